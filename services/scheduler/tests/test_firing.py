"""The firing path's shape (S1, S3, S6): no transaction is open while messaging is
called, and what used to wait for the firing transaction waits for the delivery."""

from __future__ import annotations

import asyncio

import pytest

from agentworks.core.errors import PreconditionFailed
from agentworks.server.db import Database
from agentworks.server.testing import until
from agentworks_scheduler.models import Due
from agentworks_scheduler.store import SchedulerStore
from agentworks_scheduler.store.common import WAKE_UP_LOCK
from tests.fixtures.plans import sorted_plans

BOT = "agent:demo/bot"


def hold_after_delivery(scheduler) -> tuple[asyncio.Event, asyncio.Event]:
    """Make `scheduler` wait once messaging has taken a batch, before it records it:
    (reached, release)."""
    reached, release = asyncio.Event(), asyncio.Event()

    async def wait_here(due: Due) -> None:
        reached.set()
        await release.wait()

    scheduler.service.after_delivery = wait_here
    return reached, release


IN_TRANSACTION = (
    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
    "AND pid <> pg_backend_pid() AND state LIKE 'idle in transaction%%'"
)


async def test_no_transaction_is_open_while_an_occurrence_is_delivered_S6(
    scheduler, clients, conversation, sql, deliveries
):
    """S6: between messaging's answer and the bookkeeping, no database transaction of the
    scheduler is open; the occurrence is recorded once released, and delivered once."""
    reached, release = hold_after_delivery(scheduler)
    sched = await clients.scheduler(BOT)
    wake_up = await sched.create_wake_up(conversation, delay_seconds=0, note="no txn")
    await asyncio.wait_for(reached.wait(), 10)

    # The scheduler is held for as long as this looks, so a transaction of its own would
    # show in every sample; another service's (messaging shares the database) is brief.
    async def none_open() -> bool:
        return bool((await sql(IN_TRANSACTION))[0][0] == 0)

    await until(none_open, 5, what="no transaction open while held")
    release.set()

    async def fired() -> bool:
        rows = await sql("SELECT status FROM scheduler.wake_ups WHERE id = %s", wake_up.wake_up_id)
        return rows == [("fired",)]

    await until(fired, between=scheduler.service.wait_ticks)
    assert [text for _, text, _ in await deliveries(conversation, "wake_up")] == ["no txn"]
    assert scheduler.service.stats["delivered"] == 1


async def test_pause_and_cancel_wait_for_a_delivery_in_flight_S1_S3(
    scheduler, start_scheduler, clients, conversation, sql
):
    """S1 S3: Pause returns only once the occurrence being delivered is recorded, and a
    second replica does not claim it meanwhile; a cancel waits too and then refuses,
    because it has fired."""
    reached, release = hold_after_delivery(scheduler)
    sched = await clients.scheduler(BOT)
    ops = await clients.scheduler("user:ops", {"operator"})
    wake_up = await sched.create_wake_up(conversation, delay_seconds=0, note="in flight")
    await asyncio.wait_for(reached.wait(), 10)
    other = await start_scheduler()
    await other.service.wait_ticks(2)
    assert other.service.stats["delivered"] + other.service.stats["duplicates"] == 0

    pause = asyncio.create_task(ops.pause(reason="wait for it"))
    cancel = asyncio.create_task(sched.cancel_wake_up(wake_up.wake_up_id))

    async def both_wait() -> bool:  # on the delivery's advisory lock
        rows = await sql(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND wait_event = 'advisory'"
        )
        return rows[0][0] >= 2

    await until(both_wait, 10)
    assert not pause.done() and not cancel.done()
    release.set()
    state = await asyncio.wait_for(pause, 10)
    assert state.global_paused
    with pytest.raises(PreconditionFailed, match="fired, not pending"):
        await asyncio.wait_for(cancel, 10)
    assert await sql("SELECT status FROM scheduler.wake_ups WHERE id = %s", wake_up.wake_up_id) == [
        ("fired",)
    ]
    await ops.resume()


ADVISORY_LOCKS = (
    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND database = "
    "(SELECT oid FROM pg_database WHERE datname = current_database()) AND classid = %s"
)


async def test_a_backlog_of_due_wake_ups_takes_only_a_batch_of_locks_S6(
    scheduler, conversation, sql
):
    """S6: with 3,000 wake-ups due at once (a long pause lifted, a replica back from an
    outage), a claim locks one batch, not the backlog: a lock per due row would fill
    PostgreSQL's shared lock table, and then every connection to the server fails with
    'out of shared memory'."""
    batch = scheduler.service.config.batch_size
    reached, release = hold_after_delivery(scheduler)
    await sql(
        "INSERT INTO scheduler.wake_ups (id, conversation_id, product, note, due_at, created_by) "
        "SELECT gen_random_uuid(), %s, 'crew:demo', 'n' || g, now() - interval '1 second', "
        "'agent:demo/bot' FROM generate_series(1, 3000) g",
        conversation,
    )
    await asyncio.wait_for(reached.wait(), 10)
    try:
        [(held,)] = await sql(ADVISORY_LOCKS, WAKE_UP_LOCK)
        assert 0 < held <= batch
    finally:
        release.set()

    async def drained() -> bool:
        rows = await sql("SELECT count(*) FROM scheduler.wake_ups WHERE status = 'pending'")
        return rows == [(0,)]

    await until(drained, 60, between=scheduler.service.wait_ticks)
    assert await sql(ADVISORY_LOCKS, WAKE_UP_LOCK) == [(0,)]


async def test_a_claim_locks_one_batch_of_the_oldest_whatever_plan_is_picked_S6(
    scheduler, sql, database_url
):
    """S6: the same claim through the store, with the scan-and-sort plan forced (which
    PostgreSQL may pick by itself): 100 of 3,000 due wake-ups, the oldest, and 100
    locks."""
    await scheduler.stop(0)  # only the store below claims
    await sql(
        "INSERT INTO scheduler.wake_ups (id, conversation_id, product, note, due_at, created_by) "
        "SELECT gen_random_uuid(), gen_random_uuid(), 'crew:demo', 'n' || g, "
        "now() - g * interval '1 millisecond', 'agent:demo/bot' FROM generate_series(1, 3000) g"
    )
    db = Database(sorted_plans(database_url), pool_size=1)
    await db.start()
    try:
        async with SchedulerStore(db).claiming() as claim:
            dues = await claim.due_wake_ups(100)
            [(held,)] = await sql(ADVISORY_LOCKS, WAKE_UP_LOCK)
        assert held == len(dues) == 100
        assert [due.item.note for due in dues] == [f"n{g}" for g in range(3000, 2900, -1)]
        assert await sql(ADVISORY_LOCKS, WAKE_UP_LOCK) == [(0,)]
    finally:
        await db.close()
