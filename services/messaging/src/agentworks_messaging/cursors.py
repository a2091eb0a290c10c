"""The opaque cursors of inbox reads and transcripts (C7, C12): a position in a
conversation."""

from __future__ import annotations

from agentworks.core import checks

_CURSOR_PREFIX = "p1:"


def encode_cursor(position: int) -> str:
    """An opaque cursor for a position."""
    return checks.encode_cursor(position, _CURSOR_PREFIX)


def decode_cursor(cursor: str, field: str = "after") -> int:
    """The position behind a cursor; empty means the start."""
    return checks.decode_cursor(cursor, _CURSOR_PREFIX, field)
