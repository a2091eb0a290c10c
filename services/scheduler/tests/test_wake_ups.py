"""Wake-ups through the real scheduler and messaging services (S1, S2, A2, A3, P6)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import structlog

from agentworks.client import SchedulerClient
from agentworks.client.messaging import attributes_json
from agentworks.core.errors import (
    Busy,
    Conflict,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    PreconditionFailed,
    Unauthenticated,
)
from agentworks.core.identity import Minter
from agentworks.core.keys import SigningKey
from agentworks.messaging.v1 import messaging_pb2 as m
from agentworks.scheduler.v1 import scheduler_pb2 as pb

BOT = "agent:demo/bot"


async def test_wake_up_fires_once_into_its_conversation_as_its_own_turn_S1_S2_S6(
    clients, bot, demo, conversation, service, deliveries
):
    """S1 S2 S6: a due wake-up becomes one wake_up delivery, claimed as a turn of its own."""
    sched = await clients.scheduler(BOT)
    wake_up = await sched.create_wake_up(conversation, delay_seconds=0, note="check the build")
    assert wake_up.status == pb.WAKE_UP_STATUS_PENDING
    assert (wake_up.product, wake_up.created_by) == ("crew:demo", BOT)

    turn = await bot.claim_turn([demo], wait_seconds=10)
    assert turn is not None and turn.conversation_id == conversation
    assert [d.kind for d in turn.deliveries] == [m.DELIVERY_KIND_WAKE_UP]
    delivery = turn.deliveries[0]
    assert delivery.text == "check the build"
    assert attributes_json(delivery)["wake_up_id"] == wake_up.wake_up_id
    assert attributes_json(delivery)["requested_by"] == BOT
    assert "late" in attributes_json(delivery) and "late_seconds" in attributes_json(delivery)
    await bot.complete_turn(turn.turn_id)

    await service.wait_ticks(2)  # more ticks pass: it does not fire again
    fired = await sched.get_wake_up(wake_up.wake_up_id)
    assert fired.status == pb.WAKE_UP_STATUS_FIRED
    assert fired.delivery_id == delivery.delivery_id
    assert fired.HasField("fired_at")
    assert len(await deliveries(conversation, "wake_up")) == 1


async def test_cancel_and_reschedule_while_messages_change_nothing_S1(
    clients, alice, bot, demo, opened, service, deliveries
):
    """S1: only cancel or reschedule change a wake-up; a message in between does not."""
    conversation = opened.conversation_id
    sched = await clients.scheduler(BOT)
    later = await sched.create_wake_up(conversation, delay_seconds=3600, note="later")
    dropped = await sched.create_wake_up(conversation, delay_seconds=3600, note="dropped")

    await alice.send("any news?", inbox_id=opened.inbox_id)
    turn = await bot.claim_turn([demo], wait_seconds=5)
    assert [d.kind for d in turn.deliveries] == [m.DELIVERY_KIND_MESSAGE]
    await bot.complete_turn(turn.turn_id)
    listed = await sched.list_wake_ups(conversation_id=conversation)
    assert sorted(w.note for w in listed.wake_ups) == ["dropped", "later"]
    assert {w.status for w in listed.wake_ups} == {pb.WAKE_UP_STATUS_PENDING}

    cancelled = await sched.cancel_wake_up(dropped.wake_up_id)
    assert cancelled.status == pb.WAKE_UP_STATUS_CANCELLED
    moved = await sched.reschedule_wake_up(later.wake_up_id, delay_seconds=0)
    assert moved.due_at.ToDatetime() < later.due_at.ToDatetime()

    turn = await bot.claim_turn([demo], wait_seconds=10)
    assert [d.text for d in turn.deliveries] == ["later"]
    await bot.complete_turn(turn.turn_id)
    await service.wait_ticks(2)
    assert [row[1] for row in await deliveries(conversation, "wake_up")] == ["later"]

    with pytest.raises(PreconditionFailed, match="cancelled, not pending") as not_pending:
        await sched.cancel_wake_up(dropped.wake_up_id)
    assert (not_pending.value.reason, not_pending.value.metadata) == (
        "NOT_PENDING",
        {"wake_up_id": dropped.wake_up_id, "status": "cancelled"},
    )
    with pytest.raises(PreconditionFailed, match="fired, not pending") as fired:
        await sched.reschedule_wake_up(later.wake_up_id, delay_seconds=60)
    assert fired.value.reason == "NOT_PENDING"
    assert (await sched.list_wake_ups(conversation_id=conversation)).wake_ups == []
    everything = await sched.list_wake_ups(conversation_id=conversation, include_finished=True)
    assert {w.note: w.status for w in everything.wake_ups} == {
        "later": pb.WAKE_UP_STATUS_FIRED,
        "dropped": pb.WAKE_UP_STATUS_CANCELLED,
    }


async def test_only_the_conversations_agents_and_operators_attach_wake_ups_A2_A3_S1(
    clients, demo, conversation, scheduler, sql
):
    """A2 A3 S1: strangers get NOT_FOUND, the outside party and users are refused."""
    stranger = await clients.scheduler("agent:other/bot")
    with pytest.raises(NotFound):
        await stranger.create_wake_up(conversation, delay_seconds=0)
    for principal in ("user:alice", "user:owner"):
        person = await clients.scheduler(principal)
        with pytest.raises(PermissionDenied, match="only the agents serving"):
            await person.create_wake_up(conversation, delay_seconds=0)

    # An agent that opened a conversation with crew:demo is its outside party: the
    # conversation belongs to crew:demo, not to the crew the agent acts for.
    other = await clients.messaging("agent:other/bot")
    theirs = await other.send("hi demo", target=demo)
    with pytest.raises(PermissionDenied, match="is with crew:demo; you act for crew:other"):
        await stranger.create_wake_up(theirs.conversation_id, delay_seconds=0)

    sched = await clients.scheduler(BOT)
    with pytest.raises(NotFound):
        await sched.create_wake_up("6c1f3c52-0000-4000-8000-000000000000", delay_seconds=0)
    with pytest.raises(NotFound):
        await sched.create_wake_up("not-a-conversation", delay_seconds=0)

    forged = SchedulerClient(
        scheduler.address, identity=Minter(BOT, SigningKey.generate("gateway"))
    )
    try:
        with pytest.raises(Unauthenticated):
            await forged.create_wake_up(conversation, delay_seconds=0)
    finally:
        await forged.close()

    wake_up = await sched.create_wake_up(conversation, delay_seconds=3600, note="mine")
    with pytest.raises(NotFound):
        await stranger.get_wake_up(wake_up.wake_up_id)
    with pytest.raises(NotFound):
        await stranger.cancel_wake_up(wake_up.wake_up_id)
    assert (await stranger.list_wake_ups(include_finished=True)).wake_ups == []
    # Another agent of the same crew, and an operator, may manage it.
    helper = await clients.scheduler("agent:demo/helper")
    assert (await helper.get_wake_up(wake_up.wake_up_id)).note == "mine"
    ops = await clients.scheduler("user:ops", {"operator"})
    assert (await ops.cancel_wake_up(wake_up.wake_up_id)).status == pb.WAKE_UP_STATUS_CANCELLED
    assert await sql("SELECT count(*) FROM scheduler.wake_ups") == [(1,)]


async def test_wake_up_refusals_say_what_to_do_and_store_nothing_P6_S1(clients, conversation, sql):
    """P6 S1: bad times, sizes and products are INVALID_ARGUMENT; the pending cap is BUSY."""
    sched = await clients.scheduler(BOT)
    now = datetime.now(UTC)
    refusals: list[tuple[dict[str, Any], str]] = [
        ({}, "when is missing"),
        ({"delay_seconds": -1}, "delay_seconds must be between 0"),
        ({"delay_seconds": 401 * 86400}, "delay_seconds must be between 0"),
        ({"at": now - timedelta(hours=2)}, "in the past"),
        ({"at": now + timedelta(days=401)}, "days ahead"),
        ({"delay_seconds": 1, "note": "x" * (16 * 1024 + 1)}, "note is 16385 bytes"),
        ({"delay_seconds": 1, "product": "crew:other"}, "taken from your identity"),
    ]
    for kwargs, message in refusals:
        with pytest.raises(InvalidArgument, match=message):
            await sched.create_wake_up(conversation, **kwargs)
    with pytest.raises(InvalidArgument, match="limit must be between 1 and 200"):
        await sched.list_wake_ups(limit=500)
    with pytest.raises(InvalidArgument, match="is not a cursor"):
        await sched.list_wake_ups(after="nope")
    assert await sql("SELECT count(*) FROM scheduler.wake_ups") == [(0,)]

    await sql(
        "INSERT INTO scheduler.wake_ups (id, conversation_id, due_at, created_by) "
        "SELECT gen_random_uuid(), %s, now() + interval '1 day', 'agent:demo/bot' "
        "FROM generate_series(1, 100)",
        conversation,
    )
    with pytest.raises(Busy, match="100 pending wake-ups") as full:
        await sched.create_wake_up(conversation, delay_seconds=60)
    assert (full.value.reason, full.value.metadata["limit"]) == ("STORED_LIMIT", "100")
    assert await sql("SELECT count(*) FROM scheduler.wake_ups") == [(100,)]


async def test_wake_up_list_pages_by_cursor_S1(clients, conversation):
    """S1: listing is paged; the cursor continues where the last page ended."""
    sched = await clients.scheduler(BOT)
    made = [
        (await sched.create_wake_up(conversation, delay_seconds=600 + i)).wake_up_id
        for i in range(5)
    ]
    first = await sched.list_wake_ups(conversation_id=conversation, limit=3)
    rest = await sched.list_wake_ups(conversation_id=conversation, after=first.next_cursor)
    assert [w.wake_up_id for w in [*first.wake_ups, *rest.wake_ups]] == made
    again = await sched.list_wake_ups(conversation_id=conversation, after=rest.next_cursor)
    assert again.wake_ups == [] and again.next_cursor == rest.next_cursor


async def test_a_retried_create_gets_the_same_wake_up_S1_S6(clients, conversation, sql):
    """S1 S6: the same request with the same submission_id creates one wake-up, even
    concurrently and at the pending limit; the key with another request is refused. The
    log tells the one that created it from the retries."""
    sched = await clients.scheduler(BOT)
    with structlog.testing.capture_logs() as logs:
        twins = await asyncio.gather(
            *(
                sched.create_wake_up(conversation, delay_seconds=600, note="n", submission_id="k1")
                for _ in range(8)
            )
        )
    assert len({w.wake_up_id for w in twins}) == 1
    events = sorted(e["event"] for e in logs if e["event"].startswith("wake_up."))
    assert events == ["wake_up.created"] + ["wake_up.retried"] * 7
    with pytest.raises(Conflict, match="submission_id 'k1' was already used"):
        await sched.create_wake_up(
            conversation, delay_seconds=600, note="other", submission_id="k1"
        )
    with pytest.raises(
        InvalidArgument, match="submission_id is 201 characters; the limit is 200 characters"
    ):
        await sched.create_wake_up(conversation, delay_seconds=1, submission_id="x" * 201)
    # Without a key the client makes one per call: two calls, two wake-ups.
    await sched.create_wake_up(conversation, delay_seconds=600)
    await sched.create_wake_up(conversation, delay_seconds=600)
    assert await sql("SELECT count(*) FROM scheduler.wake_ups") == [(3,)]

    await sql(
        "INSERT INTO scheduler.wake_ups (id, conversation_id, due_at, created_by) "
        "SELECT gen_random_uuid(), %s, now() + interval '1 day', 'agent:demo/bot' "
        "FROM generate_series(1, 97)",
        conversation,
    )
    again = await sched.create_wake_up(
        conversation, delay_seconds=600, note="n", submission_id="k1"
    )
    assert again.wake_up_id == twins[0].wake_up_id  # a retry is answered even when full
    with pytest.raises(Busy):
        await sched.create_wake_up(conversation, delay_seconds=600, submission_id="k2")
    assert await sql("SELECT count(*) FROM scheduler.wake_ups") == [(100,)]


async def test_the_client_refuses_a_naive_time_instead_of_reading_it_as_utc_S1(identity):
    """S1: `create_wake_up(at=datetime.now())` (no time zone) is refused by the typed
    client before anything is sent: protobuf would read it as UTC, hours off for most."""
    async with SchedulerClient("127.0.0.1:1", identity=identity(BOT)) as sched:
        with pytest.raises(ValueError, match="has no time zone: give an aware datetime"):
            await sched.create_wake_up(str(uuid.uuid4()), at=datetime(2027, 1, 14, 9, 0))
        with pytest.raises(ValueError, match="has no time zone"):
            await sched.preview_schedule(cron="0 9 * * *", after=datetime(2027, 1, 1))
