"""SQL of the timer gauges (metrics.py): what is due, held and overdue, per kind."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from agentworks.server.metrics import inline_sql
from agentworks_scheduler import tables as t
from agentworks_scheduler.store.common import StoreBase, paused


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
        sa.select(w.c.due_at.label("due_at"), paused(w.c.product).label("held"))
        .where(w.c.status == "pending", w.c.due_at <= sa.func.now())
        .offset(0)  # keeps the subquery whole: `held` is computed once per row
        .subquery("due_wake_ups")
    )
    schedules = (
        sa.select(s.c.next_fire_at.label("due_at"), paused(s.c.product).label("held"))
        .where(~s.c.paused, s.c.next_fire_at <= sa.func.now())
        .offset(0)  # keeps the subquery whole: `held` is computed once per row
        .subquery("due_schedules")
    )
    return sa.union_all(_summary("wake_up", wake_ups), _summary("schedule", schedules))


_TIMERS_SQL = inline_sql(_timers())


class TimerStore(StoreBase):
    async def timer_counts(self) -> list[Any]:
        """Per kind (wake_up, schedule): rows of kind, due, held, overdue (seconds)."""
        async with self.db.autocommit() as conn:
            return list((await conn.exec_driver_sql(_TIMERS_SQL)).all())
