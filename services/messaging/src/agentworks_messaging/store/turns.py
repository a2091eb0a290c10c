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

from agentworks.core.checks import key_reused
from agentworks.core.errors import AgentWorksError, NotFound, PreconditionFailed
from agentworks.server.db import fetch_one, fixed_sql
from agentworks.server.tracing import current_traceparent
from agentworks_messaging.models import Message, NewDelivery, TargetKey, Turn, TurnQueue
from agentworks_messaging.store.base import MessagingStoreBase
from agentworks_messaging.store.rows import delivery_from, parse_uuid

# A claim is one statement in autocommit: the first claimable conversation of the
# targets in fair order (`turn_at`, set when it became claimable: round the callers, one
# conversation each, migrations/0005_fair_turns.sql; then by age), an ordered scan of the
# partial index `conversations_claimable` stopping at the first row nobody else holds; a
# new turn, the conversation taken, its pending deliveries moved into the turn, each
# with its message; one row per delivery. `more` says whether another conversation of
# these targets is claimable (then one more idle claimer is woken: a single NOTIFY can
# stand for several new turns).
_CLAIM = """
WITH conv AS (
    SELECT id, target_kind, target_name FROM messaging.conversations
    WHERE {targets}
      AND pending_deliveries > 0 AND active_turn_id IS NULL
    ORDER BY turn_at, oldest_pending_at LIMIT 1
    FOR UPDATE SKIP LOCKED
), turn AS (
    INSERT INTO messaging.turns (id, conversation_id, runtime, status, lease_expires_at)
    SELECT :turn_id, conv.id, :runtime, 'active', now() + CAST(:lease AS interval) FROM conv
    RETURNING id, conversation_id, lease_expires_at
), dlv AS (
    -- The conversation as a value (an InitPlan), not a join: a generic plan made while
    -- deliveries was small must still look its deliveries up by `deliveries_pending`'s
    -- key, not walk every pending delivery of every conversation (a backlog, B9).
    UPDATE messaging.deliveries d SET status = 'in_turn', turn_id = (SELECT id FROM turn)
    WHERE d.conversation_id = (SELECT conversation_id FROM turn) AND d.status = 'pending'
    RETURNING d.id, d.conversation_id, d.position, d.kind, d.status, d.text, d.payload,
              d.attributes, d.turn_id, d.created_at, d.message_id, d.traceparent
), took AS (
    -- What it took is subtracted, not zeroed: a delivery stored after this statement's
    -- snapshot (its send committed before the lock above, which then saw the newer row)
    -- is not in `dlv`, so it stays pending and counted, and the next claim takes it.
    UPDATE messaging.conversations c
    SET pending_deliveries = c.pending_deliveries - (SELECT count(*) FROM dlv),
        oldest_pending_at = CASE WHEN c.pending_deliveries > (SELECT count(*) FROM dlv)
                                 THEN c.oldest_pending_at END,
        active_turn_id = turn.id
    FROM turn WHERE c.id = turn.conversation_id
    RETURNING c.id
)
SELECT conv.id AS claimed_conversation_id, conv.target_kind, conv.target_name,
       turn.lease_expires_at,
       (SELECT i.id FROM messaging.inboxes i WHERE i.conversation_id = conv.id) AS reply_inbox,
       EXISTS (SELECT 1 FROM messaging.conversations o
               WHERE {other_targets}
                 AND o.pending_deliveries > 0 AND o.active_turn_id IS NULL
                 AND o.id <> conv.id) AS more,
       (SELECT count(*) FROM took) AS took,
       dlv.*,
       m.conversation_id AS m_conversation_id, m.inbox_id AS m_inbox_id,
       m.position AS m_position, m.direction AS m_direction,
       m.sender AS m_sender, m.text AS m_text, m.parts AS m_parts,
       m.created_at AS m_created_at
FROM conv JOIN turn ON turn.conversation_id = conv.id
LEFT JOIN dlv ON true
LEFT JOIN messaging.messages m ON m.id = dlv.message_id
ORDER BY dlv.position
"""

# ... of one target, or of any of several (:kinds and :names pairwise).
_ONE_TARGET = "{t}target_kind = :kind AND {t}target_name = :name"
_SOME_TARGETS = """({t}target_kind, {t}target_name) IN (
        SELECT kind, name FROM unnest(CAST(:kinds AS text[]), CAST(:names AS text[]))
            AS k (kind, name))"""
CLAIM_OF_TARGET = fixed_sql(
    _CLAIM.format(targets=_ONE_TARGET.format(t=""), other_targets=_ONE_TARGET.format(t="o."))
)
CLAIM_OF_TARGETS = fixed_sql(
    _CLAIM.format(targets=_SOME_TARGETS.format(t=""), other_targets=_SOME_TARGETS.format(t="o."))
)

TURN_LEASE = fixed_sql(
    """
SELECT runtime, conversation_id, status, lease_expires_at > now() AS live
FROM messaging.turns WHERE id = :turn_id
"""
)

EXTEND_LEASE = fixed_sql(
    """
UPDATE messaging.turns SET lease_expires_at = now() + CAST(:lease AS interval)
WHERE id = :turn_id
RETURNING lease_expires_at
"""
)

LOCK_TURN = fixed_sql("SELECT * FROM messaging.turns WHERE id = :turn_id FOR UPDATE")

