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
from psycopg.rows import namedtuple_row

from agentworks.core.checks import is_retry
from agentworks.core.errors import Conflict, NotFound
from agentworks.server.batching import Batcher
from agentworks.server.db import Database, fetch_one, fixed_sql
from agentworks.server.tracing import current_traceparent
from agentworks_messaging.models import Receipt, TargetKey
from agentworks_messaging.store.base import MessagingStoreBase
from agentworks_messaging.store.rows import jsonb, messaging_disabled, parse_uuid, reply_refused

EARLIER_RECEIPT = fixed_sql(
    """
SELECT request_hash, message_id, conversation_id, inbox_id FROM messaging.submissions
WHERE principal = :principal AND submission_id = :submission_id
"""
)

# Start conversations: target check, retry key, conversation, inbox, message, delivery,
# for a batch of sends given as one JSON array of objects (one field per column: one
# parameter to encode, however many sends); one result row per send, in order.
SEND_NEW = fixed_sql(
    """
WITH input AS (
    SELECT * FROM ROWS FROM (
        json_to_recordset(CAST(:sends AS json)) AS (
            kind text, name text, refuse boolean, principal text, submission_id text,
            request_hash text, message_id uuid, conversation_id uuid, inbox_id uuid,
            delivery_id uuid, channel text, text text, parts text, target_key text,
            origin uuid, traceparent text)
    ) WITH ORDINALITY AS i (kind, name, refuse, principal, submission_id, request_hash,
                            message_id, conversation_id, inbox_id, delivery_id, channel,
                            text, parts, target_key, origin, traceparent, n)
), target AS (
    SELECT i.n, t.free_text_ask, t.owner
    FROM input i JOIN messaging.targets t ON t.kind = i.kind AND t.name = i.name
), ok AS (
    SELECT i.* FROM input i JOIN target USING (n)
    WHERE NOT (target.free_text_ask IS FALSE AND (i.refuse OR i.principal <> target.owner))
), sub AS (
    INSERT INTO messaging.submissions
        (principal, submission_id, request_hash, message_id, conversation_id, inbox_id)
    SELECT principal, submission_id, request_hash, message_id, conversation_id, inbox_id
    FROM ok WHERE submission_id <> ''
    ON CONFLICT DO NOTHING
    RETURNING message_id
), go AS (
    SELECT * FROM ok
    WHERE submission_id = '' OR message_id IN (SELECT message_id FROM sub)
), conv AS (
    INSERT INTO messaging.conversations
        (id, target_kind, target_name, started_by, last_position, pending_deliveries,
         oldest_pending_at, origin_conversation_id, origin_target_kind, origin_target_name)
    SELECT go.conversation_id, go.kind, go.name, go.principal, 2, 1, now(),
           oc.id, oc.target_kind, oc.target_name
    FROM go LEFT JOIN messaging.conversations oc ON oc.id = go.origin
    RETURNING id
), inbox AS (
    INSERT INTO messaging.inboxes (id, conversation_id, principal)
    SELECT go.inbox_id, conv.id, go.principal FROM go JOIN conv ON conv.id = go.conversation_id
    RETURNING id
), msg AS (
    INSERT INTO messaging.messages
        (id, conversation_id, position, inbox_id, direction, sender, channel, text, parts)
    SELECT go.message_id, conv.id, 1, inbox.id, 'to_target', go.principal, go.channel,
           go.text, CAST(go.parts AS jsonb)
    FROM go JOIN conv ON conv.id = go.conversation_id JOIN inbox ON inbox.id = go.inbox_id
    RETURNING id, conversation_id
), dlv AS (
    INSERT INTO messaging.deliveries
        (id, conversation_id, position, kind, message_id, traceparent)
    SELECT go.delivery_id, msg.conversation_id, 2, 'message', msg.id, go.traceparent
    FROM go JOIN msg ON msg.id = go.message_id
    RETURNING id
), woken AS (
    SELECT count(pg_notify('messaging_turns', key)) AS n
    FROM (SELECT DISTINCT go.target_key AS key FROM go JOIN dlv ON dlv.id = go.delivery_id) k
)
SELECT i.n,
       EXISTS (SELECT 1 FROM target WHERE target.n = i.n) AS target_exists,
       EXISTS (SELECT 1 FROM ok WHERE ok.n = i.n) AS allowed,
       EXISTS (SELECT 1 FROM dlv WHERE dlv.id = i.delivery_id) AS stored,
       (SELECT n FROM woken) AS woken
FROM input i
ORDER BY i.n
"""
)

