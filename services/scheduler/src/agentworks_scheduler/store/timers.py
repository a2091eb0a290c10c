"""SQL of the timer gauges (metrics.py): what is due, held and overdue, per kind."""

from __future__ import annotations

from typing import Any

from agentworks_scheduler.store.common import Q, StoreBase


class TimerStore(StoreBase):
    async def timer_counts(self) -> list[Any]:
        """Per kind (wake_up, schedule): rows of kind, due, held, overdue (seconds).

        Only what is due is read, through partial indexes (queries.sql, timer_counts)."""
        async with self.db.raw() as pg:
            return await Q.all(pg, "timer_counts")
