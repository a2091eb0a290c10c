"""LISTEN/NOTIFY: one listening connection per process, fanning notifications out to waiters."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Iterable, Iterator

import psycopg
import structlog

from agentworks.server.dburl import CONNECT_TIMEOUT_SECONDS, connect_timeout, libpq_url

log = structlog.get_logger("agentworks.db")


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