# Continue a conversation through an inbox bound to the caller (with :origin, one that
# conversation started, L5). The UPDATE takes the conversation's row lock, so positions
# follow commit order.
SEND_CONTINUE = fixed_sql(
    """
WITH inbox AS (
    SELECT i.id, i.conversation_id, t.kind || ':' || t.name AS target, t.free_text_ask,
           t.owner
    FROM messaging.inboxes i
    JOIN messaging.conversations c ON c.id = i.conversation_id
    JOIN messaging.targets t ON t.kind = c.target_kind AND t.name = c.target_name
    WHERE i.id = :inbox_id AND i.principal = :principal
      AND (CAST(:origin AS uuid) IS NULL OR c.origin_conversation_id = CAST(:origin AS uuid))
), ok AS (
    SELECT * FROM inbox
    WHERE NOT (free_text_ask IS FALSE AND (:refuse OR owner <> :principal))
), sub AS (
    INSERT INTO messaging.submissions
        (principal, submission_id, request_hash, message_id, conversation_id, inbox_id)
    SELECT :principal, :submission_id, :request_hash, CAST(:message_id AS uuid),
           ok.conversation_id, ok.id
    FROM ok WHERE :submission_id <> ''
    ON CONFLICT DO NOTHING
    RETURNING 1
), go AS (
    SELECT * FROM ok WHERE :submission_id = '' OR EXISTS (SELECT 1 FROM sub)
), conv AS (
    UPDATE messaging.conversations c
    SET last_position = c.last_position + 2,
        pending_deliveries = c.pending_deliveries + 1,
        oldest_pending_at = coalesce(c.oldest_pending_at, now())
    FROM go WHERE c.id = go.conversation_id
    RETURNING c.id, c.last_position, c.active_turn_id, c.target_kind, c.target_name
), msg AS (
    INSERT INTO messaging.messages
        (id, conversation_id, position, inbox_id, direction, sender, channel, text, parts)
    SELECT CAST(:message_id AS uuid), conv.id, conv.last_position - 1, :inbox_id, 'to_target',
           :principal, :channel, :text, :parts
    FROM conv
    RETURNING id
), dlv AS (
    INSERT INTO messaging.deliveries
        (id, conversation_id, position, kind, message_id, traceparent)
    SELECT CAST(:delivery_id AS uuid), conv.id, conv.last_position, 'message', msg.id,
           :traceparent
    FROM conv, msg
    RETURNING id
)
SELECT EXISTS (SELECT 1 FROM inbox) AS found,
       EXISTS (SELECT 1 FROM ok) AS allowed,
       EXISTS (SELECT 1 FROM dlv) AS stored,
       (SELECT conversation_id FROM inbox) AS conversation_id,
       (SELECT target FROM inbox) AS target,
       (SELECT pg_notify('messaging_turns', target_kind || ':' || target_name)
        FROM conv WHERE active_turn_id IS NULL AND EXISTS (SELECT 1 FROM dlv)) AS notified
"""
)

# An agent's message to the conversation's inbox, waking its long-polling readers. When
# the conversation was started in a turn of another (its origin, L5), the same statement
# queues the message there as a `conversation_reply` delivery and wakes the origin
# target's claimers: no reply is stored without its turn. The origin target's switch
# (C8) off refuses it: nothing is stored (`allowed` false). The origin's row is locked
# after this conversation's; an origin is always older than what it started, so two
# replies never lock in a cycle.
AGENT_REPLY = fixed_sql(
    """
WITH origin AS (
    SELECT c.origin_conversation_id AS id, t.free_text_ask,
           t.kind || ':' || t.name AS target
    FROM messaging.conversations c
    JOIN messaging.targets t ON t.kind = c.origin_target_kind AND t.name = c.origin_target_name
    WHERE c.id = CAST(:conversation_id AS uuid)
), ok AS (
    SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM origin WHERE free_text_ask IS FALSE)
), sub AS (
    INSERT INTO messaging.submissions
        (principal, submission_id, request_hash, message_id, conversation_id, inbox_id)
    SELECT :principal, :submission_id, :request_hash, CAST(:message_id AS uuid),
           CAST(:conversation_id AS uuid), CAST(:inbox_id AS uuid)
    FROM ok WHERE :submission_id <> ''
    ON CONFLICT DO NOTHING
    RETURNING 1
), go AS (
    SELECT 1 FROM ok WHERE :submission_id = '' OR EXISTS (SELECT 1 FROM sub)
), conv AS (
    UPDATE messaging.conversations c SET last_position = c.last_position + 1
    FROM go WHERE c.id = CAST(:conversation_id AS uuid)
    RETURNING c.id, c.last_position
), msg AS (
    INSERT INTO messaging.messages
        (id, conversation_id, position, inbox_id, direction, sender, channel, text, parts)
    SELECT CAST(:message_id AS uuid), conv.id, conv.last_position, CAST(:inbox_id AS uuid),
           'to_inbox', :principal, 'programmatic', :text, :parts
    FROM conv
    RETURNING id
), back AS (
    UPDATE messaging.conversations c
    SET last_position = c.last_position + 1,
        pending_deliveries = c.pending_deliveries + 1,
        oldest_pending_at = coalesce(c.oldest_pending_at, now())
    FROM origin WHERE c.id = origin.id AND EXISTS (SELECT 1 FROM msg)
    RETURNING c.id, c.last_position, c.active_turn_id,
              c.target_kind || ':' || c.target_name AS target
), dlv AS (
    INSERT INTO messaging.deliveries
        (id, conversation_id, position, kind, message_id, text, attributes, traceparent)
    SELECT CAST(:delivery_id AS uuid), back.id, back.last_position, 'conversation_reply',
           msg.id, :reply_text, CAST(:reply_attributes AS jsonb), :traceparent
    FROM back, msg
    RETURNING id
)
SELECT EXISTS (SELECT 1 FROM msg) AS stored,
       EXISTS (SELECT 1 FROM ok) AS allowed,
       (SELECT target FROM origin) AS origin_target,
       CASE WHEN EXISTS (SELECT 1 FROM msg)
            THEN pg_notify('messaging_inbox', CAST(:inbox_id AS text)) END AS notified,
       (SELECT pg_notify('messaging_turns', target)
        FROM back WHERE active_turn_id IS NULL AND EXISTS (SELECT 1 FROM dlv)) AS woken
"""
)

