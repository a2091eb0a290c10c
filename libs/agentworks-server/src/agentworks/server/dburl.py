"""Database URLs: SQLAlchemy's and libpq's forms, connect timeouts, descriptions for messages."""

from __future__ import annotations

import re
from typing import Any

import psycopg
import sqlalchemy as sa


def sqlalchemy_url(url: str) -> str:
    """`postgresql://...` as SQLAlchemy's psycopg 3 URL."""
    return re.sub(r"^postgres(?:ql)?(?:\+\w+)?://", "postgresql+psycopg://", url)


def libpq_url(url: str) -> str:
    """A SQLAlchemy URL as plain libpq/psycopg conninfo."""
    return re.sub(r"^postgres(?:ql)?(?:\+\w+)?://", "postgresql://", url)


# A database host that does not answer (rather than refusing) fails a request after this.
CONNECT_TIMEOUT_SECONDS = 5
# ... and a service's start (its migrations) after this; a `connect_timeout` in the URL
# wins over both.
START_CONNECT_TIMEOUT_SECONDS = 10


def connect_timeout(url: str, seconds: float) -> dict[str, Any]:
    """`{"connect_timeout": seconds}` unless the URL sets its own (psycopg's keyword
    arguments override the URL's parameters)."""
    try:
        if "connect_timeout" in psycopg.conninfo.conninfo_to_dict(libpq_url(url)):
            return {}
    except psycopg.ProgrammingError:
        pass  # the connection attempt reports it
    return {"connect_timeout": seconds}


def describe_database(url: str) -> str:
    """`user@host:port/dbname` of a database URL, for messages: never the password."""
    try:
        params = psycopg.conninfo.conninfo_to_dict(libpq_url(url))
    except psycopg.ProgrammingError:
        return "(a database URL that cannot be parsed)"
    user = f"{params['user']}@" if params.get("user") else ""
    host = str(params.get("host") or params.get("hostaddr") or "local socket")
    port = f":{params['port']}" if str(params.get("port") or "").strip(",") else ""
    dbname = f"/{params['dbname']}" if params.get("dbname") else ""
    return f"{user}{host}{port}{dbname}"


def with_database(url: str, database: str) -> str:
    """The same server URL pointing at another database."""
    parsed = sa.engine.make_url(sqlalchemy_url(url)).set(database=database)
    return libpq_url(parsed.render_as_string(hide_password=False))
