"""How the database layer has PostgreSQL plan statements: cost must not grow with history."""

from __future__ import annotations

import sqlalchemy as sa

from agentworks.core.db import Database


async def test_engine_statements_are_never_prepared_so_partial_indexes_stay_usable_S2_C10(
    database_url,
):
    """S2 C10: due timers and claimable turns are found through partial indexes. A
    prepared statement's generic plan cannot use one whose predicate a parameter must
    meet (`status = $1` for `WHERE status = 'pending'`); PostgreSQL then scans the whole
    table, and the scheduler's claim grew with every timer ever fired. SQLAlchemy's
    connections therefore never prepare: each run is planned with its values."""
    db = Database(database_url, pool_size=2)
    jobs = sa.table("jobs", sa.column("id"), sa.column("status"), sa.column("due"))
    pending_first = sa.select(jobs.c.id).where(jobs.c.status == "pending").order_by(jobs.c.due)
    try:
        async with db.transaction() as conn:  # one connection throughout
            await conn.execute(
                sa.text("CREATE TEMP TABLE jobs (id int, status text NOT NULL, due int NOT NULL)")
            )
            await conn.execute(
                sa.text(
                    "INSERT INTO jobs SELECT g, CASE WHEN g % 1000 = 0 THEN 'pending' "
                    "ELSE 'done' END, g FROM generate_series(1, 50000) g"
                )
            )
            await conn.execute(
                sa.text("CREATE INDEX jobs_due ON jobs (due) WHERE status = 'pending'")
            )
            await conn.execute(sa.text("ANALYZE jobs"))
            # Past psycopg's prepare threshold (5) and PostgreSQL's five custom plans.
            for _ in range(12):
                assert len((await conn.execute(pending_first.limit(5))).all()) == 5
            prepared = await conn.execute(sa.text("SELECT name FROM pg_prepared_statements"))
            assert prepared.all() == []
            plan = "\n".join(
                row[0]
                for row in await conn.exec_driver_sql(
                    "EXPLAIN SELECT id FROM jobs WHERE status = %(status)s ORDER BY due LIMIT 5",
                    {"status": "pending"},
                )
            )
            assert "Index Scan using jobs_due" in plan, plan
    finally:
        await db.close()
