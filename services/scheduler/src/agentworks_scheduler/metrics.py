"""The scheduler's own Prometheus metrics (P4): timers due, held and late, per kind.

The core metrics (RPCs, pool) are in `agentworks.server.metrics`. The gauges describe the
whole database, not this process: every replica reports the same values (aggregate with
max(), not sum()). `refresh` recomputes them with one query, every
`SCHEDULER_METRICS_REFRESH_SECONDS`, only while metrics are served (the SQL is in
store/timers.py). The fire-lag
histogram is per process (aggregate with sum()), observed as each occurrence fires.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from prometheus_client import Gauge, Histogram

from agentworks.server.metrics import publish, refresher
from agentworks_scheduler.config import Config

if TYPE_CHECKING:
    from agentworks_scheduler.store.timers import TimerStore

KINDS = ("wake_up", "schedule")

TIMERS_DUE = Gauge(
    "agentworks_scheduler_timers_due",
    "Wake-ups and schedule occurrences due now, not yet delivered and not held by a pause.",
    ["kind"],
)
TIMERS_HELD = Gauge(
    "agentworks_scheduler_timers_held",
    "Wake-ups and schedule occurrences due now but held by a pause (S3).",
    ["kind"],
)
TIMERS_OVERDUE = Gauge(
    "agentworks_scheduler_timers_overdue_seconds",
    "How long the oldest due, unheld timer has been due (0: none due).",
    ["kind"],
)
FIRE_LAG = Histogram(
    "agentworks_scheduler_fire_lag_seconds",
    "How long after its due time each occurrence was fired (the `late_seconds` attribute).",
    ["kind"],
    buckets=(0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 21600, 86400),
)


def fired(kind: str, late_seconds: float) -> None:
    """Record one delivered occurrence (`kind` is wake_up or schedule)."""
    FIRE_LAG.labels(kind).observe(late_seconds)


async def refresh(store: TimerStore) -> None:
    """Recompute the timer gauges (one statement)."""
    rows = await store.timer_counts()
    publish(TIMERS_DUE, {(r.kind,): r.due for r in rows})
    publish(TIMERS_HELD, {(r.kind,): r.held for r in rows})
    publish(TIMERS_OVERDUE, {(r.kind,): max(0.0, float(r.overdue)) for r in rows})


def start_refresh(store: TimerStore, config: Config) -> list[asyncio.Task[None]]:
    """The task that keeps the gauges fresh while metrics are served (else none)."""
    return refresher(config.service, lambda: refresh(store))
