"""SQL of firing (S6): claim due occurrences, then record how their delivery went.

No transaction is open while messaging is called. A batch is fired on a connection of
its own (`claiming`):

1. Claim, in one short transaction: take the pause gate shared, read the database
   clock, row-lock a bounded window of due rows not covered by a pause with
   `FOR UPDATE SKIP LOCKED`, and take the advisory lock (session-level, so it
   outlives the transaction) of up to `limit` of them. The transaction commits.
2. The caller delivers them (the connection idles; no transaction).
3. Record the outcomes in a second short transaction.
4. Release the locks (or drop the connection, which releases them too).

A row another replica is delivering keeps its advisory lock, so no other replica
claims it until that replica has recorded it (and then it is no longer due). If the
replica dies before it records, its connection closes, the locks go with it, and the
next tick (any replica) delivers the row again with the same idempotency key, which
messaging deduplicates. Pause takes the gate exclusively, so it waits for firings
claimed before it and holds later ones (S3). Cancelling, rescheduling, updating or
deleting a row takes its advisory lock for its transaction, so it waits for a delivery
in flight to be recorded (store/common.py, `wait_for_delivery`).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Any

from agentworks_scheduler.models import Delivered, Due, Failed, FireOutcome
from agentworks_scheduler.store.common import (
    GATE_LOCK,
    SCHEDULE_LOCK,
    WAKE_UP_LOCK,
    Q,
    Session,
    StoreBase,
    schedule,
    session,
    wake_up,
)

# How many due rows a claim row-locks and considers, in batches: replicas delivering
# up to this many batches at once do not leave the next one short.
CANDIDATE_WINDOW = 4


class Claim:
    """One firing batch's connection: claim due rows, then record their outcomes."""

    def __init__(self, conn: Session) -> None:
        self.conn = conn

    async def _claim(
        self, query: str, lock: int, convert: Callable[[Any], Any], limit: int
    ) -> list[Due]:
        pg = self.conn.pg
        async with pg.transaction():
            await Q.execute(pg, "hold_gate", {"gate": GATE_LOCK})
            now = await Q.value(pg, "now")
            # Candidates first, bounded, in due order, row-locked; then the advisory
            # lock, tried only on them and only until `limit` are taken (queries.sql).
            # Rows another replica is delivering still hold their advisory lock and are
            # passed over; the window is wider than a batch so that a few replicas in
            # flight do not starve the next.
            rows = await Q.all(
                pg,
                query,
                {"now": now, "window": limit * CANDIDATE_WINDOW, "lock": lock, "limit": limit},
            )
        return [Due(convert(r), now) for r in rows]

    async def due_wake_ups(self, limit: int) -> list[Due]:
        """Claim up to `limit` due, unpaused wake-ups."""
        return await self._claim("claim_due_wake_ups", WAKE_UP_LOCK, wake_up, limit)

    async def due_schedules(self, limit: int) -> list[Due]:
        """Claim up to `limit` schedules with a due occurrence, not paused."""
        return await self._claim("claim_due_schedules", SCHEDULE_LOCK, schedule, limit)

    async def record_wake_ups(self, fired: list[tuple[Due, FireOutcome]]) -> None:
        """Delivered ones fired, refused ones failed; a Retry stays pending for the next
        tick. One UPDATE over arrays for the delivered, an executemany for failures."""
        delivered = [(due, out) for due, out in fired if isinstance(out, Delivered)]
        failed = [
            {"b_id": due.item.id, "b_error": out.error}
            for due, out in fired
            if isinstance(out, Failed)
        ]
        pg = self.conn.pg
        async with pg.transaction():
            if delivered:
                await Q.execute(
                    pg,
                    "wake_ups_fired",
                    {
                        "ids": [due.item.id for due, _ in delivered],
                        "deliveries": [out.delivery_id for _, out in delivered],
                        "lates": [due.late.total_seconds() for due, _ in delivered],
                    },
                )
            if failed:
                await Q.execute_many(pg, "wake_up_failed", failed)

    async def record_schedules(
        self, fired: list[tuple[Due, FireOutcome]], next_fire: dict[str, datetime]
    ) -> None:
        """Move delivered and refused schedules to `next_fire[id]` (a refusal also
        records last_error); a Retry keeps the same occurrence and key for the next tick."""
        delivered = [due.item.id for due, out in fired if isinstance(out, Delivered)]
        failed = [
            {"b_id": due.item.id, "b_next": next_fire[due.item.id], "b_error": out.error}
            for due, out in fired
            if isinstance(out, Failed)
        ]
        pg = self.conn.pg
        async with pg.transaction():
            if delivered:
                await Q.execute(
                    pg,
                    "schedules_fired",
                    {"ids": delivered, "nexts": [next_fire[i] for i in delivered]},
                )
            if failed:
                await Q.execute_many(pg, "schedule_failed", failed)


class FiringStore(StoreBase):
    @contextlib.asynccontextmanager
    async def claiming(self) -> AsyncIterator[Claim]:
        """A firing batch's connection; its locks are released when the block ends."""
        async with session(self.db) as conn:
            yield Claim(conn)
