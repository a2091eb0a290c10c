"""The turn queue: deliveries in, turns claimed, heartbeats, ends (C5, C10, C11)."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import psycopg

from agentworks.core.checks import key_reused
from agentworks.core.errors import AgentWorksError, NotFound, PreconditionFailed, Reason
from agentworks.server.tracing import current_traceparent
from agentworks_messaging.models import Message, NewDelivery, TargetKey, Turn, TurnQueue
from agentworks_messaging.store.base import MessagingStoreBase, Q
from agentworks_messaging.store.rows import delivery_from, parse_uuid

# The claim of one target's turn, as tests EXPLAIN and PREPARE it.
CLAIM_OF_TARGET = Q.sql("claim_turn_of_target")


def _refuse_ended(turn_id: str, status: str) -> None:
    if status == "interrupted":
        raise PreconditionFailed(
            f"turn {turn_id} was recorded as interrupted (its lease ran out, or its "
            "runtime gave it up); its deliveries are not resent — read the transcript "
            "and decide whether to act",
            reason=Reason.LEASE_LOST,
            metadata={"turn_id": turn_id, "status": status},
        )
    raise PreconditionFailed(
        f"turn {turn_id} is already {status}",
        reason=Reason.TURN_ENDED,
        metadata={"turn_id": turn_id, "status": status},
    )


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
            name = "claim_turn_of_target"
            params |= {"kind": keys[0].kind, "name": keys[0].name}
        else:
            name = "claim_turn_of_targets"
            params |= {"kinds": [k.kind for k in keys], "names": [k.name for k in keys]}
        async with self.db.raw() as pg:
            rows: list[Any] = await Q.all(pg, name, params)
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
        self, pg: psycopg.AsyncConnection, turn_id: str, runtime: str, *, again: str = ""
    ) -> Any:
        """The runtime's turn, locked; refused unless active, or already `again`."""
        turn_uuid = parse_uuid(turn_id, "turn")
        row = await Q.one(pg, "lock_turn", {"turn_id": turn_uuid})
        if row is None or row.runtime != runtime:
            raise NotFound(f"turn {turn_id!r} not found")
        if row.status != again and row.status != "active":
            _refuse_ended(turn_id, row.status)
        return row

    async def heartbeat(self, turn_id: str, runtime: str, lease: timedelta) -> tuple[Any, str]:
        """Extend the runtime's active turn's lease: (new expiry, conversation id)."""
        async with self.db.raw(transaction=True) as pg:
            turn = await self._active_turn(pg, turn_id, runtime)
            expires = await Q.value(pg, "extend_lease", {"turn_id": turn.id, "lease": lease})
            return expires, str(turn.conversation_id)

    async def turn_lease(self, turn_id: str, runtime: str) -> tuple[str, str]:
        """(conversation id, status) of the runtime's turn; status `expired` when it is
        active but its lease has run out (T3: a capability ends with the lease)."""
        turn_uuid = parse_uuid(turn_id, "turn")
        async with self.db.raw() as pg:
            row = await Q.one(pg, "turn_lease", {"turn_id": turn_uuid})
        if row is None or row.runtime != runtime:
            raise NotFound(f"turn {turn_id!r} not found")
        status = "expired" if row.status == "active" and not row.live else row.status
        return str(row.conversation_id), status

    async def complete_turn(
        self, turn_id: str, runtime: str, *, interrupted: bool, error: str = ""
    ) -> None:
        """End the runtime's active turn: `completed` (deliveries `handled`), or given up
        unhandled, `interrupted` like a lapsed lease (C11), with why it failed (`error`,
        L12; "" when it did not). Asking for the ending the turn already has again (a
        retry after a lost answer) changes nothing and succeeds. One statement in
        autocommit."""
        ending = "interrupted" if interrupted else "completed"
        turn_uuid = parse_uuid(turn_id, "turn")
        async with self.db.raw() as pg:
            row = await Q.one(
                pg,
                "complete_turn",
                {
                    "turn_id": turn_uuid,
                    "runtime": runtime,
                    "status": ending,
                    "delivery_status": ending if interrupted else "handled",
                    "error": error,
                },
            )
        if row is None or row.runtime != runtime:
            raise NotFound(f"turn {turn_id!r} not found")
        if not row.ended and row.status != ending:
            _refuse_ended(turn_id, row.status)

    async def _end_turns(
        self,
        pg: psycopg.AsyncConnection,
        turn_ids: list[Any],
        turn_status: str,
        delivery_status: str,
    ) -> None:
        await Q.execute(pg, "end_turns", {"turn_ids": turn_ids, "status": turn_status})
        await Q.execute(pg, "end_deliveries", {"turn_ids": turn_ids, "status": delivery_status})
        await Q.execute(pg, "free_conversations", {"turn_ids": turn_ids})

    async def interrupt_expired_turns(self, batch: int = 100) -> int:
        """Record turns whose lease ran out as interrupted; their deliveries too (C11)."""
        async with self.db.raw(transaction=True) as pg:
            ids = [row.id for row in await Q.all(pg, "expired_turns", {"batch": batch})]
            if ids:
                await self._end_turns(pg, ids, "interrupted", "interrupted")
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
                async with self.db.raw() as pg:
                    results = await Q.all(pg, "enqueue_deliveries", {"items": json.dumps(rows)})
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
        async with self.db.raw() as pg:
            rows = await Q.all(pg, "turn_queue")
        return [
            TurnQueue(TargetKey(r.kind, r.name), r.queued, max(0.0, float(r.age)), r.active)
            for r in rows
        ]
