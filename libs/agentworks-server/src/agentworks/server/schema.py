"""A service's schema as its migrations build it, in a stable text form (`schema.sql`).

Each service commits `schema.sql` next to its `queries.sql`: what migrating an empty
database gives, read back from PostgreSQL's catalogs (tables with their columns, types,
defaults and constraints; indexes; functions; triggers; views; sequences). A test
migrates an empty database and compares (`check_snapshot`), so a migration that
changes the schema shows its effect in the same commit, and a schema drifting from its
migrations fails. The catalog is read instead of running pg_dump (which the embedded
PostgreSQL ships), whose output changes with its version and the server's: the four
snapshots come out the same on PostgreSQL 15 and 18 (18's NOT NULL entries in
pg_constraint are left out; the columns say NOT NULL).

Regenerate after adding a migration: run the service's schema test with
`AGENTWORKS_WRITE_SCHEMA=1`, e.g.
`AGENTWORKS_WRITE_SCHEMA=1 .venv/bin/pytest services/messaging/tests/test_migrations_schema.py`.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib.resources
import os
import pathlib
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg

from agentworks.server.db import migrate
from agentworks.server.dburl import libpq_url, with_database

WRITE_ENV = "AGENTWORKS_WRITE_SCHEMA"

_COLUMNS = """
SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
       pg_get_expr(d.adbin, d.adrelid), a.attidentity, a.attgenerated
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
WHERE n.nspname = %(schema)s AND c.relkind IN ('r', 'p') AND c.relname <> 'schema_migrations'
ORDER BY c.relname, a.attnum
"""

_CONSTRAINTS = """
SELECT c.relname, k.conname, pg_get_constraintdef(k.oid, true)
FROM pg_constraint k
JOIN pg_class c ON c.oid = k.conrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(schema)s AND c.relname <> 'schema_migrations'
  AND k.contype <> 'n'  -- NOT NULL (PostgreSQL 18 lists it here too): on the column
ORDER BY c.relname, k.conname
"""

_INDEXES = """
SELECT i.indexname, i.indexdef FROM pg_indexes i
WHERE i.schemaname = %(schema)s AND i.tablename <> 'schema_migrations'
  AND NOT EXISTS (SELECT 1 FROM pg_constraint k
                  JOIN pg_namespace n ON n.oid = k.connamespace
                  WHERE n.nspname = i.schemaname AND k.conname = i.indexname)
