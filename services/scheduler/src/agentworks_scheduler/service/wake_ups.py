"""Wake-ups (S1): create, read, list, cancel and reschedule."""

from __future__ import annotations

from datetime import UTC, datetime

import structlog

from agentworks.core.checks import check_no_nul
from agentworks.core.identity import Identity
from agentworks.server.capabilities import require_conversation
from agentworks_scheduler.models import Page, WakeUp
from agentworks_scheduler.service.access import Access
from agentworks_scheduler.service.rules import (
    LIST_LIMIT_DEFAULT,
    MAX_PENDING_WAKE_UPS,
    check_product,
    check_retry_key,
    check_when,
    decode_cursor,
    encode_cursor,
    legacy_request_hash,
    own_product,
    request_hash,
    trusted,
)

log = structlog.get_logger("agentworks.scheduler")


class WakeUps(Access):
    async def create_wake_up(
        self,
        identity: Identity,
        *,
        conversation_id: str,
        at: datetime | None,
        delay_seconds: int | None,
        note: str,
        product: str,
        submission_id: str = "",
    ) -> WakeUp:
        """A durable wake-up for a conversation the caller serves (S1).

        With a `submission_id`, a retry of the same request gets the same wake-up.
        """
        require_conversation(identity, conversation_id)  # a turn's capability: its own
        when = check_when(at, delay_seconds, datetime.now(UTC))
        check_no_nul(note, "note")  # its size is the proto's rule
        check_retry_key(submission_id)
        place = await self._attach(identity, conversation_id, product)
        asked = (conversation_id, at.isoformat() if at else None, delay_seconds, note, product)
        wake_up, created = await self.store.create_wake_up(
            conversation_id=place.conversation_id,
            product=place.product,
            note=note,
            when=when,
            created_by=identity.principal,
            max_pending=MAX_PENDING_WAKE_UPS,
            submission_id=submission_id,
            request_hash=request_hash(*asked),
            legacy_hash=legacy_request_hash(*asked),
        )
        log.info(
            "wake_up.created" if created else "wake_up.retried",
            wake_up_id=wake_up.id,
            conversation_id=wake_up.conversation_id,
            due_at=wake_up.due_at.isoformat(),
        )
        return wake_up

    async def get_wake_up(self, identity: Identity, wake_up_id: str) -> WakeUp:
        return await self._visible_wake_up(identity, wake_up_id)

    async def list_wake_ups(
        self,
        identity: Identity,
        *,
        conversation_id: str,
        product: str,
        include_finished: bool,
        after: str,
        limit: int,
    ) -> tuple[list[WakeUp], str]:
        require_conversation(identity, conversation_id)  # a turn's capability: its own
        position = decode_cursor(after)
        limit = limit or LIST_LIMIT_DEFAULT  # its range is the proto's rule
        check_product(product)
        visible_to = None
        if not trusted(identity):
            products = await self._owned_targets(identity)
            mine = own_product(identity)
            visible_to = (identity.principal, products | {mine} if mine else products)
        page: Page = await self.store.list_wake_ups(
            conversation_id=conversation_id,
            product=product,
            visible_to=visible_to,
            include_finished=include_finished,
            after=position,
            limit=limit,
        )
        return page.items, encode_cursor(page.next_seq)

    async def cancel_wake_up(self, identity: Identity, wake_up_id: str) -> WakeUp:
        """Cancel a pending wake-up; only this (or a reschedule) stops it (S1)."""
        await self._visible_wake_up(identity, wake_up_id, change=True)
        wake_up = await self.store.change_pending_wake_up(wake_up_id, when=None)
        log.info("wake_up.cancelled", wake_up_id=wake_up.id)
        return wake_up

    async def reschedule_wake_up(
        self,
        identity: Identity,
        wake_up_id: str,
        *,
        at: datetime | None,
        delay_seconds: int | None,
    ) -> WakeUp:
        when = check_when(at, delay_seconds, datetime.now(UTC))
        await self._visible_wake_up(identity, wake_up_id, change=True)
        wake_up = await self.store.change_pending_wake_up(wake_up_id, when=when)
        log.info("wake_up.rescheduled", wake_up_id=wake_up.id, due_at=wake_up.due_at.isoformat())
        return wake_up
