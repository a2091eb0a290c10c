"""Watching calls (N1, N5): WatchCall and WatchCallEnds, the `Watching` use cases of
`FunctionsService`. No gRPC, no SQL here.

A watch reads once at its start, then waits on the process's LISTEN connection: for
the call's NOTIFY (every change of a call sends one, with its id), or for the caller's
`ends:<caller>` NOTIFY (sent by the trigger that numbers each end, migration 0013).
While nothing happens it runs no statement at all: heartbeats come from a timer; the
database is read again only when a NOTIFY (or the listener's reconnect, which wakes
every waiter because notifications may have been missed) says something may be new.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime

from agentworks.core import checks
from agentworks.core.errors import Reason, Unavailable
from agentworks.core.identity import Identity
from agentworks.server.db import Waiter
from agentworks.server.shares import shares
from agentworks_functions.models import CallChange, StatusView
from agentworks_functions.service.following import Following
from agentworks_functions.service.rules import EVENT_LIMIT_DEFAULT, MESSAGE_LIMIT_DEFAULT, log
from agentworks_functions.store import CALL_CHANNEL, ends_key

# Seconds between heartbeats when the request leaves it 0; the range (5-60) is the
# proto's field rule (WatchCallRequest/WatchCallEndsRequest.heartbeat_seconds).
HEARTBEAT_DEFAULT_SECONDS = 15
# Ended calls per statement while WatchCallEnds catches up (and per wake-up after that).
ENDS_PAGE = 100
# WatchCallEnds cursors: an end number among the caller's calls' ends (calls.end_seq).
_ENDS_CURSOR_PREFIX = "e1:"


def encode_ends_cursor(end_seq: int) -> str:
    """The opaque WatchCallEnds cursor after end number `end_seq`."""
    return checks.encode_cursor(end_seq, _ENDS_CURSOR_PREFIX)


def decode_ends_cursor(cursor: str) -> int:
    """The end number behind a WatchCallEnds cursor; empty means before the first."""
    return checks.decode_cursor(cursor, _ENDS_CURSOR_PREFIX, "after")


def _draining() -> Unavailable:
    return Unavailable(
        "this functions replica is shutting down; watch again with the last status's "
        "cursors (the typed client resumes by itself)",
        reason=Reason.DRAINING,
    )


def _now() -> datetime:
    return datetime.now(UTC)


class Watching(Following):
    """The push use cases of `FunctionsService` (N1)."""

    async def watch_call(
        self,
        identity: Identity,
        *,
        call_id: str,
        after: int = -1,
        after_event: int = -1,
        seen_version: int | None = None,
        heartbeat_seconds: int = 0,
    ) -> AsyncIterator[CallChange]:
        """The call's status now (unless `seen_version` says it was seen), then a status
        at each change with the messages and events after the cursors, heartbeats while
        nothing changes; ends after the terminal status (N1). A3 as `status`."""
        if self.draining.is_set():
            raise _draining()
        heartbeat = heartbeat_seconds or HEARTBEAT_DEFAULT_SECONDS
        # B7: one of the principal's long-polls for the stream's life, taken before any
        # statement; subscribed before the first read, so no change is missed.
        with (
            shares().wait(identity.principal),
            self.listener.subscribe(CALL_CHANNEL, [call_id]) as waiter,
        ):
            # The first read checks the input and access (A3: NOT_FOUND) as GetStatus.
            view: StatusView | None = await self.status(
                identity, call_id=call_id, after=after, after_event=after_event
            )
            version = -1 if seen_version is None else seen_version
            while True:
                if view is not None:
                    new = bool(view.messages or view.events)
                    if new or view.call.version > version:
                        yield CallChange(view=view)
                        after, after_event = view.next_after, view.next_after_event
                        version = max(version, view.call.version)
                    if not new and not view.call.is_open:
                        log.info("call.watch_ended", call_id=call_id, status=view.call.status)
                        return
                    if new:  # a page was sent: more may follow at once
                        view = await self._watched(call_id, after, after_event)
                        continue
                if await self._woken(waiter, heartbeat):
                    view = await self._watched(call_id, after, after_event)
                else:
                    view = None
                    yield CallChange(at=_now())

    async def watch_call_ends(
        self, identity: Identity, *, after: str = "", heartbeat_seconds: int = 0
    ) -> AsyncIterator[CallChange]:
        """The ends of the caller's own calls after the cursor, in the order they ended,
        then each new end as it happens, heartbeats while none does (N1); never ends on
        its own. Each status's messages and events pages are empty."""
        position = decode_ends_cursor(after)
        if self.draining.is_set():
            raise _draining()
        heartbeat = heartbeat_seconds or HEARTBEAT_DEFAULT_SECONDS
        caller = identity.principal
        with (
            shares().wait(caller),
            self.listener.subscribe(CALL_CHANNEL, [ends_key(caller)]) as waiter,
        ):
            page = await self.store.call_ends(caller, position, ENDS_PAGE)
            log.info("call_ends.watched", caller=caller, backlog=len(page))
            live = False
            while True:
                for end_seq, view in page:
                    position = end_seq
                    yield CallChange(view=view, cursor=encode_ends_cursor(position))
                if len(page) == ENDS_PAGE:  # more may be there: read on
                    page = await self.store.call_ends(caller, position, ENDS_PAGE)
                    continue
                if not live:  # caught up: say so once (the stream is live from here)
                    live = True
                    yield CallChange(at=_now(), cursor=encode_ends_cursor(position))
                while not await self._woken(waiter, heartbeat):
                    yield CallChange(at=_now(), cursor=encode_ends_cursor(position))
                page = await self.store.call_ends(caller, position, ENDS_PAGE)

    async def _watched(self, call_id: str, after: int, after_event: int) -> StatusView:
        return await self._view(
            call_id, after, MESSAGE_LIMIT_DEFAULT, after_event, EVENT_LIMIT_DEFAULT
        )

    async def _woken(self, waiter: Waiter, heartbeat: float) -> bool:
        """Whether a NOTIFY (or the listener's reconnect) woke the waiter within
        `heartbeat` seconds; runs no statement (N5). UNAVAILABLE once draining."""
        deadline = time.monotonic() + heartbeat
        while True:
            if self.draining.is_set():
                raise _draining()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            if await waiter.wait(remaining):
                if self.draining.is_set():
                    raise _draining()
                return True
