"""The one connection pool of a service process, shared by SQLAlchemy and the hot path.

`SharedPool` is SQLAlchemy's pool class for the engine (`poolclass=SharedPool`): the
engine checks connections out of it as out of any pool, and `Database.raw()` takes the
psycopg connection of the same pooled entries directly, skipping SQLAlchemy's checkout
and result layers. One set of `size` slots bounds both, so a process never holds more
than `size` connections (its `Listener` keeps one more of its own for LISTEN).

Fail fast, as the hot path always did: a checkout never waits behind a reconnect
backoff; while PostgreSQL is away a request fails at once and `raw()` says
`Unavailable`; the first request after it is back opens a fresh connection. A
connection that broke, was left mid-statement by a cancelled request, outlived
`recycle` seconds or predates a disconnect SQLAlchemy saw is closed, not reused.

A request must not wait for a second connection while it holds one (a `transaction()`
inside a `raw()` block, or the reverse): with one bound for both, enough such requests
would wait on each other until the pool timeout.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any, cast

import psycopg
import structlog
from sqlalchemy import exc as sa_exc
from sqlalchemy.pool import ConnectionPoolEntry, Pool
from sqlalchemy.util.concurrency import await_, greenlet_spawn, in_greenlet

from agentworks.core.errors import Unavailable

log = structlog.get_logger("agentworks.db")

IDLE = psycopg.pq.TransactionStatus.IDLE
# psycopg's default: a hot statement is prepared on its fifth run on a connection.
# SQLAlchemy's statements never are (see `Database`): each pooled connection is switched
# between the two when it changes hands.
HOT_PREPARE_THRESHOLD = 5


class SharedPool(Pool):
    """`size` connections at most, checked out by SQLAlchemy or by `raw_connection()`.

    Idle entries are kept newest-last and reused last-in-first-out. A raw checkout gets
    the entry's psycopg connection in autocommit; a SQLAlchemy checkout gets it back out
    of autocommit (SQLAlchemy begins transactions implicitly) with statement preparation
    off. Switching is a flag on the connection, no round trip, and only happens when the
    entry changes hands between the two.
    """

    _is_asyncio = True  # type: ignore[assignment]  # as AsyncAdaptedQueuePool

    def __init__(  # not keyword-only: create_engine passes only the ones it sees
        self, creator: Any, pool_size: int = 10, timeout: float = 10.0, **kw: Any
    ) -> None:
        super().__init__(creator, **kw)
        self._size = pool_size
        self._timeout = timeout
        self._free = pool_size  # slots nobody holds
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._idle: list[ConnectionPoolEntry] = []
        self._out = 0
        self._closed = False

    # ------------------------------------------------------------------------- slots

    def _take_slot_now(self) -> bool:
        if self._free > 0 and not self._waiters:
            self._free -= 1
            return True
        return False

    async def _take_slot(self) -> None:
        if self._take_slot_now():
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout(self._timeout):
                await waiter
        except BaseException as exc:
            if waiter.done() and not waiter.cancelled():
                self._give_slot()  # handed one just as this checkout gave up
            else:
                waiter.cancel()
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)
            if isinstance(exc, TimeoutError):
                raise Unavailable("database busy: no connection free, retry shortly") from None
            raise

    def _give_slot(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot passes straight to the oldest waiter
                return
        self._free += 1

    def _take_idle(self) -> tuple[ConnectionPoolEntry | None, list[ConnectionPoolEntry]]:
        """The newest reusable idle entry (or None), and the stale ones met on the way."""
        stale = []
        now = time.time()
        while self._idle:
            entry = self._idle.pop()
            started = cast(Any, entry).starttime
            conn = entry.driver_connection
            if (
                conn is None
                or conn.closed
                or started < self._invalidate_time
                or (self._recycle > -1 and now - started > self._recycle)
            ):
                stale.append(entry)
                continue
            return entry, stale
        return None, stale

    # ------------------------------------------------------------- SQLAlchemy's side

    def _do_get(self) -> ConnectionPoolEntry:
        if not self._take_slot_now():
            await_(self._take_slot())
        try:
            entry, stale = self._take_idle()
            for old in stale:
                _close_entry(old)
            if entry is None:
                entry = self._create_connection()
            else:
                conn = _driver(entry)
                if conn.autocommit:
                    await_(conn.set_autocommit(False))
                conn.prepare_threshold = None
        except BaseException:
            self._give_slot()
            raise
        self._out += 1
        return entry

    def _do_return_conn(self, record: ConnectionPoolEntry) -> None:
        self._out -= 1
        try:
            conn = record.driver_connection
            if conn is None:
                pass  # invalidated or detached: SQLAlchemy closed or owns the connection
            elif self._closed or not _reusable(conn):
                _close_entry(record)
            else:
                self._idle.append(record)
        finally:
            self._give_slot()

    # --------------------------------------------------------------- the hot path

    @contextlib.asynccontextmanager
    async def raw_connection(self) -> AsyncIterator[psycopg.AsyncConnection]:
        """A pooled connection's psycopg connection in autocommit; outages -> Unavailable.

        A connection that broke, or was left mid-statement by a cancelled request, is
        closed instead of reused.
        """
        if not self._take_slot_now():
            await self._take_slot()
        self._out += 1
        entry: ConnectionPoolEntry | None = None
        conn: psycopg.AsyncConnection | None = None
        try:
            entry, stale = self._take_idle()
            for old in stale:
                await _aclose_entry(old)
            if entry is None:
                entry = await self._connect()
            conn = _driver(entry)
            if not conn.autocommit:
                await conn.set_autocommit(True)
                conn.prepare_threshold = HOT_PREPARE_THRESHOLD
            yield conn
        except psycopg.OperationalError as exc:
            if conn is not None and not conn.closed and not conn.broken:
                # A cancelled statement, a lock or serialization failure: worth a retry.
                log.warning("db.retryable_error", error=str(exc), sqlstate=exc.sqlstate)
                raise Unavailable("database busy, retry shortly") from exc
            await _aclose_entry(entry)
            entry = None
            raise Unavailable("database unavailable, retry shortly") from exc
        except OSError as exc:
            await _aclose_entry(entry)
            entry = None
            raise Unavailable("database unavailable, retry shortly") from exc
        finally:
            self._out -= 1
            if entry is not None:
                if self._closed or conn is None or not _reusable(conn):
                    # Mid-statement after a cancel, broken, or back after the pool was
                    # closed (a request still running when its service stopped).
                    await _aclose_entry(entry)
                else:
                    self._idle.append(entry)
            self._give_slot()

    async def _connect(self) -> ConnectionPoolEntry:
        """A new entry, opened as SQLAlchemy opens one (its connect events included)."""
        try:
            return await greenlet_spawn(self._create_connection)
        except (sa_exc.OperationalError, sa_exc.InterfaceError) as exc:  # in a connect event
            raise Unavailable("database unavailable, retry shortly") from exc

    # ------------------------------------------------------------------ bookkeeping

    @property
    def checked_out(self) -> int:
        """Connections in use now, by either side."""
        return self._out

    def checkedout(self) -> int:
        return self._out

    def size(self) -> int:
        return self._size

    def checkedin(self) -> int:
        return len(self._idle)

    def status(self) -> str:
        return (
            f"Pool size: {self._size}  Connections in pool: {len(self._idle)} "
            f"Current Checked out connections: {self._out}"
        )

    def recreate(self) -> SharedPool:
        return self.__class__(
            self._creator,
            pool_size=self._size,
            timeout=self._timeout,
            recycle=self._recycle,
            echo=self.echo,
            logging_name=self._orig_logging_name,
            reset_on_return=self._reset_on_return,
            pre_ping=self._pre_ping,
            _dispatch=self.dispatch,
            dialect=self._dialect,
        )

    def dispose(self) -> None:
        """Close the idle connections (from SQLAlchemy's side, in a greenlet)."""
        idle, self._idle = self._idle, []
        for entry in idle:
            _close_entry(entry)

    async def close(self) -> None:
        """Close the idle connections now, and each one in use when it comes back."""
        self._closed = True
        idle, self._idle = self._idle, []
        for entry in idle:
            await _aclose_entry(entry)


def _driver(entry: ConnectionPoolEntry) -> psycopg.AsyncConnection:
    """The psycopg connection of an entry that has one."""
    return cast(psycopg.AsyncConnection, entry.driver_connection)


def _reusable(conn: psycopg.AsyncConnection) -> bool:
    """Open, not broken and outside any transaction or statement."""
    return not conn.closed and not conn.broken and conn.pgconn.transaction_status == IDLE


def _close_entry(entry: ConnectionPoolEntry) -> None:
    """Close an entry's connection from synchronous code (SQLAlchemy's side)."""
    if in_greenlet():
        with contextlib.suppress(Exception):
            entry.close()
        return
    # Outside a greenlet (a connection the garbage collector returned): close it on the
    # event loop, never leave it open.
    conn = entry.driver_connection
    if conn is not None and not conn.closed:
        with contextlib.suppress(RuntimeError):  # no running loop: nothing left to do
            task = asyncio.get_running_loop().create_task(conn.close())
            _closing.add(task)
            task.add_done_callback(_closing.discard)


async def _aclose_entry(entry: ConnectionPoolEntry | None) -> None:
    if entry is not None and entry.driver_connection is not None:
        with contextlib.suppress(Exception):
            await greenlet_spawn(entry.close)


_closing: set[asyncio.Task[None]] = set()
