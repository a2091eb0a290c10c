"""Output files: linking uploaded blobs to a call, and their metadata (F8)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg

from agentworks.core.errors import (
    Busy,
    InvalidArgument,
    Reason,
)
from agentworks_functions.blobs import Blob
from agentworks_functions.models import (
    OPEN_STATUSES,
    FileInfo,
)
from agentworks_functions.store.base import FunctionsStoreBase, Q, notify
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
        async with self.db.raw(transaction=True) as pg:
            row = await self._lock_execution(pg, call_id, runtime)
            if row.status not in OPEN_STATUSES:
                raise call_ended(call_id, row.status)
            if target_quota:
                await self._check_target_quota(pg, row, name, blob.size, target_quota)
            old = await Q.value(pg, "file_blob", {"call_id": row.id, "name": name})
            if old is None:
                count = await Q.value(pg, "file_count", {"call_id": row.id})
                if count >= max_files:
                    raise InvalidArgument(
                        f"call {call_id} already has {count} files, the limit is {max_files}; "
                        "put results in fewer files (an archive, for instance)",
                        reason=Reason.STORED_LIMIT,
                        metadata={"call_id": call_id, "counted": "files", "limit": str(max_files)},
                    )
            await Q.execute(pg, "complete_blob", {"blob_id": blob.id})
            info = await Q.one(
                pg,
                "put_file",
                {
                    "call_id": row.id,
                    "name": name,
                    "blob_id": blob.id,
                    "size": blob.size,
                    "media_type": media_type,
                    "sha256": blob.sha256,
                    "is_text": is_text,
                },
            )
            if old is not None:
                await Q.execute(pg, "delete_blob", {"blob_id": old})
            await Q.execute(pg, "call_changed", {"call_id": row.id})
            await notify(pg, CALL_CHANNEL, str(row.id))
        return _file(info)

    async def file_info(self, call_id: str, name: str) -> FileInfo | None:
        params = {"call_id": _uuid(call_id, "call"), "name": name}
        async with self.db.raw() as pg:
            row = await Q.one(pg, "file_info", params)
        return _file(row) if row else None

    async def file_count(self, call_id: str) -> int:
        async with self.db.raw() as pg:
            count: int = await Q.value(pg, "file_count", {"call_id": _uuid(call_id, "call")})
        return count

    async def purge_unlinked_blobs(self, older_than: timedelta) -> int:
        return await self.blobs.purge_unlinked(older_than)

    async def _check_target_quota(
        self, pg: psycopg.AsyncConnection, call: Any, name: str, size: int, quota: int
    ) -> None:
        """Refuse a file that would take the target's stored files past `quota` bytes."""
        key = {"kind": call.target_kind, "name": call.target_name}
        await Q.execute(pg, "lock_target_files", key)
        used = await Q.value(
            pg, "target_file_bytes", {**key, "call_id": call.id, "file_name": name}
        )
        if used + size > quota:
            raise Busy(
                f"file {name!r} ({size} bytes) would take the output files of "
                f"{call.target_kind}:{call.target_name} to {used + size} bytes, past its quota "
                f"of {quota} bytes (FUNCTIONS_TARGET_FILE_QUOTA_BYTES); nothing was stored — "
                "the target's owner can ask the operator for more, or its old calls' files "
                "must go",
                reason=Reason.STORED_LIMIT,
                metadata={
                    "target": f"{call.target_kind}:{call.target_name}",
                    "counted": "file_bytes",
                    "limit": str(quota),
                    "setting": "FUNCTIONS_TARGET_FILE_QUOTA_BYTES",
                },
            )
