"""Inbox reads, conversations and transcripts (C7, C12)."""

from __future__ import annotations

from typing import Any

from psycopg.rows import namedtuple_row

from agentworks.core.errors import NotFound
from agentworks.server.db import fetch_one, fixed_sql
from agentworks_messaging.models import Delivery, Message, Page, TargetKey
from agentworks_messaging.store.base import MessagingStoreBase
from agentworks_messaging.store.rows import delivery_from, message_from, parse_uuid

INBOX_CONVERSATION = fixed_sql("SELECT conversation_id FROM messaging.inboxes WHERE id = :inbox_id")
READ_INBOX = fixed_sql(
    """
SELECT * FROM messaging.messages
WHERE inbox_id = :inbox_id AND direction = 'to_inbox' AND position > :after
ORDER BY position LIMIT :limit
"""
)

# The first page of a read, with the inbox's principal in the same statement: one row
# without a message when the page is empty, none when the inbox does not exist.
READ_OWN_INBOX = fixed_sql(
    """
SELECT i.principal, m.*
FROM messaging.inboxes i
LEFT JOIN LATERAL (
    SELECT * FROM messaging.messages
    WHERE inbox_id = i.id AND direction = 'to_inbox' AND position > :after
    ORDER BY position LIMIT :limit
) m ON true
WHERE i.id = :inbox_id
ORDER BY m.position
"""
)

# Who may see a conversation: its target, the target's owner, the inbox's principal.
CONVERSATION = fixed_sql(
    """
SELECT c.target_kind, c.target_name, t.owner, i.principal, i.id
FROM messaging.conversations c
JOIN messaging.targets t ON t.kind = c.target_kind AND t.name = c.target_name
JOIN messaging.inboxes i ON i.conversation_id = c.id
WHERE c.id = :conversation_id
"""
)

TRANSCRIPT_MESSAGES = fixed_sql(
    """
SELECT * FROM messaging.messages
WHERE conversation_id = :conversation_id AND position > :after
ORDER BY position LIMIT :limit
"""
)

TRANSCRIPT_DELIVERIES = fixed_sql(
    """
SELECT * FROM messaging.deliveries
WHERE conversation_id = :conversation_id AND position > :after
ORDER BY position LIMIT :limit
"""
)

MESSAGES_BY_ID = fixed_sql(
    "SELECT * FROM messaging.messages WHERE id = ANY(CAST(:message_ids AS uuid[]))"
)


class ReadQueries(MessagingStoreBase):
    async def read_own_inbox(
        self, inbox_id: str, principal: str, after: int, limit: int
    ) -> list[Message]:
        """A page of an inbox bound to `principal` (one statement); NotFound otherwise."""
        inbox_uuid = parse_uuid(inbox_id, "inbox")
        params = {"inbox_id": inbox_uuid, "after": after, "limit": limit}
        async with self.db.raw() as pg, pg.cursor(row_factory=namedtuple_row) as cur:
            await cur.execute(READ_OWN_INBOX, params)
            rows: list[Any] = await cur.fetchall()
        if not rows or rows[0].principal != principal:
            raise NotFound(f"inbox {inbox_id!r} not found")
        return [message_from(r) for r in rows if r.id is not None]

    async def inbox_conversation(self, inbox_id: str) -> str:
        """The conversation an inbox belongs to; NotFound when there is no such inbox."""
        inbox_uuid = parse_uuid(inbox_id, "inbox")
        async with self.db.raw() as pg:
            row = await fetch_one(pg, INBOX_CONVERSATION, {"inbox_id": inbox_uuid})
        if row is None:
            raise NotFound(f"inbox {inbox_id!r} not found")
        return str(row.conversation_id)

    async def read_inbox(self, inbox_id: str, after: int, limit: int) -> list[Message]:
        async with self.db.raw() as pg, pg.cursor(row_factory=namedtuple_row) as cur:
            await cur.execute(READ_INBOX, {"inbox_id": inbox_id, "after": after, "limit": limit})
            rows = await cur.fetchall()
        return [message_from(r) for r in rows]

    async def conversation(self, conversation_id: str) -> tuple[TargetKey, str, str, str]:
        """(target, target owner, inbox principal, inbox id) of a conversation."""
        conv_uuid = parse_uuid(conversation_id, "conversation")
        async with self.db.transaction() as conn:
            result = await conn.exec_driver_sql(CONVERSATION, {"conversation_id": conv_uuid})
            row = result.one_or_none()
        if row is None:
            raise NotFound(f"conversation {conversation_id!r} not found")
        return TargetKey(row.target_kind, row.target_name), row.owner, row.principal, str(row.id)

    async def transcript(self, conversation_id: str, after: int, limit: int) -> Page:
        page = {
            "conversation_id": parse_uuid(conversation_id, "conversation"),
            "after": after,
            "limit": limit,
        }
        async with self.db.transaction() as conn:
            msgs = (await conn.exec_driver_sql(TRANSCRIPT_MESSAGES, page)).all()
            dels = (await conn.exec_driver_sql(TRANSCRIPT_DELIVERIES, page)).all()
            wanted = {r.message_id for r in dels if r.message_id is not None}
            wanted -= {r.id for r in msgs}
            extra = (
                (await conn.exec_driver_sql(MESSAGES_BY_ID, {"message_ids": list(wanted)})).all()
                if wanted
                else []
            )
        by_id = {r.id: message_from(r) for r in [*msgs, *extra]}
        entries: list[Message | Delivery] = [by_id[r.id] for r in msgs] + [
            delivery_from(r, by_id.get(r.message_id)) for r in dels
        ]
        entries.sort(key=lambda e: e.position)
        entries = entries[:limit]
        return Page(entries, entries[-1].position if entries else after)
