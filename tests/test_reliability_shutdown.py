"""Graceful shutdown: SIGTERM drains functions' long-polls, execution leases survive a
clean restart, and a scheduler stopped mid-load fires everything once after it is back
(P4, F11, F12, S6). Messaging has the turn-lease version in test_reliability_messaging.py.
"""

from __future__ import annotations

import asyncio
import socket
import time
import urllib.request

import psycopg
import pytest

from agentworks.client import FunctionsClient, MessagingClient, SchedulerClient
from agentworks.client.errors import Unavailable
from agentworks.client.functions import state_name

pytestmark = pytest.mark.timeout(120)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metric(port: int, name: str) -> float:
    """One gauge from a service process's /metrics (0 when absent)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(name):
                return float(line.rsplit(" ", 1)[1])
    return 0.0


async def until(check, timeout: float = 20.0) -> None:
    """Bounded polling every 0.05 s: used where no event crosses the process boundary."""
    deadline = time.monotonic() + timeout
    while not await asyncio.to_thread(check):
        assert time.monotonic() < deadline, "condition not reached before the timeout"
        await asyncio.sleep(0.05)


async def retried(attempt, timeout: float = 10.0):
    """What a runtime does after a restart: retry UNAVAILABLE (the channel reconnects
    with backoff, so the first calls after a restart may fail fast)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await attempt()
        except Unavailable:
            assert time.monotonic() < deadline, "the service did not come back"
            await asyncio.sleep(0.1)


@pytest.mark.reliability(
    scenario="Graceful shutdown of functions (P4, F11, F12)",
    action="SIGTERM to a functions process while a GetStatus long-poll, a ClaimExecution "
    "long-poll and an AskInput long-poll wait and two executions hold leases; then the "
    "process is started again on the same port",
    check="the three long-polls return promptly with clean answers (unchanged status, no "
    "execution, no reply yet — not errors); exit code 0 in < 10 s; after the restart both "
    "leases are still held (not interrupted), the question is answered and both calls "
    "complete",
)
async def test_sigterm_drains_functions_long_polls_and_keeps_leases_P4_F12(
    database_url, service_process, identity
):
    """P4 F11 F12: see the reliability mark."""
    metrics_port = free_port()
    proc = service_process(
        "agentworks_functions",
        "FUNCTIONS",
        database_url,
        FUNCTIONS_SWEEP_SECONDS="0.2",
        FUNCTIONS_MESSAGING_ADDRESS="127.0.0.1:1",
        FUNCTIONS_METRICS_LISTEN=f"127.0.0.1:{metrics_port}",
    )
    clients = {
        name: FunctionsClient(proc.address, identity=identity(principal, roles), timeout=10)
        for name, principal, roles in (
            ("ops", "user:ops", {"operator"}),
            ("owner", "user:owner", set()),
            ("alice", "user:alice", set()),
            ("bot", "agent:drain/bot", set()),
            ("idle", "agent:idle/bot", set()),
        )
    }
    ops, owner, alice, bot, idle = clients.values()
    try:
        await ops.register_target("crew:drain", owner="user:owner")
        await ops.register_target("crew:idle", owner="user:owner")
        await owner.declare_function(
            "crew:drain", "work", input_schema={"type": "object"}, allowed_callers=["user:*"]
        )
        first = await alice.call("crew:drain", "work", {})
        asking = await alice.call("crew:drain", "work", {})
        for receipt in (first, asking):
            execution = await bot.claim_execution(["crew:drain"], wait_seconds=5, lease_seconds=20)
            assert execution is not None and execution.call_id == receipt.call_id
        await bot.report(first.call_id, progress="half way", sequence=1)
        before = await alice.get_status(first.call_id)

        status = asyncio.create_task(
            alice.get_status(first.call_id, wait_seconds=20, seen_version=before.version)
        )
        claim = asyncio.create_task(idle.claim_execution(["crew:idle"], wait_seconds=20))
        ask = asyncio.create_task(
            bot.ask_input(asking.call_id, "q1", "which colour?", wait_seconds=20)
        )
        waiters = "agentworks_long_poll_waiters"
        await until(lambda: metric(metrics_port, waiters) >= 3)

        started = time.monotonic()
        code = await asyncio.to_thread(proc.terminate)
        drained = await asyncio.wait_for(asyncio.gather(status, claim, ask), 10)
        assert code == 0
        assert time.monotonic() - started < 10
        seen, claimed, asked = drained
        assert (state_name(seen.status), seen.progress, seen.version) == (
            "running",
            "half way",
            before.version,
        )
        assert claimed is None
        assert (asked.answered, state_name(asked.status)) == (False, "waiting_for_input")

        await asyncio.to_thread(proc.start)
        for receipt in (first, asking):
            beat = await retried(
                lambda r=receipt: bot.heartbeat_execution(r.call_id, lease_seconds=20)
            )
            assert state_name(beat.status) in ("running", "waiting_for_input")  # not interrupted
        await alice.reply(asking.call_id, "blue")
        again = await bot.ask_input(asking.call_id, "q1", "which colour?", wait_seconds=5)
        assert (again.answered, again.reply) == (True, "blue")
        for receipt in (first, asking):
            await bot.finish_execution(receipt.call_id, final_message="done")
            final = await alice.get_status(receipt.call_id)
            assert (state_name(final.status), final.answer) == ("completed", "done")
    finally:
        for client in clients.values():
            await client.close()


@pytest.mark.reliability(
    scenario="Graceful shutdown of the scheduler mid-load (P4, S6)",
    action="SIGTERM to a scheduler process while 40 wake-ups come due over 2 s; started again",
    check="exit code 0 in < 10 s; after the restart every wake-up fired exactly once "
    "(one delivery per idempotency key in messaging)",
)
async def test_sigterm_mid_firing_scheduler_loses_and_duplicates_nothing_P4_S6(
    database_url, messaging, service_process, identity
):
    """P4 S6: see the reliability mark."""
    proc = service_process(
        "agentworks_scheduler",
        "SCHEDULER",
        database_url,
        SCHEDULER_MESSAGING_ADDRESS=messaging.address,
        SCHEDULER_TICK_SECONDS="0.1",
    )
    async with (
        MessagingClient(messaging.address, identity=identity("user:ops", {"operator"})) as ops,
        MessagingClient(messaging.address, identity=identity("user:alice")) as alice,
        SchedulerClient(proc.address, identity=identity("agent:timers/bot"), timeout=10) as bot,
    ):
        await ops.register_target("crew:timers", owner="user:owner")
        conversation = (await alice.send("hi", target="crew:timers")).conversation_id
        wake_ups = [
            (await bot.create_wake_up(conversation, delay_seconds=i % 3, note=f"w{i}")).wake_up_id
            for i in range(40)
        ]
        started = time.monotonic()
        code = await asyncio.to_thread(proc.terminate)
        assert code == 0 and time.monotonic() - started < 10
        await asyncio.to_thread(proc.start)

        def all_fired() -> bool:
            with psycopg.connect(database_url) as conn:
                return conn.execute(
                    "SELECT count(*) FROM scheduler.wake_ups WHERE status = 'pending'"
                ).fetchone() == (0,)

        await until(all_fired)
        with psycopg.connect(database_url) as conn:
            per_wake_up = dict(
                conn.execute(
                    "SELECT split_part(idempotency_key, ':', 2), count(*) "
                    "FROM messaging.deliveries WHERE kind = 'wake_up' GROUP BY 1"
                ).fetchall()
            )
        assert per_wake_up == {w: 1 for w in wake_ups}
