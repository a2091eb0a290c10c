"""Sends and agent replies: new conversations, continued ones, retry keys (C2-C6, C9).

Each send is ONE statement of data-modifying CTEs, run in autocommit: atomic, one round
trip, no BEGIN/COMMIT. The retry key is inserted first with ON CONFLICT DO NOTHING; a
concurrent twin waits on the unique key until the first commits, then inserts nothing,
and everything else in its statement is conditioned on that.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import psycopg

from agentworks.core.checks import is_retry
from agentworks.core.errors import Conflict, NotFound, Reason
from agentworks.server.batching import Batcher
from agentworks.server.db import Database
from agentworks.server.tracing import current_traceparent
from agentworks_messaging.models import Receipt, TargetKey
from agentworks_messaging.store.base import MessagingStoreBase, Q
from agentworks_messaging.store.rows import jsonb, messaging_disabled, parse_uuid, reply_refused


def key_in_use(submission_id: str) -> Conflict:
    """The same retry key is being stored by a request still in flight: retry (C4)."""
    return Conflict(
        f"submission_id {submission_id!r} is being used concurrently; retry",
        reason=Reason.KEY_IN_USE,
        metadata={"field": "submission_id"},
    )


class SendQueries(MessagingStoreBase):
    def __init__(self, db: Database) -> None:
        super().__init__(db)
        # Concurrent new-conversation sends share one statement and one commit. One batch
        # in flight at a time: the sends that arrive meanwhile ride together in the next
        # (group commit). With 4 in flight, batches at 32 senders averaged 1.2 sends and
        # cost twice the CPU per send of one in flight (about 3 sends per batch).
        self._new_sends: Batcher[dict[str, Any], Any] = Batcher(self._send_new_batch, concurrency=1)

    async def _earlier_receipt(
        self, pg: psycopg.AsyncConnection, principal: str, submission_id: str, request_hash: str
    ) -> Receipt | None:
        """The receipt already given for this retry key, if any (C4)."""
        if not submission_id:
            return None
        row = await Q.one(
            pg, "earlier_receipt", {"principal": principal, "submission_id": submission_id}
        )
        if row is None:
            return None
        is_retry(submission_id, row.request_hash, request_hash, "a different message")
        return Receipt(
            str(row.message_id), str(row.conversation_id), str(row.inbox_id), row.position or 0
        )

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
        origin: str | None = None,
    ) -> Receipt:
        """Start a conversation with a target, with a new inbox bound to the caller; with
        `origin`, tied to that conversation (L5: its turn started this one)."""
        # A new conversation's first message is its position 1 (send_new).
        receipt = Receipt(str(uuid.uuid4()), str(uuid.uuid4()), str(uuid.uuid4()), 1)
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
                "origin": origin,
                # Taken here, in the request's context: the batch runs in another task.
                "traceparent": current_traceparent(),
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
            raise messaging_disabled(key)
        raise key_in_use(submission_id)

    async def _send_new_batch(self, sends: Sequence[dict[str, Any]]) -> list[Any]:
        """Store many new-conversation sends in one statement (see `Batcher`).

        Each send keeps its own checks and outcome (row `n` answers send `n`); they share
        the statement, its commit and the round trip.
        """
        async with self.db.raw() as pg:
            return await Q.all(pg, "send_new", {"sends": json.dumps(sends)})

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
        origin: str | None = None,
    ) -> Receipt:
        """Continue the conversation of an inbox bound to the caller (C3); with `origin`,
        only one that conversation started (L5)."""
        inbox_uuid = parse_uuid(inbox_id, "inbox")
        message_id = str(uuid.uuid4())
        async with self.db.raw() as pg:
            row = await Q.one(
                pg,
                "send_continue",
                {
                    "inbox_id": inbox_uuid,
                    "refuse": refuse_if_disabled,
                    "origin": origin,
                    "principal": principal,
                    "submission_id": submission_id,
                    "request_hash": request_hash,
                    "message_id": message_id,
                    "delivery_id": str(uuid.uuid4()),
                    "channel": channel,
                    "text": text,
                    "parts": jsonb(parts),
                    "traceparent": current_traceparent(),
                },
            )
            if row.stored:
                return Receipt(message_id, str(row.conversation_id), inbox_id, row.position)
            earlier = await self._earlier_receipt(pg, principal, submission_id, request_hash)
        if earlier is not None:
            return earlier
        if not row.found:
            raise NotFound(f"inbox {inbox_id!r} not found")
        if not row.allowed:
            kind, _, name = row.target.partition(":")
            raise messaging_disabled(TargetKey(kind, name))
        raise key_in_use(submission_id)

    async def inbox_target(self, inbox_id: str) -> tuple[str, TargetKey, str]:
        """(conversation_id, target, bound principal) of an inbox."""
        inbox_uuid = parse_uuid(inbox_id, "inbox")
        async with self.db.raw() as pg:
            row = await Q.one(pg, "inbox_target", {"inbox_id": inbox_uuid})
        if row is None:
            raise NotFound(f"inbox {inbox_id!r} not found")
        return (
            str(row.conversation_id),
            TargetKey(row.target_kind, row.target_name),
            row.principal,
        )

    async def inbox_target_and_turn(
        self, inbox_id: str, turn_id: str, runtime: str
    ) -> tuple[str, TargetKey, str, tuple[str, str]]:
        """`inbox_target` and the (conversation id, status) of the runtime's turn, as
        `turn_lease` gives them, in one statement."""
        params = {"inbox_id": parse_uuid(inbox_id, "inbox"), "turn_id": parse_uuid(turn_id, "turn")}
        async with self.db.raw() as pg:
            row = await Q.one(pg, "inbox_target_and_turn", params)
        if row is None:
            raise NotFound(f"inbox {inbox_id!r} not found")
        if row.turn_runtime != runtime:
            raise NotFound(f"turn {turn_id!r} not found")
        status = "expired" if row.turn_status == "active" and not row.turn_live else row.turn_status
        key = TargetKey(row.target_kind, row.target_name)
        turn = (str(row.turn_conversation_id), status)
        return str(row.conversation_id), key, row.principal, turn

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
        reply_text: str = "",
        reply_attributes: dict[str, Any] | None = None,
    ) -> Receipt:
        """An agent's explicit message to the conversation's inbox (C6); for a conversation
        started in another's turn, queued there too as a `conversation_reply` delivery
        with `reply_text` and `reply_attributes` (the message id added), in the same
        statement (L5)."""
        message_id = str(uuid.uuid4())
        attributes = {**(reply_attributes or {}), "message_id": message_id}
        async with self.db.raw() as pg:
            row = await Q.one(
                pg,
                "agent_reply",
                {
                    "principal": principal,
                    "submission_id": submission_id,
                    "request_hash": request_hash,
                    "message_id": message_id,
                    "conversation_id": conversation_id,
                    "inbox_id": inbox_id,
                    "text": text,
                    "parts": jsonb(parts),
                    "delivery_id": str(uuid.uuid4()),
                    "reply_text": reply_text,
                    "reply_attributes": json.dumps(attributes),
                    "traceparent": current_traceparent(),
                },
            )
            if row.stored:
                return Receipt(message_id, conversation_id, inbox_id, row.position)
            earlier = await self._earlier_receipt(pg, principal, submission_id, request_hash)
        if earlier is not None:
            return earlier
        if not row.allowed:
            kind, _, name = row.origin_target.partition(":")
            raise reply_refused(TargetKey(kind, name))
        raise key_in_use(submission_id)

    async def purge_submissions(self, older_than: timedelta) -> int:
        """Forget retry keys older than the dedup window (C4)."""
        async with self.db.raw() as pg:
            return await Q.execute(pg, "purge_submissions", {"older_than": older_than})