ORDER BY i.indexname
"""

_FUNCTIONS = """
SELECT p.proname, pg_get_function_identity_arguments(p.oid), pg_get_functiondef(p.oid)
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = %(schema)s
ORDER BY 1, 2
"""

_TRIGGERS = """
SELECT c.relname, t.tgname, pg_get_triggerdef(t.oid, true)
FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(schema)s AND NOT t.tgisinternal
ORDER BY 1, 2
"""

_VIEWS = """
SELECT c.relname, c.relkind, pg_get_viewdef(c.oid, true)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(schema)s AND c.relkind IN ('v', 'm')
ORDER BY 1
"""

_SEQUENCES = """
SELECT c.relname, format_type(s.seqtypid, NULL), s.seqincrement, s.seqstart
FROM pg_sequence s JOIN pg_class c ON c.oid = s.seqrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(schema)s
ORDER BY 1
"""

_TYPES = """
SELECT t.typname, string_agg(quote_literal(e.enumlabel), ', ' ORDER BY e.enumsortorder)
FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
JOIN pg_enum e ON e.enumtypid = t.oid
WHERE n.nspname = %(schema)s
GROUP BY t.typname ORDER BY 1
"""


def dump_schema(conn: psycopg.Connection[Any], schema: str) -> str:
    """The objects of `schema` (its migrations' bookkeeping aside) as stable SQL text."""
    args = {"schema": schema}
    # Definitions name their own schema's objects unqualified, others qualified: the
    # text does not depend on the session's search_path.
    conn.execute("SELECT set_config('search_path', %s, false)", (schema,))
    out = [f"-- The {schema} schema as its migrations build it (agentworks.server.schema).", ""]
    for name, labels in conn.execute(_TYPES, args).fetchall():
        out += [f"CREATE TYPE {name} AS ENUM ({labels});", ""]
    for name, type_, increment, start in conn.execute(_SEQUENCES, args).fetchall():
        out += [f"CREATE SEQUENCE {name} AS {type_} INCREMENT {increment} START {start};", ""]
    tables: dict[str, list[str]] = {}
    for table, column, type_, not_null, default, identity, generated in conn.execute(
        _COLUMNS, args
    ).fetchall():
        line = f"{column} {type_}"
        if generated:
            line += f" GENERATED ALWAYS AS ({default}) STORED"
        elif default is not None:
            line += f" DEFAULT {default}"
        if identity:
            line += " GENERATED ALWAYS" if identity == "a" else " GENERATED BY DEFAULT"
            line += " AS IDENTITY"
        if not_null:
            line += " NOT NULL"
        tables.setdefault(table, []).append(line)
    for table, name, definition in conn.execute(_CONSTRAINTS, args).fetchall():
        tables.setdefault(table, []).append(f"CONSTRAINT {name} {definition}")
    for table, lines in tables.items():
        out.append(f"CREATE TABLE {table} (")
        out += [f"    {line}," for line in lines[:-1]] + [f"    {lines[-1]}", ");", ""]
    for _name, definition in conn.execute(_INDEXES, args).fetchall():
        out += [f"{definition};", ""]
    for name, kind, definition in conn.execute(_VIEWS, args).fetchall():
        what = "MATERIALIZED VIEW" if kind == "m" else "VIEW"
        out += [f"CREATE {what} {name} AS", definition.rstrip().rstrip(";") + ";", ""]
    for _name, _args, definition in conn.execute(_FUNCTIONS, args).fetchall():
        out += [definition.rstrip().rstrip(";") + ";", ""]
    for _table, _name, definition in conn.execute(_TRIGGERS, args).fetchall():
        out += [f"{definition};", ""]
    return "\n".join(out).rstrip() + "\n"


@contextlib.contextmanager
def empty_database(server_url: str) -> Iterator[str]:
    """A new, empty database on the server of `server_url` (dropped afterwards)."""
    name = f"aw_schema_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(libpq_url(server_url), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield with_database(server_url, name)
    finally:
        with (
            contextlib.suppress(psycopg.Error),
            psycopg.connect(libpq_url(server_url), autocommit=True) as conn,
        ):
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def migrated_schema(server_url: str, schema: str, package: str) -> str:
    """`dump_schema` of an empty database migrated by `package`'s `migrations`."""
    with empty_database(server_url) as url:
        migrate(url, schema, f"{package}.migrations")
        with psycopg.connect(libpq_url(url), autocommit=True) as conn:
            return dump_schema(conn, schema)


def snapshot_path(package: str) -> pathlib.Path:
    """Where `package` keeps its `schema.sql` (inside the package: it ships with it)."""
    return pathlib.Path(str(importlib.resources.files(package).joinpath("schema.sql")))


def check_snapshot(server_url: str, schema: str, package: str) -> None:
    """Fail unless migrating an empty database gives `package`'s committed `schema.sql`.

    With AGENTWORKS_WRITE_SCHEMA=1 the snapshot is written instead (then review and
    commit it)."""
    built = migrated_schema(server_url, schema, package)
    path = snapshot_path(package)
    if os.environ.get(WRITE_ENV) == "1":
        path.write_text(built)
        return
    committed = path.read_text() if path.exists() else ""
    if built != committed:
        diff = "".join(
            difflib.unified_diff(
                committed.splitlines(keepends=True),
                built.splitlines(keepends=True),
                f"{package}/schema.sql (committed)",
                "migrated",
            )
        )
        raise AssertionError(
            f"the migrations of {schema} do not build {package}/schema.sql; if the change "
            f"is meant, regenerate it with {WRITE_ENV}=1 (docs/operations.md):\n{diff}"
        )


def declared_columns(metadata: Any) -> set[tuple[str, str, bool]]:
    """(table, column, nullable) of SQLAlchemy tables (a service's tables.py)."""
    return {
        (table.name, column.name, bool(column.nullable))
        for table in metadata.tables.values()
        for column in table.columns
    }


def migrated_columns(conn: psycopg.Connection[Any], schema: str) -> set[tuple[str, str, bool]]:
    """(table, column, nullable) of a migrated schema, its bookkeeping table aside."""
    rows = conn.execute(
        "SELECT table_name, column_name, is_nullable = 'YES' FROM information_schema.columns "
        "WHERE table_schema = %s AND table_name <> 'schema_migrations'",
        (schema,),
    ).fetchall()
    return {(table, column, nullable) for table, column, nullable in rows}
