"""Push across replicas for calls (N1): a platform service that follows the ends of its
calls with the typed client's `watch_call_ends`, and a caller watching one call with
`watch_call`, survive a kill -9 of the functions replica they stream from, resuming on
the other from their last cursors with every end, message and status exactly once."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from structlog.testing import capture_logs

from agentworks.client import FunctionsClient
from agentworks.client.functions import state_name
from agentworks.core.errors import DeadlineExceeded, Unavailable

pytestmark = pytest.mark.timeout(120)

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}}


async def _retried(action: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
    """A request retried until acknowledged while a replica is down (each is idempotent:
    a call with its submission_id, a cancel, a report with its sequence, a finish)."""
    for _ in range(100):
        try:
            return await action(*args, **kwargs)
        except (Unavailable, DeadlineExceeded):
            await asyncio.sleep(0.1)
    raise AssertionError("never acknowledged")


@pytest.mark.alone
@pytest.mark.reliability(
    scenario="Process fault: the functions replica under a call-ends stream killed (N1)",
    action="a platform service follows its calls' ends with the typed client over a "
    "channel to two functions processes; each replica in turn is SIGKILLed (and "
    "restarted) while calls keep ending",
    check="the iterator resumes on the other replica from its last cursor by itself; "
    "every end reaches it exactly once, in the order the calls ended, with no polling",
)
async def test_call_ends_survive_a_kill_9_of_the_replica_streaming_them_N1_P3(
    database_url, service_process, identity
):
    """N1 P3: two functions processes behind one round-robin channel; a platform service
    (user:platform) streams the ends of its calls. Killing each replica in turn (one
    of them is the stream's), the iterator resumes by itself from its last cursor: the
    ends of all 15 calls arrive once each, in the order they ended, and at least one
    resume happened."""
    replicas = [
        service_process("agentworks_functions", "FUNCTIONS", database_url) for _ in range(2)
    ]
    addresses = ",".join(r.address for r in replicas)
    async with (
        FunctionsClient(addresses, identity=identity("user:ops", {"operator"})) as ops,
        FunctionsClient(addresses, identity=identity("user:owner")) as owner,
        FunctionsClient(addresses, identity=identity("user:platform"), timeout=5) as platform,
        FunctionsClient(addresses, identity=identity("agent:demo/bot"), timeout=5) as bot,
    ):
        await ops.register_target("crew:demo", owner="user:owner", running_limit=50)
        await owner.declare_function(
            "crew:demo", "job", input_schema=SCHEMA, allowed_callers=["user:*"]
        )
        received: list[str] = []
        arrived = asyncio.Event()

        async def follow() -> None:
            async for change in platform.watch_call_ends(heartbeat_seconds=5):
                received.append(change.status.call_id)
                arrived.set()

        async def until_received(count: int) -> None:
            while len(received) < count:
                arrived.clear()
                await asyncio.wait_for(arrived.wait(), 30)

        ended: list[str] = []

        async def end_calls(label: str, count: int) -> None:
            """`count` calls, each ended in turn: by its runtime's finish or a cancel."""
            for n in range(count):
                key = f"{label}-{n}"
                call = await _retried(
                    platform.call, "crew:demo", "job", {"n": n}, submission_id=key
                )
                if n % 2:
                    await _retried(platform.cancel, call.call_id)
                else:
                    claimed = await _retried(bot.claim_execution, ["crew:demo"])
                    assert claimed is not None and claimed.call_id == call.call_id
                    await _retried(bot.finish_execution, call.call_id, final_message="ok")
                ended.append(call.call_id)

        with capture_logs() as logs:
            follower = asyncio.create_task(follow())
            try:
                await end_calls("before", 5)
                await until_received(len(ended))
                for number, victim in enumerate(replicas):
                    victim.kill()
                    await end_calls(f"after-kill-{number}", 5)
                    await until_received(len(ended))
                    await asyncio.to_thread(victim.start)
            finally:
                follower.cancel()
                await asyncio.gather(follower, return_exceptions=True)
    assert received == ended  # each end once, in the order they ended, across both kills
    resumes = [entry for entry in logs if entry["event"] == "stream.resuming"]
    assert resumes, "the stream never broke: neither kill hit its replica"


async def test_a_call_watch_survives_a_kill_9_of_its_replica_N1_P3(
    database_url, service_process, identity
):
    """N1 P3 F7: a caller watches one call over a channel to two functions processes
    while its runtime reports messages; each replica is killed in turn. The iterator
    resumes from the last status's cursors and version: every message arrives once, in
    order, and the terminal status is the last thing yielded."""
    replicas = [
        service_process("agentworks_functions", "FUNCTIONS", database_url) for _ in range(2)
    ]
    addresses = ",".join(r.address for r in replicas)
    async with (
        FunctionsClient(addresses, identity=identity("user:ops", {"operator"})) as ops,
        FunctionsClient(addresses, identity=identity("user:owner")) as owner,
        FunctionsClient(addresses, identity=identity("user:alice"), timeout=5) as alice,
        FunctionsClient(addresses, identity=identity("agent:demo/bot"), timeout=5) as bot,
    ):
        await ops.register_target("crew:demo", owner="user:owner")
        await owner.declare_function(
            "crew:demo", "job", input_schema=SCHEMA, allowed_callers=["user:*"]
        )
        call_id = (await alice.call("crew:demo", "job", {"n": 1})).call_id
        await bot.claim_execution(["crew:demo"], lease_seconds=60)
        statuses: list[Any] = []
        changed = asyncio.Event()

        async def follow() -> None:
            async for change in alice.watch_call(call_id, heartbeat_seconds=5):
                statuses.append(change.status)
                changed.set()

        def messages() -> list[str]:
            return [m.text for s in statuses for m in s.messages]

        async def until_messages(count: int) -> None:
            while len(messages()) < count:
                changed.clear()
                await asyncio.wait_for(changed.wait(), 30)

        sent: list[str] = []
        sequence = 0

        async def report(label: str) -> None:
            nonlocal sequence
            for n in range(3):
                sequence += 1
                sent.append(f"{label}-{n}")
                await _retried(bot.report, call_id, messages=[sent[-1]], sequence=sequence)

        with capture_logs() as logs:
            follower = asyncio.create_task(follow())
            await report("before")
            await until_messages(len(sent))
            for number, victim in enumerate(replicas):
                victim.kill()
                await report(f"after-kill-{number}")
                await until_messages(len(sent))
                await asyncio.to_thread(victim.start)
            await _retried(bot.finish_execution, call_id, final_message="done")
            await asyncio.wait_for(follower, 30)  # the iterator ends after the terminal status
    assert messages() == sent  # each once, in order, across both kills
    assert state_name(statuses[-1].status) == "completed"
    assert all(state_name(s.status) != "completed" for s in statuses[:-1])
    resumes = [entry for entry in logs if entry["event"] == "stream.resuming"]
    assert resumes, "the stream never broke: neither kill hit its replica"
