"""Output files: linking uploaded blobs to a call, and their metadata (F8)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert

from agentworks.core.errors import (
    Busy,
    InvalidArgument,
)
from agentworks.server.db import notify
from agentworks_functions import tables as t
from agentworks_functions.blobs import Blob
from agentworks_functions.models import (
    OPEN_STATUSES,
    FileInfo,
)
from agentworks_functions.store.base import FunctionsStoreBase
from agentworks_functions.store.rows import CALL_CHANNEL, _file, _uuid, call_ended


class FileQueries(FunctionsStoreBase):
    async def link_file(
        self,
        call_id: str,
        runtime: str,
        *,
        name: str,
        blob: Blob,
        media_type: str,
        is_text: bool,
        max_files: int,
        target_quota: int = 0,
    ) -> FileInfo:
        """Make an uploaded blob the call's file `name`, replacing an earlier one (F8).

        With `target_quota`, the target's files (of all its calls) may take at most that
        many bytes (T8); the target's row is locked meanwhile, so two uploads of one target
        cannot both pass it."""
        f = t.files
        async with self.db.transaction() as conn:
            row = await self._lock_execution(conn, call_id, runtime)
            if row.status not in OPEN_STATUSES:
                raise call_ended(call_id, row.status)
            if target_quota:
                await self._check_target_quota(conn, row, name, blob.size, target_quota)
            old = (
                await conn.execute(
                    sa.select(f.c.blob_id).where(f.c.call_id == row.id, f.c.name == name)
                )
            ).scalar_one_or_none()
            if old is None:
                count = (
                    await conn.execute(
                        sa.select(sa.func.count()).select_from(f).where(f.c.call_id == row.id)
                    )
                ).scalar_one()
                if count >= max_files:
                    raise InvalidArgument(
                        f"call {call_id} already has {count} files, the limit is {max_files}; "
                        "put results in fewer files (an archive, for instance)"
                    )
            await conn.execute(
                t.blobs.update().where(t.blobs.c.id == blob.id).values(complete=True)
            )
            values = {
                "blob_id": blob.id,
                "size": blob.size,
                "media_type": media_type,
                "sha256": blob.sha256,
                "is_text": is_text,
            }
            info = (
                await conn.execute(
                    pg_insert(f)
                    .values(call_id=row.id, name=name, **values)
                    .on_conflict_do_update(
                        index_elements=["call_id", "name"],
                        set_={**values, "created_at": sa.func.now()},
                    )
                    .returning(*f.c)
                )
            ).one()
            if old is not None:
                await conn.execute(t.blobs.delete().where(t.blobs.c.id == old))
            await conn.execute(
                t.calls.update().where(t.calls.c.id == row.id).values(version=t.calls.c.version + 1)
            )
            await conn.execute(notify(CALL_CHANNEL, str(row.id)))
        return _file(info)

    async def file_info(self, call_id: str, name: str) -> FileInfo | None:
        f = t.files
        call_uuid = _uuid(call_id, "call")
        async with self.db.autocommit() as conn:
            row = (
                await conn.execute(sa.select(f).where(f.c.call_id == call_uuid, f.c.name == name))
            ).one_or_none()
        return _file(row) if row else None

    async def file_count(self, call_id: str) -> int:
        f = t.files
        async with self.db.autocommit() as conn:
            return (
                await conn.execute(
                    sa.select(sa.func.count())
                    .select_from(f)
                    .where(f.c.call_id == _uuid(call_id, "call"))
                )
            ).scalar_one()

    async def purge_unlinked_blobs(self, older_than: timedelta) -> int:
        return await self.blobs.purge_unlinked(older_than)

    async def _check_target_quota(
        self, conn: Any, call: Any, name: str, size: int, quota: int
    ) -> None:
        """Refuse a file that would take the target's stored files past `quota` bytes."""
        c, f, tg = t.calls, t.files, t.targets
        await conn.execute(
            sa.select(tg.c.kind)
            .where(tg.c.kind == call.target_kind, tg.c.name == call.target_name)
            .with_for_update(key_share=True)
        )
        used = (
            await conn.execute(
                sa.select(sa.func.coalesce(sa.func.sum(f.c.size), 0))
                .select_from(f.join(c, c.c.id == f.c.call_id))
                .where(
                    c.c.target_kind == call.target_kind,
                    c.c.target_name == call.target_name,
                    sa.not_(sa.and_(f.c.call_id == call.id, f.c.name == name)),
                )
            )
        ).scalar_one()
        if used + size > quota:
            raise Busy(
                f"file {name!r} ({size} bytes) would take the output files of "
                f"{call.target_kind}:{call.target_name} to {used + size} bytes, past its quota "
                f"of {quota} bytes (FUNCTIONS_TARGET_FILE_QUOTA_BYTES); nothing was stored — "
                "the target's owner can ask the operator for more, or its old calls' files "
                "must go"
            )
