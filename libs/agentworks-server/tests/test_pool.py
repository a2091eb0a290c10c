"""One connection pool per process, of at most pool_size connections, that every store's
statements (`raw()`) share."""

from __future__ import annotations

import asyncio
import contextlib
import uuid

import psycopg
import pytest

from agentworks.client import MessagingClient
from agentworks.core.errors import Unavailable
from agentworks.server.db import Database

PID = "SELECT pg_backend_pid()"


def named(url: str, application_name: str) -> str:
    """The URL with an application_name, so its connections can be told apart."""
    return f"{url}{'&' if '?' in url else '?'}application_name={application_name}"


async def connections_named(url: str, application_name: str) -> list[tuple[str, str]]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT backend_type, query FROM pg_stat_activity WHERE application_name = %s",
            (application_name,),
        )
        return [(str(r[0]), str(r[1])) for r in await cur.fetchall()]


async def test_checkouts_take_turns_on_the_pools_connections_P5(database_url):
    """P5: with a pool of one, a second checkout (a transaction here) waits while the
    first holds the connection, opens no second one, then gets the same backend."""
    db = Database(database_url, pool_size=1)
    try:
        async with db.raw() as pg:
            raw_pid = (await (await pg.execute(PID)).fetchall())[0][0]

            async def transaction_pid() -> int:
                async with db.raw(transaction=True) as conn:
                    return int((await (await conn.execute(PID)).fetchall())[0][0])

            waiting = asyncio.create_task(transaction_pid())
            await asyncio.sleep(0.2)  # time to open a second connection: none may come
            assert not waiting.done()  # no second connection was opened for it
            assert db.pool.checked_out == 1
        assert await waiting == raw_pid
        assert db.pool.checked_out == 0
    finally:
        await db.close()


async def test_each_checkout_gets_its_own_mode_on_a_shared_connection_P5_S2(database_url):
    """P5 S2: on the one connection of the pool, `raw()` stays autocommit (each
    statement committed) and prepares its fixed statements (after five runs), and
    `raw(transaction=True)` is a transaction (a failure rolls it back), whichever mode
    the connection had before."""
    db = Database(database_url, pool_size=1)
    try:
        async with db.raw() as pg:
            await pg.execute("CREATE TABLE pool_modes (n int)")
        with pytest.raises(RuntimeError):
            async with db.raw(transaction=True) as conn:
                await conn.execute("INSERT INTO pool_modes VALUES (1)")
                raise RuntimeError("rolled back")
        async with db.raw() as pg:
            assert (await (await pg.execute("SELECT count(*) FROM pool_modes")).fetchone()) == (0,)
            await pg.execute("INSERT INTO pool_modes VALUES (2)")  # autocommit: committed
            for _ in range(6):
                await pg.execute("SELECT count(*) FROM pool_modes WHERE n > %(n)s", {"n": 1})
            cur = await pg.execute("SELECT statement FROM pg_prepared_statements")
            assert [s for (s,) in await cur.fetchall() if "n >" in s]
        async with db.raw(transaction=True) as conn:
            await conn.execute("INSERT INTO pool_modes VALUES (3)")
        async with await psycopg.AsyncConnection.connect(database_url) as other:
            cur = await other.execute("SELECT n FROM pool_modes ORDER BY n")
            assert await cur.fetchall() == [(2,), (3,)]
    finally:
        await db.close()


async def test_a_full_pool_refuses_after_its_timeout_and_loses_no_slot_P4_P5(database_url):
    """P4 P5: with every connection in use, a checkout (plain or a transaction) waits at
    most the pool timeout, then fails with UNAVAILABLE "database busy"; a checkout
    cancelled while waiting leaves no slot behind, and every slot can be used again."""
    db = Database(database_url, pool_size=2, pool_timeout=0.3)
    try:
        async with contextlib.AsyncExitStack() as held:
            await held.enter_async_context(db.raw())
            await held.enter_async_context(db.raw(transaction=True))
            with pytest.raises(Unavailable, match="database busy: no connection free"):
                async with db.raw():
                    pass
            with pytest.raises(Unavailable, match="database busy: no connection free"):
                async with db.raw(transaction=True):
                    pass
            cancelled = asyncio.create_task(db.raw().__aenter__())
            await asyncio.sleep(0.05)  # into the pool's queue (private state: not awaited)
            cancelled.cancel()
            with pytest.raises(asyncio.CancelledError):
                await cancelled
        assert db.pool.checked_out == 0
        async with db.raw() as one, db.raw(transaction=True) as two:
            first = (await (await one.execute(PID)).fetchall())[0][0]
            assert (await (await two.execute(PID)).fetchall())[0][0] != first
        assert db.pool.checkedin() == 2
    finally:
        await db.close()


async def test_a_connection_left_in_a_transaction_by_raw_is_closed_not_reused_P4(database_url):
    """P4: a connection given back inside a transaction (a cancelled request) is closed;
    the next checkout opens a fresh one."""
    db = Database(database_url, pool_size=1)
    try:
        async with db.raw() as pg:
            left = pg
            pid = (await (await pg.execute(PID)).fetchall())[0][0]
            await pg.execute("BEGIN")
        assert left.closed
        async with db.raw() as fresh:
            assert (await (await fresh.execute(PID)).fetchall())[0][0] != pid
    finally:
        await db.close()


async def test_a_service_opens_at_most_pool_size_connections_on_both_paths_P5(
    start_messaging, identity, database_url
):
    """P5: a messaging process with MESSAGING_POOL_SIZE=3, under concurrent sends and
    reads (hot statements, `raw()`) and transcripts and target reads (SQLAlchemy
    transactions), never has more than 3 connections in pg_stat_activity besides its
    one LISTEN connection (two pools would have allowed 6); and it does use all 3."""
    app = f"pool_{uuid.uuid4().hex[:10]}"
    service = await start_messaging(
        MESSAGING_DATABASE_URL=named(database_url, app), MESSAGING_POOL_SIZE="3"
    )
    operator = MessagingClient(service.address, identity=identity("user:ops", {"operator"}))
    alice = MessagingClient(service.address, identity=identity("user:alice"))
    try:
        await operator.register_target("crew:pool", owner="user:owner")
        receipts = [await alice.send(f"first {i}", target="crew:pool") for i in range(8)]
        seen: list[list[tuple[str, str]]] = []
        done = asyncio.Event()

        async def sample() -> None:
            while not done.is_set():
                seen.append(await connections_named(database_url, app))
                await asyncio.sleep(0.005)  # the sampling rate, not a wait

        async def hot(i: int) -> None:
            receipt = receipts[i % len(receipts)]
            for n in range(15):
                await alice.send(f"more {i}.{n}", inbox_id=receipt.inbox_id)
                await alice.read(receipt.inbox_id)

        async def engine(i: int) -> None:
            receipt = receipts[i % len(receipts)]
            for _ in range(15):
                await alice.get_transcript(receipt.conversation_id)
                await operator.get_target("crew:pool")

        sampler = asyncio.create_task(sample())
        await asyncio.gather(*(hot(i) for i in range(12)), *(engine(i) for i in range(12)))
        done.set()
        await sampler
    finally:
        await operator.close()
        await alice.close()
    assert len(seen) > 10
    listening = [[q for _, q in rows if q.startswith("LISTEN")] for rows in seen]
    assert all(len(lst) <= 1 for lst in listening)
    pooled = [len([q for _, q in rows if not q.startswith("LISTEN")]) for rows in seen]
    assert max(pooled) == 3, pooled
    assert max(len(rows) for rows in seen) <= 3 + 1
