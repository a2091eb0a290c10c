"""SQL for the messaging use cases: one method per use case, each one short transaction.

Concurrency rests on PostgreSQL alone (P3): the conversation row lock orders positions
and guards the turn queue, `ON CONFLICT` deduplicates retries, `FOR UPDATE SKIP LOCKED`
lets replicas claim turns and sweep leases without stepping on each other, and
`pg_notify` (sent at commit) wakes long-polls on every replica.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import psycopg
import sqlalchemy as sa
from psycopg.rows import namedtuple_row
from psycopg.types.json import Jsonb
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from agentworks.client.errors import AgentWorksError, Conflict, NotFound, PreconditionFailed
from agentworks.server.batching import Batcher
from agentworks.server.db import Database, fetch_one, fixed_sql, notify
from agentworks_messaging import tables as t
from agentworks_messaging.models import (
    Delivery,
    Message,
    NewDelivery,
    Page,
    Receipt,
    Target,
    TargetKey,
    Turn,
)

INBOX_CHANNEL = "messaging_inbox"
TURN_CHANNEL = "messaging_turns"


def _target(row: Any) -> Target:
    return Target(
        key=TargetKey(row.kind, row.name),
        owner=row.owner,
        free_text_ask=row.free_text_ask,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def _message(row: Any) -> Message:
    return Message(
        id=str(row.id),
        conversation_id=str(row.conversation_id),
        inbox_id=str(row.inbox_id),
        position=row.position,
        direction=row.direction,
        sender=row.sender,
        text=row.text,
        parts=row.parts,
        created_at=row.created_at,
    )


def _delivery(row: Any, message: Message | None = None) -> Delivery:
    return Delivery(
        id=str(row.id),
        conversation_id=str(row.conversation_id),
        position=row.position,
        kind=row.kind,
        status=row.status,
        text=row.text,
        payload=bytes(row.payload) if row.payload is not None else None,
        attributes=row.attributes,
        turn_id=str(row.turn_id) if row.turn_id else None,
        created_at=row.created_at,
        message=message,
    )


def _uuid(value: str, what: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except (ValueError, AttributeError, TypeError):
        raise NotFound(f"{what} {value!r} not found") from None


def _json(value: Any) -> Jsonb | None:
    return None if value is None else Jsonb(value)


class MessagingStore:
    """All SQL of the messaging service.

    The hot use cases (send, reply, read, enqueue) are fixed SQL on `Database.raw()`;
    the rest go through SQLAlchemy Core.
    """

    def __init__(self, db: Database) -> None:
        self.db = db
        # Concurrent new-conversation sends share one statement and one commit. One batch
        # in flight at a time: the sends that arrive meanwhile ride together in the next
        # (group commit). With 4 in flight, batches at 32 senders averaged 1.2 sends and
        # cost twice the CPU per send of one in flight (about 3 sends per batch).
        self._new_sends: Batcher[dict[str, Any], Any] = Batcher(self._send_new_batch, concurrency=1)

    # ------------------------------------------------------------------ targets

    async def put_target(self, key: TargetKey, owner: str, free_text_ask: bool | None) -> Target:
        """Create the target, or give an existing one this owner. A capability not given
        (None) keeps its stored value: registering again never undoes an owner's setting."""
        changes: dict[str, Any] = {"owner": owner, "updated_at": sa.func.now()}
        if free_text_ask is not None:
            changes["free_text_ask"] = free_text_ask
        stmt = (
            pg_insert(t.targets)
            .values(kind=key.kind, name=key.name, owner=owner, free_text_ask=free_text_ask)
            .on_conflict_do_update(index_elements=["kind", "name"], set_=changes)
            .returning(*t.targets.c)
        )
        async with self.db.transaction() as conn:
            return _target((await conn.execute(stmt)).one())

    async def get_target(self, key: TargetKey) -> Target:
        async with self.db.transaction() as conn:
            row = (
                await conn.execute(
                    sa.select(t.targets).where(
                        t.targets.c.kind == key.kind, t.targets.c.name == key.name
                    )
                )
            ).one_or_none()
        if row is None:
            raise NotFound(f"{key} is not registered")
        return _target(row)

    async def update_target(self, key: TargetKey, free_text_ask: bool | None) -> Target:
        stmt = (
            t.targets.update()
            .where(t.targets.c.kind == key.kind, t.targets.c.name == key.name)
            .values(free_text_ask=free_text_ask, updated_at=sa.func.now())
            .returning(*t.targets.c)
        )
        async with self.db.transaction() as conn:
            row = (await conn.execute(stmt)).one_or_none()
        if row is None:
            raise NotFound(f"{key} is not registered")
        return _target(row)

    # --------------------------------------------------------------------- send
    #
    # Each send is ONE statement of data-modifying CTEs, run in autocommit: atomic, one
    # round trip, no BEGIN/COMMIT. The retry key is inserted first with ON CONFLICT DO
    # NOTHING; a concurrent twin waits on the unique key until the first commits, then
    # inserts nothing, and everything else in its statement is conditioned on that.

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

    async def _send_new_batch(self, sends: Sequence[dict[str, Any]]) -> list[Any]:
        """Store many new-conversation sends in one statement (see `Batcher`).

        Each send keeps its own checks and outcome (row `n` answers send `n`); they share
        the statement, its commit and the round trip.
        """
        async with self.db.raw() as pg, pg.cursor(row_factory=namedtuple_row) as cur:
            await cur.execute(_SEND_NEW, {"sends": json.dumps(sends)})
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

    # --------------------------------------------------------------------- read

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

    # -------------------------------------------------------------------- turns

    async def claim_turn(
        self, runtime: str, keys: Sequence[TargetKey], lease: timedelta
    ) -> Turn | None:
        """Take the oldest claimable conversation of these targets as one turn (C10)."""
        c = t.conversations
        by_kind: dict[str, list[str]] = {}
        for key in keys:
            by_kind.setdefault(key.kind, []).append(key.name)
        target_filter = sa.or_(
            *(
                sa.and_(c.c.target_kind == kind, c.c.target_name.in_(names))
                for kind, names in by_kind.items()
            )
        )
        async with self.db.transaction() as conn:
            conv = (
                await conn.execute(
                    sa.select(c.c.id, c.c.target_kind, c.c.target_name)
                    .where(target_filter, c.c.pending_deliveries > 0, c.c.active_turn_id.is_(None))
                    .order_by(c.c.oldest_pending_at)
                    .limit(1)
                    .with_for_update(skip_locked=True)
                )
            ).one_or_none()
            if conv is None:
                return None
            turn_id = uuid.uuid4()
            lease_expires_at = (
                await conn.execute(
                    t.turns.insert()
                    .values(
                        id=turn_id,
                        conversation_id=conv.id,
                        runtime=runtime,
                        status="active",
                        lease_expires_at=sa.func.now() + lease,
                    )
                    .returning(t.turns.c.lease_expires_at)
                )
            ).scalar_one()
            await conn.execute(
                c.update()
                .where(c.c.id == conv.id)
                .values(pending_deliveries=0, oldest_pending_at=None, active_turn_id=turn_id)
            )
            d = t.deliveries
            rows = (
                await conn.execute(
                    d.update()
                    .where(d.c.conversation_id == conv.id, d.c.status == "pending")
                    .values(status="in_turn", turn_id=turn_id)
                    .returning(*d.c)
                )
            ).all()
            message_ids = [r.message_id for r in rows if r.message_id is not None]
            messages = {}
            if message_ids:
                messages = {
                    r.id: _message(r)
                    for r in (
                        await conn.execute(
                            sa.select(t.messages).where(t.messages.c.id.in_(message_ids))
                        )
                    ).all()
                }
            inbox_id = (
                await conn.execute(
                    sa.select(t.inboxes.c.id).where(t.inboxes.c.conversation_id == conv.id)
                )
            ).scalar_one()
        deliveries = sorted(
            (_delivery(r, messages.get(r.message_id)) for r in rows), key=lambda x: x.position
        )
        return Turn(
            id=str(turn_id),
            conversation_id=str(conv.id),
            target=TargetKey(conv.target_kind, conv.target_name),
            reply_inbox_id=str(inbox_id),
            lease_expires_at=lease_expires_at,
            deliveries=deliveries,
        )

    async def _active_turn(
        self, conn: AsyncConnection, turn_id: str, runtime: str, *, again: str = ""
    ) -> Any:
        """The runtime's turn, locked; refused unless active, or already `again`."""
        turn_uuid = _uuid(turn_id, "turn")
        row = (
            await conn.execute(
                sa.select(t.turns).where(t.turns.c.id == turn_uuid).with_for_update()
            )
        ).one_or_none()
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

    async def heartbeat(self, turn_id: str, runtime: str, lease: timedelta) -> Any:
        async with self.db.transaction() as conn:
            await self._active_turn(conn, turn_id, runtime)
            return (
                await conn.execute(
                    t.turns.update()
                    .where(t.turns.c.id == turn_id)
                    .values(lease_expires_at=sa.func.now() + lease)
                    .returning(t.turns.c.lease_expires_at)
                )
            ).scalar_one()

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
        await conn.execute(
            t.turns.update()
            .where(t.turns.c.id.in_(turn_ids))
            .values(status=turn_status, ended_at=sa.func.now())
        )
        await conn.execute(
            t.deliveries.update()
            .where(t.deliveries.c.turn_id.in_(turn_ids))
            .values(status=delivery_status)
        )
        c = t.conversations
        freed = (
            await conn.execute(
                c.update()
                .where(c.c.active_turn_id.in_(turn_ids))
                .values(active_turn_id=None)
                .returning(c.c.target_kind, c.c.target_name, c.c.pending_deliveries)
            )
        ).all()
        for key in {f"{r.target_kind}:{r.target_name}" for r in freed if r.pending_deliveries}:
            await conn.execute(notify(TURN_CHANNEL, key))

    async def interrupt_expired_turns(self, batch: int = 100) -> int:
        """Record turns whose lease ran out as interrupted; their deliveries too (C11)."""
        async with self.db.transaction() as conn:
            ids = (
                (
                    await conn.execute(
                        sa.select(t.turns.c.id)
                        .where(
                            t.turns.c.status == "active", t.turns.c.lease_expires_at < sa.func.now()
                        )
                        .limit(batch)
                        .with_for_update(skip_locked=True)
                    )
                )
                .scalars()
                .all()
            )
            if ids:
                await self._end_turns(conn, list(ids), "interrupted", "interrupted")
        return len(ids)

    async def purge_submissions(self, older_than: timedelta) -> int:
        async with self.db.transaction() as conn:
            result = await conn.execute(
                t.submissions.delete().where(
                    t.submissions.c.created_at < sa.func.now() - older_than
                )
            )
        return result.rowcount or 0

    # --------------------------------------------------------------- deliveries

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


