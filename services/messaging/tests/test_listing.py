"""Listing conversations and reading whole transcripts over gRPC (V1, V2, A3)."""

from __future__ import annotations

import pytest

from agentworks.client.common import target_str
from agentworks.core import errors
from agentworks.messaging.v1 import messaging_pb2 as m


async def _all(client, **filters) -> list:
    items, cursor = [], ""
    while True:
        page = await client.list_conversations(after=cursor, limit=2, **filters)
        items.extend(page.conversations)
        cursor = page.next_cursor
        if not cursor:
            return items


async def test_conversations_are_listed_newest_first_across_pages_with_the_last_message_V1(
    clients, demo, operator
):
    """V1: a caller's conversations come newest first page by page (a boundary crossed
    without a repeat or a gap), each with its inbox, target, message count, last message
    and the transcript cursor of its latest entry; filtered by target."""
    await operator.register_target("crew:other", owner="user:zed")
    alice = await clients("user:alice")
    bot = await clients("agent:demo/bot")
    receipts = [await alice.send(f"hello {n}", target=demo) for n in range(3)]
    receipts.append(await alice.send("elsewhere", target="crew:other"))
    turn = await bot.claim_turn([demo], wait_seconds=5)
    await bot.send_message(turn.reply_inbox_id, "a reply")
    await bot.complete_turn(turn.turn_id)

    listed = await _all(alice)
    assert [c.conversation_id for c in listed] == [r.conversation_id for r in receipts[::-1]]
    assert [c.inbox_id for c in listed] == [r.inbox_id for r in receipts[::-1]]
    replied = next(c for c in listed if c.inbox_id == turn.reply_inbox_id)
    assert replied.message_count == 2 and replied.principal == "user:alice"
    assert replied.last_message.text == "a reply"
    assert replied.last_message.direction == "to_inbox"
    assert target_str(replied.target) == "crew:demo" and replied.started_by == "user:alice"
    transcript = await alice.get_transcript(replied.conversation_id)
    assert transcript.next_cursor == replied.latest_cursor  # nothing after the latest

    only_demo = await _all(alice, target=demo)
    assert len(only_demo) == 3
    assert all(target_str(c.target) == "crew:demo" for c in only_demo)


async def test_since_lists_only_conversations_with_new_messages_and_counts_them_V1(clients, demo):
    """V1: `since` (the since_cursor of an earlier list) lists the conversations with
    messages newer than it, with how many; it may repeat the last seconds, never miss."""
    alice = await clients("user:alice")
    first = await alice.send("one", target=demo)
    listed = await alice.list_conversations()
    assert listed.since_cursor
    later = await alice.list_conversations(since=listed.since_cursor)
    # within the margin the first message counts again: a repeat, never a miss
    assert [c.conversation_id for c in later.conversations] == [first.conversation_id]
    await alice.send("two", inbox_id=first.inbox_id)
    again = await alice.list_conversations(since=listed.since_cursor)
    assert again.conversations[0].new_messages == 2
    without = (await alice.list_conversations()).conversations[0]
    assert without.new_messages == 0


async def test_a_second_user_sees_none_of_the_first_users_conversations_A3_V1(
    clients, demo, operator
):
    """A3 V1: another user lists none of alice's conversations (even filtering by the
    target); the target's owner sees every conversation with it; the operator all."""
    alice = await clients("user:alice")
    mallory = await clients("user:mallory")
    owner = await clients("user:owner")
    receipt = await alice.send("private", target=demo)
    assert list((await mallory.list_conversations()).conversations) == []
    assert list((await mallory.list_conversations(target=demo)).conversations) == []
    for viewer in (owner, operator):
        (seen,) = (await viewer.list_conversations()).conversations
        assert seen.conversation_id == receipt.conversation_id


