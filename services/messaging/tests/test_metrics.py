"""Messaging's own metrics (P4): the turn queue per target, scraped from a real process."""

from __future__ import annotations

import time

import pytest

from agentworks.client import MessagingClient
from agentworks.server.testing import free_port, scrape_until

pytestmark = pytest.mark.timeout(120)

QUEUED = "agentworks_messaging_turns_queued"
AGE = "agentworks_messaging_turn_queue_age_seconds"
ACTIVE = "agentworks_messaging_turns_active"


def queue(scrape, target: str) -> tuple[float | None, float | None, float | None]:
    return (
        scrape.value(QUEUED, target=target),
        scrape.value(AGE, target=target),
        scrape.value(ACTIVE, target=target),
    )


async def test_turn_queue_depth_age_and_active_turns_per_target_P4_P3_C10(
    database_url, service_process, identity
):
    """P4 P3 C10: /metrics reports, per registered target, the turns waiting to be claimed
    (conversations with pending deliveries and no turn), how long the oldest has waited,
    and the active turns; a message arriving during a turn waits for the next one. The
    values come from the database, so a second replica reports the same."""
    port = free_port()
    env = {"MESSAGING_METRICS_REFRESH_SECONDS": "0.1"}
    proc = service_process(
        "agentworks_messaging",
        "MESSAGING",
        database_url,
        MESSAGING_METRICS_LISTEN=f"127.0.0.1:{port}",
        **env,
    )
    started = time.monotonic()
    async with (
        MessagingClient(proc.address, identity=identity("user:ops", {"operator"})) as ops,
        MessagingClient(proc.address, identity=identity("user:alice")) as alice,
        MessagingClient(proc.address, identity=identity("agent:queue/bot")) as bot,
    ):
        await ops.register_target("crew:queue", owner="user:owner")
        await ops.register_target("crew:idle", owner="user:owner")
        first = await alice.send("one", target="crew:queue")
        await alice.send("two", target="crew:queue")

        # Two turns queued; the oldest has waited at least 0.3 s (and not longer than
        # this test has run); nothing for the idle target.
        seen = await scrape_until(
            port,
            lambda s: (
                s.value(QUEUED, target="crew:queue") == 2
                and (s.value(AGE, target="crew:queue") or 0) >= 0.3
            ),
        )
        assert seen.number(AGE, target="crew:queue") < time.monotonic() - started + 1
        assert seen.value(ACTIVE, target="crew:queue") == 0
        assert queue(seen, "crew:idle") == (0, 0, 0)
        refreshed = seen.value(
            "agentworks_metrics_refreshed_timestamp_seconds", service="messaging"
        )
        assert refreshed is not None and abs(time.time() - refreshed) < 10

        # A second replica reports the same database-wide values.
        other_port = free_port()
        service_process(
            "agentworks_messaging",
            "MESSAGING",
            database_url,
            MESSAGING_METRICS_LISTEN=f"127.0.0.1:{other_port}",
            **env,
        )
        await scrape_until(other_port, lambda s: s.value(QUEUED, target="crew:queue") == 2)

        # Claiming the oldest conversation moves it from queued to active; a follow-up
        # in that conversation waits behind the running turn, not as a new queued turn.
        turn = await bot.claim_turn(["crew:queue"])
        assert turn is not None and turn.conversation_id == first.conversation_id
        await alice.send("and three", inbox_id=first.inbox_id)
        seen = await scrape_until(
            port,
            lambda s: queue(s, "crew:queue")[0::2] == (1, 1),
        )
        assert seen.number(AGE, target="crew:queue") > 0

        # Completing the turn queues the conversation again (for its follow-up).
        await bot.complete_turn(turn.turn_id)
        await scrape_until(port, lambda s: queue(s, "crew:queue")[0::2] == (2, 0))

        # Both claimed: nothing queued, age back to 0, two active turns.
        for _ in range(2):
            assert await bot.claim_turn(["crew:queue"]) is not None
        await scrape_until(port, lambda s: queue(s, "crew:queue") == (0, 0, 2))
