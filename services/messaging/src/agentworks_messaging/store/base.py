"""What every part of `MessagingStore` shares: the database."""

from __future__ import annotations

from agentworks.server.db import Database


class MessagingStoreBase:
    """The database of one `MessagingStore`.

    Every query is a named `fixed_sql` constant in the module of its use case. The hot
    ones (send, reply, read, enqueue) run on `Database.raw()`, skipping SQLAlchemy
    (docs/architecture.md, "Hot paths skip SQLAlchemy"); the others run in a short
    transaction on the engine (`Database.transaction()`, `exec_driver_sql`).
    """

    def __init__(self, db: Database) -> None:
        self.db = db
