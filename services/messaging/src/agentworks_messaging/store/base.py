"""The store's connection and what its parts share."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from psycopg.rows import namedtuple_row

from agentworks.server.batching import Batcher
from agentworks.server.db import Database
from agentworks_messaging.store.sql import _SEND_NEW


class MessagingStoreBase:
    """What the parts of `MessagingStore` share."""

    def __init__(self, db: Database) -> None:
        self.db = db
        # Concurrent new-conversation sends share one statement and one commit. One batch
        # in flight at a time: the sends that arrive meanwhile ride together in the next
        # (group commit). With 4 in flight, batches at 32 senders averaged 1.2 sends and
        # cost twice the CPU per send of one in flight (about 3 sends per batch).
        self._new_sends: Batcher[dict[str, Any], Any] = Batcher(self._send_new_batch, concurrency=1)

    async def _send_new_batch(self, sends: Sequence[dict[str, Any]]) -> list[Any]:
        """Store many new-conversation sends in one statement (see `Batcher`).

        Each send keeps its own checks and outcome (row `n` answers send `n`); they share
        the statement, its commit and the round trip.
        """
        async with self.db.raw() as pg, pg.cursor(row_factory=namedtuple_row) as cur:
            await cur.execute(_SEND_NEW, {"sends": json.dumps(sends)})
            return await cur.fetchall()
