"""SQL of pauses (S3): the pause rows and the gate that firing holds while it delivers."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from agentworks_scheduler import tables as t
from agentworks_scheduler.models import PauseEntry
from agentworks_scheduler.store.common import GATE_LOCK, StoreBase


class PauseStore(StoreBase):
    async def pause(self, product: str, reason: str, paused_by: str) -> list[PauseEntry]:
        async with self.db.transaction() as conn:
            await self._close_gate(conn)
            await conn.execute(
                pg_insert(t.pauses)
                .values(product=product, reason=reason, paused_by=paused_by)
                .on_conflict_do_nothing(index_elements=["product"])
            )
            return await self._pauses(conn)

    async def resume(self, product: str) -> tuple[bool, list[PauseEntry]]:
        """Lift the pause of exactly this scope: (whether there was one, the pauses left)."""
        async with self.db.transaction() as conn:
            await self._close_gate(conn)
            lifted = await conn.execute(t.pauses.delete().where(t.pauses.c.product == product))
            return bool(lifted.rowcount), await self._pauses(conn)

    async def pauses(self) -> list[PauseEntry]:
        async with self.db.transaction() as conn:
            return await self._pauses(conn)

    async def _close_gate(self, conn: AsyncConnection) -> None:
        """Wait for in-flight firings (claimed and not yet recorded); later firings wait
        for this transaction.

        Firing holds the gate (an advisory lock) shared from its claim until it has
        recorded what it delivered; this takes it exclusively. The gate row is updated
        too, which waits for a replica of an earlier version still firing in one
        transaction holding that row `FOR SHARE`.
        """
        await conn.execute(sa.select(sa.func.pg_advisory_xact_lock(GATE_LOCK, 0)))
        await conn.execute(t.pause_gate.update().values(changed_at=sa.func.now()))

    async def _pauses(self, conn: AsyncConnection) -> list[PauseEntry]:
        rows = (await conn.execute(sa.select(t.pauses).order_by(t.pauses.c.product))).all()
        return [PauseEntry(r.product, r.reason, r.paused_by, r.paused_at) for r in rows]
