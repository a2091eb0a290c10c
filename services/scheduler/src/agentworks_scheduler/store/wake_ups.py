"""SQL of wake-ups (S1): create, read, list, cancel or reschedule, purge."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc

from agentworks.core.errors import Busy, NotFound, PreconditionFailed
from agentworks_scheduler import tables as t
from agentworks_scheduler.models import Page, WakeUp
from agentworks_scheduler.store.common import (
    WAKE_UP_LOCK,
    StoreBase,
    Viewer,
    When,
    as_uuid,
    due_value,
    listing,
    retried,
    retry_key_conflict,
    retry_key_values,
    take_turns,
    wait_for_delivery,
    wake_up,
)


class WakeUpStore(StoreBase):
    async def create_wake_up(
        self,
        *,
        conversation_id: str,
        product: str,
        note: str,
        when: When,
        created_by: str,
        max_pending: int,
        submission_id: str = "",
        request_hash: str = "",
        legacy_hash: str = "",
    ) -> tuple[WakeUp, bool]:
        """A pending wake-up, or the one this retry key created already (S1); and
        whether it is new."""
        w = t.wake_ups
        conv = as_uuid(conversation_id, "conversation")
        try:
            async with self.db.transaction() as conn:
                await take_turns(conn, "wake_ups", conversation_id)
                earlier = await retried(
                    conn,
                    w,
                    created_by=created_by,
                    submission_id=submission_id,
                    request_hash=request_hash,
                    what="wake-up",
                    legacy_hash=legacy_hash,
                )
                if earlier is not None:
                    return wake_up(earlier), False
                pending = (
                    await conn.execute(
                        sa.select(sa.func.count())
                        .select_from(w)
                        .where(w.c.conversation_id == conv, w.c.status == "pending")
                    )
                ).scalar_one()
                if pending >= max_pending:
                    raise Busy(
                        f"conversation {conversation_id} already has {pending} pending "
                        f"wake-ups (the limit is {max_pending}); cancel or reschedule one "
                        "instead"
                    )
                row = (
                    await conn.execute(
                        w.insert()
                        .values(
                            id=uuid.uuid4(),
                            conversation_id=conv,
                            product=product,
                            note=note,
                            due_at=due_value(when),
                            created_by=created_by,
                            **retry_key_values(submission_id, request_hash),
                        )
                        .returning(*w.c)
                    )
                ).one()
        except sa_exc.IntegrityError as exc:
            # The same key, used at the same moment for another conversation.
            raise retry_key_conflict(submission_id) from exc
        return wake_up(row), True

    async def get_wake_up(self, wake_up_id: str) -> WakeUp:
        w = t.wake_ups
        async with self.db.transaction() as conn:
            row = (
                await conn.execute(sa.select(w).where(w.c.id == as_uuid(wake_up_id, "wake-up")))
            ).one_or_none()
        if row is None:
            raise NotFound(f"wake-up {wake_up_id!r} not found")
        return wake_up(row)

    async def change_pending_wake_up(self, wake_up_id: str, *, when: When | None) -> WakeUp:
        """Reschedule (`when`) or cancel (None) a wake-up that has not fired yet (S1).

        A wake-up being delivered right now is locked: this waits for its firing to be
        recorded and then refuses, because it has fired.
        """
        w = t.wake_ups
        key = as_uuid(wake_up_id, "wake-up")
        values: dict[str, Any] = {"updated_at": sa.func.now()}
        if when is None:
            values["status"] = "cancelled"
        else:
            values["due_at"] = due_value(when)
        async with self.db.transaction() as conn:
            await wait_for_delivery(conn, WAKE_UP_LOCK, key)
            row = (
                await conn.execute(
                    w.update()
                    .where(w.c.id == key, w.c.status == "pending")
                    .values(**values)
                    .returning(*w.c)
                )
            ).one_or_none()
            if row is None:
                current = (await conn.execute(sa.select(w).where(w.c.id == key))).one_or_none()
                if current is None:
                    raise NotFound(f"wake-up {wake_up_id!r} not found")
                if when is None:
                    raise PreconditionFailed(
                        f"wake-up {wake_up_id} is {current.status}, not pending: only a "
                        "pending wake-up can be cancelled; nothing to do, it is no longer due "
                        "to fire"
                    )
                raise PreconditionFailed(
                    f"wake-up {wake_up_id} is {current.status}, not pending: only a pending "
                    "wake-up can be rescheduled; to be woken again, create a new wake-up for "
                    f"conversation {current.conversation_id}"
                )
        return wake_up(row)

    async def list_wake_ups(
        self,
        *,
        conversation_id: str,
        product: str,
        visible_to: Viewer,
        include_finished: bool,
        after: int,
        limit: int,
    ) -> Page:
        """Wake-ups in creation order that `visible_to` may see (see `Viewer`)."""
        w = t.wake_ups
        query = listing(
            w, conversation_id=conversation_id, product=product, after=after, visible_to=visible_to
        )
        if not include_finished:
            query = query.where(w.c.status == "pending")
        return await self._page(query, wake_up, limit, after)

    async def purge_finished_wake_ups(self, older_than: timedelta) -> int:
        w = t.wake_ups
        async with self.db.transaction() as conn:
            result = await conn.execute(
                w.delete().where(
                    w.c.status != "pending", w.c.updated_at < sa.func.now() - older_than
                )
            )
        return result.rowcount or 0
