"""tables.py says what migrations/ built: same tables, columns, nullability (P1)."""

from __future__ import annotations

from agentworks_scheduler import tables


async def test_tables_match_the_migrated_scheduler_schema_P1(sql):
    """P1: the scheduler's own schema, as migrated, equals its SQLAlchemy tables."""
    rows = await sql(
        "SELECT table_name, column_name, is_nullable = 'YES' FROM information_schema.columns "
        "WHERE table_schema = 'scheduler' AND table_name <> 'schema_migrations'"
    )
    migrated = {(table, column, nullable) for table, column, nullable in rows}
    declared = {
        (table.name, column.name, bool(column.nullable))
        for table in tables.metadata.tables.values()
        for column in table.columns
    }
    assert migrated == declared
