"""Schedules through the real services: manage, preview, fire (S4, S6, A3)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import structlog

from agentworks.client.messaging import attributes_json
from agentworks.core.errors import (
    Busy,
    Conflict,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Reason,
)
from agentworks.core.limits import MAX_NAME_CHARS, MAX_PROMPT_BYTES
from agentworks.messaging.v1 import messaging_pb2 as m

BOT = "agent:demo/bot"


def at(ts) -> datetime:
    return ts.ToDatetime(tzinfo=UTC)


async def test_operator_manages_a_cron_schedule_with_a_time_zone_S4(clients, conversation):
    """S4: create, list, update, pause, resume, preview and delete a schedule."""
    ops = await clients.scheduler("user:ops", {"operator"})
    schedule = await ops.create_schedule(
        conversation,
        "morning check",
        cron="0 9 * * 1-5",
        time_zone="Europe/Berlin",
        name="weekday mornings",
        product="crew:demo",
    )
    assert schedule.recurrence.cron == "0 9 * * 1-5"
    assert schedule.recurrence.time_zone == "Europe/Berlin"
    assert schedule.product == "crew:demo" and not schedule.paused
    preview = await ops.preview_schedule(schedule.schedule_id, count=3)
    assert preview[0] == at(schedule.next_fire_at)
    assert all(t.astimezone(_berlin()).hour == 9 for t in preview)
    assert all(t.astimezone(_berlin()).weekday() < 5 for t in preview)

    listed = await ops.list_schedules(conversation_id=conversation)
    assert [s.schedule_id for s in listed.schedules] == [schedule.schedule_id]

    renamed = await ops.update_schedule(schedule.schedule_id, prompt="morning status")
    assert renamed.prompt == "morning status"
    assert renamed.next_fire_at == schedule.next_fire_at  # same rule, same next time
    with pytest.raises(ValueError, match="time_zone goes with a cron rule"):
        await ops.update_schedule(schedule.schedule_id, time_zone="America/New_York")
    hourly = await ops.update_schedule(schedule.schedule_id, interval_seconds=3600)
    assert hourly.recurrence.interval_seconds == 3600
    expected = datetime.now(UTC) + timedelta(hours=1)
    assert abs(at(hourly.next_fire_at) - expected) < timedelta(seconds=30)

    assert (await ops.pause_schedule(schedule.schedule_id)).paused
    assert not (await ops.resume_schedule(schedule.schedule_id)).paused
    await ops.delete_schedule(schedule.schedule_id)
    with pytest.raises(NotFound):
        await ops.get_schedule(schedule.schedule_id)
    assert (await ops.list_schedules()).schedules == []


def _berlin():
    from zoneinfo import ZoneInfo

    return ZoneInfo("Europe/Berlin")


async def test_preview_across_dst_over_grpc_S4(clients):
    """S4: the preview RPC returns the local-time-correct instants across a DST change."""
    sched = await clients.scheduler(BOT)
    times = await sched.preview_schedule(
        cron="30 2 * * *",
        time_zone="Europe/Berlin",
        count=3,
        after=datetime(2024, 3, 29, 12, tzinfo=UTC),
    )
    assert times == [
        datetime(2024, 3, 30, 1, 30, tzinfo=UTC),
        datetime(2024, 3, 31, 1, 30, tzinfo=UTC),  # 02:30 skipped: 03:30 CEST
        datetime(2024, 4, 1, 0, 30, tzinfo=UTC),
    ]
    with pytest.raises(InvalidArgument, match="count must be between 1 and 100"):
        await sched.preview_schedule(cron="* * * * *", count=101)


async def test_a_schedule_prompt_fires_into_its_conversation_S4_S6(
    clients, bot, demo, conversation, service, deliveries
):
    """S4 S6: at its time a schedule delivers its prompt once, then moves on."""
    sched = await clients.scheduler(BOT)
    start = datetime.now(UTC) + timedelta(seconds=0.5)
    schedule = await sched.create_schedule(
        conversation, "daily digest", interval_seconds=3600, start_at=start
    )
    assert at(schedule.next_fire_at) == start.replace(microsecond=start.microsecond)
    turn = await bot.claim_turn([demo], wait_seconds=15)
    assert [d.kind for d in turn.deliveries] == [m.DELIVERY_KIND_SCHEDULE]
    delivery = turn.deliveries[0]
    assert delivery.text == "daily digest"
    assert attributes_json(delivery)["schedule_id"] == schedule.schedule_id
    assert attributes_json(delivery)["missed_occurrences"] == 0
    await bot.complete_turn(turn.turn_id)

    await service.wait_ticks(2)
    after = await sched.get_schedule(schedule.schedule_id)
    assert after.fire_count == 1 and after.HasField("last_fired_at")
    assert at(after.next_fire_at) == start + timedelta(hours=1)
    keys = [row[0] for row in await deliveries(conversation, "schedule")]
    assert keys == [f"schedule:{schedule.schedule_id}:{start.isoformat(timespec='microseconds')}"]


async def test_only_the_creator_or_an_operator_manages_a_schedule_A3_S4(clients, conversation):
    """A3 S4: other principals, even agents of the same crew, get NOT_FOUND."""
    sched = await clients.scheduler(BOT)
    schedule = await sched.create_schedule(conversation, "ping", cron="*/5 * * * *")
    assert schedule.product == "crew:demo" and schedule.created_by == BOT
    helper = await clients.scheduler("agent:demo/helper")
    for action in (
        helper.get_schedule,
        helper.pause_schedule,
        helper.delete_schedule,
        helper.preview_schedule,
    ):
        with pytest.raises(NotFound):
            await action(schedule.schedule_id)
    with pytest.raises(NotFound):
        await helper.update_schedule(schedule.schedule_id, prompt="hijacked")
    assert (await helper.list_schedules()).schedules == []
    assert [s.prompt for s in (await sched.list_schedules()).schedules] == ["ping"]
    ops = await clients.scheduler("user:ops", {"operator"})
    assert (await ops.pause_schedule(schedule.schedule_id)).paused

    alice = await clients.scheduler("user:alice")
    with pytest.raises(PermissionDenied):
        await alice.create_schedule(conversation, "from outside", cron="* * * * *")


async def test_schedule_refusals_store_nothing_S4_P6(clients, conversation, sql):
    """S4 P6: bad rules, zones, prompts and intervals are refused before anything is saved."""
    sched = await clients.scheduler(BOT)
    refusals: list[tuple[dict[str, Any], str]] = [
        ({"cron": "0 9 * *"}, "it needs five"),
        ({"cron": "0 9 * * *", "time_zone": "Europe/Nowhere"}, "not a known IANA"),
        ({"cron": "0 0 31 2 *"}, "never fires"),
        ({"interval_seconds": 0}, "interval_seconds must be between 1"),
        ({}, "recurrence is required"),
        ({"cron": "* * * * *", "start_at": datetime.now(UTC)}, "interval schedules only"),
    ]
    for kwargs, message in refusals:
        with pytest.raises(InvalidArgument, match=message):
            await sched.create_schedule(conversation, "prompt", **kwargs)
    with pytest.raises(InvalidArgument, match="prompt is empty"):
        await sched.create_schedule(conversation, "  ", cron="* * * * *")
    # The proto's rules: the name's characters and the prompt's bytes.
    for kwargs, field, rule, limit in (
        ({"name": "n" * (MAX_NAME_CHARS + 1)}, "name", "string.max_len", MAX_NAME_CHARS),
        ({"prompt": "p" * (MAX_PROMPT_BYTES + 1)}, "prompt", "string.max_bytes", MAX_PROMPT_BYTES),
    ):
        arguments: dict[str, Any] = {"prompt": "prompt", "cron": "* * * * *", **kwargs}
        with pytest.raises(InvalidArgument) as refused:
            await sched.create_schedule(conversation, arguments.pop("prompt"), **arguments)
        assert refused.value.reason == Reason.FIELD_RULE
        assert refused.value.metadata == {"field": field, "rule": rule, "limit": str(limit)}
    assert await sql("SELECT count(*) FROM scheduler.schedules") == [(0,)]


async def test_schedules_and_webhooks_per_conversation_are_bounded_S4_S5_P6(
    clients, conversation, sql
):
    """S4 S5 P6: a conversation holds at most 100 schedules and 100 webhooks; one more is
    refused RESOURCE_EXHAUSTED saying the limit and what to do, and stores nothing; after
    a delete there is room again."""
    sched = await clients.scheduler(BOT)
    first = await sched.create_schedule(conversation, "tick", interval_seconds=3600, paused=True)
    hook = await sched.create_webhook(conversation, name="first")
    await sql(
        "INSERT INTO scheduler.schedules (id, name, conversation_id, product, prompt, cron, "
        "interval_seconds, time_zone, anchor_at, next_fire_at, paused, created_by) "
        "SELECT gen_random_uuid(), name, conversation_id, product, prompt, cron, "
        "interval_seconds, time_zone, anchor_at, next_fire_at, true, created_by "
        "FROM scheduler.schedules, generate_series(1, 99)"
    )
    await sql(
        "INSERT INTO scheduler.webhooks (id, name, conversation_id, product, salt, "
        "secret_fingerprint, created_by) SELECT gen_random_uuid(), name, conversation_id, "
        "product, salt, secret_fingerprint, created_by FROM scheduler.webhooks, "
        "generate_series(1, 99)"
    )
    with pytest.raises(Busy, match="already has 100 schedules \\(the limit is 100\\); delete"):
        await sched.create_schedule(conversation, "one more", interval_seconds=3600)
    with pytest.raises(Busy, match="already has 100 webhooks \\(the limit is 100\\); delete"):
        await sched.create_webhook(conversation, name="one more")
    counts = (
        "SELECT (SELECT count(*) FROM scheduler.schedules), "
        "(SELECT count(*) FROM scheduler.webhooks)"
    )
    assert await sql(counts) == [(100, 100)]

    await sched.delete_schedule(first.schedule_id)
    await sched.delete_webhook(hook.webhook_id)
    await sched.create_schedule(conversation, "room again", interval_seconds=3600, paused=True)
    await sched.create_webhook(conversation, name="room again")
    assert await sql(counts) == [(100, 100)]


async def test_a_retried_create_gets_the_same_schedule_S4_S6(clients, conversation, sql):
    """S4 S6: the same CreateSchedule with the same submission_id makes one schedule (and
    so one prompt per occurrence), even concurrently and at the per-conversation limit;
    the key with another request is refused ALREADY_EXISTS naming the key; keys are per
    creator. The log says which request made it and which were retries."""
    sched = await clients.scheduler(BOT)
    request = {"interval_seconds": 3600, "name": "digest", "submission_id": "s-1"}
    with structlog.testing.capture_logs() as logs:
        twins = await asyncio.gather(
            *(sched.create_schedule(conversation, "digest", **request) for _ in range(6))
        )
    assert len({x.schedule_id for x in twins}) == 1
    events = sorted(e["event"] for e in logs if e["event"].startswith("schedule."))
    assert events == ["schedule.created"] + ["schedule.retried"] * 5
    with pytest.raises(Conflict, match="submission_id 's-1' was already used for a different"):
        await sched.create_schedule(conversation, "other prompt", **request)
    with pytest.raises(
        InvalidArgument, match="submission_id is 201 characters; the limit is 200 characters"
    ):
        await sched.create_schedule(
            conversation, "x", interval_seconds=3600, submission_id="x" * 201
        )
    ops = await clients.scheduler("user:ops", {"operator"})
    mine = await ops.create_schedule(conversation, "digest", **request)
    assert mine.schedule_id != twins[0].schedule_id and mine.created_by == "user:ops"
    assert await sql("SELECT count(*) FROM scheduler.schedules") == [(2,)]

    await sql(
        "INSERT INTO scheduler.schedules (id, conversation_id, prompt, interval_seconds, "
        "anchor_at, next_fire_at, created_by) SELECT gen_random_uuid(), %s, 'p', 3600, now(), "
        "now() + interval '1 hour', 'agent:demo/bot' FROM generate_series(1, 98)",
        conversation,
    )
    again = await sched.create_schedule(conversation, "digest", **request)
    assert again.schedule_id == twins[0].schedule_id  # a retry is answered even when full
    with pytest.raises(Busy):
        await sched.create_schedule(conversation, "new", interval_seconds=3600)
