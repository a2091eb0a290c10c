"""Listing conversations (V1), by keyset: each page continues after the (created_at, id)
of the last conversation of the one before (never OFFSET), along 0002_listing.sql."""

from __future__ import annotations

import uuid
from datetime import datetime

from agentworks.server.db import fixed_sql
from agentworks_messaging.models import ConversationSummary, Message, TargetKey
from agentworks_messaging.store.base import MessagingStoreBase

# :viewer NULL is the operator (every conversation); else the viewer's inboxes and the
# conversations of the targets it owns. :since NULL lists all, else only conversations
# with messages after it, counting them.
LIST_CONVERSATIONS = fixed_sql(
    """
SELECT c.id, c.target_kind, c.target_name, c.started_by, c.created_at, c.last_position,
    i.id AS inbox_id, i.principal,
    (SELECT count(*) FROM messaging.messages m WHERE m.conversation_id = c.id)
        AS message_count,
    CASE WHEN CAST(:since AS timestamptz) IS NULL THEN 0 ELSE
        (SELECT count(*) FROM messaging.messages m
         WHERE m.conversation_id = c.id AND m.created_at > CAST(:since AS timestamptz))
    END AS new_messages,
    lm.id AS m_id, lm.position AS m_position, lm.inbox_id AS m_inbox_id,
    lm.direction AS m_direction, lm.sender AS m_sender, lm.text AS m_text,
    lm.parts AS m_parts, lm.created_at AS m_created_at
FROM messaging.conversations c
JOIN messaging.inboxes i ON i.conversation_id = c.id
LEFT JOIN LATERAL (
    SELECT * FROM messaging.messages m WHERE m.conversation_id = c.id
    ORDER BY m.position DESC LIMIT 1
) lm ON true
WHERE (CAST(:viewer AS text) IS NULL OR i.principal = CAST(:viewer AS text)
       OR (c.target_kind, c.target_name) IN (
           SELECT t.kind, t.name FROM messaging.targets t WHERE t.owner = CAST(:viewer AS text)))
  AND (CAST(:kind AS text) IS NULL
       OR (c.target_kind = CAST(:kind AS text) AND c.target_name = CAST(:name AS text)))
  AND (CAST(:after_at AS timestamptz) IS NULL
       OR (c.created_at, c.id) < (CAST(:after_at AS timestamptz), CAST(:after_id AS uuid)))
  AND (CAST(:since AS timestamptz) IS NULL OR EXISTS (
       SELECT 1 FROM messaging.messages m
       WHERE m.conversation_id = c.id AND m.created_at > CAST(:since AS timestamptz)))
ORDER BY c.created_at DESC, c.id DESC
LIMIT :limit
"""
)

NOW = fixed_sql("SELECT now() AS now")


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
        async with self.db.transaction() as conn:
            now = (await conn.exec_driver_sql(NOW)).one().now
            rows = (await conn.exec_driver_sql(LIST_CONVERSATIONS, params)).all()
        return [_summary(r) for r in rows], now


def _summary(row) -> ConversationSummary:
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
