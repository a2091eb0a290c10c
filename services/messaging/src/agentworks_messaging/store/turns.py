"""The turn queue: deliveries in, turns claimed, heartbeats, ends (C5, C10, C11)."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import psycopg
from psycopg.rows import namedtuple_row
from sqlalchemy.ext.asyncio import AsyncConnection

from agentworks.client.errors import AgentWorksError, Conflict, NotFound, PreconditionFailed
from agentworks.server.db import fixed_sql
from agentworks.server.tracing import current_traceparent
from agentworks_messaging.models import NewDelivery, TargetKey, Turn, TurnQueue
from agentworks_messaging.store.base import MessagingStoreBase
from agentworks_messaging.store.reads import MESSAGES_BY_ID
from agentworks_messaging.store.rows import delivery_from, message_from, parse_uuid

# The oldest claimable conversation of one target (an ordered scan of the partial index
# `conversations_claimable`, stopping at the first row nobody else holds) ...
CLAIMABLE_OF_TARGET = fixed_sql(
    """
SELECT id, target_kind, target_name FROM messaging.conversations
WHERE target_kind = :kind AND target_name = :name
  AND pending_deliveries > 0 AND active_turn_id IS NULL
ORDER BY oldest_pending_at LIMIT 1
FOR UPDATE SKIP LOCKED
"""
)

# ... or of any of several targets (:kinds and :names pairwise).
CLAIMABLE_OF_TARGETS = fixed_sql(
    """
SELECT id, target_kind, target_name FROM messaging.conversations
WHERE (target_kind, target_name) IN (
        SELECT kind, name FROM unnest(CAST(:kinds AS text[]), CAST(:names AS text[]))
            AS k (kind, name))
  AND pending_deliveries > 0 AND active_turn_id IS NULL
ORDER BY oldest_pending_at LIMIT 1
FOR UPDATE SKIP LOCKED
"""
)

START_TURN = fixed_sql(
    """
INSERT INTO messaging.turns (id, conversation_id, runtime, status, lease_expires_at)
VALUES (:turn_id, :conversation_id, :runtime, 'active', now() + CAST(:lease AS interval))
RETURNING lease_expires_at
"""
)

TAKE_CONVERSATION = fixed_sql(
    """
UPDATE messaging.conversations
SET pending_deliveries = 0, oldest_pending_at = NULL, active_turn_id = :turn_id
WHERE id = :conversation_id
"""
)

TAKE_DELIVERIES = fixed_sql(
    """
UPDATE messaging.deliveries SET status = 'in_turn', turn_id = :turn_id
WHERE conversation_id = :conversation_id AND status = 'pending'
RETURNING *
"""
)

CONVERSATION_INBOX = fixed_sql(
    "SELECT id FROM messaging.inboxes WHERE conversation_id = :conversation_id"
)

TURN_LEASE = fixed_sql(
    """
SELECT runtime, conversation_id, status, lease_expires_at > now() AS live
FROM messaging.turns WHERE id = :turn_id
"""
)

LOCK_TURN = fixed_sql("SELECT * FROM messaging.turns WHERE id = :turn_id FOR UPDATE")

EXTEND_LEASE = fixed_sql(
    """
UPDATE messaging.turns SET lease_expires_at = now() + CAST(:lease AS interval)
WHERE id = :turn_id
RETURNING lease_expires_at
"""
)

END_TURNS = fixed_sql(
    """
UPDATE messaging.turns SET status = :status, ended_at = now()
WHERE id = ANY(CAST(:turn_ids AS uuid[]))
"""
)

END_DELIVERIES = fixed_sql(
    """
UPDATE messaging.deliveries SET status = :status
WHERE turn_id = ANY(CAST(:turn_ids AS uuid[]))
"""
)

# Free the turns' conversations; those with deliveries that came meanwhile can be
# claimed again, so their target's claimers are woken (at commit).
FREE_CONVERSATIONS = fixed_sql(
    """
