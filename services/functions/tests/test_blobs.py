"""The chunked blob storage behind output files (F8, T8), on a real PostgreSQL: its named
queries (queries.sql) write chunk by chunk, read byte ranges back exactly, and purge only
blobs never linked to a file."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import psycopg

from agentworks.server.db import Database
from agentworks_functions.blobs import CHUNK_BYTES, PostgresBlobStore


async def test_a_blob_is_stored_in_chunks_read_back_by_range_and_purged_unless_linked_F8_T8(
    database_url,
):
    """F8, T8: bytes written in uneven pieces land as CHUNK_BYTES chunks; any byte range
    reads back exactly; an aborted blob is gone; only unlinked blobs are purged."""
    data = bytes(range(256)) * ((2 * CHUNK_BYTES + 1000) // 256 + 1)
    db = Database(database_url, pool_size=1)
    await db.start()
    try:
        blobs = PostgresBlobStore(db)
        writer = await blobs.writer()
        for start in range(0, len(data), 70_000):
            await writer.write(data[start : start + 70_000])
        blob = await writer.close()
        assert (blob.size, blob.sha256) == (len(data), hashlib.sha256(data).hexdigest())
        for offset, length in [(0, 10), (CHUNK_BYTES - 5, 10), (1, len(data)), (len(data), 5)]:
            assert await blobs.read(blob.id, offset, length) == data[offset : offset + length]
        assert await blobs.read(blob.id, 0, 0) == b""

        aborted = await blobs.writer()
        await aborted.write(b"x" * (CHUNK_BYTES + 1))  # one chunk stored, then dropped
        await aborted.abort()
        aborted_id = str(aborted._id)

        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            count = "SELECT count(*) FROM functions.blob_chunks WHERE blob_id = %s"
            assert (await (await conn.execute(count, (blob.id,))).fetchone()) == (3,)
            linked = await blobs.writer()
            await linked.write(b"kept")
            kept = await linked.close()
            await conn.execute(
                "UPDATE functions.blobs SET complete = true WHERE id = %s", (kept.id,)
            )
            # Not yet old enough: nothing goes.
            assert await blobs.purge_unlinked(timedelta(hours=1)) == 0
            assert await blobs.purge_unlinked(timedelta(0)) >= 1  # the unlinked `blob`
            left = await conn.execute(
                "SELECT id::text FROM functions.blobs WHERE id = ANY(%s)",
                ([blob.id, aborted_id, kept.id],),
            )
            assert [r[0] for r in await left.fetchall()] == [kept.id]
    finally:
        await db.close()
