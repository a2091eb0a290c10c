"""Graceful shutdown: SIGTERM drains functions' long-polls, execution leases survive a
clean restart, and a scheduler stopped mid-load fires everything once after it is back
(P4, F11, F12, S6). Messaging has the turn-lease version in test_reliability_messaging.py.
"""

from __future__ import annotations

import asyncio
import json
import re
import time

import psycopg
import pytest

from agentworks.client import FunctionsClient, MessagingClient, SchedulerClient
from agentworks.client.functions import state_name
from agentworks.core import errors
from agentworks.core.errors import Unavailable
from agentworks.server.testing import free_port, scrape_until, until

pytestmark = pytest.mark.timeout(120)


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


@pytest.mark.alone
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
        await scrape_until(metrics_port, lambda page: page.total(waiters) >= 3)

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


@pytest.mark.alone
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

        await until(lambda: asyncio.to_thread(all_fired))
        with psycopg.connect(database_url) as conn:
            per_wake_up: dict[str, int] = dict(
                conn.execute(
                    "SELECT split_part(idempotency_key, ':', 2), count(*) "
                    "FROM messaging.deliveries WHERE kind = 'wake_up' GROUP BY 1"
                ).fetchall()
            )
        assert per_wake_up == {w: 1 for w in wake_ups}


def log_problems(path) -> list[str]:
    """The lines of a service's log that a clean stop must not have: errors (JSON
    `level` error or critical), tracebacks, asyncio's "Task exception was never
    retrieved", and psycopg's warnings about a statement cut twice."""
    bad = []
    for line in path.read_text().splitlines():
        try:
            level = json.loads(line).get("level", "")
        except ValueError:
            level = ""
        if level in ("error", "critical") or re.search(
            r"never retrieved|Traceback|\bERROR\b|query cancellation interrupted", line
        ):
            bad.append(line)
    return bad


def waiting_for_locks(database_url: str, count: int) -> bool:
    """Whether `count` sessions of the database (or more) wait for a lock."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchone()
        return row is not None and row[0] >= count


@pytest.mark.alone
@pytest.mark.reliability(
    scenario="SIGTERM to functions with statements in flight (P4, F12)",
    action="calls accepted under load from 8 concurrent callers while 2 runtimes claim and "
    "finish; then, with the target's row locked by another session so that 4 more calls "
    "stay mid-statement, 2 GetStatus long-polls waiting, SIGTERM (drain grace 1 s); started "
    "again on the same port",
    check='exit code 0; the log holds no error, no traceback and no "never retrieved" '
    "(one server.requests_cut warning); the 4 cut calls failed and stored nothing; after "
    "the restart every accepted call is there, the finished ones completed",
)
async def test_sigterm_with_statements_in_flight_logs_no_error_and_loses_nothing_P4_F12(
    database_url, service_process, identity, tmp_path
):
    """P4 F12: see the reliability mark."""
    log = tmp_path / "functions.log"
    proc = service_process(
        "agentworks_functions",
        "FUNCTIONS",
        database_url,
        stderr_to=str(log),
        FUNCTIONS_MESSAGING_ADDRESS="127.0.0.1:1",
        FUNCTIONS_DRAIN_SECONDS="1",
        FUNCTIONS_SWEEP_SECONDS="0.2",
        LOG_JSON="1",
        LOG_LEVEL="info",
        # The load is as fast as alice can call: an operator's share of her own (B7).
        AGENTWORKS_PRINCIPAL_SHARES=(
            '{"user:alice": {"creates_per_second": 100000, "burst": 100000}}'
        ),
    )
    ops, owner, alice, bot = clients = [
        FunctionsClient(proc.address, identity=identity(principal, roles), timeout=10)
        for principal, roles in (
            ("user:ops", {"operator"}),
            ("user:owner", set()),
            ("user:alice", set()),
            ("agent:drain/bot", set()),
        )
    ]
    try:
        await ops.register_target("crew:drain", owner="user:owner", running_limit=1000)
        await owner.declare_function(
            "crew:drain", "work", input_schema={"type": "object"}, allowed_callers=["user:*"]
        )
        accepted: list[str] = []
        finished: list[str] = []
        loading = True

        async def caller() -> None:
            while loading:
                accepted.append((await alice.call("crew:drain", "work", {})).call_id)

        async def runtime() -> None:
            while loading:
                execution = await bot.claim_execution(["crew:drain"], wait_seconds=1)
                if execution is not None:
                    await bot.finish_execution(execution.call_id, final_message="done")
                    finished.append(execution.call_id)

        load = [asyncio.create_task(caller()) for _ in range(8)]
        load += [asyncio.create_task(runtime()) for _ in range(2)]
        await asyncio.sleep(1.0)
        loading = False
        await asyncio.wait_for(asyncio.gather(*load), 10)
        assert len(accepted) > 20 and finished

        open_call = next(c for c in accepted if c not in finished)
        before = await alice.get_status(open_call)
        polls = [
            asyncio.create_task(
                alice.get_status(open_call, wait_seconds=20, seen_version=before.version)
            )
            for _ in range(2)
        ]
        with psycopg.connect(database_url) as lock:
            # Calls take the target's row: these wait mid-statement until the drain cuts them.
            lock.execute("SELECT * FROM functions.targets FOR UPDATE")
            cut = [asyncio.create_task(alice.call("crew:drain", "work", {})) for _ in range(4)]
            await until(lambda: asyncio.to_thread(waiting_for_locks, database_url, 4))
            code = await asyncio.to_thread(proc.terminate)
        assert code == 0
        cut_outcomes = await asyncio.gather(*cut, return_exceptions=True)
        assert all(isinstance(o, errors.AgentWorksError) for o in cut_outcomes), cut_outcomes
        await asyncio.gather(*polls, return_exceptions=True)
        problems = log_problems(log)
        assert problems == [], "\n".join(problems)
        assert "server.requests_cut" in log.read_text()

        await asyncio.to_thread(proc.start)
        with psycopg.connect(database_url) as conn:
            stored = {r[0] for r in conn.execute("SELECT id::text FROM functions.calls")}
        assert stored == set(accepted)  # nothing accepted is lost, nothing cut is stored
        for call_id in finished:
            status = await retried(lambda c=call_id: alice.get_status(c))
            assert (state_name(status.status), status.answer) == ("completed", "done")
    finally:
        for client in clients:
            await client.close()
