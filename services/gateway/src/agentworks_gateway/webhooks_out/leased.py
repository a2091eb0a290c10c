"""One replica's followers of leased rows (N2, X2): each row (a webhook feed, an A2A push
config) is followed by one replica at a time, under a lease renewed every few seconds.
A round renews what this replica holds, stops the followers of rows it lost, gives back
the rows whose follower stopped on its own (claimable again at once) and claims more up
to its room; `wake()` starts a round now (a row may be new). Subclasses say how rows
are renewed, claimed, released and followed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Collection, Hashable
from typing import Any, Generic, TypeVar

import structlog

from agentworks.core import errors
from agentworks_gateway.webhooks_out.settings import WebhooksOutConfig

K = TypeVar("K", bound=Hashable)
R = TypeVar("R")


class LeasedFollowers(Generic[K, R]):
    """Renew, claim and follow leased rows until cancelled."""

    # Rows one replica follows at most (each holds one stream to a service).
    max_followed = 1000
    # The log event of a failed round.
    round_failed = "leased.round_failed"

    def __init__(self, config: WebhooksOutConfig, replica: str) -> None:
        self.config = config
        self.replica = replica
        self._wake = asyncio.Event()
        self._followers: dict[K, asyncio.Task[None]] = {}

    # ------------------------------------------------------------------ by each user

    async def renew(self, lease_seconds: float) -> Collection[K]:
        raise NotImplementedError

    async def claim(self, lease_seconds: float, limit: int) -> list[R]:
        raise NotImplementedError

    async def release(self, key: K) -> None:
        raise NotImplementedError

    def key_of(self, row: R) -> K:
        raise NotImplementedError

    def start(self, row: R) -> asyncio.Task[None]:
        """The task that follows `row` until it stops or is cancelled."""
        raise NotImplementedError

    # ------------------------------------------------------------------ the loop

    @property
    def following(self) -> list[K]:
        """The keys of the rows this replica follows now."""
        return [key for key, task in self._followers.items() if not task.done()]

    def wake(self) -> None:
        """A row may be new: look for it now."""
        self._wake.set()

    async def run(self) -> None:
        """Renew, claim and follow until cancelled."""
        every = min(self.config.poll_seconds, self.config.lease_seconds / 3)
        log: Any = structlog.get_logger(type(self).__module__)
        try:
            while True:
                self._wake.clear()
                try:
                    await self._round()
                except errors.Unavailable as exc:
                    log.warning(self.round_failed, error=exc.message)
                except Exception:  # never stop following for one bad round
                    log.exception(self.round_failed)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(every):
                        await self._wake.wait()
        finally:
            followers = list(self._followers.values())
            for task in followers:
                task.cancel()
            if followers:
                await asyncio.wait(followers)

    async def _round(self) -> None:
        lease = self.config.lease_seconds
        held = await self.renew(lease)
        for key, task in list(self._followers.items()):
            if key not in held or task.done():
                task.cancel()
                del self._followers[key]
                if key in held:  # it stopped on its own: claimable again at once
                    await self.release(key)
        room = self.max_followed - len(self._followers)
        if room <= 0:
            return
        for row in await self.claim(lease, room):
            key = self.key_of(row)
            old = self._followers.pop(key, None)
            if old is not None:
                old.cancel()
            self._followers[key] = self.start(row)

    async def release_all(self) -> None:
        """Give up every row this replica held, for another replica to take at once."""
        for key in list(self._followers):
            with contextlib.suppress(errors.AgentWorksError):
                await self.release(key)
