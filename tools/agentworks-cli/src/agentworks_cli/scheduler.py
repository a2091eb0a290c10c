"""The scheduler's commands (`wake-ups`, `schedules`, `pauses`, `webhooks`; S1-S5, G3):
what they share. Times and durations as the command line takes them, request building,
paging, and the options several of them have.

Each command calls the tool of the same name (`wake_ups`, `schedules`, `pauses`,
`webhooks`) on the gateway's HTTP API. The scheduler decides who may do what: operators
may state a `--product`; pauses need the operator role.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from agentworks.core.limits import MAX_SUBMISSION_ID
from agentworks_cli.errors import UsageError
from agentworks_cli.output import note
from agentworks_cli.times import local_zone

_DURATION = re.compile(r"^(\d+)\s*([smhd]?)$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}

TIME_HELP = "ISO 8601, e.g. 2026-01-31T09:00 (local time) or 2026-01-31T08:00:00Z"
DURATION_HELP = "seconds, or a number with s, m, h or d (90, 15m, 2h, 1d)"


def cli_time(value: str, flag: str) -> str:
    """An ISO 8601 time; without an offset it is read in the local time zone, where a
    time the clocks skip (a spring-forward gap) moves forward by the gap, as cron rules
    do (02:30 on such a day in New York is 03:30 EDT)."""
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise UsageError(f"{flag} {value!r} is not a time ({exc}): use {TIME_HELP}") from None
    if parsed.tzinfo is None:
        zone = local_zone()
        if zone is None:
            parsed = parsed.astimezone()
        else:  # fold 0: a skipped time takes the offset before the gap, so moves forward
            parsed = parsed.replace(tzinfo=zone).astimezone(UTC).astimezone(zone)
    return parsed.isoformat()


def duration(value: str, flag: str) -> int:
    """Seconds from `90`, `90s`, `15m`, `2h` or `1d`."""
    match = _DURATION.match(value.strip())
    if not match:
        raise UsageError(f"{flag} {value!r} is not a duration: use {DURATION_HELP}")
    return int(match.group(1)) * _UNITS[match.group(2)]


def set_fields(request: dict[str, Any], args: argparse.Namespace, **fields: str) -> dict[str, Any]:
    """Copy the given (not None) options into the request: field=attribute name."""
    for field, attribute in fields.items():
        value = getattr(args, attribute, None)
        if value is not None and value is not False:
            request[field] = value
    return request


def list_request(action: str, args: argparse.Namespace) -> dict[str, Any]:
    return set_fields(
        {"action": action},
        args,
        conversation_id="conversation",
        product="product",
        after="after",
        limit="limit",
    )


# The scheduler's page size when --limit is not given (docs/scheduler.md).
LIST_LIMIT_DEFAULT = 50


def next_page(result: Mapping[str, Any], key: str, args: argparse.Namespace) -> None:
    """A hint for the next page, when this one is full (a shorter page was the last)."""
    if result["next_cursor"] and len(result[key]) >= (
        getattr(args, "limit", None) or LIST_LIMIT_DEFAULT
    ):
        note(f"more may follow: --after {result['next_cursor']}")


def list_options(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--conversation", metavar="ID", help=f"only {what} of this conversation")
    parser.add_argument(
        "--product", metavar="PRODUCT", help=f"only {what} of this product (crew:<name>)"
    )
    parser.add_argument(
        "--after", "--cursor", metavar="CURSOR", help="the next page: the cursor printed last"
    )
    parser.add_argument("--limit", type=int, metavar="N", help="at most N (1-200)")


def submission_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--submission-id",
        metavar="KEY",
        help=f"retry key (up to {MAX_SUBMISSION_ID} characters): running the command again with "
        f"the same key returns the {what} the first run created instead of making a second one",
    )
