"""PostgreSQL access: the async engine and its one pool, and per-service migrations.

One `Database` per process owns one pool of at most `pool_size` connections
(`agentworks.server.pool.SharedPool`, SQLAlchemy's pool class for its engine, which only
the tracing instrumentation hooks) and one `Listener` connection
(`agentworks.server.listener`). Stores run their named queries (`agentworks.server.queries`,
each service's `queries.sql`) on `Database.raw()`, which takes plain psycopg connections
from that pool, one statement or one transaction at a time; a full pool or an outage is
`Unavailable`. SQLAlchemy only declares the tables (each service's tables.py, checked
against the migrated schema).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.resources
import re
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Any, cast

import psycopg
import structlog
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from agentworks.server.dburl import (
    CONNECT_TIMEOUT_SECONDS,
    START_CONNECT_TIMEOUT_SECONDS,
    connect_timeout,
    describe_database,
    libpq_url,
    sqlalchemy_url,
    with_database,
)
from agentworks.server.listener import Listener, Waiter, sa_quote_listen
from agentworks.server.pool import SharedPool
from agentworks.server.queries import Queries

__all__ = [
    "CONNECT_TIMEOUT_SECONDS",
    "START_CONNECT_TIMEOUT_SECONDS",
    "Database",
    "Listener",
    "Migration",
    "Queries",
    "Waiter",
    "connect_timeout",
    "describe_database",
    "libpq_url",
    "load_migrations",
    "migrate",
    "sa_quote_listen",
    "sqlalchemy_url",
    "with_database",
]

log = structlog.get_logger("agentworks.db")


class Database:
    """The engine, its one pool and the NOTIFY listener of one service process.

    At most `pool_size` connections besides the listener's: SQLAlchemy's checkouts and
    the hot statements' (`raw()`) share them (`SharedPool`).
    """

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 10,
        schema: str | None = None,
        pool_timeout: float = 10.0,
    ) -> None:
        self.url = url
        self.schema = schema
        self.engine: AsyncEngine = create_async_engine(
            sqlalchemy_url(url),
            poolclass=SharedPool,
            pool_size=pool_size,
            pool_timeout=pool_timeout,  # then a checkout fails: "database busy"
            pool_recycle=1800,
            # Never server-side prepared: each statement is planned with its parameter
            # values. A prepared statement's generic plan cannot use a partial index
            # whose predicate a parameter must satisfy (`status = $1` for an index
            # `WHERE status = 'pending'`), and PostgreSQL falls back to scanning the
            # whole table: the scheduler's due-timer claim cost grew with every fired
            # timer. The hot statements (`raw()`) write such constants into their text,
            # and the pool lets psycopg prepare them on the connections it hands to
            # `raw()`.
            connect_args={
                "prepare_threshold": None,
                **connect_timeout(url, CONNECT_TIMEOUT_SECONDS),
            },
        )
        self.pool = cast(SharedPool, self.engine.sync_engine.pool)
        self.listener = Listener(url)
        self.tracer: Any = None  # set by tracing.trace_database

    async def start(self, channels: Iterable[str] = ()) -> None:
        channels = list(channels)
        if channels:
            await self.listener.start(channels)

    async def close(self) -> None:
        await self.listener.close()
        await self.pool.close()

    @contextlib.asynccontextmanager
    async def raw(self, *, transaction: bool = False) -> AsyncIterator[psycopg.AsyncConnection]:
        """A plain psycopg connection in autocommit, for a store's named queries.

        Taken from the engine's pool but skipping SQLAlchemy's connection, statement and
        result layers: about a third of the CPU of a short statement through the engine
        (measured in bench/). With `transaction` the block runs in one transaction,
        committed on success. Outages become `Unavailable`; psycopg prepares a hot
        statement after its fifth use on a connection, so it is planned once per
        connection (`agentworks.server.queries`).
        """
        async with self.pool.raw_connection() as conn:
            if self.tracer is not None:
                with self.tracer.start_as_current_span(
                    "postgresql", attributes={"db.system": "postgresql"}
                ):
                    if transaction:
                        async with conn.transaction():
                            yield conn
                    else:
                        yield conn
            elif transaction:
                async with conn.transaction():
                    yield conn
            else:
                yield conn


# ---------------------------------------------------------------------------- migrations


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def load_migrations(package: str) -> list[Migration]:
    """Versioned SQL files `NNNN_name.sql` shipped in `package` (a `migrations` folder)."""
    found = []
    for entry in importlib.resources.files(package).iterdir():
        match = re.match(r"^(\d{4})_(\w+)\.sql$", entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text()))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise RuntimeError(f"migrations in {package} are not numbered 1..n: {versions}")
    return found


def migrate(
    url: str, schema: str, package: str, *, timeout: float = START_CONNECT_TIMEOUT_SECONDS
) -> list[int]:
    """Apply the pending migrations of one service's schema; returns the versions applied.

    Safe to run from several replicas at once: an advisory lock serializes them. A
    database that does not answer fails the connection after `timeout` seconds
    (`psycopg.OperationalError`) instead of hanging the start.
    """
    migrations = load_migrations(package)
    applied_now = []
    with psycopg.connect(libpq_url(url), autocommit=True, **connect_timeout(url, timeout)) as conn:
        conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (f"migrate:{schema}",))
        try:
            # Only when missing: CREATE SCHEMA IF NOT EXISTS needs CREATE on the database
            # even when the schema exists, and a role that owns just its schema has not.
            if not conn.execute(
                "SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)
            ).fetchone():
                conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
            conn.execute(
                f'CREATE TABLE IF NOT EXISTS "{schema}".schema_migrations ('
                " version integer PRIMARY KEY, name text NOT NULL, checksum text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
            rows = conn.execute(
                f'SELECT version, checksum FROM "{schema}".schema_migrations'
            ).fetchall()
            done = dict(rows)
            for m in migrations:
                if m.version in done:
                    if done[m.version] != m.checksum:
                        raise RuntimeError(
                            f"migration {schema} {m.version:04d}_{m.name} was changed after "
                            "it was applied; add a new migration instead"
                        )
                    continue
                with conn.transaction():
                    conn.execute(f'SET LOCAL search_path TO "{schema}", public')
                    conn.execute(m.sql)
                    conn.execute(
                        f'INSERT INTO "{schema}".schema_migrations (version, name, checksum)'
                        " VALUES (%s, %s, %s)",
                        (m.version, m.name, m.checksum),
                    )
                applied_now.append(m.version)
                log.info("migration.applied", schema=schema, version=m.version, name=m.name)
        finally:
            conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (f"migrate:{schema}",))
    return applied_now
