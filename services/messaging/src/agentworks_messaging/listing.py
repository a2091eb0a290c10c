"""Listing conversations and targets (V1) under A3: the operator sees every one; anyone
else the conversations of the inboxes bound to them and those of the targets they own,
and the targets they own."""

from __future__ import annotations

from datetime import timedelta

from agentworks.core.checks import (
    decode_key_cursor,
    decode_time_cursor,
    encode_key_cursor,
    encode_time_cursor,
)
from agentworks.core.identity import Identity
from agentworks.core.limits import LIST_PAGE_DEFAULT
from agentworks_messaging.models import ConversationSummary, Target, TargetKey
from agentworks_messaging.store import MessagingStore

_LIST_CURSOR = "mc1:"
_SINCE_CURSOR = "ms1:"
_TARGETS_CURSOR = "mt1:"
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
        limit = limit or LIST_PAGE_DEFAULT  # its range is the proto's rule
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

    async def list_targets(
        self, identity: Identity, *, after: str, limit: int
    ) -> tuple[list[Target], str]:
        """A page of the targets `identity` owns (the operator: all) by (kind, name), and
        the next cursor ("" after the last page)."""
        limit = limit or LIST_PAGE_DEFAULT  # its range is the proto's rule
        key = decode_key_cursor(after, _TARGETS_CURSOR, (str, str))
        targets = await self.store.list_targets(
            viewer=None if identity.is_operator else identity.principal,
            after=(key[0], key[1]) if key else None,
            limit=limit + 1,
        )
        more = len(targets) > limit
        targets = targets[:limit]
        last = targets[-1].key if more else None
        return targets, encode_key_cursor(_TARGETS_CURSOR, last.kind, last.name) if last else ""
