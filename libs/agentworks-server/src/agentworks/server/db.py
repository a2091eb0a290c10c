"""PostgreSQL access: the async engine, per-service migrations, and LISTEN/NOTIFY.

One `Database` per process owns the SQLAlchemy engine (psycopg 3) on one pool of at most
`pool_size` connections (`agentworks.server.pool.SharedPool`), and one `Listener`
connection. Stores run short transactions through `Database.transaction()`, and their
hot paths as fixed SQL through `Database.raw()`, which takes plain psycopg connections
from the same pool; driver errors that mean "the database is not reachable" become
`Unavailable`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib.resources
import re
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, cast

import psycopg
import sqlalchemy as sa
import structlog
from psycopg.rows import namedtuple_row
from sqlalchemy import exc as sa_exc
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from agentworks.core.errors import Unavailable
from agentworks.server.pool import SharedPool

log = structlog.get_logger("agentworks.db")


def sqlalchemy_url(url: str) -> str:
    """`postgresql://...` as SQLAlchemy's psycopg 3 URL."""
    return re.sub(r"^postgres(?:ql)?(?:\+\w+)?://", "postgresql+psycopg://", url)


def libpq_url(url: str) -> str:
    """A SQLAlchemy URL as plain libpq/psycopg conninfo."""
    return re.sub(r"^postgres(?:ql)?(?:\+\w+)?://", "postgresql://", url)


