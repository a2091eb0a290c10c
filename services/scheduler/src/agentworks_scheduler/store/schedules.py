"""SQL of recurring schedules (S4): create, read, update, delete, list."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from agentworks.core.errors import NotFound
from agentworks_scheduler import tables as t
from agentworks_scheduler.models import Page, Recurrence, Schedule
from agentworks_scheduler.store.common import (
    SCHEDULE_LOCK,
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
            t.schedules,
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
        s = t.schedules
        async with self.db.transaction() as conn:
            row = (
                await conn.execute(sa.select(s).where(s.c.id == as_uuid(schedule_id, "schedule")))
            ).one_or_none()
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
        s = t.schedules
        key = as_uuid(schedule_id, "schedule")
        async with self.db.transaction() as conn:
            await wait_for_delivery(conn, SCHEDULE_LOCK, key)
            row = (
                await conn.execute(sa.select(s).where(s.c.id == key).with_for_update())
            ).one_or_none()
            if row is None:
                raise NotFound(f"schedule {schedule_id!r} not found")
            now = (await conn.execute(sa.select(sa.func.now()))).scalar_one()
            values = change(schedule(row), now)
            if not values:
                return schedule(row)
            values["updated_at"] = sa.func.now()
            row = (
                await conn.execute(
                    s.update().where(s.c.id == row.id).values(**values).returning(*s.c)
                )
            ).one()
        return schedule(row)

    async def delete_schedule(self, schedule_id: str) -> None:
        s = t.schedules
        key = as_uuid(schedule_id, "schedule")
        async with self.db.transaction() as conn:
            await wait_for_delivery(conn, SCHEDULE_LOCK, key)
            await conn.execute(s.delete().where(s.c.id == key))

    async def list_schedules(
        self,
        *,
        conversation_id: str,
        product: str,
        visible_to: Viewer,
        after: int,
        limit: int,
    ) -> Page:
        query = listing(
            t.schedules,
            conversation_id=conversation_id,
            product=product,
            visible_to=visible_to,
            after=after,
        )
        return await self._page(query, schedule, limit, after)
