"""Sends, agent replies and enqueued deliveries (C2-C6, C10)."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Sequence
from typing import Any

import psycopg
import sqlalchemy as sa
from psycopg.rows import namedtuple_row

from agentworks.client.errors import AgentWorksError, Conflict, NotFound
from agentworks.server.db import fetch_one
from agentworks_messaging import tables as t
from agentworks_messaging.models import (
    NewDelivery,
    Receipt,
    TargetKey,
)
from agentworks_messaging.store.base import MessagingStoreBase
from agentworks_messaging.store.rows import _json, _messaging_disabled, _uuid
from agentworks_messaging.store.sql import _AGENT_REPLY, _EARLIER_RECEIPT, _ENQUEUE, _SEND_CONTINUE


class SendQueries(MessagingStoreBase):
    async def _earlier_receipt(
        self, pg: psycopg.AsyncConnection, principal: str, submission_id: str, request_hash: str
    ) -> Receipt | None:
        """The receipt already given for this retry key, if any (C4)."""
        if not submission_id:
            return None
        row = await fetch_one(
            pg, _EARLIER_RECEIPT, {"principal": principal, "submission_id": submission_id}
        )
        if row is None:
            return None
        if row.request_hash != request_hash:
            raise Conflict(
                f"submission_id {submission_id!r} was already used for a different message; "
                "use a new submission_id for new content"
            )
        return Receipt(str(row.message_id), str(row.conversation_id), str(row.inbox_id))

    async def send_new(
        self,
        *,
        principal: str,
        key: TargetKey,
        text: str,
        parts: list[dict[str, Any]] | None,
        channel: str,
        submission_id: str,
        request_hash: str,
        refuse_if_disabled: bool,
    ) -> Receipt:
        """Start a conversation with a target, with a new inbox bound to the caller."""
        receipt = Receipt(str(uuid.uuid4()), str(uuid.uuid4()), str(uuid.uuid4()))
        row = await self._new_sends.submit(
            {
                "kind": key.kind,
                "name": key.name,
                "refuse": refuse_if_disabled,
                "principal": principal,
                "submission_id": submission_id,
                "request_hash": request_hash,
                "message_id": receipt.message_id,
                "conversation_id": receipt.conversation_id,
                "inbox_id": receipt.inbox_id,
                "delivery_id": str(uuid.uuid4()),
                "channel": channel,
                "text": text,
                "parts": None if parts is None else json.dumps(parts),
                "target_key": str(key),
            }
        )
        if row.stored:
            return receipt
        async with self.db.raw() as pg:
            earlier = await self._earlier_receipt(pg, principal, submission_id, request_hash)
        if earlier is not None:
            return earlier
        if not row.target_exists:
            raise NotFound(f"{key} is not registered")
        if not row.allowed:
            raise _messaging_disabled(key)
        raise Conflict(f"submission_id {submission_id!r} is being used concurrently; retry")

    async def send_continue(
        self,
        *,
        principal: str,
        inbox_id: str,
        text: str,
        parts: list[dict[str, Any]] | None,
        channel: str,
        submission_id: str,
        request_hash: str,
        refuse_if_disabled: bool,
    ) -> Receipt:
        """Continue the conversation of an inbox bound to the caller (C3)."""
        inbox_uuid = _uuid(inbox_id, "inbox")
        message_id = str(uuid.uuid4())
        async with self.db.raw() as pg:
            row = await fetch_one(
                pg,
                _SEND_CONTINUE,
                {
                    "inbox_id": inbox_uuid,
                    "refuse": refuse_if_disabled,
                    "principal": principal,
                    "submission_id": submission_id,
                    "request_hash": request_hash,
                    "message_id": message_id,
                    "delivery_id": str(uuid.uuid4()),
                    "channel": channel,
                    "text": text,
                    "parts": _json(parts),
                },
            )
            if row.stored:
                return Receipt(message_id, str(row.conversation_id), inbox_id)
            earlier = await self._earlier_receipt(pg, principal, submission_id, request_hash)
        if earlier is not None:
            return earlier
        if not row.found:
            raise NotFound(f"inbox {inbox_id!r} not found")
        if not row.allowed:
            kind, _, name = row.target.partition(":")
            raise _messaging_disabled(TargetKey(kind, name))
        raise Conflict(f"submission_id {submission_id!r} is being used concurrently; retry")

    async def inbox_target(self, inbox_id: str) -> tuple[str, TargetKey, str]:
        """(conversation_id, target, bound principal) of an inbox."""
        inbox_uuid = _uuid(inbox_id, "inbox")
        async with self.db.transaction() as conn:
            row = (
                await conn.execute(
                    sa.select(
                        t.inboxes.c.conversation_id,
                        t.inboxes.c.principal,
                        t.conversations.c.target_kind,
                        t.conversations.c.target_name,
                    )
                    .select_from(
                        t.inboxes.join(
                            t.conversations, t.conversations.c.id == t.inboxes.c.conversation_id
                        )
                    )
                    .where(t.inboxes.c.id == inbox_uuid)
                )
            ).one_or_none()
        if row is None:
            raise NotFound(f"inbox {inbox_id!r} not found")
        return (
            str(row.conversation_id),
            TargetKey(row.target_kind, row.target_name),
            row.principal,
        )

    async def agent_reply(
        self,
        *,
        principal: str,
        inbox_id: str,
        conversation_id: str,
        text: str,
        parts: list[dict[str, Any]] | None,
        submission_id: str,
        request_hash: str,
    ) -> Receipt:
        """An agent's explicit message to the conversation's inbox (C6)."""
        receipt = Receipt(str(uuid.uuid4()), conversation_id, inbox_id)
        async with self.db.raw() as pg:
            row = await fetch_one(
                pg,
                _AGENT_REPLY,
                {
                    "principal": principal,
                    "submission_id": submission_id,
                    "request_hash": request_hash,
                    "message_id": receipt.message_id,
                    "conversation_id": conversation_id,
                    "inbox_id": inbox_id,
                    "text": text,
                    "parts": _json(parts),
                },
            )
            if row.stored:
                return receipt
            earlier = await self._earlier_receipt(pg, principal, submission_id, request_hash)
        if earlier is not None:
            return earlier
        raise Conflict(f"submission_id {submission_id!r} is being used concurrently; retry")

    async def enqueue_deliveries(
        self, items: Sequence[NewDelivery]
    ) -> list[tuple[str, bool] | AgentWorksError]:
        """Queue deliveries once per idempotency key, all in one statement (S6, F13).

        One outcome per item, in order: (delivery_id, created), or the error that item
        alone failed with (nothing of it stored). Keys must differ within `items`.
        """
        outcomes: list[tuple[str, bool] | AgentWorksError] = []
        rows: list[dict[str, Any]] = []
        for n, item in enumerate(items):
            try:
                conversation = _uuid(item.conversation_id, "conversation")
            except NotFound as exc:
                outcomes.append(exc)
                continue
            delivery_id = str(uuid.uuid4())
            outcomes.append((delivery_id, True))
            rows.append(
                {
                    "n": n,
                    "conversation_id": str(conversation),
                    "delivery_id": delivery_id,
                    "kind": item.kind,
                    "text": item.text,
                    "payload": None
                    if item.payload is None
                    else base64.b64encode(item.payload).decode(),
                    "attributes": item.attributes,
                    "key": item.idempotency_key,
                }
            )
        if not rows:
            return outcomes
        for attempt in range(3):
            try:
                async with self.db.raw() as pg, pg.cursor(row_factory=namedtuple_row) as cur:
                    await cur.execute(_ENQUEUE, {"items": json.dumps(rows)})
                    results = await cur.fetchall()
                break
            except (psycopg.errors.UniqueViolation, psycopg.errors.DeadlockDetected):
                # A concurrent request with one of these keys committed first (or the
                # database broke a lock cycle): nothing was stored; the next attempt
                # sees the committed deliveries as existing.
                if attempt == 2:
                    raise
        for row in results:
            item = items[row.n]
            if row.existing_id is not None:
                if row.other_conversation:
                    outcomes[row.n] = Conflict(
                        f"idempotency_key {item.idempotency_key!r} was already used for "
                        "another conversation; keys must be unique per occurrence"
                    )
                elif row.other_content:
                    outcomes[row.n] = Conflict(
                        f"idempotency_key {item.idempotency_key!r} was already used for a "
                        "delivery with different content (kind, text or payload); a retry "
                        "must repeat it, new content needs a new key"
                    )
                else:
                    outcomes[row.n] = (str(row.existing_id), False)
            elif not row.stored:
                outcomes[row.n] = NotFound(f"conversation {item.conversation_id!r} not found")
        return outcomes
