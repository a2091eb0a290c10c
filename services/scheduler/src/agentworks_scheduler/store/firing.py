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

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from agentworks_scheduler import tables as t
from agentworks_scheduler.models import Delivered, Due, Failed, FireOutcome
from agentworks_scheduler.store.common import (
    GATE_LOCK,
    SCHEDULE_LOCK,
    WAKE_UP_LOCK,
    StoreBase,
    lock_key,
    not_paused,
    schedule,
    session,
    wake_up,
)

# How many due rows a claim row-locks and considers, in batches: replicas delivering
# up to this many batches at once do not leave the next one short.
CANDIDATE_WINDOW = 4


class Claim:
    """One firing batch's connection: claim due rows, then record their outcomes."""

    def __init__(self, conn: AsyncConnection) -> None:
        self.conn = conn

    async def _claim(
        self,
        table: sa.Table,
        lock: int,
        claimable: Callable[[datetime], list[sa.ColumnElement[bool]]],
        order_by: sa.Column[Any],
        convert: Callable[[Any], Any],
        limit: int,
    ) -> list[Due]:
        async with self.conn.begin():
            await self.conn.execute(sa.select(sa.func.pg_advisory_lock_shared(GATE_LOCK, 0)))
            now = (await self.conn.execute(sa.select(sa.func.now()))).scalar_one()
            # Candidates first, bounded, in due order, row-locked (a row a concurrent
            # claim or edit holds is skipped); then the advisory lock, tried only on
            # them and only until `limit` are taken. A lock tried in the scan's own
            # WHERE would be taken for every due row before the sort and the LIMIT (the
            # caveat in PostgreSQL's advisory-lock docs): a backlog would fill the
            # server's shared lock table. Rows another replica is delivering still
            # hold their advisory lock and are passed over; the window is wider than a
            # batch so that a few replicas in flight do not starve the next. The rows
            # returned are the ones FOR UPDATE locked: their newest version, not the
            # statement's snapshot (an edit committed meanwhile is what gets delivered).
            candidates = (
                sa.select(table)
                .where(*claimable(now))
                .order_by(order_by)
                .limit(limit * CANDIDATE_WINDOW)
                .with_for_update(skip_locked=True)
                .cte("candidates")
                .prefix_with("MATERIALIZED")
            )
            claimed = (
                sa.select(candidates)
                .where(sa.func.pg_try_advisory_lock(lock, lock_key(candidates.c.id)))
                .limit(limit)
                .cte("claimed")
                .prefix_with("MATERIALIZED")
            )
            rows = (
                await self.conn.execute(sa.select(claimed).order_by(claimed.c[order_by.name]))
            ).all()
        return [Due(convert(r), now) for r in rows]

    async def due_wake_ups(self, limit: int) -> list[Due]:
        """Claim up to `limit` due, unpaused wake-ups."""
        w = t.wake_ups

        def claimable(now: datetime) -> list[sa.ColumnElement[bool]]:
            return [w.c.status == "pending", w.c.due_at <= now, not_paused(w.c.product)]

        return await self._claim(w, WAKE_UP_LOCK, claimable, w.c.due_at, wake_up, limit)

    async def due_schedules(self, limit: int) -> list[Due]:
        """Claim up to `limit` schedules with a due occurrence, not paused."""
        s = t.schedules

        def claimable(now: datetime) -> list[sa.ColumnElement[bool]]:
            return [~s.c.paused, s.c.next_fire_at <= now, not_paused(s.c.product)]

        return await self._claim(s, SCHEDULE_LOCK, claimable, s.c.next_fire_at, schedule, limit)

    async def record_wake_ups(self, fired: list[tuple[Due, FireOutcome]]) -> None:
        """Delivered ones fired, refused ones failed; a Retry stays pending for the next
        tick. One UPDATE over arrays for the delivered, an executemany for failures."""
        delivered = [(due, out) for due, out in fired if isinstance(out, Delivered)]
        failed = [
            {"b_id": due.item.id, "b_error": out.error}
            for due, out in fired
            if isinstance(out, Failed)
        ]
        async with self.conn.begin():
            if delivered:
                await self.conn.execute(
                    _WAKE_UPS_FIRED,
                    {
                        "ids": [due.item.id for due, _ in delivered],
                        "deliveries": [out.delivery_id for _, out in delivered],
                        "lates": [due.late.total_seconds() for due, _ in delivered],
                    },
                )
            if failed:
                await self.conn.execute(_WAKE_UP_FAILED, failed)

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
        async with self.conn.begin():
            if delivered:
                await self.conn.execute(
                    _SCHEDULES_FIRED,
                    {"ids": delivered, "nexts": [next_fire[i] for i in delivered]},
                )
            if failed:
                await self.conn.execute(_SCHEDULE_FAILED, failed)


class FiringStore(StoreBase):
    @contextlib.asynccontextmanager
    async def claiming(self) -> AsyncIterator[Claim]:
        """A firing batch's connection; its locks are released when the block ends."""
        async with session(self.db) as conn:
            yield Claim(conn)


# The outcomes of a firing batch: the delivered ones in one statement over arrays, the
# rare failures as one executemany.
_w, _s = t.wake_ups, t.schedules
_WAKE_UPS_FIRED = sa.text(
    """
UPDATE scheduler.wake_ups w
SET status = 'fired', fired_at = clock_timestamp(), updated_at = clock_timestamp(),
    delivery_id = b.delivery_id, late_seconds = b.late_seconds
FROM unnest(CAST(:ids AS uuid[]), CAST(:deliveries AS uuid[]), CAST(:lates AS float8[]))
    AS b (id, delivery_id, late_seconds)
WHERE w.id = b.id
"""
)
_WAKE_UP_FAILED = (
    _w.update()
    .where(_w.c.id == sa.bindparam("b_id"))
    .values(status="failed", error=sa.bindparam("b_error"), updated_at=sa.func.clock_timestamp())
)
_SCHEDULES_FIRED = sa.text(
    """
UPDATE scheduler.schedules s
SET next_fire_at = b.next_fire_at, last_fired_at = clock_timestamp(),
    fire_count = s.fire_count + 1, last_error = NULL
FROM unnest(CAST(:ids AS uuid[]), CAST(:nexts AS timestamptz[])) AS b (id, next_fire_at)
WHERE s.id = b.id
"""
)
_SCHEDULE_FAILED = (
    _s.update()
    .where(_s.c.id == sa.bindparam("b_id"))
    .values(next_fire_at=sa.bindparam("b_next"), last_error=sa.bindparam("b_error"))
)