# End one runtime's active turn in one statement (autocommit): the turn, its deliveries,
# its conversation freed (waking the target's claimers when deliveries came meanwhile).
# The row answers what the turn was, so a refusal can say why.
COMPLETE_TURN = fixed_sql(
    """
WITH t AS (
    SELECT id, runtime, status FROM messaging.turns WHERE id = :turn_id FOR UPDATE
), ended AS (
    UPDATE messaging.turns tu SET status = :status, ended_at = now()
    FROM t WHERE tu.id = t.id AND t.runtime = :runtime AND t.status = 'active'
    RETURNING tu.id
), dlv AS (
    UPDATE messaging.deliveries SET status = :delivery_status
    WHERE turn_id IN (SELECT id FROM ended)
), freed AS (
    UPDATE messaging.conversations SET active_turn_id = NULL
    WHERE active_turn_id IN (SELECT id FROM ended)
    RETURNING target_kind || ':' || target_name AS target, pending_deliveries
)
SELECT t.runtime, t.status, EXISTS (SELECT 1 FROM ended) AS ended,
       (SELECT count(pg_notify('messaging_turns', target)) FROM freed
        WHERE pending_deliveries > 0) AS woken
FROM t
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


def _refuse_ended(turn_id: str, status: str) -> None:
    if status == "interrupted":
        raise PreconditionFailed(
            f"turn {turn_id} was recorded as interrupted (its lease ran out, or its "
            "runtime gave it up); its deliveries are not resent — read the transcript "
            "and decide whether to act"
        )
    raise PreconditionFailed(f"turn {turn_id} is already {status}")


def _claimed_message(row: Any) -> Message:
    """The message of a claimed delivery row (its `m_` columns)."""
    return Message(
        id=str(row.message_id),
        # A conversation_reply's message is of the other conversation, not the turn's (L5).
        conversation_id=str(row.m_conversation_id),
        inbox_id=str(row.m_inbox_id),
        position=row.m_position,
        direction=row.m_direction,
        sender=row.m_sender,
        text=row.m_text,
        parts=row.m_parts,
        created_at=row.m_created_at,
    )


class TurnQueries(MessagingStoreBase):
    async def claim_turn(
        self, runtime: str, keys: Sequence[TargetKey], lease: timedelta
    ) -> tuple[Turn | None, bool]:
        """Take the first claimable conversation of these targets in fair order as one
        turn (C10, B9), in one statement; and whether another of theirs is claimable."""
        params: dict[str, Any] = {"turn_id": uuid.uuid4(), "runtime": runtime, "lease": lease}
        if len(keys) == 1:
            sql = CLAIM_OF_TARGET
            params |= {"kind": keys[0].kind, "name": keys[0].name}
        else:
            sql = CLAIM_OF_TARGETS
            params |= {"kinds": [k.kind for k in keys], "names": [k.name for k in keys]}
        async with self.db.raw() as pg, pg.cursor(row_factory=namedtuple_row) as cur:
            await cur.execute(sql, params)
            rows: list[Any] = await cur.fetchall()
        if not rows:
            return None, False
        first = rows[0]
        deliveries = [
            delivery_from(r, _claimed_message(r) if r.message_id is not None else None)
            for r in rows
            if r.id is not None
        ]
        # The turn continues the trace of its oldest delivery that has one (P4).
        traced = sorted(
            (r.position, r.traceparent) for r in rows if r.id is not None and r.traceparent
        )
        turn = Turn(
            id=str(params["turn_id"]),
            conversation_id=str(first.claimed_conversation_id),
            target=TargetKey(first.target_kind, first.target_name),
            reply_inbox_id=str(first.reply_inbox),
            lease_expires_at=first.lease_expires_at,
            deliveries=deliveries,
            traceparent=traced[0][1] if traced else "",
        )
        return turn, first.more

    async def _active_turn(
        self, conn: AsyncConnection, turn_id: str, runtime: str, *, again: str = ""
    ) -> Any:
        """The runtime's turn, locked; refused unless active, or already `again`."""
        turn_uuid = parse_uuid(turn_id, "turn")
        row = (await conn.exec_driver_sql(LOCK_TURN, {"turn_id": turn_uuid})).one_or_none()
        if row is None or row.runtime != runtime:
            raise NotFound(f"turn {turn_id!r} not found")
        if row.status != again and row.status != "active":
            _refuse_ended(turn_id, row.status)
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
        async with self.db.raw() as pg:
            row = await fetch_one(pg, TURN_LEASE, {"turn_id": turn_uuid})
        if row is None or row.runtime != runtime:
            raise NotFound(f"turn {turn_id!r} not found")
        status = "expired" if row.status == "active" and not row.live else row.status
        return str(row.conversation_id), status

    async def complete_turn(self, turn_id: str, runtime: str, *, interrupted: bool) -> None:
        """End the runtime's active turn: `completed` (deliveries `handled`), or given up
        unhandled, `interrupted` like a lapsed lease (C11). Asking for the ending the turn
        already has again (a retry after a lost answer) changes nothing and succeeds.
        One statement in autocommit."""
        ending = "interrupted" if interrupted else "completed"
        turn_uuid = parse_uuid(turn_id, "turn")
        async with self.db.raw() as pg:
            row = await fetch_one(
                pg,
                COMPLETE_TURN,
                {
                    "turn_id": turn_uuid,
                    "runtime": runtime,
                    "status": ending,
                    "delivery_status": ending if interrupted else "handled",
                },
            )
        if row is None or row.runtime != runtime:
            raise NotFound(f"turn {turn_id!r} not found")
        if not row.ended and row.status != ending:
            _refuse_ended(turn_id, row.status)

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
                    outcomes[row.n] = key_reused(
                        item.idempotency_key, "another conversation", "idempotency_key"
                    )
                elif row.other_content:
                    outcomes[row.n] = key_reused(
                        item.idempotency_key,
                        "a delivery with different content (kind, text or payload)",
                        "idempotency_key",
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
