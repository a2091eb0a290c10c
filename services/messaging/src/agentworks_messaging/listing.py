"""Listing conversations (V1) under A3: the operator sees every one; anyone else the
conversations of the inboxes bound to them and those of the targets they own."""

from __future__ import annotations

from datetime import timedelta

from agentworks.client.checks import (
    bounded,
    decode_time_cursor,
    encode_time_cursor,
)
from agentworks.client.identity import Identity
from agentworks.client.limits import LIST_PAGE_DEFAULT, MAX_LIST_PAGE
from agentworks_messaging.models import ConversationSummary, TargetKey
from agentworks_messaging.store import MessagingStore

_LIST_CURSOR = "mc1:"
_SINCE_CURSOR = "ms1:"
# A message's time is its transaction's start, so one still being stored when a list is
# read can carry an earlier time than the list: `since` reaches this far back, so it
# repeats what came in these last seconds rather than miss a message.
SINCE_MARGIN = timedelta(seconds=10)


class ConversationListing:
    """The listing use case of `MessagingService`."""

    store: MessagingStore

    async def list_conversations(
        self, identity: Identity, *, target: TargetKey | None, after: str, limit: int, since: str
    ) -> tuple[list[ConversationSummary], str, str]:
        """A page of the conversations `identity` may see, newest first; the next cursor
        ("" after the last page) and a `since` cursor to ask later what is new."""
        limit = bounded(limit, "limit", 1, MAX_LIST_PAGE, LIST_PAGE_DEFAULT)
        key = decode_time_cursor(after, _LIST_CURSOR)
        since_key = decode_time_cursor(since, _SINCE_CURSOR, "since")
        items, now = await self.store.list_conversations(
            viewer=None if identity.is_operator else identity.principal,
            target=target,
            after=key,
            since=since_key[0] if since_key else None,
            limit=limit + 1,
        )
        more = len(items) > limit
        items = items[:limit]
        last = items[-1] if more else None
        cursor = (
            encode_time_cursor(_LIST_CURSOR, last.created_at, last.conversation_id) if last else ""
        )
        since_cursor = encode_time_cursor(
            _SINCE_CURSOR, now - SINCE_MARGIN, "00000000-0000-0000-0000-000000000000"
        )
        return items, cursor, since_cursor
