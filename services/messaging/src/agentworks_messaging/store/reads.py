"""Inbox reads, conversations and transcripts (C7, C12)."""

from __future__ import annotations

from typing import Any

from agentworks.core.errors import NotFound
from agentworks_messaging.models import Delivery, Message, Page, TargetKey
from agentworks_messaging.store.base import MessagingStoreBase, Q
from agentworks_messaging.store.rows import delivery_from, message_from, parse_uuid


class ReadQueries(MessagingStoreBase):
    async def read_own_inbox(
        self, inbox_id: str, principal: str, after: int | None, limit: int
    ) -> list[Message]:
        """A page of an inbox bound to `principal` (one statement); NotFound otherwise.
        `after` None: its newest `limit` messages (oldest first)."""
        inbox_uuid = parse_uuid(inbox_id, "inbox")
        if after is None:
            query, params = "read_own_inbox_newest", {"inbox_id": inbox_uuid, "limit": limit}
        else:
            query, params = (
                "read_own_inbox",
                {"inbox_id": inbox_uuid, "after": after, "limit": limit},
            )
        async with self.db.raw() as pg:
            rows: list[Any] = await Q.all(pg, query, params)
        if not rows or rows[0].principal != principal:
            raise NotFound(f"inbox {inbox_id!r} not found")
        return [message_from(r) for r in rows if r.id is not None]

    async def inbox_conversation(self, inbox_id: str) -> str:
        """The conversation an inbox belongs to; NotFound when there is no such inbox."""
        inbox_uuid = parse_uuid(inbox_id, "inbox")
        async with self.db.raw() as pg:
            row = await Q.one(pg, "inbox_conversation", {"inbox_id": inbox_uuid})
        if row is None:
            raise NotFound(f"inbox {inbox_id!r} not found")
        return str(row.conversation_id)

    async def read_inbox(self, inbox_id: str, after: int, limit: int) -> list[Message]:
        params = {"inbox_id": inbox_id, "after": after, "limit": limit}
        async with self.db.raw() as pg:
            rows = await Q.all(pg, "read_inbox", params)
        return [message_from(r) for r in rows]

    async def conversation(self, conversation_id: str) -> tuple[TargetKey, str, str, str]:
        """(target, target owner, inbox principal, inbox id) of a conversation."""
        conv_uuid = parse_uuid(conversation_id, "conversation")
        async with self.db.raw() as pg:
            row = await Q.one(pg, "conversation", {"conversation_id": conv_uuid})
        if row is None:
            raise NotFound(f"conversation {conversation_id!r} not found")
        return TargetKey(row.target_kind, row.target_name), row.owner, row.principal, str(row.id)

    async def transcript(self, conversation_id: str, after: int | None, limit: int) -> Page:
        """A page of the transcript after `after`; `after` None: its newest `limit`
        entries (oldest first), read backwards from the end."""
        page = {
            "conversation_id": parse_uuid(conversation_id, "conversation"),
            "after": after,
            "limit": limit,
        }
        if after is None:
            queries = ("transcript_messages_newest", "transcript_deliveries_newest")
        else:
            queries = ("transcript_messages", "transcript_deliveries")
        async with self.db.raw(transaction=True) as pg:
            msgs = await Q.all(pg, queries[0], page)
            dels = await Q.all(pg, queries[1], page)
            wanted = {r.message_id for r in dels if r.message_id is not None}
            wanted -= {r.id for r in msgs}
            extra = (
                await Q.all(pg, "messages_by_id", {"message_ids": list(wanted)}) if wanted else []
            )
        by_id = {r.id: message_from(r) for r in [*msgs, *extra]}
        entries: list[Message | Delivery] = [by_id[r.id] for r in msgs] + [
            delivery_from(r, by_id.get(r.message_id)) for r in dels
        ]
        entries.sort(key=lambda e: e.position)
        entries = entries[-limit:] if after is None else entries[:limit]
        return Page(entries, entries[-1].position if entries else after or 0)
