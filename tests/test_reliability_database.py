"""Functions and scheduler under PostgreSQL faults: the server is stopped under load and
started again (messaging has its own test in test_reliability_messaging.py).

While the database is away every call answers UNAVAILABLE quickly instead of hanging or
failing INTERNAL, long-polls in flight end cleanly, the services recover on their own
when it is back, and nothing that was acknowledged is lost or stored twice (P3, P4, F6,
F12, S6).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import psycopg
import pytest

from agentworks.client import FunctionsClient, MessagingClient, SchedulerClient
from agentworks.client.functions import state_name
from agentworks.core.errors import AgentWorksError, DeadlineExceeded, Unavailable
from agentworks.scheduler.v1 import scheduler_pb2
from agentworks.server.testing import until
from agentworks_scheduler.models import Due

pytestmark = pytest.mark.timeout(180)

T = TypeVar("T")
RETRYABLE = (Unavailable, DeadlineExceeded)
OUTAGE_LIMIT = 15.0  # seconds a caller may wait for an answer while the database is away


async def recovered(attempt: Callable[[], Awaitable[T]], timeout: float = 30.0) -> T:
    """Retry `attempt` on UNAVAILABLE until it succeeds: the service's own recovery."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await attempt()
        except RETRYABLE:
            assert time.monotonic() < deadline, "the service did not recover on its own"
            await asyncio.sleep(0.1)


async def ends_unavailable(aw: Awaitable[object]) -> float:
    """Await a request made during the outage; it must end UNAVAILABLE, quickly."""
    started = time.monotonic()
    with pytest.raises(AgentWorksError) as err:
        await aw
    assert isinstance(err.value, Unavailable), f"{type(err.value).__name__}: {err.value}"
    elapsed = time.monotonic() - started
    assert elapsed < OUTAGE_LIMIT, f"a request hung for {elapsed:.1f} s"
    return elapsed


@pytest.mark.alone
@pytest.mark.reliability(
    scenario="PostgreSQL outage under load: functions (P3, P4, F6, F12)",
    action="3 callers call with retry keys while a runtime holds an execution and "
    "ClaimExecution and GetStatus long-polls wait; PostgreSQL is stopped (fast shutdown) "
    "and started again on the same data",
    check="calls, status reads, heartbeats and both long-polls end UNAVAILABLE in < 15 s "
    "(no hang, no INTERNAL); the same process serves again on its own; every acknowledged "
    "call is stored exactly once and none without a receipt; the held execution survives "
    "(lease kept) and completes; a retried key returns its original call",
)
async def test_functions_database_outage_answers_unavailable_and_recovers_P3_P4_F12(
    fault_postgres, start_functions, identity
):
    """P3 P4 F6 F12: see the reliability mark."""
    service = await start_functions(
        FUNCTIONS_DATABASE_URL=fault_postgres.url, FUNCTIONS_POLL_FALLBACK_SECONDS="0.5"
    )
    ops = FunctionsClient(service.address, identity=identity("user:ops", {"operator"}), timeout=5)
    owner = FunctionsClient(service.address, identity=identity("user:owner"), timeout=5)
    alice = FunctionsClient(service.address, identity=identity("user:alice"), timeout=5)
    bot = FunctionsClient(service.address, identity=identity("agent:db/bot"), timeout=5)
    idle = FunctionsClient(service.address, identity=identity("agent:idle/bot"), timeout=5)
    clients = [ops, owner, alice, bot, idle]
    try:
        await ops.register_target("crew:db", owner="user:owner", running_limit=1000)
        await ops.register_target("crew:idle", owner="user:owner")
        await owner.declare_function(
            "crew:db",
            "echo",
            input_schema={"type": "object", "additionalProperties": True},
            allowed_callers=["user:*"],
        )
        before = await alice.call("crew:db", "echo", {"n": 0}, submission_id="before")
        held = await bot.claim_execution(["crew:db"], wait_seconds=5, lease_seconds=60)
        assert held is not None and held.call_id == before.call_id

        acknowledged: dict[str, str] = {}
        stop = asyncio.Event()

        async def caller(n: int) -> None:
            async with FunctionsClient(
                service.address, identity=identity(f"user:c{n}"), timeout=5
            ) as client:
                i = 0
                while not stop.is_set():
                    key = f"c{n}-{i}"
                    receipt = await recovered(
                        functools.partial(
                            client.call, "crew:db", "echo", {"k": key}, submission_id=key
                        )
                    )
                    acknowledged[f"user:c{n}/{key}"] = receipt.call_id
                    i += 1

        load = [asyncio.create_task(caller(n)) for n in range(3)]
        claim = asyncio.create_task(idle.claim_execution(["crew:idle"], wait_seconds=20))
        status = asyncio.create_task(alice.get_status(before.call_id, wait_seconds=20))
        listener = service.database.listener
        await until(lambda: listener.waiting >= 2, 30)  # both long-polls are waiting
        await until(lambda: len(acknowledged) >= 10, 30)

        await asyncio.to_thread(fault_postgres.stop)
        await ends_unavailable(claim)
        await ends_unavailable(status)
        await ends_unavailable(alice.call("crew:db", "echo", {}, submission_id="during"))
        await ends_unavailable(alice.get_status(before.call_id))
        await ends_unavailable(bot.heartbeat_execution(before.call_id, lease_seconds=60))
        during = len(acknowledged)

        await asyncio.to_thread(fault_postgres.start)
        await recovered(lambda: alice.get_status(before.call_id))
        await until(lambda: len(acknowledged) > during + 10, 30)  # the load goes on
        stop.set()
        await asyncio.gather(*load)

        again = await alice.call("crew:db", "echo", {"n": 0}, submission_id="before")
        assert (again.call_id, again.created) == (before.call_id, False)
        beat = await bot.heartbeat_execution(before.call_id, lease_seconds=60)
        assert state_name(beat.status) == "running"  # the lease survived the outage
        await bot.finish_execution(before.call_id, final_message="done after the outage")
        finished = await alice.get_status(before.call_id)
        assert (state_name(finished.status), finished.answer) == (
            "completed",
            "done after the outage",
        )

        with psycopg.connect(fault_postgres.url) as conn:
            stored: dict[str, str] = dict(
                conn.execute(
                    "SELECT caller || '/' || submission_key, id::text FROM functions.calls "
                    "WHERE caller LIKE 'user:c%'"
                ).fetchall()
            )
        assert len(acknowledged) > 20, "the load was too light to mean anything"
        assert stored == acknowledged  # each exactly once; none without its receipt
    finally:
        for client in clients:
            await client.close()


