"""Following the feeds (N2): each feed (an endpoint's call ends or inbox) is read by one
replica at a time, under a lease, from the cursor stored with it.

Each event becomes a delivery row written in the transaction that moves the feed's
cursor past it (`WebhookStore.record`): a restart or a kill -9 resumes from the stored
cursor, so no event is lost, and a delivery's id is derived from the event, so an event
read twice (a lease taken over mid-event) is stored once. A replica renews its leases
every few seconds; a feed whose lease it lost (another took it over) stops here. Feeds
are read as the principal that registered them, and only while that principal has an
API token that is not revoked or expired.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Collection
from typing import Any

import structlog

from agentworks.core import errors
from agentworks.core.identity import Identity
from agentworks_gateway.webhooks_out import events
from agentworks_gateway.webhooks_out.leased import LeasedFollowers
from agentworks_gateway.webhooks_out.models import CALL_ENDS, INBOX_PREFIX, Feed
from agentworks_gateway.webhooks_out.settings import WebhooksOutConfig
from agentworks_gateway.webhooks_out.store import WebhookStore

log = structlog.get_logger("agentworks.gateway.webhooks_out")

# Feeds one replica follows at most (each holds one stream to a service).
MAX_FEEDS_PER_REPLICA = 1000
# Events from before a feed's registration are skipped; their cursor is stored every
# this many (and at each heartbeat), not once per event.
SKIPPED_PER_WRITE = 100
MAX_BACKOFF_SECONDS = 60.0

# (cursor after the event, its delivery or None, whether it is a heartbeat)
Event = tuple[str, dict[str, Any] | None, bool]


class Feeds(LeasedFollowers[tuple[str, str], Feed]):
    """One replica's followers of the feeds it holds the lease of."""

    max_followed = MAX_FEEDS_PER_REPLICA
    round_failed = "webhooks.feeds_failed"

    def __init__(
        self,
        store: WebhookStore,
        gateway: Any,
        config: WebhooksOutConfig,
        replica: str,
        delivered: Callable[[], None],
    ) -> None:
        super().__init__(config, replica)
        self.store = store
        self.gateway = gateway
        self.delivered = delivered  # wakes the dispatcher: new deliveries are stored

    async def renew(self, lease_seconds: float) -> Collection[tuple[str, str]]:
        return await self.store.renew_feeds(self.replica, lease_seconds=lease_seconds)

    async def claim(self, lease_seconds: float, limit: int) -> list[Feed]:
        return await self.store.claim_feeds(self.replica, lease_seconds=lease_seconds, limit=limit)

    async def release(self, key: tuple[str, str]) -> None:
        await self.store.release_feed(*key, self.replica)

    def key_of(self, row: Feed) -> tuple[str, str]:
        return (row.endpoint_id, row.source)

    def start(self, row: Feed) -> asyncio.Task[None]:
        log.info("webhook_feed.following", endpoint_id=row.endpoint_id, source=row.source)
        return asyncio.create_task(
            self._follow(row), name=f"webhook-feed-{row.endpoint_id}-{row.source}"
        )

    async def _follow(self, feed: Feed) -> None:
        """Read the feed's events into delivery rows until the lease is lost."""
        saved = [feed.cursor]  # the cursor stored last, kept across a broken stream
        backoff = 1.0
        while True:
            try:
                await self._read(feed, saved)
                return  # the lease was lost
            except asyncio.CancelledError:
                raise
            except errors.AgentWorksError as exc:
                error = exc.message
            except Exception as exc:  # a stream that broke in a way the client did not handle
                log.exception("webhook_feed.broken", endpoint_id=feed.endpoint_id)
                error = f"{type(exc).__name__}: {exc}"
            log.info(
                "webhook_feed.failed", endpoint_id=feed.endpoint_id, source=feed.source, error=error
            )
            with contextlib.suppress(errors.AgentWorksError):
                await self.store.feed_error(feed, self.replica, error[:300])
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)

    async def _read(self, feed: Feed, saved: list[str]) -> None:
        """Follow the stream from the stored cursor `saved[0]`, storing each delivery
        with the cursor after it; returns when the lease is lost."""
        skipped = 0
        unsaved = saved[0]
        retry = self.config.retry_seconds
        async for event_cursor, delivery, heartbeat in self._events(feed, saved[0]):
            if event_cursor:
                unsaved = event_cursor
            if delivery is None:  # a heartbeat, or an event from before the feed
                skipped += 0 if heartbeat else 1
                if unsaved != saved[0] and (heartbeat or skipped >= SKIPPED_PER_WRITE):
                    if not await self.store.record(feed, self.replica, unsaved, (), retry):
                        return
                    saved[0], skipped = unsaved, 0
                continue
            if not await self.store.record(feed, self.replica, unsaved, [delivery], retry):
                return
            saved[0], skipped = unsaved, 0
            self.delivered()

    async def _events(self, feed: Feed, after: str) -> AsyncIterator[Event]:
        """The feed's stream as (cursor, delivery or None, heartbeat)."""
        identity = Identity(principal=feed.principal)
        if feed.source == CALL_ENDS:
            calls = self.gateway.functions(identity)
            async for change in calls.watch_call_ends(after=after, heartbeats=True):
                if change.WhichOneof("change") != "status":
                    yield change.cursor, None, True
                    continue
                ended = events.call_ended(feed.endpoint_id, change.status, feed.created_at)
                yield change.cursor, ended, False
        elif feed.source.startswith(INBOX_PREFIX):
            inbox_id = feed.source[len(INBOX_PREFIX) :]
            inbox = self.gateway.messaging(identity)
            async for event in inbox.subscribe(inbox_id, after=after, heartbeats=True):
                if event.WhichOneof("event") != "message":
                    yield event.cursor, None, True
                    continue
                created = events.message_created(feed.endpoint_id, event.message, feed.created_at)
                yield event.cursor, created, False
