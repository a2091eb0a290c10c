"""Global and per-product pauses hold timers; resume releases them, marked late (S3)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agentworks.client.messaging import attributes_json
from agentworks.core.errors import InvalidArgument, PermissionDenied
from agentworks.messaging.v1 import messaging_pb2 as m
from agentworks.scheduler.v1 import scheduler_pb2 as pb

BOT = "agent:demo/bot"


async def test_pause_holds_wake_ups_and_resume_releases_them_late_S3(
    clients, bot, demo, conversation, service, deliveries
):
    """S3: nothing fires while a global, product or kind pause covers it; the first tick
    after the last resume fires it, with late=true and how late."""
    ops = await clients.scheduler("user:ops", {"operator"})
    sched = await clients.scheduler(BOT)
    with pytest.raises(PermissionDenied, match="operator role"):
        await sched.pause()
    with pytest.raises(PermissionDenied, match="operator role"):
        await sched.resume()
    for bad in ("crew:", "demo", "user:alice", "crew:*x"):
        with pytest.raises(InvalidArgument, match="cannot be paused"):
            await ops.pause(bad)

    state = await ops.pause(reason="maintenance")
    assert state.global_paused and state.pauses[0].reason == "maintenance"
    state = await ops.pause("crew:demo")
    state = await ops.pause("crew:*")
    assert list(state.paused_products) == ["crew:*", "crew:demo"]
    assert (await sched.pause_state()).global_paused

    # Due ten minutes ago: it has been held all that time.
    held = await sched.create_wake_up(
        conversation, at=datetime.now(UTC) - timedelta(minutes=10), note="held"
    )
    for lift in ("", "crew:*"):
        await service.wait_ticks(2)
        assert (await sched.get_wake_up(held.wake_up_id)).status == pb.WAKE_UP_STATUS_PENDING
        assert await deliveries(conversation, "wake_up") == []
        await ops.resume(lift)
    await service.wait_ticks(2)
    assert await deliveries(conversation, "wake_up") == []  # crew:demo still paused

    state = await ops.resume("crew:demo")
    assert not state.global_paused and list(state.paused_products) == []
    assert not (await ops.resume("crew:demo")).pauses  # idempotent

    turn = await bot.claim_turn([demo], wait_seconds=10)
    assert [d.kind for d in turn.deliveries] == [m.DELIVERY_KIND_WAKE_UP]
    attributes = attributes_json(turn.deliveries[0])
    assert attributes["late"] is True
    assert attributes["late_seconds"] >= 600
    await bot.complete_turn(turn.turn_id)


async def test_pause_only_holds_the_paused_product_S3(
    clients, alice, bot, demo, conversation, service, deliveries
):
    """S3: pausing another product holds nothing of crew:demo."""
    ops = await clients.scheduler("user:ops", {"operator"})
    await ops.pause("crew:other")
    await ops.pause("workflow:*")
    sched = await clients.scheduler(BOT)
    await sched.create_wake_up(conversation, delay_seconds=0, note="not held")
    turn = await bot.claim_turn([demo], wait_seconds=10)
    assert [d.text for d in turn.deliveries] == ["not held"]
    await bot.complete_turn(turn.turn_id)


async def test_schedule_missed_during_a_pause_fires_once_after_resume_S3_S4(
    clients, bot, demo, conversation, service, deliveries, sql
):
    """S3 S4: ten occurrences missed during a pause collapse into one delivery."""
    ops = await clients.scheduler("user:ops", {"operator"})
    await ops.pause(reason="incident")
    sched = await clients.scheduler(BOT)
    schedule = await sched.create_schedule(conversation, "status report", interval_seconds=60)
    # Let eleven minutes pass while paused: the next occurrence was ten minutes ago.
    await sql(
        "UPDATE scheduler.schedules SET anchor_at = anchor_at - interval '11 minutes', "
        "next_fire_at = next_fire_at - interval '11 minutes' WHERE id = %s",
        schedule.schedule_id,
    )
    await service.wait_ticks(2)
    assert await deliveries(conversation, "schedule") == []

    await ops.resume()
    turn = await bot.claim_turn([demo], wait_seconds=10)
    assert [d.kind for d in turn.deliveries] == [m.DELIVERY_KIND_SCHEDULE]
    delivery = turn.deliveries[0]
    assert delivery.text == "status report"
    assert attributes_json(delivery)["schedule_id"] == schedule.schedule_id
    assert attributes_json(delivery)["missed_occurrences"] == 10
    assert attributes_json(delivery)["late"] is True
    await bot.complete_turn(turn.turn_id)

    await service.wait_ticks(2)
    assert len(await deliveries(conversation, "schedule")) == 1
    after = await sched.get_schedule(schedule.schedule_id)
    assert after.fire_count == 1
    assert after.next_fire_at.ToDatetime(tzinfo=UTC) > datetime.now(UTC)


async def test_resume_says_whether_it_lifted_a_pause_S3(clients, demo):
    """S3: Resume answers resumed=true when it lifted the pause it named; a scope that is
    not paused (a typo) answers resumed=false, changes nothing and is not an error."""
    ops = await clients.scheduler("user:ops", {"operator"})
    await ops.pause("crew:demo")
    typo = await ops.resume("crew:typo")
    assert typo.resumed is False and list(typo.paused_products) == ["crew:demo"]
    lifted = await ops.resume("crew:demo")
    assert lifted.resumed is True and list(lifted.paused_products) == []
    assert (await ops.resume("crew:demo")).resumed is False  # still idempotent
    assert (await ops.pause("")).resumed is False