def _messaging_disabled(key: TargetKey) -> PreconditionFailed:
    return PreconditionFailed(
        f"{key} has agent messaging turned off (capabilities.free_text_ask = false): "
        "conversational messages are refused; call one of its declared functions instead"
    )


_EARLIER_RECEIPT = fixed_sql(
    """
SELECT request_hash, message_id, conversation_id, inbox_id FROM messaging.submissions
WHERE principal = :principal AND submission_id = :submission_id
"""
)

_INBOX_PRINCIPAL = fixed_sql("SELECT principal FROM messaging.inboxes WHERE id = :inbox_id")

_READ_INBOX = fixed_sql(
    """
SELECT * FROM messaging.messages
WHERE inbox_id = :inbox_id AND direction = 'to_inbox' AND position > :after
ORDER BY position LIMIT :limit
"""
)

# Start conversations: target check, retry key, conversation, inbox, message, delivery,
# for a batch of sends given as one JSON array of objects (one field per column: one
# parameter to encode, however many sends); one result row per send, in order.
_SEND_NEW = fixed_sql(
    """
WITH input AS (
    SELECT * FROM ROWS FROM (
        json_to_recordset(CAST(:sends AS json)) AS (
            kind text, name text, refuse boolean, principal text, submission_id text,
            request_hash text, message_id uuid, conversation_id uuid, inbox_id uuid,
            delivery_id uuid, channel text, text text, parts text, target_key text)
    ) WITH ORDINALITY AS i (kind, name, refuse, principal, submission_id, request_hash,
                            message_id, conversation_id, inbox_id, delivery_id, channel,
                            text, parts, target_key, n)
), target AS (
    SELECT i.n, t.free_text_ask
    FROM input i JOIN messaging.targets t ON t.kind = i.kind AND t.name = i.name
), ok AS (
    SELECT i.* FROM input i JOIN target USING (n)
    WHERE NOT (i.refuse AND target.free_text_ask IS FALSE)
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
         oldest_pending_at)
    SELECT conversation_id, kind, name, principal, 2, 1, now() FROM go
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
    INSERT INTO messaging.deliveries (id, conversation_id, position, kind, message_id)
    SELECT go.delivery_id, msg.conversation_id, 2, 'message', msg.id
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

# Continue a conversation through an inbox bound to the caller. The UPDATE takes the
# conversation's row lock, so positions follow commit order.
_SEND_CONTINUE = fixed_sql(
    """
WITH inbox AS (
    SELECT i.id, i.conversation_id, t.kind || ':' || t.name AS target, t.free_text_ask
    FROM messaging.inboxes i
    JOIN messaging.conversations c ON c.id = i.conversation_id
    JOIN messaging.targets t ON t.kind = c.target_kind AND t.name = c.target_name
    WHERE i.id = :inbox_id AND i.principal = :principal
), ok AS (
    SELECT * FROM inbox WHERE NOT (:refuse AND free_text_ask IS FALSE)
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
    INSERT INTO messaging.deliveries (id, conversation_id, position, kind, message_id)
    SELECT CAST(:delivery_id AS uuid), conv.id, conv.last_position, 'message', msg.id
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

# An agent's message to the conversation's inbox, waking its long-polling readers.
_AGENT_REPLY = fixed_sql(
    """
WITH sub AS (
    INSERT INTO messaging.submissions
        (principal, submission_id, request_hash, message_id, conversation_id, inbox_id)
    SELECT :principal, :submission_id, :request_hash, CAST(:message_id AS uuid),
           CAST(:conversation_id AS uuid), CAST(:inbox_id AS uuid)
    WHERE :submission_id <> ''
    ON CONFLICT DO NOTHING
    RETURNING 1
), go AS (
    SELECT 1 WHERE :submission_id = '' OR EXISTS (SELECT 1 FROM sub)
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
)
SELECT EXISTS (SELECT 1 FROM msg) AS stored,
       CASE WHEN EXISTS (SELECT 1 FROM msg)
            THEN pg_notify('messaging_inbox', CAST(:inbox_id AS text)) END AS notified
"""
)

# EnqueueDelivery as one statement: the retry key is looked up first; a new delivery takes
# the conversation's row lock (so its position follows commit order) and wakes the turn
# claimers if no turn is running. A concurrent twin with the same key makes the INSERT
# fail with a unique violation, which aborts the whole statement: nothing is stored and
# the caller retries, now finding the twin (C10, S6, F13).
# Queue deliveries given as one JSON array of objects (payload in base64), one result
# row per item. Conversations are locked in id order (two batches never wait on each
# other in a cycle); each gets its new positions in one UPDATE, in item order.
_ENQUEUE = fixed_sql(
    """
WITH input AS (
    SELECT * FROM json_to_recordset(CAST(:items AS json)) AS (
        n integer, conversation_id uuid, delivery_id uuid, kind text, text text,
        payload text, attributes jsonb, key text)
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
        (id, conversation_id, position, kind, text, payload, attributes, idempotency_key)
    SELECT f.delivery_id, conv.id, conv.base + f.k, f.kind, f.text,
           decode(f.payload, 'base64'), f.attributes, f.key
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
