"""Exactly-once firing across replicas and across a crash mid-firing (S6, P3)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from agentworks.server.testing import until
from agentworks_scheduler.models import Due

BOT = "agent:demo/bot"


def hang_after_delivery(scheduler) -> asyncio.Event:
    """Make `scheduler` hang once messaging has taken a batch, before it records it (as
    if killed there); the event is set when that point is reached."""
    delivered = asyncio.Event()
    never = asyncio.Event()

    async def die_here(due: Due) -> None:
        delivered.set()
        await never.wait()

    scheduler.service.after_delivery = die_here
    return delivered


async def test_thousand_due_wake_ups_on_three_replicas_are_each_delivered_once_S6_P3(
    start_scheduler, scheduler, clients, alice, demo, sql
):
    """S6 P3: 1,000 due wake-ups, three replicas racing for them: 1,000 deliveries."""
    conversations = [(await alice.send(f"c{i}", target=demo)).conversation_id for i in range(10)]
    ops = await clients.scheduler("user:ops", {"operator"})
    # Hold everything until all three replicas run, so they race for the same rows.
    await ops.pause(reason="load test")
    await sql(
        "INSERT INTO scheduler.wake_ups (id, conversation_id, product, note, due_at, created_by) "
        "SELECT gen_random_uuid(), (%s::uuid[])[1 + g %% 10], 'crew:demo', 'n' || g, "
        "now() - interval '1 second', 'agent:demo/bot' FROM generate_series(1, 1000) g",
        conversations,
    )
    replicas = [scheduler, await start_scheduler(), await start_scheduler()]
    await ops.resume()

    async def all_fired() -> bool:
        rows = await sql("SELECT count(*) FROM scheduler.wake_ups WHERE status = 'pending'")
        return rows == [(0,)]

    await until(all_fired, 90, between=scheduler.service.wait_ticks)
    assert await sql(
        "SELECT count(*), count(DISTINCT idempotency_key) FROM messaging.deliveries "
        "WHERE kind = 'wake_up'"
    ) == [(1000, 1000)]
    assert await sql(
        "SELECT count(*) FROM scheduler.wake_ups w "
        "JOIN messaging.deliveries d ON d.id = w.delivery_id AND d.kind = 'wake_up' "
        "WHERE w.status = 'fired' AND d.conversation_id = w.conversation_id"
    ) == [(1000,)]
    stats = [r.service.stats for r in replicas]
    assert sum(s["delivered"] for s in stats) == 1000
    # No replica ever sent an occurrence another one had claimed: the row locks alone
    # kept them apart; messaging's deduplication was not needed.
    assert sum(s["duplicates"] for s in stats) == 0


async def test_replica_killed_between_delivery_and_bookkeeping_does_not_duplicate_S6(
    scheduler, start_scheduler, clients, conversation, sql, deliveries
):
    """S6: messaging got the wake-up, the replica died before recording it; a restarted
    replica delivers it again with the same key, and messaging keeps one."""
    delivered = hang_after_delivery(scheduler)
    sched = await clients.scheduler(BOT)
    wake_up = await sched.create_wake_up(conversation, delay_seconds=0, note="once")
    await asyncio.wait_for(delivered.wait(), 10)
    await scheduler.stop(0)  # killed mid-firing: its transaction rolls back

    status = "SELECT status FROM scheduler.wake_ups WHERE id = %s"
    assert await sql(status, wake_up.wake_up_id) == [("pending",)]
    assert len(await deliveries(conversation, "wake_up")) == 1

    restarted = await start_scheduler()

    async def fired() -> bool:
        return await sql(status, wake_up.wake_up_id) == [("fired",)]

    await until(fired, between=restarted.service.wait_ticks)
    rows = await deliveries(conversation, "wake_up")
    assert len(rows) == 1 and rows[0][1] == "once"
    assert restarted.service.stats["duplicates"] == 1
    assert restarted.service.stats["delivered"] == 0
    assert await sql(
        "SELECT count(*) FROM scheduler.wake_ups w JOIN messaging.deliveries d "
        "ON d.id = w.delivery_id WHERE w.id = %s",
        wake_up.wake_up_id,
    ) == [(1,)]


async def test_a_refused_occurrence_fails_alone_and_its_batch_fires_S2_S6(
    scheduler, start_scheduler, clients, alice, demo, sql
):
    """S2 S6: a batch goes to messaging as EnqueueDeliveries requests of at most 500; an
    occurrence messaging refuses (its conversation is gone) fails on its own, and every
    other one of the batch fires once."""
    conversation = (await alice.send("many", target=demo)).conversation_id
    # One replica, whose batch holds all of them: three requests (500, 500, 201).
    replica = await start_scheduler(SCHEDULER_BATCH_SIZE="2000")
    await scheduler.stop(0)
    ops = await clients.scheduler("user:ops", {"operator"}, address=replica.address)
    await ops.pause(reason="load")
    await sql(
        "INSERT INTO scheduler.wake_ups (id, conversation_id, product, note, due_at, created_by) "
        "SELECT gen_random_uuid(), %s, 'crew:demo', 'n' || g, "
        "now() - interval '1 second', 'agent:demo/bot' FROM generate_series(1, 1200) g",
        conversation,
    )
    await sql(
        "INSERT INTO scheduler.wake_ups (id, conversation_id, product, note, due_at, created_by) "
        "VALUES (gen_random_uuid(), gen_random_uuid(), 'crew:demo', 'nowhere', "
        "now() - interval '1 second', 'agent:demo/bot')"
    )
    await ops.resume()

    async def settled() -> bool:
        rows = await sql("SELECT count(*) FROM scheduler.wake_ups WHERE status = 'pending'")
        return rows == [(0,)]

    await until(settled, 60, between=replica.service.wait_ticks)
    assert await sql(
        "SELECT status, count(*) FROM scheduler.wake_ups GROUP BY status ORDER BY status"
    ) == [("failed", 1), ("fired", 1200)]
    [(error,)] = await sql("SELECT error FROM scheduler.wake_ups WHERE status = 'failed'")
    assert "not found" in error
    positions = await sql(
        "SELECT min(position), max(position), count(*) FROM messaging.deliveries "
        "WHERE conversation_id = %s AND kind = 'wake_up'",
        conversation,
    )
    assert positions == [(3, 1202, 1200)]  # 1 and 2: the opening message and its delivery
    assert replica.service.stats["delivered"] == 1200


async def test_occurrences_stay_due_while_messaging_is_away_and_fire_once_after_S2_S6(
    scheduler, start_messaging, messaging, clients, conversation, sql, deliveries
):
    """S2 S6: while messaging cannot be reached the whole request fails; its occurrences
    stay due, and fire once each when messaging is back."""
    sched = await clients.scheduler(BOT)
    notes = [f"while away {n}" for n in range(3)]
    for note in notes:
        await sched.create_wake_up(conversation, delay_seconds=1, note=note)
    await messaging.stop(0)

    async def retried() -> bool:
        return scheduler.service.stats["retries"] >= 3

    await until(retried, between=scheduler.service.wait_ticks)
    assert await sql("SELECT DISTINCT status FROM scheduler.wake_ups") == [("pending",)]

    await start_messaging(MESSAGING_LISTEN=messaging.address)

    async def fired() -> bool:
        rows = await sql("SELECT count(*) FROM scheduler.wake_ups WHERE status = 'fired'")
        return rows == [(3,)]

    await until(fired, 30, between=scheduler.service.wait_ticks)
    rows = await deliveries(conversation, "wake_up")
    assert sorted(text for _, text, _ in rows) == notes


async def test_edited_prompt_after_lost_answer_is_still_delivered_once_S4_S6(
    scheduler, start_scheduler, clients, conversation, sql, deliveries
):
    """S4 S6: messaging stored a schedule occurrence, the replica died before recording
    it, and the owner edited the prompt meanwhile. The retry sends the same key with the
    new prompt, which messaging refuses (ALREADY_EXISTS: other content). The occurrence
    is in the turn queue once, with the prompt it was sent with, and the schedule records
    it fired — not failed; the new prompt applies from the next occurrence on."""
    delivered = hang_after_delivery(scheduler)
    sched = await clients.scheduler(BOT)
    schedule = await sched.create_schedule(
        conversation,
        "first prompt",
        interval_seconds=3600,
        start_at=datetime.now(UTC) + timedelta(seconds=1),
    )
    await asyncio.wait_for(delivered.wait(), 10)
    await scheduler.stop(0)  # killed mid-firing: its transaction rolls back

    row = "SELECT fire_count, last_error, next_fire_at FROM scheduler.schedules WHERE id = %s"
    [(count, error, occurrence)] = await sql(row, schedule.schedule_id)
    assert (count, error) == (0, None)
    stamp = occurrence.astimezone(UTC).isoformat(timespec="microseconds")
    key = f"schedule:{schedule.schedule_id}:{stamp}"
    assert [(k, text) for k, text, _ in await deliveries(conversation, "schedule")] == [
        (key, "first prompt")
    ]

    # An operator's pause, taken while no replica runs, holds the retry until the edit.
    await sql(
        "INSERT INTO scheduler.pauses (product, reason, paused_by) "
        "VALUES ('', 'editing', 'user:ops')"
    )
    restarted = await start_scheduler()
    owner = await clients.scheduler(BOT, address=restarted.address)
    edited = await owner.update_schedule(schedule.schedule_id, prompt="edited prompt")
    assert edited.prompt == "edited prompt" and edited.fire_count == 0
    ops = await clients.scheduler("user:ops", {"operator"}, address=restarted.address)
    await ops.resume()

    async def settled() -> bool:
        [(count, error, _)] = await sql(row, schedule.schedule_id)
        return count > 0 or error is not None

    await until(settled, between=restarted.service.wait_ticks)
    [(count, error, next_fire_at)] = await sql(row, schedule.schedule_id)
    assert (count, error) == (1, None)
    assert next_fire_at > occurrence
    assert [(k, text) for k, text, _ in await deliveries(conversation, "schedule")] == [
        (key, "first prompt")
    ]
    assert restarted.service.stats["duplicates"] == 1
    assert restarted.service.stats["failed"] == 0
    assert restarted.service.stats["delivered"] == 0


async def test_wake_up_retried_with_other_content_is_recorded_fired_not_failed_S6(
    scheduler, start_scheduler, clients, conversation, sql, deliveries
):
    """S6: the same for a wake-up. Its note cannot be edited through the API, so the
    row is changed behind the scheduler's back: the retry's ALREADY_EXISTS records it
    fired (messaging's refusal names no delivery id, so none is recorded), and the rest
    of its batch is recorded with it."""
    delivered = hang_after_delivery(scheduler)
    sched = await clients.scheduler(BOT)
    wake_up = await sched.create_wake_up(conversation, delay_seconds=0, note="as sent")
    await asyncio.wait_for(delivered.wait(), 10)
    await scheduler.stop(0)  # killed mid-firing: its transaction rolls back

    await sql("UPDATE scheduler.wake_ups SET note = 'changed' WHERE id = %s", wake_up.wake_up_id)
    [(other,)] = await sql(
        "INSERT INTO scheduler.wake_ups (id, conversation_id, product, note, due_at, created_by) "
        "VALUES (gen_random_uuid(), %s, 'crew:demo', 'other', now(), %s) RETURNING id",
        conversation,
        BOT,
    )
    restarted = await start_scheduler()
    status = "SELECT status, delivery_id, error FROM scheduler.wake_ups WHERE id = %s"

    async def fired() -> bool:
        rows = await sql(
            "SELECT count(*) FROM scheduler.wake_ups WHERE status = 'pending' AND id IN (%s, %s)",
            wake_up.wake_up_id,
            other,
        )
        return rows == [(0,)]

    await until(fired, between=restarted.service.wait_ticks)
    assert await sql(status, wake_up.wake_up_id) == [("fired", None, None)]
    [(state, delivery_id, _)] = await sql(status, other)
    assert state == "fired" and delivery_id is not None
    rows = await deliveries(conversation, "wake_up")
    assert sorted(text for _, text, _ in rows) == ["as sent", "other"]
    assert restarted.service.stats["duplicates"] == 1
    assert restarted.service.stats["failed"] == 0
