"""The functions schema: migrations build schema.sql, tables.py declares it, and every
named query of queries.sql is used by the store and parses against it (P1)."""

from __future__ import annotations

import pathlib
import re

import psycopg

from agentworks.server.schema import check_snapshot, declared_columns, migrated_columns
from agentworks_functions import tables
from agentworks_functions.store.base import Q

PACKAGE = pathlib.Path(tables.__file__).parent
# What runs the named queries: the store, the blob storage and the gauges.
RUNNERS = [*(PACKAGE / "store").glob("*.py"), PACKAGE / "blobs.py", PACKAGE / "metrics.py"]


def test_migrating_an_empty_database_builds_schema_sql_P1(pg_server_url):
    """P1: 0001..n applied to an empty database give the committed schema.sql."""
    check_snapshot(pg_server_url, "functions", "agentworks_functions")


def test_tables_py_declares_the_migrated_columns_P1(database_url):
    """P1: tables.py has the tables, columns and nullability the migrations built."""
    with psycopg.connect(database_url) as conn:
        assert migrated_columns(conn, "functions") == declared_columns(tables.metadata)


def test_every_named_query_is_used_and_prepares_P1(database_url):
    """P1: each query of queries.sql is run by the store (or blobs.py, metrics.py), each
    name they run is there, and PostgreSQL accepts each statement (PREPARE plans it, runs
    nothing)."""
    source = "\n".join(p.read_text() for p in RUNNERS)
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
