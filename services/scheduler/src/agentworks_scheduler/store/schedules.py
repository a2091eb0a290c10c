"""SQL of recurring schedules (S4): create, read, update, delete, list."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from agentworks.core.errors import NotFound
from agentworks_scheduler.models import Page, Recurrence, Schedule
from agentworks_scheduler.store.common import (
    SCHEDULE_LOCK,
    Q,
    StoreBase,
    Viewer,
    as_uuid,
    listing,
    schedule,
    wait_for_delivery,
)


class ScheduleStore(StoreBase):
    async def create_schedule(
        self,
        *,
        name: str,
        conversation_id: str,
        product: str,
        prompt: str,
        recurrence: Recurrence,
        anchor_at: datetime,
        next_fire_at: datetime,
        paused: bool,
        created_by: str,
        max_per_conversation: int,
        submission_id: str = "",
        request_hash: str = "",
        legacy_hash: str = "",
    ) -> tuple[Schedule, bool]:
        """A schedule, or the one this retry key created already (S4); and whether it
        is new."""
        row, created = await self._create_attached(
            "schedule",
            conversation_id=conversation_id,
            created_by=created_by,
            submission_id=submission_id,
            request_hash=request_hash,
            legacy_hash=legacy_hash,
            max_per_conversation=max_per_conversation,
            values={
                "id": uuid.uuid4(),
                "name": name,
                "product": product,
                "prompt": prompt,
                "cron": recurrence.cron,
                "interval_seconds": recurrence.interval_seconds,
                "time_zone": recurrence.time_zone,
                "anchor_at": anchor_at,
                "next_fire_at": next_fire_at,
                "paused": paused,
            },
        )
        return schedule(row), created

    async def get_schedule(self, schedule_id: str) -> Schedule:
        async with self.db.raw() as pg:
            row = await Q.one(pg, "get_schedule", {"id": as_uuid(schedule_id, "schedule")})
        if row is None:
            raise NotFound(f"schedule {schedule_id!r} not found")
        return schedule(row)

    async def update_schedule(
        self, schedule_id: str, change: Callable[[Schedule, datetime], dict[str, Any]]
    ) -> Schedule:
        """Lock the schedule, let `change(schedule, now)` say which columns to set, save.

        The lock waits for an occurrence of this schedule being delivered to be
        recorded, so an update never races the bookkeeping of an occurrence.
        """
        key = as_uuid(schedule_id, "schedule")
        async with self.db.raw(transaction=True) as pg:
            await wait_for_delivery(pg, SCHEDULE_LOCK, key)
            row = await Q.one(pg, "lock_schedule", {"id": key})
            if row is None:
                raise NotFound(f"schedule {schedule_id!r} not found")
            now = await Q.value(pg, "now")
            values = change(schedule(row), now)
            if not values:
                return schedule(row)
            unknown = set(values) - set(_SETTABLE)
            if unknown:
                raise ValueError(f"schedules cannot change {sorted(unknown)}")
            current = {name: getattr(row, name) for name in _SETTABLE}
            row = await Q.one(pg, "save_schedule", {**current, **values, "id": row.id})
        return schedule(row)

    async def delete_schedule(self, schedule_id: str) -> None:
        key = as_uuid(schedule_id, "schedule")
        async with self.db.raw(transaction=True) as pg:
            await wait_for_delivery(pg, SCHEDULE_LOCK, key)
            await Q.execute(pg, "delete_schedule", {"id": key})

    async def list_schedules(
        self,
        *,
        conversation_id: str,
        product: str,
        visible_to: Viewer,
        after: int,
        limit: int,
    ) -> Page:
        params = listing(
            conversation_id=conversation_id,
            product=product,
            visible_to=visible_to,
            after=after,
            limit=limit,
        )
        return await self._page("list_schedules", params, schedule, after)


# What `update_schedule`'s change may set (save_schedule writes them all, the unchanged
# ones as they were).
_SETTABLE = (
    "name",
    "prompt",
    "cron",
    "interval_seconds",
    "time_zone",
    "anchor_at",
    "next_fire_at",
    "paused",
)
