"""What every part of FunctionsStore shares: the database, the named queries, and
locking and ending calls."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from agentworks.core.errors import NotFound
from agentworks.server.db import Database
from agentworks.server.queries import Queries
from agentworks_functions.blobs import BlobStore, PostgresBlobStore
from agentworks_functions.models import INTERRUPTED, Ending
from agentworks_functions.store.rows import (
    CALL_CHANNEL,
    NOTICE_CHANNEL,
    _call,
    _uuid,
    call_not_found,
    ended_key,
)

# Every statement of the store, by name, from ../queries.sql (read once, at import).
Q = Queries.load("agentworks_functions")


async def notify(pg: psycopg.AsyncConnection, channel: str, payload: str) -> None:
    """A notification, sent when the surrounding transaction commits."""
    await Q.execute(pg, "notify", {"channel": channel, "payload": payload})


class FunctionsStoreBase:
    """What the parts of `FunctionsStore` share.

    Every statement is a named query of queries.sql, run on a `Database.raw()`
    connection: one statement in autocommit, or one short transaction
    (`raw(transaction=True)`) for a change that locks the call's row first.
    """

    def __init__(
        self,
        db: Database,
        *,
        default_running_limit: int,
        caller_share_percent: int = 100,
        blobs: BlobStore | None = None,
    ) -> None:
        self.db = db
        self.default_running_limit = default_running_limit
        self.caller_share_percent = caller_share_percent
        self.blobs: BlobStore = blobs or PostgresBlobStore(db)

    async def _lock_call(self, pg: psycopg.AsyncConnection, call_id: str) -> Any:
        call_uuid = _uuid(call_id, "call")
        row = await Q.one(pg, "lock_call", {"call_id": call_uuid})
        if row is None:
            raise call_not_found(call_id)
        return row

    async def _lock_execution(self, pg: psycopg.AsyncConnection, call_id: str, runtime: str) -> Any:
        """The call row, locked, if this runtime holds its execution."""
        try:
            row = await self._lock_call(pg, call_id)
        except NotFound:
            row = None  # the same answer as for someone else's call (A3)
        if row is None or row.runtime != runtime:
            raise NotFound(f"execution {call_id!r} not found: claim it with ClaimExecution first")
        return row

    async def _end(
        self,
        pg: psycopg.AsyncConnection,
        rows: Sequence[Any],
        ending: Ending,
        notice_text: Callable,
    ) -> None:
        """End open calls once (guarded by status) and queue their completion notices."""
        if len(rows) > 1:  # a batch: its callers' end counters in one order (no deadlock)
            await Q.execute(pg, "lock_caller_ends", {"ids": [r.id for r in rows]})
        ended = await Q.all(
            pg,
            "end_calls",
            {
                "ids": [r.id for r in rows],
                "status": ending.status,
                "answer": ending.answer,
                "has_result": ending.has_result,
                "result": None if ending.result is None else Jsonb(ending.result),
                "error": ending.error,
            },
        )
        for row in ended:
            if row.notify_conversation_id is not None:
                call = _call(row)
                attributes = {
                    "call_id": str(row.id),
                    "status": row.status,
                    "target": f"{row.target_kind}:{row.target_name}",
                    "function": row.function,
                    "start_receipt": row.starts_work and row.status == "completed",
                }
                await Q.execute(
                    pg,
                    "queue_notice",
                    {
                        "call_id": row.id,
                        "conversation_id": row.notify_conversation_id,
                        "text": notice_text(call),
                        "attributes": Jsonb(attributes),
                    },
                )
                await notify(pg, NOTICE_CHANNEL, "due")
            await notify(pg, CALL_CHANNEL, str(row.id))
            await notify(pg, CALL_CHANNEL, ended_key(row.id))

    async def _interrupt(
        self,
        query: str,
        params: dict[str, Any],
        error: str,
        notice_text: Callable,
        status: str = INTERRUPTED,
    ) -> int:
        """End the open calls `query` selects and locks (a batch), with `error`."""
        async with self.db.raw(transaction=True) as pg:
            rows = await Q.all(pg, query, params)
            if rows:
                await self._end(pg, rows, Ending(status, error=error), notice_text)
        return len(rows)
