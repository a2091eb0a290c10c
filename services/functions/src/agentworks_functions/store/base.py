"""What every part of FunctionsStore shares."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from agentworks.core.errors import (
    NotFound,
)
from agentworks.server.db import Database, notify
from agentworks_functions import tables as t
from agentworks_functions.blobs import BlobStore, PostgresBlobStore
from agentworks_functions.models import (
    INTERRUPTED,
    OPEN_STATUSES,
    Ending,
)
from agentworks_functions.store.rows import (
    CALL_CHANNEL,
    NOTICE_CHANNEL,
    _call,
    _uuid,
    call_not_found,
    ended_key,
)


class FunctionsStoreBase:
    """What the parts of `FunctionsStore` share."""

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

    async def _lock_call(self, conn: AsyncConnection, call_id: str) -> Any:
        call_uuid = _uuid(call_id, "call")
        row = (
            await conn.execute(
                sa.select(t.calls).where(t.calls.c.id == call_uuid).with_for_update()
            )
        ).one_or_none()
        if row is None:
            raise call_not_found(call_id)
        return row

    async def _lock_execution(self, conn: AsyncConnection, call_id: str, runtime: str) -> Any:
        """The call row, locked, if this runtime holds its execution."""
        try:
            row = await self._lock_call(conn, call_id)
        except NotFound:
            row = None  # the same answer as for someone else's call (A3)
        if row is None or row.runtime != runtime:
            raise NotFound(f"execution {call_id!r} not found: claim it with ClaimExecution first")
        return row

    async def _end(
        self, conn: AsyncConnection, rows: Sequence[Any], ending: Ending, notice_text: Callable
    ) -> None:
        """End open calls once (guarded by status) and queue their completion notices."""
        c = t.calls
        ids = [r.id for r in rows]
        ended = (
            await conn.execute(
                c.update()
                .where(c.c.id.in_(ids), c.c.status.in_(OPEN_STATUSES))
                .values(
                    status=ending.status,
                    answer=ending.answer,
                    has_result=ending.has_result,
                    result=ending.result,
                    error=ending.error,
                    ended_at=sa.func.now(),
                    version=c.c.version + 1,
                )
                .returning(*c.c)
            )
        ).all()
        for row in ended:
            if row.notify_conversation_id is not None:
                call = _call(row)
                await conn.execute(
                    pg_insert(t.notices)
                    .values(
                        call_id=row.id,
                        conversation_id=row.notify_conversation_id,
                        text=notice_text(call),
                        attributes={
                            "call_id": str(row.id),
                            "status": row.status,
                            "target": f"{row.target_kind}:{row.target_name}",
                            "function": row.function,
                            "start_receipt": row.starts_work and row.status == "completed",
                        },
                    )
                    .on_conflict_do_nothing()
                )
                await conn.execute(notify(NOTICE_CHANNEL, "due"))
            await conn.execute(notify(CALL_CHANNEL, str(row.id)))
            await conn.execute(notify(CALL_CHANNEL, ended_key(row.id)))

    async def _interrupt(
        self,
        conditions: list[sa.ColumnElement[bool]],
        error: str,
        notice_text: Callable,
        batch: int,
        status: str = INTERRUPTED,
    ) -> int:
        c = t.calls
        async with self.db.transaction() as conn:
            rows = (
                await conn.execute(
                    sa.select(c.c.id)
                    .where(c.c.status.in_(OPEN_STATUSES), *conditions)
                    .limit(batch)
                    .with_for_update(skip_locked=True)
                )
            ).all()
            if rows:
                await self._end(conn, rows, Ending(status, error=error), notice_text)
        return len(rows)
