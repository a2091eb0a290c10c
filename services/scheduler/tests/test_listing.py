"""Who sees the wake-ups, schedules and webhooks of a conversation (V1, A3): their creator,
the agents of the product (wake-ups), the owner of the conversation's target, the operator;
nobody else."""

from __future__ import annotations

import pytest

from agentworks.core.errors import NotFound, PermissionDenied

BOT = "agent:demo/bot"


async def _attached(clients, conversation) -> dict[str, str]:
    """A wake-up, a schedule and a webhook crew:demo's agent attached to the conversation."""
    sched = await clients.scheduler(BOT)
    wake_up = await sched.create_wake_up(conversation, delay_seconds=3600, note="later")
    schedule = await sched.create_schedule(conversation, "hourly", interval_seconds=3600)
    webhook = await sched.create_webhook(conversation, name="ci")
    return {
        "wake_up": wake_up.wake_up_id,
        "schedule": schedule.schedule_id,
        "webhook": webhook.webhook_id,
    }


async def _listed(client) -> dict[str, list[str]]:
    return {
        "wake_up": [w.wake_up_id for w in (await client.list_wake_ups()).wake_ups],
        "schedule": [s.schedule_id for s in (await client.list_schedules()).schedules],
        "webhook": [h.webhook_id for h in (await client.list_webhooks()).webhooks],
    }


async def test_the_owner_of_the_target_sees_what_its_agents_attached_others_nothing_V1_A3(
    clients, demo, conversation
):
    """V1 A3 S1 S4 S5: user:owner, who owns crew:demo, lists and reads the wake-up,
    schedule and webhook crew:demo's agent attached to a conversation with it (no webhook
    secret), but may not change them (PERMISSION_DENIED saying who may); the operator
    sees all; alice (who opened the conversation), a stranger and the owner of another
    target list none and get NOT_FOUND by id, like a random id."""
    ids = await _attached(clients, conversation)
    everything = {what: [item_id] for what, item_id in ids.items()}

    owner = await clients.scheduler("user:owner")
    assert await _listed(owner) == everything
    assert await _listed(await clients.scheduler("user:ops", {"operator"})) == everything
    by_conversation = await owner.list_wake_ups(conversation_id=conversation, product=demo)
    assert [w.wake_up_id for w in by_conversation.wake_ups] == [ids["wake_up"]]
    assert (await owner.get_wake_up(ids["wake_up"])).note == "later"
    assert (await owner.get_schedule(ids["schedule"])).prompt == "hourly"
    hook = await owner.get_webhook(ids["webhook"])
    assert hook.name == "ci" and hook.secret == ""
    assert len(await owner.preview_schedule(ids["schedule"], count=2)) == 2
    for change in (
        owner.cancel_wake_up(ids["wake_up"]),
        owner.pause_schedule(ids["schedule"]),
        owner.delete_schedule(ids["schedule"]),
        owner.rotate_webhook_secret(ids["webhook"]),
        owner.delete_webhook(ids["webhook"]),
    ):
        with pytest.raises(PermissionDenied, match="you own crew:demo, so you may see"):
            await change

    ops = await clients.messaging("user:ops", {"operator"})
    await ops.register_target("crew:other", owner="user:zed")
    nobody: dict[str, list[str]] = {what: [] for what in ids}
    for principal in ("user:alice", "user:mallory", "user:zed"):
        other = await clients.scheduler(principal)
        assert await _listed(other) == nobody, principal
        for read, item_id in (
            (other.get_wake_up, ids["wake_up"]),
            (other.get_schedule, ids["schedule"]),
            (other.get_webhook, ids["webhook"]),
            (other.cancel_wake_up, ids["wake_up"]),
            (other.delete_webhook, ids["webhook"]),
        ):
            with pytest.raises(NotFound, match=f"'{item_id}' not found"):
                await read(item_id)


async def test_ownership_is_messagings_now_a_new_owner_sees_the_old_one_no_longer_V1_A3(
    clients, demo, conversation
):
    """V1 A3: who owns a target is asked of messaging at each read, not kept with the
    record: when the operator gives crew:demo to user:heir, the heir sees what was
    attached before, and user:owner sees none of it any more."""
    ids = await _attached(clients, conversation)
    ops = await clients.messaging("user:ops", {"operator"})
    await ops.register_target(demo, owner="user:heir")
    heir = await clients.scheduler("user:heir")
    assert await _listed(heir) == {what: [item_id] for what, item_id in ids.items()}
    former = await clients.scheduler("user:owner")
    assert await _listed(former) == {what: [] for what in ids}
    with pytest.raises(NotFound):
        await former.get_schedule(ids["schedule"])
