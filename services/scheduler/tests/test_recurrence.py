"""When schedules fire: cron rules in a time zone across DST changes, intervals (S4).

Unit tests of the pure next-fire functions; nothing is waited for.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from agentworks.core.errors import InvalidArgument
from agentworks_scheduler import recurrence as rec
from agentworks_scheduler.models import Recurrence

BERLIN = ZoneInfo("Europe/Berlin")


def cron(expr: str, tz: str = "UTC") -> Recurrence:
    return rec.check(Recurrence(cron=expr, time_zone=tz), min_interval_seconds=60)


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, sec: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, sec, tzinfo=UTC)


def fire_times(rule: Recurrence, after: datetime, count: int) -> list[datetime]:
    return rec.fire_times(rule, after, after, count)


def test_daily_cron_keeps_local_time_across_spring_forward_S4():
    """S4: 09:00 New York stays 09:00 local when the offset changes from -5 to -4."""
    times = fire_times(cron("0 9 * * *", "America/New_York"), utc(2024, 3, 8, 15), 3)
    assert times == [utc(2024, 3, 9, 14), utc(2024, 3, 10, 13), utc(2024, 3, 11, 13)]


def test_skipped_wall_time_fires_shifted_forward_by_the_jump_S4():
    """S4: 02:30 does not exist on 2024-03-31 in Berlin; it fires at 03:30 CEST, once."""
    times = fire_times(cron("30 2 * * *", "Europe/Berlin"), utc(2024, 3, 29, 12), 3)
    assert times == [utc(2024, 3, 30, 1, 30), utc(2024, 3, 31, 1, 30), utc(2024, 4, 1, 0, 30)]
    assert [t.astimezone(BERLIN).strftime("%d %H:%M %Z") for t in times] == [
        "30 02:30 CET",
        "31 03:30 CEST",
        "01 02:30 CEST",
    ]


def test_repeated_wall_time_fires_once_for_a_fixed_hour_rule_S4():
    """S4: 02:30 happens twice on 2024-10-27 in Berlin; a daily 02:30 rule fires once."""
    times = fire_times(cron("30 2 * * *", "Europe/Berlin"), utc(2024, 10, 26, 12), 3)
    assert times == [utc(2024, 10, 27, 0, 30), utc(2024, 10, 28, 1, 30), utc(2024, 10, 29, 1, 30)]


def test_wildcard_hour_rule_follows_real_time_through_both_passes_S4():
    """S4: every 30 minutes keeps firing every 30 real minutes through the repeated hour."""
    times = fire_times(cron("*/30 * * * *", "Europe/Berlin"), utc(2024, 10, 26, 23, 15), 8)
    assert times == [utc(2024, 10, 26, 23, 30) + timedelta(minutes=30 * i) for i in range(8)]
    spring = fire_times(cron("*/30 * * * *", "Europe/Berlin"), utc(2024, 3, 31, 0, 15), 4)
    assert spring == [utc(2024, 3, 31, 0, 30) + timedelta(minutes=30 * i) for i in range(4)]


def test_interval_occurrences_stay_on_their_grid_and_count_what_was_missed_S3_S4():
    """S3 S4: intervals step from their anchor; missed occurrences are counted, capped."""
    rule = rec.check(Recurrence(interval_seconds=600), min_interval_seconds=60)
    anchor = utc(2024, 1, 1, 0, 0)
    assert rec.next_after(rule, anchor, utc(2023, 12, 31)) == anchor
    assert rec.next_after(rule, anchor, utc(2024, 1, 1, 0, 25)) == utc(2024, 1, 1, 0, 30)
    assert rec.next_after(rule, anchor, utc(2024, 1, 1, 0, 30)) == utc(2024, 1, 1, 0, 40)
    assert rec.missed(rule, anchor, anchor, utc(2024, 1, 1, 1, 5)) == 6
    hourly = cron("0 * * * *")
    assert rec.missed(hourly, anchor, anchor, utc(2024, 1, 1, 5, 30)) == 5
    assert rec.missed(hourly, anchor, anchor, utc(2025, 1, 1)) == rec.MISSED_CAP


def test_reversed_range_wraps_around_overnight_S4():
    """S4: a range whose start is above its end wraps past the field's end: hours 22-2
    are 22:00-02:59 of the wall clock; a step counts across the wrap."""
    overnight = cron("* 22-2 * * *")
    assert fire_times(overnight, utc(2024, 1, 1, 2, 58), 3) == [
        utc(2024, 1, 1, 2, 59),
        utc(2024, 1, 1, 22, 0),
        utc(2024, 1, 1, 22, 1),
    ]
    assert fire_times(overnight, utc(2024, 1, 1, 23, 58), 3) == [
        utc(2024, 1, 1, 23, 59),
        utc(2024, 1, 2, 0, 0),
        utc(2024, 1, 2, 0, 1),
    ]
    every_other = cron("0 22-2/2 * * *")
    assert fire_times(every_other, utc(2024, 1, 1, 12), 4) == [
        utc(2024, 1, 1, 22),
        utc(2024, 1, 2, 0),
        utc(2024, 1, 2, 2),
        utc(2024, 1, 2, 22),
    ]
    assert fire_times(cron("5-1 7 * * *"), utc(2024, 1, 1, 7, 0), 3) == [
        utc(2024, 1, 1, 7, 1),
        utc(2024, 1, 1, 7, 5),
        utc(2024, 1, 1, 7, 6),
    ]


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        (Recurrence(cron="0 9 * *"), "has 4 fields; it needs five: minute hour"),
        (Recurrence(cron="0 0 9 * * *"), "a sixth field \\(seconds\\) is not supported"),
        (Recurrence(cron="61 * * * *"), "the minute field '61' is not valid \\(allowed: 0-59"),
        (Recurrence(cron="0 9 * 13 *"), "the month field '13' is not valid \\(allowed: 1-12"),
        (Recurrence(cron="0 9 * * 8"), "the day-of-week field '8' is not valid"),
        (Recurrence(cron="@reboot"), "unknown alias"),
        (Recurrence(cron="0 0 30 2 *"), "never fires"),
        (Recurrence(cron="0 9 * * *", time_zone="Mars/Olympus"), "not a known IANA"),
        (Recurrence(interval_seconds=59), "interval_seconds must be between 60"),
        (Recurrence(), "exactly one of cron or interval_seconds"),
        (Recurrence(cron="0 * * * *", interval_seconds=60), "exactly one"),
    ],
)
def test_bad_rules_are_refused_with_a_reason_S4_P6(rule, message):
    """S4 P6: a rule that is malformed or never fires is INVALID_ARGUMENT."""
    with pytest.raises(InvalidArgument, match=message):
        rec.check(rule, min_interval_seconds=60)


def test_aliases_and_zone_names_are_normalized_S4():
    """S4: @daily means midnight in the zone; an empty zone means UTC."""
    rule = cron("@daily", "Europe/Berlin")
    assert fire_times(rule, utc(2024, 6, 1, 12), 1) == [utc(2024, 6, 1, 22)]
    assert cron("0 9 * * 1-5", "").time_zone == "UTC"
