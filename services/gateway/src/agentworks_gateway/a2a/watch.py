"""The two streams the A2A binding reads: a call's changes (X2) and the agent messages
of an inbox (X3), on the services' push streams (N1: `FunctionsClient.watch_call`,
`MessagingClient.subscribe`), each ended when the gateway drains (the client
subscribes again on another replica).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from agentworks.client import FunctionsClient, MessagingClient
from agentworks.client.functions import PAST_EVERY_PAGE
from agentworks.core.limits import MAX_INBOX_PAGE
from agentworks.functions.v1 import functions_pb2 as f
from agentworks.messaging.v1 import messaging_pb2 as m
from agentworks_gateway import sse
from agentworks_gateway.service import Gateway


async def call_changes(
    gateway: Gateway, client: FunctionsClient, call_id: str, *, seen_version: int | None = None
) -> AsyncIterator[f.CallStatus]:
    """Each new status of a call after `seen_version` (None: the current one first),
    until it ends; the last one yielded is the ended call (unless the gateway drains).
    The statuses carry no message or event pages (the task shows neither)."""
    changes = client.watch_call(call_id, after=PAST_EVERY_PAGE, after_event=PAST_EVERY_PAGE)
    async for change in sse.until(gateway.draining, changes):
        status = change.status
        if seen_version is not None and status.version <= seen_version:
            continue
        seen_version = status.version
        yield status


async def inbox_messages(
    gateway: Gateway, client: MessagingClient, inbox_id: str, *, after: str = ""
) -> AsyncIterator[tuple[m.Message, str]]:
    """The agent messages sent to an inbox after the cursor `after`, each with the cursor
    after it, as they come (until the gateway drains: a conversation has no end, C5)."""
    events = client.subscribe(inbox_id, after=after)
    async for event in sse.until(gateway.draining, events):
        yield event.message, event.cursor


async def inbox_so_far(
    client: MessagingClient, inbox_id: str, *, limit: int
) -> tuple[list[m.Message], str]:
    """The newest `limit` agent messages of an inbox (oldest first; at most a page,
    MAX_INBOX_PAGE) and the cursor after the last message there is: one Read from the
    inbox's end, however long the conversation (B)."""
    page = await client.read(inbox_id, limit=min(max(limit, 1), MAX_INBOX_PAGE), newest=True)
    return (list(page.messages) if limit else []), page.next_cursor