WITH freed AS (
    UPDATE messaging.conversations SET active_turn_id = NULL
    WHERE active_turn_id = ANY(CAST(:turn_ids AS uuid[]))
    RETURNING target_kind || ':' || target_name AS target, pending_deliveries
)
SELECT count(pg_notify('messaging_turns', target)) AS woken
FROM (SELECT DISTINCT target FROM freed WHERE pending_deliveries > 0) k
"""
)

# Queue deliveries given as one JSON array of objects (payload in base64), one result
# row per item. The retry keys are looked up first. Conversations are locked in id order
# (two batches never wait on each other in a cycle); each gets its new positions in one
# UPDATE, in item order (so positions follow commit order), and the claimers of a target
# with no turn running are woken. A concurrent twin with the same key makes the INSERT
# fail with a unique violation, which aborts the whole statement: nothing is stored and
# the caller retries, now finding the twin (C10, S6, F13).
ENQUEUE = fixed_sql(
    """
WITH input AS (
    SELECT * FROM json_to_recordset(CAST(:items AS json)) AS (
        n integer, conversation_id uuid, delivery_id uuid, kind text, text text,
        payload text, attributes jsonb, key text, traceparent text)
), existing AS (
    SELECT i.n, d.id, d.conversation_id <> i.conversation_id AS other_conversation,
           (d.kind, d.text, d.payload) IS DISTINCT FROM
               (i.kind, i.text, decode(i.payload, 'base64')) AS other_content
    FROM input i JOIN messaging.deliveries d ON d.idempotency_key = i.key
), fresh AS (
    SELECT i.*, row_number() OVER (PARTITION BY i.conversation_id ORDER BY i.n) AS k
    FROM input i WHERE i.n NOT IN (SELECT n FROM existing)
), locked AS (
    SELECT c.id FROM messaging.conversations c
    WHERE c.id IN (SELECT conversation_id FROM fresh)
    ORDER BY c.id
    FOR UPDATE
), conv AS (
    UPDATE messaging.conversations c
    SET last_position = c.last_position + f.added,
        pending_deliveries = c.pending_deliveries + f.added,
        oldest_pending_at = coalesce(c.oldest_pending_at, now())
    FROM (SELECT conversation_id, count(*) AS added FROM fresh GROUP BY conversation_id) f
    WHERE c.id = f.conversation_id AND c.id IN (SELECT id FROM locked)
    RETURNING c.id, c.last_position - f.added AS base, c.active_turn_id,
              c.target_kind || ':' || c.target_name AS target
), dlv AS (
    INSERT INTO messaging.deliveries
        (id, conversation_id, position, kind, text, payload, attributes, idempotency_key,
         traceparent)
    SELECT f.delivery_id, conv.id, conv.base + f.k, f.kind, f.text,
           decode(f.payload, 'base64'), f.attributes, f.key, f.traceparent
    FROM fresh f JOIN conv ON conv.id = f.conversation_id
    RETURNING id
), woken AS (
    SELECT count(pg_notify('messaging_turns', target)) AS n
    FROM (SELECT DISTINCT target FROM conv WHERE active_turn_id IS NULL) k
)
SELECT i.n, e.id AS existing_id, e.other_conversation, e.other_content,
       i.delivery_id IN (SELECT id FROM dlv) AS stored,
       (SELECT n FROM woken) AS woken
FROM input i LEFT JOIN existing e ON e.n = i.n
ORDER BY i.n
"""
)

# Per registered target: queued turns, the oldest one's age, active turns (the gauges of
# metrics.py). Only the live parts of the tables are read, through partial indexes:
# `conversations_claimable` (pending work, no turn) and `turns_active_lease` (active
# turns, each joined to its conversation by primary key); message and delivery history
# is never scanned. The constants are written into the text for those indexes to match.
TURN_QUEUE = fixed_sql(
    """
SELECT t.kind, t.name,
       coalesce(queued.n, 0) AS queued,
       coalesce(EXTRACT(epoch FROM now() - queued.oldest), 0) AS age,
       coalesce(active.n, 0) AS active
