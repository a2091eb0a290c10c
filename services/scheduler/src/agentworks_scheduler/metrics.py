"""The scheduler's own Prometheus metrics (P4): timers due, held and late, per kind.

The core metrics (RPCs, pool) are in `agentworks.server.metrics`. The gauges describe the
whole database, not this process: every replica reports the same values (aggregate with
max(), not sum()). `refresh` recomputes them with one query, every
`SCHEDULER_METRICS_REFRESH_SECONDS`, only while metrics are served. The fire-lag
histogram is per process (aggregate with sum()), observed as each occurrence fires.
"""

from __future__ import annotations

import asyncio

import sqlalchemy as sa
from prometheus_client import Gauge, Histogram

from agentworks.server.db import Database
from agentworks.server.metrics import inline_sql, publish, refresher
from agentworks_scheduler import tables as t
from agentworks_scheduler.config import Config

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


def _held(product: sa.ColumnElement[str]) -> sa.Exists:
    """A pause covers this product: global, the product, or its whole kind (as the store)."""
    p = t.pauses
    return sa.exists().where(
        sa.or_(
            p.c.product == "",
            p.c.product == product,
            p.c.product == sa.func.split_part(product, ":", 1) + ":*",
        )
    )


def _summary(kind: str, due: sa.Subquery) -> sa.Select:
    return sa.select(
        sa.literal(kind).label("kind"),
        sa.func.count().filter(~due.c.held).label("due"),
        sa.func.count().filter(due.c.held).label("held"),
        sa.func.coalesce(
            sa.extract("epoch", sa.func.now() - sa.func.min(due.c.due_at).filter(~due.c.held)),
            0,
        ).label("overdue"),
    )


def _timers() -> sa.CompoundSelect:
    """Due wake-ups and due schedule occurrences, summarised per kind.

    Only what is due is read, through the partial indexes `wake_ups_due` (pending, by
    due time) and `schedules_due` (not paused, by next fire time); fired and cancelled
    history is never scanned.
    """
    w, s = t.wake_ups, t.schedules
    wake_ups = (
        sa.select(w.c.due_at.label("due_at"), _held(w.c.product).label("held"))
        .where(w.c.status == "pending", w.c.due_at <= sa.func.now())
        .offset(0)  # keeps the subquery whole: `held` is computed once per row
        .subquery("due_wake_ups")
    )
    schedules = (
        sa.select(s.c.next_fire_at.label("due_at"), _held(s.c.product).label("held"))
        .where(~s.c.paused, s.c.next_fire_at <= sa.func.now())
        .offset(0)  # keeps the subquery whole: `held` is computed once per row
        .subquery("due_schedules")
    )
    return sa.union_all(_summary("wake_up", wake_ups), _summary("schedule", schedules))


_SQL = inline_sql(_timers())


async def refresh(db: Database) -> None:
    """Recompute the timer gauges (one statement)."""
    async with db.autocommit() as conn:
        rows = (await conn.exec_driver_sql(_SQL)).all()
    publish(TIMERS_DUE, {(r.kind,): r.due for r in rows})
    publish(TIMERS_HELD, {(r.kind,): r.held for r in rows})
    publish(TIMERS_OVERDUE, {(r.kind,): max(0.0, float(r.overdue)) for r in rows})


def start_refresh(db: Database, config: Config) -> list[asyncio.Task[None]]:
    """The task that keeps the gauges fresh while metrics are served (else none)."""
    return refresher(config.service, lambda: refresh(db))
