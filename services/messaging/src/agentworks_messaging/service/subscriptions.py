"""Subscribe (N1, N5): an inbox's messages as one open stream; the `SubscriptionCases` of
`MessagingService`. No gRPC, no SQL here.

A stream reads what is already there after its cursor (paged), then waits on the
process's LISTEN connection for the inbox's NOTIFY. While nothing happens it runs no
statement at all: heartbeats come from a timer and carry the position already known;
the database is read again only when a NOTIFY for the inbox (or the listener's
reconnect, which wakes every waiter because notifications may have been missed) wakes
it. Every event carries the cursor after it, so a client resumes anywhere (another
replica, after any disconnect) without a message lost or repeated.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import structlog

from agentworks.core.checks import check_no_nul
from agentworks.core.errors import Reason, Unavailable
from agentworks.core.identity import Identity
from agentworks.server.db import Listener, Waiter
from agentworks.server.shares import shares
from agentworks_messaging.cursors import decode_cursor, encode_cursor
from agentworks_messaging.models import InboxEvent, Message
from agentworks_messaging.service.rules import refuse_runtime_inbox_read
from agentworks_messaging.store import INBOX_CHANNEL, MessagingStore

log = structlog.get_logger("agentworks.messaging")

# Seconds between heartbeats when the request leaves it 0; the range (5-60) is the
# proto's field rule (SubscribeRequest.heartbeat_seconds), checked before the handler.
HEARTBEAT_DEFAULT_SECONDS = 15
# Messages per statement while a stream catches up (and per wake-up after that).
SUBSCRIBE_PAGE = 100


def _draining() -> Unavailable:
    return Unavailable(
        "this messaging replica is shutting down; subscribe again with the last event's "
        "cursor (the typed client resumes by itself)",
        reason=Reason.DRAINING,
    )


class SubscriptionCases:
    """The Subscribe use case of `MessagingService`."""

    store: MessagingStore
    listener: Listener
    draining: asyncio.Event

    async def subscribe(
        self, identity: Identity, *, inbox_id: str, after: str, heartbeat_seconds: int
    ) -> AsyncIterator[InboxEvent]:
        """The caller's inbox's messages after the cursor, then each new one as it
        arrives, with heartbeats while none does (N1); never ends on its own."""
        check_no_nul(inbox_id, "inbox_id")
        position = decode_cursor(after)
        refuse_runtime_inbox_read(identity)
        if self.draining.is_set():
            raise _draining()
        heartbeat = heartbeat_seconds or HEARTBEAT_DEFAULT_SECONDS
        # B7: the stream holds one of the principal's long-polls for its life (taken
        # before any statement: a principal past its share costs the database nothing).
        with (
            shares().wait(identity.principal),
            self.listener.subscribe(INBOX_CHANNEL, [inbox_id]) as waiter,
        ):
            # The first page checks the inbox is the caller's (A3) in the same
            # statement; a stranger's inbox is NOT_FOUND, as for Read.
            page = await self.store.read_own_inbox(
                inbox_id, identity.principal, position, SUBSCRIBE_PAGE
            )
            log.info("inbox.subscribed", inbox_id=inbox_id, backlog=len(page))
            live = False
            while True:
                for message in page:
                    position = message.position
                    yield InboxEvent(encode_cursor(position), message)
                if len(page) == SUBSCRIBE_PAGE:  # more may be there: read on
                    page = await self.store.read_inbox(inbox_id, position, SUBSCRIBE_PAGE)
                    continue
                if not live:  # caught up: say so once (the stream is live from here)
                    live = True
                    yield InboxEvent(encode_cursor(position), at=datetime.now(UTC))
                woken = await self._next_page(waiter, inbox_id, position, heartbeat)
                while woken is None:  # a heartbeat's time passed with nothing new
                    yield InboxEvent(encode_cursor(position), at=datetime.now(UTC))
                    woken = await self._next_page(waiter, inbox_id, position, heartbeat)
                page = woken

    async def _next_page(
        self, waiter: Waiter, inbox_id: str, position: int, heartbeat: float
    ) -> list[Message] | None:
        """The messages after `position` once a NOTIFY (or the listener's reconnect)
        says there may be some; None when `heartbeat` seconds pass without one. Runs no
        statement while it waits (N5)."""
        deadline = time.monotonic() + heartbeat
        while True:
            if self.draining.is_set():
                raise _draining()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            if not await waiter.wait(remaining):
                continue  # the deadline: the check above returns None
            if self.draining.is_set():
                raise _draining()
            page = await self.store.read_inbox(inbox_id, position, SUBSCRIBE_PAGE)
            if page:
                return page
            # Woken with nothing new (a reconnect, another stream's message): wait on
            # for the rest of this heartbeat's time.
