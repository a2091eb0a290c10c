"""The scheduler's own metrics (P4): timers due, held and overdue, and fire lag, scraped
from a real process."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from agentworks.client import MessagingClient, SchedulerClient
from agentworks.server.testing import free_port, scrape_until

pytestmark = pytest.mark.timeout(120)

DUE = "agentworks_scheduler_timers_due"
HELD = "agentworks_scheduler_timers_held"
OVERDUE = "agentworks_scheduler_timers_overdue_seconds"
LAG = "agentworks_scheduler_fire_lag_seconds"


def timers(scrape, kind: str) -> tuple[float | None, float | None]:
    """(due, held) of one kind."""
    return scrape.value(DUE, kind=kind), scrape.value(HELD, kind=kind)


async def test_timers_due_held_overdue_and_fire_lag_P4_S2_S3(
    database_url, messaging, service_process, identity
):
    """P4 S2 S3: /metrics reports the wake-ups and schedule occurrences that are due and
    not delivered yet, how long the oldest has been due, and those a pause holds instead;
    each delivered occurrence is observed in the fire-lag histogram with its lateness."""
    port = free_port()
    proc = service_process(
        "agentworks_scheduler",
        "SCHEDULER",
        database_url,
        SCHEDULER_MESSAGING_ADDRESS=messaging.address,
        SCHEDULER_METRICS_LISTEN=f"127.0.0.1:{port}",
        SCHEDULER_METRICS_REFRESH_SECONDS="0.1",
        # One tick at start, then none during the test: what is due stays due.
        SCHEDULER_TICK_SECONDS="3600",
    )
    async with (
        MessagingClient(messaging.address, identity=identity("user:ops", {"operator"})) as ops,
        MessagingClient(messaging.address, identity=identity("user:alice")) as alice,
        SchedulerClient(proc.address, identity=identity("agent:timers/bot"), timeout=10) as bot,
        SchedulerClient(proc.address, identity=identity("user:ops", {"operator"})) as operator,
    ):
        await ops.register_target("crew:timers", owner="user:owner")
        conversation = (await alice.send("hi", target="crew:timers")).conversation_id
        seen = await scrape_until(port, lambda s: timers(s, "wake_up") == (0, 0))
        assert timers(seen, "schedule") == (0, 0)
        assert seen.value(OVERDUE, kind="wake_up") == 0
        assert seen.value(f"{LAG}_count", kind="wake_up") is None  # nothing fired yet

        # Ten minutes overdue, and an interval schedule whose next occurrence is 2 s away.
        now = datetime.now(UTC)
        await bot.create_wake_up(conversation, at=now - timedelta(minutes=10), note="late")
        await bot.create_schedule(
            conversation, "every minute", interval_seconds=60, start_at=now - timedelta(seconds=58)
        )
        seen = await scrape_until(
            port, lambda s: timers(s, "wake_up") == (1, 0) and timers(s, "schedule") == (1, 0)
        )
        assert 600 <= seen.number(OVERDUE, kind="wake_up") < 700
        assert 0 < seen.number(OVERDUE, kind="schedule") < 60

        # A global pause holds both: due becomes held, and nothing is overdue.
        await operator.pause(reason="maintenance")
        seen = await scrape_until(
            port, lambda s: timers(s, "wake_up") == (0, 1) and timers(s, "schedule") == (0, 1)
        )
        assert seen.value(OVERDUE, kind="wake_up") == seen.value(OVERDUE, kind="schedule") == 0

        # Resumed, and restarted so that its first tick fires both at once.
        await operator.resume()
        await asyncio.to_thread(proc.terminate)
        await asyncio.to_thread(proc.start)
        seen = await scrape_until(
            port,
            lambda s: (
                s.value(f"{LAG}_count", kind="wake_up") == 1
                and s.value(f"{LAG}_count", kind="schedule") == 1
                and timers(s, "wake_up") == (0, 0)
                and timers(s, "schedule") == (0, 0)
            ),
        )
        assert 600 <= seen.number(f"{LAG}_sum", kind="wake_up") < 700
        assert seen.value(f"{LAG}_bucket", kind="wake_up", le="300.0") == 0
        assert seen.value(f"{LAG}_bucket", kind="wake_up", le="1800.0") == 1
        assert 0 <= seen.number(f"{LAG}_sum", kind="schedule") < 60
