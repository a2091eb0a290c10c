"""Recurring schedules (S4): create, read, update, pause one, delete, list, preview."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import structlog

from agentworks.core.checks import check_no_nul
from agentworks.core.errors import InvalidArgument, Reason, rule_meta
from agentworks.core.identity import Identity
from agentworks_scheduler import recurrence as rec
from agentworks_scheduler.models import Recurrence, Schedule
from agentworks_scheduler.service.access import Access
from agentworks_scheduler.service.rules import (
    MAX_DELAY,
    MAX_PREVIEW_SPAN,
    MAX_SCHEDULES_PER_CONVERSATION,
    PREVIEW_DEFAULT,
    check_prompt,
    check_retry_key,
    legacy_request_hash,
    request_hash,
)

log = structlog.get_logger("agentworks.scheduler")


class Schedules(Access):
    def _check_recurrence(self, recurrence: Recurrence | None) -> Recurrence:
        if recurrence is None:
            raise InvalidArgument(
                "recurrence is required: give a cron rule or interval_seconds",
                reason=Reason.FIELD_RULE,
                metadata=rule_meta("recurrence", "required"),
            )
        return rec.check(recurrence, min_interval_seconds=self.config.min_interval_seconds)

    async def create_schedule(
        self,
        identity: Identity,
        *,
        conversation_id: str,
        prompt: str,
        recurrence: Recurrence | None,
        name: str,
        product: str,
        start_at: datetime | None,
        paused: bool,
        submission_id: str = "",
    ) -> Schedule:
        """A recurring prompt into a conversation (S4).

        With a `submission_id`, a retry of the same request gets the same schedule.
        """
        check_prompt(prompt)
        check_no_nul(name, "name")  # its length is the proto's rule
        check_retry_key(submission_id)
        rule = self._check_recurrence(recurrence)
        now = datetime.now(UTC)
        if start_at is not None and rule.interval_seconds is None:
            raise InvalidArgument(
                "start_at applies to interval schedules only; cron rules fire at the times "
                "they name (in time_zone), so leave start_at out",
                reason=Reason.INVALID_VALUE,
                metadata=rule_meta("start_at"),
            )
        if start_at is not None and not now - MAX_DELAY <= start_at <= now + MAX_DELAY:
            raise InvalidArgument(
                f"start_at must be within {MAX_DELAY.days} days of now",
                reason=Reason.FIELD_RULE,
                metadata=rule_meta("start_at", "range", f"{MAX_DELAY.days} days"),
            )
        place = await self._attach(identity, conversation_id, product)
        if rule.interval_seconds:
            anchor = start_at or now + timedelta(seconds=rule.interval_seconds)
            # A start in the past joins the grid at its next point: nothing is backfilled.
            next_fire_at = rec.next_after(rule, anchor, now - timedelta(microseconds=1))
        else:
            anchor = now
            next_fire_at = rec.next_after(rule, anchor, now)
        asked = (
            conversation_id,
            prompt,
            rule.cron,
            rule.interval_seconds,
            rule.time_zone,
            name,
            product,
            start_at.isoformat() if start_at else None,
            paused,
        )
        schedule, created = await self.store.create_schedule(
            name=name,
            conversation_id=place.conversation_id,
            product=place.product,
            prompt=prompt,
            recurrence=rule,
            anchor_at=anchor,
            next_fire_at=next_fire_at,
            paused=paused,
            created_by=identity.principal,
            max_per_conversation=MAX_SCHEDULES_PER_CONVERSATION,
            submission_id=submission_id,
            request_hash=request_hash(*asked),
            legacy_hash=legacy_request_hash(*asked),
        )
        log.info(
            "schedule.created" if created else "schedule.retried",
            schedule_id=schedule.id,
            conversation_id=schedule.conversation_id,
            rule=str(rule),
            next_fire_at=schedule.next_fire_at.isoformat(),
        )
        return schedule

    async def get_schedule(self, identity: Identity, schedule_id: str) -> Schedule:
        return await self._owned_schedule(identity, schedule_id)

    async def update_schedule(
        self,
        identity: Identity,
        schedule_id: str,
        *,
        prompt: str | None,
        name: str | None,
        recurrence: Recurrence | None,
    ) -> Schedule:
        """Change prompt, name or rule; a new rule restarts from now (S4)."""
        if prompt is not None:
            check_prompt(prompt)
        if name is not None:
            check_no_nul(name, "name")  # its length is the proto's rule
        rule = self._check_recurrence(recurrence) if recurrence is not None else None
        await self._owned_schedule(identity, schedule_id, change=True)

        def change(schedule: Schedule, now: datetime) -> dict[str, Any]:
            values: dict[str, Any] = {}
            if prompt is not None:
                values["prompt"] = prompt
            if name is not None:
                values["name"] = name
            if rule is not None:
                anchor = now + timedelta(seconds=rule.interval_seconds or 0)
                values.update(
                    cron=rule.cron,
                    interval_seconds=rule.interval_seconds,
                    time_zone=rule.time_zone,
                    anchor_at=anchor,
                    next_fire_at=rec.next_after(rule, anchor, now),
                )
            return values

        schedule = await self.store.update_schedule(schedule_id, change)
        log.info("schedule.updated", schedule_id=schedule_id, rule=str(schedule.recurrence))
        return schedule

    async def set_schedule_paused(
        self, identity: Identity, schedule_id: str, *, paused: bool
    ) -> Schedule:
        """Pause or resume one schedule; resuming skips what was missed meanwhile."""
        await self._owned_schedule(identity, schedule_id, change=True)

        def change(schedule: Schedule, now: datetime) -> dict[str, Any]:
            if schedule.paused == paused:
                return {}
            values: dict[str, Any] = {"paused": paused}
            if not paused and schedule.next_fire_at <= now:
                values["next_fire_at"] = rec.next_after(
                    schedule.recurrence, schedule.anchor_at, now
                )
            return values

        schedule = await self.store.update_schedule(schedule_id, change)
        log.info("schedule.paused" if paused else "schedule.resumed", schedule_id=schedule_id)
        return schedule

    async def delete_schedule(self, identity: Identity, schedule_id: str) -> None:
        await self._owned_schedule(identity, schedule_id, change=True)
        await self.store.delete_schedule(schedule_id)
        log.info("schedule.deleted", schedule_id=schedule_id)

    async def list_schedules(
        self, identity: Identity, *, conversation_id: str, product: str, after: str, limit: int
    ) -> tuple[list[Schedule], str]:
        return await self._list_own(
            identity,
            self.store.list_schedules,
            conversation_id=conversation_id,
            product=product,
            after=after,
            limit=limit,
        )

    async def preview_schedule(
        self,
        identity: Identity,
        *,
        schedule_id: str,
        recurrence: Recurrence | None,
        count: int,
        after: datetime | None,
    ) -> list[datetime]:
        """The next `count` fire times of a saved schedule or of a rule (S4)."""
        count = count or PREVIEW_DEFAULT  # its range is the proto's rule
        now = datetime.now(UTC)
        if after is not None and abs(after - now) > MAX_PREVIEW_SPAN:
            # Far enough out, fire times run past the year 9999 that datetime can hold.
            raise InvalidArgument(
                f"after must be within {MAX_PREVIEW_SPAN.days // 365} years of now, "
                f"got {after.isoformat()}",
                reason=Reason.FIELD_RULE,
                metadata=rule_meta("after", "range", f"{MAX_PREVIEW_SPAN.days // 365} years"),
            )
        start = after or now
        if schedule_id:
            schedule = await self._owned_schedule(identity, schedule_id)
            return rec.fire_times(schedule.recurrence, schedule.anchor_at, start, count)
        rule = self._check_recurrence(recurrence)
        anchor = start + timedelta(seconds=rule.interval_seconds or 0)
        return rec.fire_times(rule, anchor, start, count)
