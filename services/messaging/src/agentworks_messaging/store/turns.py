"""The per-conversation turn queue: claim, heartbeat, complete, expire (C5, C11)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from agentworks.client.errors import NotFound, PreconditionFailed
from agentworks.server.db import notify
from agentworks_messaging import tables as t
from agentworks_messaging.models import (
    TargetKey,
    Turn,
)
from agentworks_messaging.store.base import MessagingStoreBase
from agentworks_messaging.store.rows import TURN_CHANNEL, _delivery, _message, _uuid


class TurnQueries(MessagingStoreBase):
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
