"""The gateway schema: migrations build schema.sql, tables.py declares it, and every
named query of queries.sql is used by the store and parses against it (P1)."""

from __future__ import annotations

import pathlib
import re

import psycopg

from agentworks.server.schema import check_snapshot, declared_columns, migrated_columns
from agentworks_gateway import tables
from agentworks_gateway.store import Q

STORE = pathlib.Path(tables.__file__).parent


def test_migrating_an_empty_database_builds_schema_sql_P1(pg_server_url):
    """P1: 0001..n applied to an empty database give the committed schema.sql."""
    check_snapshot(pg_server_url, "gateway", "agentworks_gateway")


def test_tables_py_declares_the_migrated_columns_P1(database_url):
    """P1: tables.py has the tables, columns and nullability the migrations built."""
    with psycopg.connect(database_url) as conn:
        assert migrated_columns(conn, "gateway") == declared_columns(tables.metadata)


def test_every_named_query_is_used_and_prepares_P1(database_url):
    """P1: each query of queries.sql is run by the store, each name the store runs is
    there, and PostgreSQL accepts each statement (PREPARE plans it, runs nothing)."""
    stores = [
        STORE / "store.py",
        STORE / "webhooks_out" / "store.py",
        STORE / "a2a_out" / "store.py",
        STORE / "a2a" / "push" / "store.py",
    ]
    source = "\n".join(p.read_text() for p in stores)
    used = set(re.findall(r'"([a-z][a-z0-9_]*)"', source)) & Q.names
    named = set(re.findall(r'(?:Q\.\w+\(\s*pg,\s*|Q\.sql\(|name = )"([a-z0-9_]+)"', source))
    assert named <= Q.names
    assert used == Q.names
    with psycopg.connect(database_url) as conn:
        for name in sorted(Q.names):
            conn.execute(f"PREPARE q_{name} AS {numbered(Q.sql(name))}")


def numbered(statement: str) -> str:
    """A statement's `%(name)s` parameters as PREPARE's `$1, $2, ...` (types inferred)."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match[1] not in names:
            names.append(match[1])
        return f"${names.index(match[1]) + 1}"

    return re.sub(r"%\((\w+)\)s", number, statement).replace("%%", "%")
