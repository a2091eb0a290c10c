"""File bytes behind a small interface, stored chunked in PostgreSQL (an object store can
replace it: implement `BlobStore` and pass it to `FunctionsStore`).

A blob is written chunk by chunk while an upload streams in, each chunk in its own short
transaction, so no transaction stays open for the length of an upload. It becomes visible
only when the store links it to a file (marking it complete in that transaction); the
sweeper deletes blobs that were never linked.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

import sqlalchemy as sa

from agentworks.server.db import Database
from agentworks_functions import tables as t

# Every chunk but a blob's last has exactly this size, so a byte range maps to chunks.
CHUNK_BYTES = 256 * 1024


@dataclass(frozen=True)
class Blob:
    id: str
    size: int
    sha256: str


class BlobWriter(Protocol):
    async def write(self, data: bytes) -> None: ...
    async def close(self) -> Blob: ...
    async def abort(self) -> None: ...


class BlobStore(Protocol):
    """Where file bytes live."""

    async def writer(self) -> BlobWriter: ...
    async def read(self, blob_id: str, offset: int, length: int) -> bytes: ...
    async def purge_unlinked(self, older_than: timedelta) -> int: ...


class PostgresBlobWriter:
    """Buffers to CHUNK_BYTES and stores each full chunk as one row."""

    def __init__(self, db: Database, blob_id: uuid.UUID) -> None:
        self._db = db
        self._id = blob_id
        self._buffer = bytearray()
        self._seq = 0
        self._size = 0
        self._sha = hashlib.sha256()

    async def _flush(self, data: bytes) -> None:
        async with self._db.transaction() as conn:
            await conn.execute(
                t.blob_chunks.insert().values(blob_id=self._id, seq=self._seq, data=data)
            )
        self._seq += 1

    async def write(self, data: bytes) -> None:
        self._buffer += data
        self._size += len(data)
        self._sha.update(data)
        while len(self._buffer) >= CHUNK_BYTES:
            chunk = bytes(self._buffer[:CHUNK_BYTES])
            del self._buffer[:CHUNK_BYTES]
            await self._flush(chunk)

    async def close(self) -> Blob:
        if self._buffer or self._seq == 0:
            await self._flush(bytes(self._buffer))
            self._buffer.clear()
        digest = self._sha.hexdigest()
        async with self._db.transaction() as conn:
            await conn.execute(
                t.blobs.update()
                .where(t.blobs.c.id == self._id)
                .values(size=self._size, sha256=digest)
            )
        return Blob(str(self._id), self._size, digest)

    async def abort(self) -> None:
        async with self._db.transaction() as conn:
            await conn.execute(t.blobs.delete().where(t.blobs.c.id == self._id))


class PostgresBlobStore:
    """Blobs as rows of `functions.blob_chunks`."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def writer(self) -> PostgresBlobWriter:
        blob_id = uuid.uuid4()
        async with self.db.transaction() as conn:
            await conn.execute(t.blobs.insert().values(id=blob_id))
        return PostgresBlobWriter(self.db, blob_id)

    async def read(self, blob_id: str, offset: int, length: int) -> bytes:
        if length <= 0:
            return b""
        first, last = offset // CHUNK_BYTES, (offset + length - 1) // CHUNK_BYTES
        c = t.blob_chunks
        async with self.db.transaction() as conn:
            rows = (
                await conn.execute(
                    sa.select(c.c.seq, c.c.data)
                    .where(c.c.blob_id == blob_id, c.c.seq >= first, c.c.seq <= last)
                    .order_by(c.c.seq)
                )
            ).all()
        data = b"".join(bytes(r.data) for r in rows)
        start = offset - first * CHUNK_BYTES
        return data[start : start + length]

    async def purge_unlinked(self, older_than: timedelta) -> int:
        async with self.db.transaction() as conn:
            result = await conn.execute(
                t.blobs.delete().where(
                    t.blobs.c.complete.is_(False),
                    t.blobs.c.created_at < sa.func.now() - older_than,
                )
            )
        return result.rowcount or 0
