"""SQL of pauses (S3): the pause rows and the gate that firing holds while it delivers."""

from __future__ import annotations

import psycopg

from agentworks_scheduler.models import PauseEntry
from agentworks_scheduler.store.common import GATE_LOCK, Q, StoreBase


class PauseStore(StoreBase):
    async def pause(self, product: str, reason: str, paused_by: str) -> list[PauseEntry]:
        async with self.db.raw(transaction=True) as pg:
            await self._close_gate(pg)
            await Q.execute(
                pg, "add_pause", {"product": product, "reason": reason, "paused_by": paused_by}
            )
            return await self._pauses(pg)

    async def resume(self, product: str) -> tuple[bool, list[PauseEntry]]:
        """Lift the pause of exactly this scope: (whether there was one, the pauses left)."""
        async with self.db.raw(transaction=True) as pg:
            await self._close_gate(pg)
            lifted = await Q.execute(pg, "remove_pause", {"product": product})
            return bool(lifted), await self._pauses(pg)

    async def pauses(self) -> list[PauseEntry]:
        async with self.db.raw() as pg:
            return await self._pauses(pg)

    async def _close_gate(self, pg: psycopg.AsyncConnection) -> None:
        """Wait for in-flight firings (claimed and not yet recorded); later firings wait
        for this transaction.

        Firing holds the gate (an advisory lock) shared from its claim until it has
        recorded what it delivered; this takes it exclusively. The gate row is updated
        too, which waits for a replica of an earlier version still firing in one
        transaction holding that row `FOR SHARE`.
        """
        await Q.execute(pg, "close_gate", {"gate": GATE_LOCK})
        await Q.execute(pg, "touch_gate")

    async def _pauses(self, pg: psycopg.AsyncConnection) -> list[PauseEntry]:
        rows = await Q.all(pg, "pauses")
        return [PauseEntry(r.product, r.reason, r.paused_by, r.paused_at) for r in rows]
