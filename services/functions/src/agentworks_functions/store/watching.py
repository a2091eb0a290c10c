"""Watching calls (N1): the ends of a caller's calls in the order they ended."""

from __future__ import annotations

from agentworks_functions.models import StatusView
from agentworks_functions.store.base import FunctionsStoreBase, Q
from agentworks_functions.store.rows import status_view


def ends_key(caller: str) -> str:
    """The CALL_CHANNEL payload that says one of `caller`'s calls ended (sent by the
    trigger of migrations/0013_call_ends.sql): what WatchCallEnds waits on."""
    return f"ends:{caller}"


class WatchQueries(FunctionsStoreBase):
    async def call_ends(self, caller: str, after: int, limit: int) -> list[tuple[int, StatusView]]:
        """`caller`'s calls that ended after end number `after`, oldest end first, each
        with its end number (the messages and events pages empty)."""
        async with self.db.raw() as pg:
            rows = await Q.all(
                pg, "call_ends_page", {"caller": caller, "after": after, "limit": limit}
            )
        return [(row.end_seq, status_view(row, -1, -1)) for row in rows]
