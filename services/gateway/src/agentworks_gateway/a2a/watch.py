"""The two streams the A2A binding reads: a call's changes (X2) and the agent messages
of an inbox (X3).

Until the services' push streams (N1: `FunctionsClient.watch_call`,
`MessagingClient.subscribe`) are in the typed clients, each is a loop of long-polls
(`GetStatus` with `seen_version`, `Read` with a cursor), each waiting at most
`MAX_WAIT_SECONDS` through `Gateway.long_poll` (so a draining gateway ends the wait and
the caller's long-poll share counts it); these two functions are where they are swapped.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator

from agentworks.client import FunctionsClient, MessagingClient
from agentworks.client.functions import ENDED_STATES, PAST_EVERY_PAGE
from agentworks.core.limits import MAX_WAIT_SECONDS
from agentworks.functions.v1 import functions_pb2 as f
from agentworks.messaging.v1 import messaging_pb2 as m
from agentworks_gateway.service import Gateway


async def call_changes(
    gateway: Gateway, client: FunctionsClient, call_id: str, *, seen_version: int | None = None
) -> AsyncIterator[f.CallStatus]:
    """Each new status of a call after `seen_version` (None: the current one first),
    until it ends; the last one yielded is the ended call."""
    version = seen_version
    while True:
        status = await gateway.long_poll(
            functools.partial(_status, client, call_id, version),
            MAX_WAIT_SECONDS if version is not None else 0,
        )
        if gateway.draining.is_set() and status.version == version:
            return  # the gateway is stopping: the client subscribes again elsewhere
        if status.version != version:
            version = status.version
            yield status
        if status.status in ENDED_STATES:
            return


async def _status(
    client: FunctionsClient, call_id: str, version: int | None, wait: int
) -> f.CallStatus:
    return await client.get_status(
        call_id,
        after=PAST_EVERY_PAGE,
        message_limit=1,
        after_event=PAST_EVERY_PAGE,
        event_limit=1,
        wait_seconds=wait,
        seen_version=version,
    )


async def _read(client: MessagingClient, inbox_id: str, cursor: str, wait: int) -> m.ReadResponse:
    return await client.read(inbox_id, after=cursor, wait_seconds=wait)


async def inbox_messages(
    gateway: Gateway, client: MessagingClient, inbox_id: str, *, after: str = ""
) -> AsyncIterator[tuple[m.Message, str]]:
    """The agent messages sent to an inbox after the cursor `after`, each with the cursor
    after it, as they come (forever: a conversation has no end, C5)."""
    cursor = after
    while True:
        page = await gateway.long_poll(
            functools.partial(_read, client, inbox_id, cursor),
            MAX_WAIT_SECONDS,
        )
        for message in page.messages:
            yield message, page.next_cursor
        cursor = page.next_cursor or cursor
        if gateway.draining.is_set() and not page.messages:
            return


async def inbox_so_far(
    client: MessagingClient, inbox_id: str, *, limit: int
) -> tuple[list[m.Message], str]:
    """The newest `limit` agent messages of an inbox (oldest first) and the cursor after
    the last message there is."""
    kept: list[m.Message] = []
    cursor = ""
    while True:
        page = await client.read(inbox_id, after=cursor)
        kept = (kept + list(page.messages))[-limit:] if limit else []
        if not page.messages or not page.next_cursor:
            return kept, page.next_cursor or cursor
        cursor = page.next_cursor
