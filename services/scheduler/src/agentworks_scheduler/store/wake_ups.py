"""SQL of wake-ups (S1): create, read, list, cancel or reschedule, purge."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import psycopg

from agentworks.core.errors import Busy, NotFound, PreconditionFailed, Reason
from agentworks_scheduler.models import Page, WakeUp
from agentworks_scheduler.store.common import (
    WAKE_UP_LOCK,
    Q,
    StoreBase,
    Viewer,
    When,
    as_uuid,
    due_params,
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
        conv = as_uuid(conversation_id, "conversation")
        try:
            async with self.db.raw(transaction=True) as pg:
                await take_turns(pg, "wake_ups", conversation_id)
                earlier = await retried(
                    pg,
                    "wake_up_by_key",
                    created_by=created_by,
                    submission_id=submission_id,
                    request_hash=request_hash,
                    what="wake-up",
                    legacy_hash=legacy_hash,
                )
                if earlier is not None:
                    return wake_up(earlier), False
                pending = await Q.value(pg, "pending_wake_ups", {"conversation_id": conv})
                if pending >= max_pending:
                    raise Busy(
                        f"conversation {conversation_id} already has {pending} pending "
                        f"wake-ups (the limit is {max_pending}); cancel or reschedule one "
                        "instead",
                        reason=Reason.STORED_LIMIT,
                        metadata={
                            "conversation_id": conversation_id,
                            "counted": "pending wake-ups",
                            "limit": str(max_pending),
                        },
                    )
                row = await Q.one(
                    pg,
                    "create_wake_up",
                    {
                        "id": uuid.uuid4(),
                        "conversation_id": conv,
                        "product": product,
                        "note": note,
                        **due_params(when),
                        "created_by": created_by,
                        **retry_key_values(submission_id, request_hash),
                    },
                )
        except psycopg.errors.IntegrityError as exc:
            # The same key, used at the same moment for another conversation.
            raise retry_key_conflict(submission_id) from exc
        return wake_up(row), True

    async def get_wake_up(self, wake_up_id: str) -> WakeUp:
        async with self.db.raw() as pg:
            row = await Q.one(pg, "get_wake_up", {"id": as_uuid(wake_up_id, "wake-up")})
        if row is None:
            raise NotFound(f"wake-up {wake_up_id!r} not found")
        return wake_up(row)

    async def change_pending_wake_up(self, wake_up_id: str, *, when: When | None) -> WakeUp:
        """Reschedule (`when`) or cancel (None) a wake-up that has not fired yet (S1).

        A wake-up being delivered right now is locked: this waits for its firing to be
        recorded and then refuses, because it has fired.
        """
        key = as_uuid(wake_up_id, "wake-up")
        params: dict[str, Any] = {"id": key, "cancel": when is None}
        params |= due_params(when) if when is not None else {"due_at": None, "delay": None}
        async with self.db.raw(transaction=True) as pg:
            await wait_for_delivery(pg, WAKE_UP_LOCK, key)
            row = await Q.one(pg, "change_pending_wake_up", params)
            if row is None:
                current = await Q.one(pg, "get_wake_up", {"id": key})
                if current is None:
                    raise NotFound(f"wake-up {wake_up_id!r} not found")
                if when is None:
                    raise PreconditionFailed(
                        f"wake-up {wake_up_id} is {current.status}, not pending: only a "
                        "pending wake-up can be cancelled; nothing to do, it is no longer due "
                        "to fire",
                        reason=Reason.NOT_PENDING,
                        metadata={"wake_up_id": wake_up_id, "status": current.status},
                    )
                raise PreconditionFailed(
                    f"wake-up {wake_up_id} is {current.status}, not pending: only a pending "
                    "wake-up can be rescheduled; to be woken again, create a new wake-up for "
                    f"conversation {current.conversation_id}",
                    reason=Reason.NOT_PENDING,
                    metadata={"wake_up_id": wake_up_id, "status": current.status},
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
        params = listing(
            conversation_id=conversation_id,
            product=product,
            after=after,
            limit=limit,
            visible_to=visible_to,
        )
        params["include_finished"] = include_finished
        return await self._page("list_wake_ups", params, wake_up, after)

    async def purge_finished_wake_ups(self, older_than: timedelta) -> int:
        async with self.db.raw() as pg:
            return await Q.execute(pg, "purge_finished_wake_ups", {"older_than": older_than})
