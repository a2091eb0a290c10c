"""How the database layer has PostgreSQL plan statements: cost must not grow with history."""

from __future__ import annotations

from agentworks.server.db import Database
from agentworks.server.testing import until


async def test_hot_statements_keep_their_partial_index_once_prepared_S2_C10(database_url):
    """S2 C10: due timers and claimable turns are found through partial indexes. A
    prepared statement's generic plan cannot use one whose predicate a parameter must
    meet (`status = $1` for `WHERE status = 'pending'`); PostgreSQL would then scan the
    whole table, and the scheduler's claim grew with every timer ever fired. So the named
    queries (`raw()`, prepared by psycopg after five runs) write the predicate's constant
    into their text: prepared, they still use the index."""
    db = Database(database_url, pool_size=2)
    pending_first = "SELECT id FROM jobs WHERE status = 'pending' ORDER BY due LIMIT %(n)s"
    try:
        async with db.raw(transaction=True) as conn:  # one connection throughout
            await conn.execute("CREATE TEMP TABLE jobs (id int, status text NOT NULL, due int)")
            await conn.execute(
                "INSERT INTO jobs SELECT g, CASE WHEN g % 1000 = 0 THEN 'pending' "
                "ELSE 'done' END, g FROM generate_series(1, 50000) g"
            )
            await conn.execute("CREATE INDEX jobs_due ON jobs (due) WHERE status = 'pending'")
            await conn.execute("ANALYZE jobs")
            # Past psycopg's prepare threshold (5) and PostgreSQL's five custom plans.
            for _ in range(12):
                cur = await conn.execute(pending_first, {"n": 5})
                assert len(await cur.fetchall()) == 5
            cur = await conn.execute("SELECT name, statement FROM pg_prepared_statements")
            [name] = [n for n, statement in await cur.fetchall() if "jobs" in statement]
            await conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
            cur = await conn.execute(f"EXPLAIN EXECUTE {name}(5)")
            plan = "\n".join(row[0] for row in await cur.fetchall())
            assert "Index Scan using jobs_due" in plan, plan
    finally:
        await db.close()


def test_a_database_that_does_not_answer_fails_the_migration_in_bounded_time_P4():
    """P4: a start connects to migrate with a timeout (10 s by default; a
    `connect_timeout` in the URL wins), so a host that accepts the connection but never
    answers (a black hole) fails the start instead of hanging it."""
    import socket
    import time

    import psycopg
    import pytest

    from agentworks.server.db import START_CONNECT_TIMEOUT_SECONDS, connect_timeout, migrate

    assert START_CONNECT_TIMEOUT_SECONDS == 10
    assert connect_timeout("postgresql://u@h/db", 10) == {"connect_timeout": 10}
    assert connect_timeout("postgresql://u@h/db?connect_timeout=3", 10) == {}
    with socket.create_server(("127.0.0.1", 0)) as hole:  # listens, never accepts
        url = f"postgresql://user:secret@127.0.0.1:{hole.getsockname()[1]}/db"
        started = time.monotonic()
        with pytest.raises(psycopg.OperationalError, match="timeout"):
            migrate(url, "messaging", "agentworks_messaging.migrations", timeout=2)
        assert time.monotonic() - started < 8


def test_a_database_is_described_without_its_password_P4():
    """P4: start-up failures name the database as user@host:port/database, never with
    its password."""
    from agentworks.server.db import describe_database

    assert describe_database("postgresql://aw:s3cret@db.internal:5432/agentworks") == (
        "aw@db.internal:5432/agentworks"
    )
    assert describe_database("postgresql+psycopg://aw:s3cret@h1,h2/x") == "aw@h1,h2/x"
    assert describe_database("host=/tmp dbname=x password=s3cret") == "/tmp/x"
    assert "s3cret" not in describe_database("host=h password=s3cret garbage")


async def test_a_connection_in_use_when_the_pool_closes_is_closed_when_it_comes_back_P4(
    database_url,
):
    """P4: a request still running when its service stops gives its connection back
    after the pool was closed; it is closed then, not kept in a closed pool and left for
    the garbage collector (a ResourceWarning and an open session on the server)."""
    db = Database(database_url, pool_size=2)
    async with db.raw() as idle_one:
        pass
    async with db.raw() as busy:
        assert busy is idle_one  # reused while the pool is open
        await db.close()
        assert idle_one is busy and not busy.closed
    assert busy.closed


async def test_a_notice_wakes_one_claim_waiter_and_every_plain_waiter_C10_P3(database_url):
    """C10 P3: a NOTIFY wakes every plain waiter of its key (readers) but only one of its
    `one` waiters (claims); one that leaves with an unused wake-up passes it on."""
    import asyncio

    import psycopg

    from agentworks.server.db import Listener, libpq_url

    listener = Listener(database_url)
    await listener.start(["test_turns"])
    try:
        with (
            listener.subscribe("test_turns", ["crew:a"]) as plain,
            listener.subscribe("test_turns", ["crew:a"], one=True) as first,
            listener.subscribe("test_turns", ["crew:a"], one=True) as second,
        ):
            waits = [asyncio.create_task(w.wait(0.5)) for w in (plain, first, second)]
            await until(lambda: plain.waiting and first.waiting and second.waiting, 5)
            async with await psycopg.AsyncConnection.connect(
                libpq_url(database_url), autocommit=True
            ) as conn:
                await conn.execute("SELECT pg_notify('test_turns', 'crew:a')")
            woke = await asyncio.gather(*waits)
            assert woke[0] is True
            assert sorted(woke[1:]) == [False, True]
            with listener.subscribe("test_turns", ["crew:a"], one=True) as third:
                # Woken, but it leaves without looking: the wake-up goes to another.
                listener.wake_one("test_turns", "crew:a")
                assert third.woken or first.woken or second.woken
            assert first.woken or second.woken
    finally:
        await listener.close()
