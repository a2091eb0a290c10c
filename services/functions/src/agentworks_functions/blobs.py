"""File bytes behind a small interface, stored chunked in PostgreSQL (an object store can
replace it: implement `BlobStore` and pass it to `FunctionsStore`).

A blob is written chunk by chunk while an upload streams in, each chunk in its own
statement (autocommit), so no transaction stays open for the length of an upload. It
becomes visible only when the store links it to a file (marking it complete in that
transaction); the sweeper deletes blobs that were never linked. Its statements are named
queries of queries.sql, run on `Database.raw()` as the store's are.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from agentworks.server.db import Database
from agentworks.server.queries import Queries

# The blob statements of ../queries.sql (the store loads the same file; blobs.py is
# imported by the store, so it cannot take the store's `Q`).
Q = Queries.load("agentworks_functions")

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
        async with self._db.raw() as pg:
            await Q.execute(
                pg, "add_blob_chunk", {"blob_id": self._id, "seq": self._seq, "data": data}
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
        async with self._db.raw() as pg:
            await Q.execute(
                pg, "close_blob", {"blob_id": self._id, "size": self._size, "sha256": digest}
            )
        return Blob(str(self._id), self._size, digest)

    async def abort(self) -> None:
        async with self._db.raw() as pg:
            await Q.execute(pg, "delete_blob", {"blob_id": self._id})


class PostgresBlobStore:
    """Blobs as rows of `functions.blob_chunks`."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def writer(self) -> PostgresBlobWriter:
        blob_id = uuid.uuid4()
        async with self.db.raw() as pg:
            await Q.execute(pg, "new_blob", {"blob_id": blob_id})
        return PostgresBlobWriter(self.db, blob_id)

    async def read(self, blob_id: str, offset: int, length: int) -> bytes:
        if length <= 0:
            return b""
        first, last = offset // CHUNK_BYTES, (offset + length - 1) // CHUNK_BYTES
        async with self.db.raw() as pg:
            rows = await Q.all(
                pg, "blob_chunks", {"blob_id": blob_id, "first": first, "last": last}
            )
        data = b"".join(bytes(r.data) for r in rows)
        start = offset - first * CHUNK_BYTES
        return data[start : start + length]

    async def purge_unlinked(self, older_than: timedelta) -> int:
        async with self.db.raw() as pg:
            return await Q.execute(pg, "purge_unlinked_blobs", {"older_than": older_than})