INBOX_TARGET = fixed_sql(
    """
SELECT i.conversation_id, i.principal, c.target_kind, c.target_name
FROM messaging.inboxes i JOIN messaging.conversations c ON c.id = i.conversation_id
WHERE i.id = :inbox_id
"""
)

# The same with a turn of the caller's, for a reply that completes it: one statement.
INBOX_TARGET_AND_TURN = fixed_sql(
    """
SELECT i.conversation_id, i.principal, c.target_kind, c.target_name,
       t.runtime AS turn_runtime, t.conversation_id AS turn_conversation_id,
       t.status AS turn_status, t.lease_expires_at > now() AS turn_live
FROM messaging.inboxes i JOIN messaging.conversations c ON c.id = i.conversation_id
LEFT JOIN messaging.turns t ON t.id = :turn_id
WHERE i.id = :inbox_id
"""
)

PURGE_SUBMISSIONS = fixed_sql(
    "DELETE FROM messaging.submissions WHERE created_at < now() - CAST(:older_than AS interval)"
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
        row = await fetch_one(
            pg, EARLIER_RECEIPT, {"principal": principal, "submission_id": submission_id}
        )
        if row is None:
            return None
        is_retry(submission_id, row.request_hash, request_hash, "a different message")
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
        origin: str | None = None,
    ) -> Receipt:
        """Start a conversation with a target, with a new inbox bound to the caller; with
        `origin`, tied to that conversation (L5: its turn started this one)."""
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
        raise Conflict(f"submission_id {submission_id!r} is being used concurrently; retry")

    async def _send_new_batch(self, sends: Sequence[dict[str, Any]]) -> list[Any]:
        """Store many new-conversation sends in one statement (see `Batcher`).

        Each send keeps its own checks and outcome (row `n` answers send `n`); they share
        the statement, its commit and the round trip.
        """
        async with self.db.raw() as pg, pg.cursor(row_factory=namedtuple_row) as cur:
            await cur.execute(SEND_NEW, {"sends": json.dumps(sends)})
            return await cur.fetchall()

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
            row = await fetch_one(
                pg,
                SEND_CONTINUE,
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
                return Receipt(message_id, str(row.conversation_id), inbox_id)
            earlier = await self._earlier_receipt(pg, principal, submission_id, request_hash)
        if earlier is not None:
            return earlier
        if not row.found:
            raise NotFound(f"inbox {inbox_id!r} not found")
        if not row.allowed:
            kind, _, name = row.target.partition(":")
            raise messaging_disabled(TargetKey(kind, name))
        raise Conflict(f"submission_id {submission_id!r} is being used concurrently; retry")

    async def inbox_target(self, inbox_id: str) -> tuple[str, TargetKey, str]:
        """(conversation_id, target, bound principal) of an inbox."""
        inbox_uuid = parse_uuid(inbox_id, "inbox")
        async with self.db.raw() as pg:
            row = await fetch_one(pg, INBOX_TARGET, {"inbox_id": inbox_uuid})
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
            row = await fetch_one(pg, INBOX_TARGET_AND_TURN, params)
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
        receipt = Receipt(str(uuid.uuid4()), conversation_id, inbox_id)
        attributes = {**(reply_attributes or {}), "message_id": receipt.message_id}
        async with self.db.raw() as pg:
            row = await fetch_one(
                pg,
                AGENT_REPLY,
                {
                    "principal": principal,
                    "submission_id": submission_id,
                    "request_hash": request_hash,
                    "message_id": receipt.message_id,
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
                return receipt
            earlier = await self._earlier_receipt(pg, principal, submission_id, request_hash)
        if earlier is not None:
            return earlier
        if not row.allowed:
            kind, _, name = row.origin_target.partition(":")
            raise reply_refused(TargetKey(kind, name))
        raise Conflict(f"submission_id {submission_id!r} is being used concurrently; retry")

    async def purge_submissions(self, older_than: timedelta) -> int:
        """Forget retry keys older than the dedup window (C4)."""
        async with self.db.transaction() as conn:
            result = await conn.exec_driver_sql(PURGE_SUBMISSIONS, {"older_than": older_than})
        return result.rowcount or 0