async def test_listing_refuses_bad_cursors_and_limits_V1_P6(clients, demo):
    """V1 P6: a malformed cursor, a transcript cursor given as a list cursor, and a limit
    past 200 are refused with INVALID_ARGUMENT saying what was wrong."""
    alice = await clients("user:alice")
    receipt = await alice.send("x", target=demo)
    transcript_cursor = (await alice.get_transcript(receipt.conversation_id)).next_cursor
    for cursor in ("garbage", transcript_cursor):
        with pytest.raises(errors.InvalidArgument, match="is not a cursor of this list"):
            await alice.list_conversations(after=cursor)
    with pytest.raises(errors.InvalidArgument, match="since"):
        await alice.list_conversations(since="garbage")
    with pytest.raises(errors.InvalidArgument, match="limit must be between 1 and 200"):
        await alice.list_conversations(limit=500)


async def test_a_participant_reads_both_directions_and_every_delivery_kind_V2_C12(clients, demo):
    """V2 C12: the caller's transcript holds what it sent, what the agent replied, and
    the deliveries of every kind (message, wake-up, schedule, webhook, function
    completion) in order, across pages; another user gets NOT_FOUND."""
    alice = await clients("user:alice")
    bot = await clients("agent:demo/bot")
    scheduler = await clients("service:scheduler")
    functions = await clients("service:functions")
    receipt = await alice.send("question", target=demo)
    conversation = receipt.conversation_id
    turn = await bot.claim_turn([demo], wait_seconds=5)
    await bot.send_message(turn.reply_inbox_id, "answer")
    await bot.complete_turn(turn.turn_id)
    kinds = {
        m.DELIVERY_KIND_WAKE_UP: (scheduler, b""),
        m.DELIVERY_KIND_SCHEDULE: (scheduler, b""),
        m.DELIVERY_KIND_WEBHOOK: (scheduler, b'{"event": 1}'),
        m.DELIVERY_KIND_FUNCTION_COMPLETED: (functions, b""),
    }
    for kind, (sender, payload) in kinds.items():
        await sender.enqueue_delivery(
            conversation,
            kind=kind,
            idempotency_key=f"k{kind}",
            text=f"kind {kind}",
            payload=payload,
        )

    entries, cursor = [], ""
    while True:
        page = await alice.get_transcript(conversation, after=cursor, limit=2)
        if not page.entries:
            break
        entries.extend(page.entries)
        cursor = page.next_cursor
    messages = [e.message for e in entries if e.HasField("message")]
    assert [(x.direction, x.text) for x in messages] == [
        ("to_target", "question"),
        ("to_inbox", "answer"),
    ]
    delivered = [e.delivery.kind for e in entries if e.HasField("delivery")]
    assert delivered == [m.DELIVERY_KIND_MESSAGE, *kinds]
    webhook = next(e.delivery for e in entries if e.delivery.kind == m.DELIVERY_KIND_WEBHOOK)
    assert webhook.payload == b'{"event": 1}'
    mallory = await clients("user:mallory")
    with pytest.raises(errors.NotFound):
        await mallory.get_transcript(conversation)


async def test_targets_are_listed_to_their_owner_by_kind_and_name_across_pages_A3_V1(
    clients, demo, operator
):
    """V1 A3: ListTargets gives the caller the targets it owns, by (kind, name), page by
    page; someone who owns none sees none, the operator every target; a cursor that is not
    one of this list, or a limit past 200, is refused saying so."""
    for name in ("workflow:wf", "crew:zeta", "crew:alpha"):
        await operator.register_target(name, owner="user:owner")
    await operator.register_target("crew:other", owner="user:zed")
    owner = await clients("user:owner")
    first = await owner.list_targets(limit=2)
    second = await owner.list_targets(limit=2, after=first.next_cursor)
    assert [target_str(t.ref) for t in first.targets] == ["crew:alpha", "crew:demo"]
    assert [target_str(t.ref) for t in second.targets] == ["crew:zeta", "workflow:wf"]
    assert second.next_cursor == "" and {t.owner for t in second.targets} == {"user:owner"}
    assert list((await (await clients("user:mallory")).list_targets()).targets) == []
    assert len((await operator.list_targets()).targets) == 5
    with pytest.raises(errors.InvalidArgument, match="is not a cursor of this list"):
        await owner.list_targets(after=(await owner.list_conversations()).since_cursor)
    with pytest.raises(errors.InvalidArgument, match="limit must be between 1 and 200"):
        await owner.list_targets(limit=201)
