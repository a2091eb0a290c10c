"""Times for people: the API's UTC timestamps shown in the local time zone (TZ, else
/etc/localtime), with the zone's name, so `2026-12-02T01:20:00+00:00` reads
`2026-12-02 02:20 CET` in Berlin."""

from __future__ import annotations

import os
from datetime import datetime, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


def local_zone() -> tzinfo | None:
    """The local time zone with its rules (TZ, else /etc/localtime); None if unknown."""
    name = os.environ.get("TZ", "").removeprefix(":")
    try:
        if name:
            return ZoneInfo(name)
        with open("/etc/localtime", "rb") as file:
            return ZoneInfo.from_file(file)
    except (OSError, ValueError, ZoneInfoNotFoundError):
        return None


def local_time(value: str | None, *, seconds: bool = True) -> str:
    """An RFC 3339 time in the local zone, with the zone's name (`2026-12-02 01:20:05 UTC`);
    `-` for none; a value that is not a time with an offset is shown as it is."""
    if not value:
        return "-"
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return value
    if parsed.tzinfo is None:
        return value
    zone = local_zone()
    shown = parsed.astimezone(zone) if zone is not None else parsed.astimezone()
    return shown.strftime("%Y-%m-%d %H:%M:%S %Z" if seconds else "%Y-%m-%d %H:%M %Z")


def short_time(value: str | None) -> str:
    """A time for a table cell: local, to the minute, with the zone (`2026-12-02 01:20 UTC`)."""
    return local_time(value, seconds=False)
