"""When a schedule fires: cron rules read in a time zone, and fixed intervals (S4).

Pure functions, no I/O. Cron fields match the local wall-clock time of the schedule's
zone (IANA, via zoneinfo); croniter walks the wall clock and zoneinfo turns each wall
time into an instant. Daylight-saving changes follow classic cron:

- a wall time that does not exist (clocks jump forward) fires shifted forward by the
  jump: 02:30 on a 02:00 -> 03:00 night fires at 03:30 new time; if that instant is
  already an occurrence, it fires once;
- a wall time that occurs twice (clocks go back) fires once, at its first occurrence,
  for rules with a fixed hour ("30 2 * * *"); rules whose hour field is a wildcard
  ("*/15 * * * *", "0 */2 * * *") follow real time and fire in both passes.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadCronError, CroniterBadDateError, croniter

from agentworks.core.errors import InvalidArgument, Reason, rule_meta
from agentworks.core.limits import MAX_CRON_CHARS as MAX_CRON_CHARS
from agentworks.core.limits import MAX_INTERVAL_SECONDS as MAX_INTERVAL_SECONDS
from agentworks_scheduler.models import Recurrence

# Longest daylight-saving or zone shift we allow for when ordering wall-clock times.
_MAX_SHIFT = timedelta(hours=3)
# Counting missed occurrences stops here ("at least this many").
MISSED_CAP = 1000
_ALIASES = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}


# In the zone database's folder but not zones to schedule by: the server host's own
# zone (whatever it happens to be), and the placeholder of unconfigured systems.
_NOT_ZONES = frozenset({"localtime", "factory", "posixrules"})


def zone(name: str) -> ZoneInfo:
    """The IANA zone `name` ("" means UTC), or InvalidArgument."""
    try:
        if name.lower() in _NOT_ZONES:
            raise ValueError(name)
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidArgument(
            f"time_zone {name!r} is not a known IANA time zone: use a name like "
            "'Europe/Berlin', 'America/New_York' or 'UTC'",
            reason=Reason.INVALID_VALUE,
            metadata={"field": "recurrence.time_zone"},
        ) from None


# The field a cron refusal names (the Recurrence of a schedule request).
CRON = "recurrence.cron"

# The five cron fields and their values, for saying which one is wrong.
_FIELDS = (
    ("minute", "0-59"),
    ("hour", "0-23"),
    ("day-of-month", "1-31"),
    ("month", "1-12 or jan-dec"),
    ("day-of-week", "0-7 or sun-sat, 0 and 7 both Sunday"),
)


def cron_fields(expr: str) -> str:
    """The five cron fields of `expr` (aliases expanded), or InvalidArgument."""
    text = " ".join(expr.split())
    if not text:
        raise InvalidArgument(
            "cron is empty: give five fields, e.g. '0 9 * * 1-5'",
            reason=Reason.FIELD_RULE,
            metadata=rule_meta(CRON, "required"),
        )
    if len(text) > MAX_CRON_CHARS:
        raise InvalidArgument(
            f"cron is longer than {MAX_CRON_CHARS} characters",
            reason=Reason.FIELD_RULE,
            metadata=rule_meta(CRON, "string.max_len", MAX_CRON_CHARS),
        )
    if text.startswith("@"):
        if text.lower() not in _ALIASES:
            raise InvalidArgument(
                f"cron {expr!r}: unknown alias; use one of {', '.join(sorted(_ALIASES))}",
                reason=Reason.INVALID_VALUE,
                metadata={"field": CRON},
            )
        return _ALIASES[text.lower()]
    fields = text.split(" ")
    if len(fields) != 5:
        seconds = "; a sixth field (seconds) is not supported" if len(fields) == 6 else ""
        raise InvalidArgument(
            f"cron {expr!r} has {len(fields)} field{'s' * (len(fields) != 1)}; it needs "
            f"five: minute hour day-of-month month day-of-week (e.g. '0 9 * * 1-5'){seconds}",
            reason=Reason.INVALID_VALUE,
            metadata={"field": CRON},
        )
    if not croniter.is_valid(text):
        for index, (name, allowed) in enumerate(_FIELDS):
            alone = " ".join(fields[index] if i == index else "*" for i in range(5))
            if not croniter.is_valid(alone):
                raise InvalidArgument(
                    f"cron {expr!r}: the {name} field {fields[index]!r} is not valid "
                    f"(allowed: {allowed}; with *, lists a,b, ranges a-b and steps */n)",
                    reason=Reason.INVALID_VALUE,
                    metadata={"field": CRON, "cron_field": name},
                )
        raise InvalidArgument(
            f"cron {expr!r} is not a valid cron expression",
            reason=Reason.INVALID_VALUE,
            metadata={"field": CRON},
        )
    return text


def check(recurrence: Recurrence, *, min_interval_seconds: int) -> Recurrence:
    """A validated, normalized recurrence (the cron text is kept as given)."""
    if (recurrence.cron is None) == (recurrence.interval_seconds is None):
        raise InvalidArgument(
            "recurrence needs exactly one of cron or interval_seconds",
            reason=Reason.FIELD_RULE,
            metadata=rule_meta("recurrence", "oneof"),
        )
    if recurrence.cron is not None:
        cron = " ".join(recurrence.cron.split())
        fields = cron_fields(cron)
        tz = zone(recurrence.time_zone)
        try:
            next(_cron_instants(fields, tz, datetime.now(UTC)))
        except (CroniterBadDateError, CroniterBadCronError, StopIteration):
            raise InvalidArgument(
                f"cron {cron!r} never fires (no such date)",
                reason=Reason.INVALID_VALUE,
                metadata={"field": CRON},
            ) from None
        return Recurrence(cron=cron, time_zone=tz.key)
    interval = recurrence.interval_seconds or 0
    if not min_interval_seconds <= interval <= MAX_INTERVAL_SECONDS:
        raise InvalidArgument(
            f"interval_seconds must be between {min_interval_seconds} and "
            f"{MAX_INTERVAL_SECONDS}, got {interval}",
            reason=Reason.FIELD_RULE,
            metadata={
                **rule_meta("recurrence.interval_seconds", "int64.gte", min_interval_seconds),
                "max": str(MAX_INTERVAL_SECONDS),
            },
        )
    return Recurrence(interval_seconds=interval, time_zone=zone(recurrence.time_zone).key)


def occurrences(recurrence: Recurrence, anchor: datetime, after: datetime) -> Iterator[datetime]:
    """Fire times strictly after `after`, in order, as UTC datetimes (endless)."""
    if recurrence.cron is not None:
        yield from _cron_instants(cron_fields(recurrence.cron), zone(recurrence.time_zone), after)
        return
    step = timedelta(seconds=recurrence.interval_seconds or 0)
    at = anchor if after < anchor else anchor + ((after - anchor) // step + 1) * step
    while True:
        yield at.astimezone(UTC)
        at += step


def next_after(recurrence: Recurrence, anchor: datetime, after: datetime) -> datetime:
    """The first fire time strictly after `after`."""
    return next(occurrences(recurrence, anchor, after))


def fire_times(
    recurrence: Recurrence, anchor: datetime, after: datetime, count: int
) -> list[datetime]:
    """The next `count` fire times strictly after `after` (the preview)."""
    times = []
    for at in occurrences(recurrence, anchor, after):
        times.append(at)
        if len(times) >= count:
            break
    return times


def missed(recurrence: Recurrence, anchor: datetime, first: datetime, now: datetime) -> int:
    """Occurrences in (first, now] that collapse into the one firing at `first` (S3)."""
    if now <= first:
        return 0
    if recurrence.interval_seconds:
        return min(MISSED_CAP, (now - first) // timedelta(seconds=recurrence.interval_seconds))
    count = 0
    for at in occurrences(recurrence, anchor, first):
        if at > now or count >= MISSED_CAP:
            break
        count += 1
    return count


def _exists(naive: datetime, tz: ZoneInfo, fold: int) -> bool:
    """Whether this wall time really occurs in `tz` (not skipped by a jump forward)."""
    local = naive.replace(tzinfo=tz, fold=fold)
    back = local.astimezone(UTC).astimezone(tz)
    return back.replace(tzinfo=None) == naive


def _cron_instants(fields: str, tz: ZoneInfo, after: datetime) -> Iterator[datetime]:
    """Instants matching the cron fields on `tz`'s wall clock, strictly after `after`.

    Near a daylight-saving change, wall-clock order and real order differ by up to the
    shift, so candidates are kept in a heap and released once no later wall time can
    produce an earlier instant.
    """
    both_passes = fields.split(" ")[1].startswith("*")
    start = (after - _MAX_SHIFT).astimezone(tz).replace(tzinfo=None)
    walker = croniter(fields, start)
    heap: list[datetime] = []
    seen: set[datetime] = set()
    while True:
        naive = walker.get_next(datetime)
        first = naive.replace(tzinfo=tz, fold=0)
        candidates = []
        if _exists(naive, tz, 0):
            candidates.append(first)
            second = naive.replace(tzinfo=tz, fold=1)
            if both_passes and second.utcoffset() != first.utcoffset() and _exists(naive, tz, 1):
                candidates.append(second)
        elif not both_passes:
            # Skipped by a jump forward: fold 0 reads it with the old offset, which is the
            # same wall time shifted forward by the jump.
            candidates.append(first)
        for local in candidates:
            at = local.astimezone(UTC)
            if at > after and at not in seen:
                seen.add(at)
                heapq.heappush(heap, at)
        horizon = first.astimezone(UTC) - _MAX_SHIFT
        while heap and heap[0] < horizon:
            at = heapq.heappop(heap)
            seen.discard(at)
            yield at
