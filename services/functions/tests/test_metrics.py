"""Functions' own metrics (P4): running calls, limits and busy refusals per target,
scraped from a real process."""

from __future__ import annotations

import pytest

from agentworks.client import FunctionsClient
from agentworks.core import errors
from agentworks.server.testing import free_port, scrape_until

pytestmark = pytest.mark.timeout(120)

RUNNING = "agentworks_functions_calls_running"
UNCLAIMED = "agentworks_functions_calls_unclaimed"
LIMIT = "agentworks_functions_running_limit"
BUSY = "agentworks_functions_busy_refusals_total"


def target(scrape, name: str) -> tuple[float | None, ...]:
    """(running, unclaimed, limit, busy refusals) of one target."""
    return (
        scrape.value(RUNNING, target=name),
        scrape.value(UNCLAIMED, target=name),
        scrape.value(LIMIT, target=name),
        scrape.value(BUSY, target=name),
    )


async def test_running_calls_limits_and_busy_refusals_per_target_P4_F5(
    database_url, service_process, identity
):
    """P4 F5: /metrics reports, per registered target, the open calls counted against the
    running limit (waiting for input included), those no runtime has claimed, and the
    effective limit; each call refused as busy is counted for its target, whether it is
    refused at once or under the target's lock (a call with a retry key)."""
    port = free_port()
    proc = service_process(
        "agentworks_functions",
        "FUNCTIONS",
        database_url,
        FUNCTIONS_METRICS_LISTEN=f"127.0.0.1:{port}",
        FUNCTIONS_METRICS_REFRESH_SECONDS="0.1",
        FUNCTIONS_DEFAULT_RUNNING_LIMIT="3",
        FUNCTIONS_MESSAGING_ADDRESS="127.0.0.1:1",
    )
    clients = [
        FunctionsClient(proc.address, identity=identity(principal, roles), timeout=10)
        for principal, roles in (
            ("user:ops", {"operator"}),
            ("user:owner", set()),
            ("user:alice", set()),
            ("agent:busy/bot", set()),
        )
    ]
    ops, owner, alice, bot = clients
    try:
        await ops.register_target("crew:busy", owner="user:owner", running_limit=2)
        await ops.register_target("crew:idle", owner="user:owner")
        await owner.declare_function(
            "crew:busy",
            "work",
            input_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
            allowed_callers=["user:*"],
        )
        first = await alice.call("crew:busy", "work", {})
        second = await alice.call("crew:busy", "work", {})
        with pytest.raises(errors.Busy):  # refused at once
            await alice.call("crew:busy", "work", {"n": 3})
        with pytest.raises(errors.Busy):  # refused under the target's lock
            await alice.call("crew:busy", "work", {"n": 4}, submission_id="retry-4")

        seen = await scrape_until(port, lambda s: target(s, "crew:busy") == (2, 2, 2, 2))
        # The idle target: no calls, the service default limit, no refusal yet.
        assert target(seen, "crew:idle") == (0, 0, 3, None)

        # Claimed and waiting for input: still running (it holds its place), not unclaimed.
        execution = await bot.claim_execution(["crew:busy"], wait_seconds=5)
        assert execution is not None and execution.call_id == first.call_id
        await bot.ask_input(first.call_id, "q1", "which colour?")
        await scrape_until(port, lambda s: target(s, "crew:busy")[:2] == (2, 1))

        # Finished: one running call left, and room for a new one.
        claimed = await bot.claim_execution(["crew:busy"])
        assert claimed is not None and claimed.call_id == second.call_id
        await bot.finish_execution(second.call_id, final_message="done")
        await scrape_until(port, lambda s: target(s, "crew:busy") == (1, 0, 2, 2))
        await alice.call("crew:busy", "work", {"n": 5})
        with pytest.raises(errors.Busy):
            await alice.call("crew:busy", "work", {"n": 6})
        await scrape_until(port, lambda s: target(s, "crew:busy") == (2, 1, 2, 3))
    finally:
        for client in clients:
            await client.close()
