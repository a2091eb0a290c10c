"""Inbox reads, conversations and transcripts (C7, C12)."""

from __future__ import annotations

import sqlalchemy as sa
from psycopg.rows import namedtuple_row

from agentworks.client.errors import NotFound
from agentworks.server.db import fetch_one
from agentworks_messaging import tables as t
from agentworks_messaging.models import (
    Delivery,
    Message,
    Page,
    TargetKey,
)
from agentworks_messaging.store.base import MessagingStoreBase
from agentworks_messaging.store.rows import _delivery, _message, _uuid
from agentworks_messaging.store.sql import _INBOX_PRINCIPAL, _READ_INBOX


class ReadQueries(MessagingStoreBase):
    async def inbox_principal(self, inbox_id: str) -> str | None:
        inbox_uuid = _uuid(inbox_id, "inbox")
        async with self.db.raw() as pg:
            row = await fetch_one(pg, _INBOX_PRINCIPAL, {"inbox_id": inbox_uuid})
        return None if row is None else row.principal

    async def read_inbox(self, inbox_id: str, after: int, limit: int) -> list[Message]:
        async with self.db.raw() as pg, pg.cursor(row_factory=namedtuple_row) as cur:
            await cur.execute(_READ_INBOX, {"inbox_id": inbox_id, "after": after, "limit": limit})
            rows = await cur.fetchall()
        return [_message(r) for r in rows]

    async def conversation(self, conversation_id: str) -> tuple[TargetKey, str, str, str]:
        """(target, target owner, inbox principal, inbox id) of a conversation."""
        conv_uuid = _uuid(conversation_id, "conversation")
        c = t.conversations
        async with self.db.transaction() as conn:
            row = (
                await conn.execute(
                    sa.select(
                        c.c.target_kind,
                        c.c.target_name,
                        t.targets.c.owner,
                        t.inboxes.c.principal,
                        t.inboxes.c.id,
                    )
                    .select_from(
                        c.join(
                            t.targets,
                            sa.and_(
                                t.targets.c.kind == c.c.target_kind,
                                t.targets.c.name == c.c.target_name,
                            ),
                        ).join(t.inboxes, t.inboxes.c.conversation_id == c.c.id)
                    )
                    .where(c.c.id == conv_uuid)
                )
            ).one_or_none()
        if row is None:
            raise NotFound(f"conversation {conversation_id!r} not found")
        return TargetKey(row.target_kind, row.target_name), row.owner, row.principal, str(row.id)

    async def transcript(self, conversation_id: str, after: int, limit: int) -> Page:
        m, d = t.messages, t.deliveries
        async with self.db.transaction() as conn:
            msgs = (
                await conn.execute(
                    sa.select(m)
                    .where(m.c.conversation_id == conversation_id, m.c.position > after)
                    .order_by(m.c.position)
                    .limit(limit)
                )
            ).all()
            dels = (
                await conn.execute(
                    sa.select(d)
                    .where(d.c.conversation_id == conversation_id, d.c.position > after)
                    .order_by(d.c.position)
                    .limit(limit)
                )
            ).all()
            wanted = {r.message_id for r in dels if r.message_id is not None}
            wanted -= {r.id for r in msgs}
            extra = (
                (await conn.execute(sa.select(m).where(m.c.id.in_(wanted)))).all() if wanted else []
            )
        by_id = {r.id: _message(r) for r in [*msgs, *extra]}
        entries: list[Message | Delivery] = [by_id[r.id] for r in msgs] + [
            _delivery(r, by_id.get(r.message_id)) for r in dels
        ]
        entries.sort(key=lambda e: e.position)
        entries = entries[:limit]
        return Page(entries, entries[-1].position if entries else after)
