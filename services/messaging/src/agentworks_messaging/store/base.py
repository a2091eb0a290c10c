"""What every part of `MessagingStore` shares: the database and the named queries."""

from __future__ import annotations

from agentworks.server.db import Database
from agentworks.server.queries import Queries

# Every statement of the store, by name, from ../queries.sql (read once, at import).
Q = Queries.load("agentworks_messaging")


class MessagingStoreBase:
    """The database of one `MessagingStore`.

    Every statement is a named query of queries.sql, run on a `Database.raw()`
    connection: one statement in autocommit (most use cases are one statement of
    data-modifying CTEs), or one short transaction (`raw(transaction=True)`) where a use
    case reads, locks and writes in several. The hot ones (send, reply, read, claim,
    enqueue) are marked `(prepared)` there (docs/architecture.md, "Data").
    """

    def __init__(self, db: Database) -> None:
        self.db = db
