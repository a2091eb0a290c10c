"""Listing conversations (V1), by keyset: each page continues after the (created_at, id)
of the last conversation of the one before (never OFFSET), along 0002_listing.sql."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from agentworks_messaging.models import ConversationSummary, Message, TargetKey
from agentworks_messaging.store.base import MessagingStoreBase, Q


class ListingQueries(MessagingStoreBase):
    async def list_conversations(
        self,
        *,
        viewer: str | None,
        target: TargetKey | None,
        after: tuple[datetime, uuid.UUID] | None,
        since: datetime | None,
        limit: int,
    ) -> tuple[list[ConversationSummary], datetime]:
        """Up to `limit` conversations newest first after the key `after`, and the
        database's time when they were read."""
        params = {
            "viewer": viewer,
            "kind": target.kind if target else None,
            "name": target.name if target else None,
            "after_at": after[0] if after else None,
            "after_id": after[1] if after else None,
            "since": since,
            "limit": limit,
        }
        async with self.db.raw(transaction=True) as pg:
            now = await Q.value(pg, "now")
            rows = await Q.all(pg, "list_conversations", params)
        return [_summary(r) for r in rows], now


def _summary(row: Any) -> ConversationSummary:
    last = None
    if row.m_id is not None:
        last = Message(
            id=str(row.m_id),
            conversation_id=str(row.id),
            inbox_id=str(row.m_inbox_id),
            position=row.m_position,
            direction=row.m_direction,
            sender=row.m_sender,
            text=row.m_text,
            parts=row.m_parts,
            created_at=row.m_created_at,
        )
    return ConversationSummary(
        conversation_id=str(row.id),
        inbox_id=str(row.inbox_id),
        principal=row.principal,
        target=TargetKey(row.target_kind, row.target_name),
        started_by=row.started_by,
        created_at=row.created_at,
        message_count=row.message_count,
        last_message=last,
        last_position=row.last_position,
        new_messages=row.new_messages,
    )