def is_disconnect(exc: BaseException) -> bool:
    if isinstance(exc, sa_exc.DBAPIError) and exc.connection_invalidated:
        return True
    orig = getattr(exc, "orig", exc)
    return isinstance(orig, psycopg.OperationalError | psycopg.errors.AdminShutdown) or (
        isinstance(exc, sa_exc.OperationalError | sa_exc.InterfaceError)
    )


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
        """A plain psycopg connection in autocommit, for a store's hot statements.

        Taken from the engine's pool but skipping SQLAlchemy's connection, statement and
        result layers: about a third of the CPU of a short statement through the engine
        (measured in bench/). With `transaction` the block runs in one transaction,
        committed on success. Outages become `Unavailable`; psycopg prepares a statement
        after its fifth use on a connection, so fixed SQL text is planned once per
        connection.
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

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncConnection]:
        """A connection in a transaction, committed on success; outages -> Unavailable."""
        with translate_outages():
            async with self.engine.begin() as conn:
                yield conn

    @contextlib.asynccontextmanager
    async def autocommit(self) -> AsyncIterator[AsyncConnection]:
        """A connection where each statement commits on its own.

        For reads and for use cases written as one statement (data-modifying CTEs are
        atomic): no BEGIN and COMMIT round trips.
        """
        with translate_outages():
            async with self.engine.connect() as conn:
                await conn.execution_options(isolation_level="AUTOCOMMIT")
                yield conn


# A database host that does not answer (rather than refusing) fails a request after this.
CONNECT_TIMEOUT_SECONDS = 5
# ... and a service's start (its migrations) after this; a `connect_timeout` in the URL
# wins over both.
START_CONNECT_TIMEOUT_SECONDS = 10


def connect_timeout(url: str, seconds: float) -> dict[str, Any]:
    """`{"connect_timeout": seconds}` unless the URL sets its own (psycopg's keyword
    arguments override the URL's parameters)."""
    try:
        if "connect_timeout" in psycopg.conninfo.conninfo_to_dict(libpq_url(url)):
            return {}
    except psycopg.ProgrammingError:
        pass  # the connection attempt reports it
    return {"connect_timeout": seconds}


def describe_database(url: str) -> str:
    """`user@host:port/dbname` of a database URL, for messages: never the password."""
    try:
        params = psycopg.conninfo.conninfo_to_dict(libpq_url(url))
    except psycopg.ProgrammingError:
        return "(a database URL that cannot be parsed)"
    user = f"{params['user']}@" if params.get("user") else ""
    host = str(params.get("host") or params.get("hostaddr") or "local socket")
    port = f":{params['port']}" if str(params.get("port") or "").strip(",") else ""
    dbname = f"/{params['dbname']}" if params.get("dbname") else ""
    return f"{user}{host}{port}{dbname}"


@contextlib.contextmanager
def translate_outages() -> Iterator[None]:
    """Database outages as `Unavailable`, so callers get UNAVAILABLE and may retry."""
    try:
        yield
    except (sa_exc.OperationalError, sa_exc.InterfaceError, OSError) as exc:
        if is_disconnect(exc) or isinstance(exc, OSError):
            raise Unavailable("database unavailable, retry shortly") from exc
        raise
    except sa_exc.TimeoutError as exc:
        raise Unavailable("database busy: no connection free, retry shortly") from exc


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


# ----------------------------------------------------------------------------- listener


class Waiter:
    """Woken when a NOTIFY for one of its keys arrives (or the listener reconnects)."""

    def __init__(
        self, listener: Listener, channel: str, keys: frozenset[str], one: bool = False
    ) -> None:
        self._listener = listener
        self.channel = channel
        self.keys = keys
        self.one = one  # one of the `one` waiters of a key is woken per notification
        self.waiting = False
        self._event = asyncio.Event()

    def wake(self) -> None:
        self._event.set()

    @property
    def woken(self) -> bool:
        return self._event.is_set()

    async def wait(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds; True if woken. Re-arms for the next wait."""
        self.waiting = True
        try:
            async with asyncio.timeout(max(timeout, 0)):
                await self._event.wait()
            return True
        except TimeoutError:
            return False
        finally:
            self.waiting = False
            self._event.clear()


class Listener:
    """One LISTEN connection per process, fanning notifications out to waiters.

    The payload of each notification is a key (an inbox id, a target); waiters subscribe
    to keys. When the connection drops, every waiter is woken so it re-checks the
    database, and the listener reconnects with backoff. Waiters also re-check on their
    own timer, so polling remains the fallback.
    """

    def __init__(self, url: str) -> None:
        self._url = libpq_url(url)
        self._channels: list[str] = []
        self._waiters: dict[tuple[str, str], set[Waiter]] = {}
        self._task: asyncio.Task[None] | None = None
        self._connected = asyncio.Event()
        self.wakeups = 0

    @property
    def waiting(self) -> int:
        return sum(len(s) for s in self._waiters.values())

    async def start(self, channels: list[str]) -> None:
        self._channels = channels
        self._task = asyncio.create_task(self._run(), name="notify-listener")
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(10):
                await self._connected.wait()

    async def close(self) -> None:
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        self.wake_all()

    @contextlib.contextmanager
    def subscribe(
        self, channel: str, keys: Iterable[str], *, one: bool = False
    ) -> Iterator[Waiter]:
        """Wait for notifications of `channel` whose payload is one of `keys`.

        With `one`, a notification wakes one of the key's `one` waiters instead of all
        (claims: one new piece of work needs one claimer, not every idle one). Such a
        waiter that leaves with a wake-up it did not use passes it on.
        """
        waiter = Waiter(self, channel, frozenset(keys), one)
        for key in waiter.keys:
            self._waiters.setdefault((channel, key), set()).add(waiter)
        try:
            yield waiter
        finally:
            for key in waiter.keys:
                group = self._waiters.get((channel, key))
                if group is not None:
                    group.discard(waiter)
                    if not group:
                        del self._waiters[(channel, key)]
            if one and waiter.woken:
                for key in waiter.keys:
                    self.wake_one(channel, key)

    def wake_one(self, channel: str, key: str) -> None:
        """Wake one `one` waiter of a key: an idle one if any, else one not yet woken (it
        looks again after its current attempt); none when all are woken already."""
        candidates = [w for w in self._waiters.get((channel, key), ()) if w.one and not w.woken]
        if candidates:
            idle = [w for w in candidates if w.waiting]
            (idle or candidates)[0].wake()
            self.wakeups += 1

    def _dispatch(self, channel: str, payload: str) -> None:
        many = False
        for waiter in self._waiters.get((channel, payload), ()):
            if waiter.one:
                many = True
                continue
            waiter.wake()
            self.wakeups += 1
        if many:
            self.wake_one(channel, payload)

    def wake_all(self) -> None:
        for group in self._waiters.values():
            for waiter in group:
                waiter.wake()

    async def _run(self) -> None:
        backoff = 0.1
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(
                    self._url,
                    autocommit=True,
                    **connect_timeout(self._url, CONNECT_TIMEOUT_SECONDS),
                )
                async with conn:
                    for channel in self._channels:
                        await conn.execute(sa_quote_listen(channel))
                    self._connected.set()
                    backoff = 0.1
                    self.wake_all()  # anything may have happened while we were away
                    async for note in conn.notifies():
                        self._dispatch(note.channel, note.payload)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # reconnect on any failure, never die
                self._connected.clear()
                self.wake_all()
                log.warning("listener.disconnected", error=str(exc), retry_in=backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)


def sa_quote_listen(channel: str) -> str:
    if not re.match(r"^[a-z_][a-z0-9_]*$", channel):
        raise ValueError(f"bad channel name {channel!r}")
    return f"LISTEN {channel}"


def notify(channel: str, payload: str) -> sa.TextClause:
    """A statement that sends a notification when the surrounding transaction commits."""
    return sa.text("SELECT pg_notify(:channel, :payload)").bindparams(
        channel=channel, payload=payload
    )


async def fetch_one(conn: psycopg.AsyncConnection, sql: str, params: dict[str, Any]) -> Any:
    """One row (a named tuple) of a fixed statement on a `Database.raw()` connection, or None."""
    async with conn.cursor(row_factory=namedtuple_row) as cur:
        await cur.execute(sql, params)
        return await cur.fetchone()


def fixed_sql(text: str) -> str:
    """SQL written with `:name` parameters (as for `sa.text`) in psycopg's `%(name)s` form.

    For the hot statements run through `Database.raw()`; `::` casts and literal `%` are
    kept as they are.
    """
    return re.sub(r"(?<![:\w]):(\w+)", r"%(\1)s", text.replace("%", "%%"))


def with_database(url: str, database: str) -> str:
    """The same server URL pointing at another database."""
    parsed = sa.engine.make_url(sqlalchemy_url(url)).set(database=database)
    return libpq_url(parsed.render_as_string(hide_password=False))