@pytest.mark.alone
@pytest.mark.reliability(
    scenario="PostgreSQL outage during firing: scheduler (P3, P4, S6)",
    action="wake-ups are created under load; PostgreSQL (shared with messaging) is stopped "
    "inside a firing transaction, right after messaging accepted a delivery and before "
    "the scheduler recorded it, and started again",
    check="scheduler RPCs end UNAVAILABLE in < 15 s; the tick loop survives and resumes on "
    "its own; every wake-up (acknowledged or not) fires exactly once — one delivery per "
    "idempotency key in messaging, the interrupted one re-sent and deduplicated",
)
async def test_scheduler_database_outage_mid_firing_fires_each_wake_up_once_P3_P4_S6(
    fault_postgres, start_messaging, start_scheduler, identity
):
    """P3 P4 S6: see the reliability mark."""
    messaging = await start_messaging(
        MESSAGING_DATABASE_URL=fault_postgres.url, MESSAGING_POLL_FALLBACK_SECONDS="0.5"
    )
    scheduler = await start_scheduler(
        SCHEDULER_DATABASE_URL=fault_postgres.url,
        SCHEDULER_MESSAGING_ADDRESS=messaging.address,
        SCHEDULER_DELIVERY_TIMEOUT_SECONDS="2",
    )
    ops = MessagingClient(messaging.address, identity=identity("user:ops", {"operator"}))
    alice = MessagingClient(messaging.address, identity=identity("user:alice"))
    bot = SchedulerClient(scheduler.address, identity=identity("agent:db/bot"), timeout=5)
    clients = [ops, alice, bot]
    try:
        await ops.register_target("crew:db", owner="user:owner")
        conversation = (await alice.send("hello", target="crew:db")).conversation_id
        later = await bot.create_wake_up(conversation, delay_seconds=2, note="due during")

        armed, stopped = [True], asyncio.Event()

        async def stop_database_here(due: Due) -> None:
            if armed[0] and due.item.note == "the fatal one":
                armed[0] = False
                await asyncio.to_thread(fault_postgres.stop)
                stopped.set()

        scheduler.service.after_delivery = stop_database_here
        acknowledged: set[str] = set()
        unknown = 0
        stop = asyncio.Event()

        async def creator() -> None:
            nonlocal unknown
            i = 0
            while not stop.is_set():
                try:
                    w = await bot.create_wake_up(conversation, delay_seconds=0, note=f"w{i}")
                    acknowledged.add(w.wake_up_id)
                except RETRYABLE:
                    unknown += 1  # not idempotent: never retried (see docs/reliability.md)
                    await asyncio.sleep(0.1)
                i += 1

        load = asyncio.create_task(creator())
        await until(lambda: len(acknowledged) >= 10, 30)
        fatal = await bot.create_wake_up(conversation, delay_seconds=0, note="the fatal one")
        await asyncio.wait_for(stopped.wait(), 15)

        await ends_unavailable(bot.get_wake_up(fatal.wake_up_id))
        await ends_unavailable(bot.create_wake_up(conversation, delay_seconds=0))
        await asyncio.to_thread(fault_postgres.start)
        await recovered(lambda: bot.get_wake_up(fatal.wake_up_id))
        during = len(acknowledged)
        await until(lambda: len(acknowledged) > during + 5, 30)
        stop.set()
        await load

        async def none_pending() -> bool:
            with psycopg.connect(fault_postgres.url) as conn:
                return conn.execute(
                    "SELECT count(*) FROM scheduler.wake_ups WHERE status = 'pending'"
                ).fetchone() == (0,)

        await until(none_pending, 30)
        with psycopg.connect(fault_postgres.url) as conn:
            wake_ups: dict[str, str] = dict(
                conn.execute(
                    "SELECT id::text, status FROM scheduler.wake_ups WHERE id <> %s",
                    (later.wake_up_id,),
                ).fetchall()
            )
            per_wake_up: dict[str, int] = dict(
                conn.execute(
                    "SELECT split_part(idempotency_key, ':', 2), count(*) "
                    "FROM messaging.deliveries WHERE kind = 'wake_up' GROUP BY 1"
                ).fetchall()
            )
        assert acknowledged | {fatal.wake_up_id} <= set(wake_ups)
        assert len(wake_ups) - len(acknowledged) - 1 <= unknown  # stored without a receipt
        assert set(wake_ups.values()) == {"fired"}
        assert per_wake_up == {w: 1 for w in [*wake_ups, later.wake_up_id]}
        assert scheduler.service.stats["duplicates"] >= 1  # the interrupted one, re-sent
        fired_late = await bot.get_wake_up(later.wake_up_id)
        assert fired_late.status == scheduler_pb2.WAKE_UP_STATUS_FIRED
    finally:
        for client in clients:
            await client.close()