FROM messaging.targets t
LEFT JOIN (
    SELECT target_kind, target_name, count(*) AS n, min(oldest_pending_at) AS oldest
    FROM messaging.conversations
    WHERE pending_deliveries > 0 AND active_turn_id IS NULL
    GROUP BY target_kind, target_name
) queued ON queued.target_kind = t.kind AND queued.target_name = t.name
LEFT JOIN (
    SELECT c.target_kind, c.target_name, count(*) AS n
    FROM messaging.turns tu JOIN messaging.conversations c ON c.id = tu.conversation_id
    WHERE tu.status = 'active'
    GROUP BY c.target_kind, c.target_name
) active ON active.target_kind = t.kind AND active.target_name = t.name
"""
)

EXPIRED_TURNS = fixed_sql(
    """
SELECT id FROM messaging.turns
WHERE status = 'active' AND lease_expires_at < now()
LIMIT :batch
FOR UPDATE SKIP LOCKED
"""
)


class TurnQueries(MessagingStoreBase):
    async def claim_turn(
        self, runtime: str, keys: Sequence[TargetKey], lease: timedelta
    ) -> Turn | None:
        """Take the oldest claimable conversation of these targets as one turn (C10)."""
        claimable: tuple[str, dict[str, Any]]
        if len(keys) == 1:
            claimable = CLAIMABLE_OF_TARGET, {"kind": keys[0].kind, "name": keys[0].name}
        else:
            kinds = [k.kind for k in keys]
            claimable = CLAIMABLE_OF_TARGETS, {"kinds": kinds, "names": [k.name for k in keys]}
        async with self.db.transaction() as conn:
            conv = (await conn.exec_driver_sql(*claimable)).one_or_none()
            if conv is None:
                return None
            turn = {"turn_id": uuid.uuid4(), "conversation_id": conv.id}
            lease_expires_at = (
                await conn.exec_driver_sql(START_TURN, {**turn, "runtime": runtime, "lease": lease})
            ).scalar_one()
            await conn.exec_driver_sql(TAKE_CONVERSATION, turn)
            rows = (await conn.exec_driver_sql(TAKE_DELIVERIES, turn)).all()
            message_ids = [r.message_id for r in rows if r.message_id is not None]
            messages = {}
            if message_ids:
                result = await conn.exec_driver_sql(MESSAGES_BY_ID, {"message_ids": message_ids})
                messages = {r.id: message_from(r) for r in result.all()}
            inbox = await conn.exec_driver_sql(CONVERSATION_INBOX, {"conversation_id": conv.id})
            inbox_id = inbox.scalar_one()
        deliveries = sorted(
            (delivery_from(r, messages.get(r.message_id)) for r in rows), key=lambda x: x.position
        )
        # The turn continues the trace of its oldest delivery that has one (P4).
        traced = sorted((r.position, r.traceparent) for r in rows if r.traceparent)
        return Turn(
            id=str(turn["turn_id"]),
            conversation_id=str(conv.id),
            target=TargetKey(conv.target_kind, conv.target_name),
            reply_inbox_id=str(inbox_id),
            lease_expires_at=lease_expires_at,
            deliveries=deliveries,
            traceparent=traced[0][1] if traced else "",
        )

    async def _active_turn(
        self, conn: AsyncConnection, turn_id: str, runtime: str, *, again: str = ""
    ) -> Any:
        """The runtime's turn, locked; refused unless active, or already `again`."""
        turn_uuid = parse_uuid(turn_id, "turn")
        row = (await conn.exec_driver_sql(LOCK_TURN, {"turn_id": turn_uuid})).one_or_none()
        if row is None or row.runtime != runtime:
            raise NotFound(f"turn {turn_id!r} not found")
        if row.status == again:
            return row
        if row.status == "interrupted":
            raise PreconditionFailed(
                f"turn {turn_id} was recorded as interrupted (its lease ran out, or its "
                "runtime gave it up); its deliveries are not resent — read the transcript "
                "and decide whether to act"
            )
        if row.status != "active":
            raise PreconditionFailed(f"turn {turn_id} is already {row.status}")
        return row

    async def heartbeat(self, turn_id: str, runtime: str, lease: timedelta) -> tuple[Any, str]:
        """Extend the runtime's active turn's lease: (new expiry, conversation id)."""
        async with self.db.transaction() as conn:
            turn = await self._active_turn(conn, turn_id, runtime)
            result = await conn.exec_driver_sql(EXTEND_LEASE, {"turn_id": turn.id, "lease": lease})
            return result.scalar_one(), str(turn.conversation_id)

    async def turn_lease(self, turn_id: str, runtime: str) -> tuple[str, str]:
        """(conversation id, status) of the runtime's turn; status `expired` when it is
        active but its lease has run out (T3: a capability ends with the lease)."""
        turn_uuid = parse_uuid(turn_id, "turn")
        async with self.db.transaction() as conn:
            result = await conn.exec_driver_sql(TURN_LEASE, {"turn_id": turn_uuid})
            row = result.one_or_none()
        if row is None or row.runtime != runtime:
            raise NotFound(f"turn {turn_id!r} not found")
        status = "expired" if row.status == "active" and not row.live else row.status
        return str(row.conversation_id), status

    async def complete_turn(self, turn_id: str, runtime: str, *, interrupted: bool) -> None:
        """End the runtime's active turn: `completed` (deliveries `handled`), or given up
        unhandled, `interrupted` like a lapsed lease (C11). Asking for the ending the turn
        already has again (a retry after a lost answer) changes nothing and succeeds."""
        ending = "interrupted" if interrupted else "completed"
        async with self.db.transaction() as conn:
            turn = await self._active_turn(conn, turn_id, runtime, again=ending)
            if turn.status == "active":
                await self._end_turns(conn, [turn.id], ending, ending if interrupted else "handled")

    async def _end_turns(
        self, conn: AsyncConnection, turn_ids: list[Any], turn_status: str, delivery_status: str
    ) -> None:
        await conn.exec_driver_sql(END_TURNS, {"turn_ids": turn_ids, "status": turn_status})
        await conn.exec_driver_sql(
            END_DELIVERIES, {"turn_ids": turn_ids, "status": delivery_status}
        )
        await conn.exec_driver_sql(FREE_CONVERSATIONS, {"turn_ids": turn_ids})

    async def interrupt_expired_turns(self, batch: int = 100) -> int:
        """Record turns whose lease ran out as interrupted; their deliveries too (C11)."""
        async with self.db.transaction() as conn:
            ids = (await conn.exec_driver_sql(EXPIRED_TURNS, {"batch": batch})).scalars().all()
            if ids:
                await self._end_turns(conn, list(ids), "interrupted", "interrupted")
        return len(ids)

    async def enqueue_deliveries(
        self, items: Sequence[NewDelivery]
    ) -> list[tuple[str, bool] | AgentWorksError]:
        """Queue deliveries once per idempotency key, all in one statement (S6, F13).

        One outcome per item, in order: (delivery_id, created), or the error that item
        alone failed with (nothing of it stored). Keys must differ within `items`.
        """
        outcomes: list[tuple[str, bool] | AgentWorksError] = []
        rows: list[dict[str, Any]] = []
        traceparent = current_traceparent()  # the enqueuer's trace, for the turn (P4)
        for n, item in enumerate(items):
            try:
                conversation = parse_uuid(item.conversation_id, "conversation")
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
                    "traceparent": traceparent,
                }
            )
        if not rows:
            return outcomes
        results: list[Any] = []
        for attempt in range(3):
            try:
                async with self.db.raw() as pg, pg.cursor(row_factory=namedtuple_row) as cur:
                    await cur.execute(ENQUEUE, {"items": json.dumps(rows)})
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

    async def turn_queue(self) -> list[TurnQueue]:
        """The turn queue of every registered target, in one statement."""
        async with self.db.autocommit() as conn:
            rows = (await conn.exec_driver_sql(TURN_QUEUE)).all()
        return [
            TurnQueue(TargetKey(r.kind, r.name), r.queued, max(0.0, float(r.age)), r.active)
            for r in rows
        ]
