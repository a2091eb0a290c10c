"""The completion-notice outbox (F13): claiming due notices and recording outcomes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import psycopg

from agentworks_functions.models import (
    Delivered,
    GaveUp,
    Notice,
    NoticeOutcome,
)
from agentworks_functions.store.base import FunctionsStoreBase, Q

# The first key of the notices' advisory locks (the second: the call id, hashed).
NOTICE_LOCK = 0x0F13


class NoticeQueries(FunctionsStoreBase):
    async def deliver_notices(
        self,
        send: Callable[[list[Notice]], Awaitable[list[NoticeOutcome]]],
        *,
        retry_after: timedelta,
        batch: int = 100,
    ) -> int:
        """Send due completion notices, a batch at a time; `send` says what became of
        each: delivered, retry later, or gave up (never sent again).

        No transaction is open while they are sent. One statement claims a batch and takes
        a session advisory lock on each notice, on a connection held until the outcomes
        are recorded (one statement more): another replica skips locked notices, so it
        never sends one at the same time. If this process dies mid-send, its connection
        closes, the locks go with it and the notices are due at once; sent again,
        messaging's idempotency key drops the repeats.
        """
        async with self.db.raw() as pg:
            try:
                rows = await Q.all(pg, "claim_notices", {"batch": batch, "lock": NOTICE_LOCK})
                if not rows:
                    return 0
                notices = [Notice(str(r[0]), str(r[1]), r[2], r[3], r[4]) for r in rows]
                outcomes = await send(notices)
                await Q.execute(pg, "notices_attempted", _attempted(rows, outcomes, retry_after))
                return len(rows)
            finally:
                await _release_locks(pg)


async def _release_locks(pg: psycopg.AsyncConnection[Any]) -> None:
    """Release the notices' session advisory locks before the connection goes back to
    the pool; when that fails or is cancelled (the service stopping), close the
    connection instead: its locks end with its session.

    Never in a shielded task of its own: the pool would close the connection under it
    when the caller is cancelled, and the task's error would be logged as never
    retrieved ("consuming input failed: connection pointer is NULL").
    """
    try:
        await Q.execute(pg, "unlock_notices")
    except BaseException as exc:
        await pg.close()
        if not isinstance(exc, Exception):
            raise


def _attempted(
    rows: list[Any], outcomes: list[NoticeOutcome], retry_after: timedelta
) -> dict[str, list[Any]]:
    """The parameters of `notices_attempted`: every outcome in one statement, delivered,
    failed for good, or due again after a backoff that doubles per attempt (capped at
    60 x retry_after)."""
    pairs = list(zip(rows, outcomes, strict=True))
    failures = [None if isinstance(o, Delivered) else o for _, o in pairs]
    return {
        "ids": [r[0] for r, _ in pairs],
        "delivered": [isinstance(o, Delivered) for _, o in pairs],
        "gave_up": [isinstance(o, GaveUp) for _, o in pairs],
        "codes": [f.code if f else None for f in failures],
        "reasons": [f.reason or None if f else None for f in failures],
        "messages": [f.message if f else None for f in failures],
        "delays": [(retry_after * min(2 ** r[4], 60)).total_seconds() for r, _ in pairs],
    }
