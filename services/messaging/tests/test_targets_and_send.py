"""Targets, sending, retries and the messaging switch (C1-C5, C8, A3, A4, P6)."""

from __future__ import annotations

import asyncio

import grpc
import psycopg
import pytest

from agentworks.client import MessagingClient
from agentworks.core.errors import (
    Conflict,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    PreconditionFailed,
)
from agentworks.messaging.v1 import messaging_pb2 as pb


def count(database_url: str, table: str) -> int:
    with psycopg.connect(database_url) as conn:
        row = conn.execute(f"SELECT count(*) FROM messaging.{table}").fetchone()
        assert row is not None
        return int(row[0])


async def test_registering_needs_operator_and_free_text_ask_defaults_on_C1(clients, operator):
    """C1: operators register targets; the messaging switch is on unless set false."""
    stranger = await clients("user:mallory")
    with pytest.raises(PermissionDenied):
        await stranger.register_target("crew:sales", owner="user:mallory")

    target = await operator.register_target("crew:sales", owner="user:owner")
    assert target.owner == "user:owner"
    assert not target.capabilities.HasField("free_text_ask")  # unset means on

    workflow = await operator.register_target("workflow:wf-1", owner="user:owner")
    assert workflow.ref.kind == 2


async def test_only_the_owner_changes_settings_C1(clients, demo):
    """C1: the owner (not a stranger) turns agent messaging off and on."""
    owner = await clients("user:owner")
    stranger = await clients("user:mallory")
    with pytest.raises(PermissionDenied):
        await stranger.update_target(demo, free_text_ask=False)
    updated = await owner.update_target(demo, free_text_ask=False)
    assert updated.capabilities.free_text_ask is False
    assert (await owner.get_target(demo)).capabilities.free_text_ask is False


async def test_registering_again_keeps_the_owners_setting_unless_given_C1_C8(
    clients, operator, demo
):
    """C1 C8: registering an existing target again (a deploy's bootstrap, say) moves its
    owner but keeps a messaging switch the owner turned off; a given setting replaces it."""
    owner = await clients("user:owner")
    await owner.update_target(demo, free_text_ask=False)

    again = await operator.register_target(demo, owner="user:owner")
    assert again.capabilities.free_text_ask is False
    with pytest.raises(PreconditionFailed, match="free_text_ask"):
        await (await clients("user:alice")).send("still off?", target=demo)

    moved = await operator.register_target(demo, owner="user:heir")
    assert moved.owner == "user:heir"
    assert moved.capabilities.free_text_ask is False
    replaced = await operator.register_target(demo, owner="user:heir", free_text_ask=True)
    assert replaced.capabilities.free_text_ask is True


async def test_the_owner_turns_the_a2a_card_off_and_on_X1_C1(clients, operator, demo):
    """X1 C1: the A2A card switch is on unless set false; only the owner (or the operator)
    changes it; changing one capability keeps the other; registering again keeps it."""
    owner = await clients("user:owner")
    assert not (await owner.get_target(demo)).capabilities.HasField("a2a_card")  # on
    with pytest.raises(PermissionDenied):
        await (await clients("user:mallory")).update_target(demo, a2a_card=False)
    assert not (await owner.get_target(demo)).capabilities.HasField("a2a_card")

    await owner.update_target(demo, free_text_ask=False)
    off = await owner.update_target(demo, a2a_card=False)
    assert off.capabilities.a2a_card is False
    assert off.capabilities.free_text_ask is False  # left unset: kept
    both = await owner.update_target(demo, free_text_ask=True)
    assert (both.capabilities.free_text_ask, both.capabilities.a2a_card) == (True, False)

    again = await operator.register_target(demo, owner="user:owner")
    assert again.capabilities.a2a_card is False
    on = await operator.register_target(demo, owner="user:owner", a2a_card=True)
    assert on.capabilities.a2a_card is True


async def test_send_creates_conversation_and_inbox_bound_to_caller_C2_C3(clients, demo):
    """C2 C3: a send without inbox_id starts a conversation with a new inbox."""
    alice = await clients("user:alice")
    first = await alice.send("one", target=demo)
    second = await alice.send("two", target=demo)
    assert first.accepted
    assert first.conversation_id != second.conversation_id
    assert first.inbox_id != second.inbox_id

    again = await alice.send("three", inbox_id=first.inbox_id)
    assert again.conversation_id == first.conversation_id
    assert again.inbox_id == first.inbox_id


async def test_separate_agents_sharing_one_account_hold_separate_inboxes_A4(clients, demo):
    """A4: two tools on one account each keep their own inbox and conversation."""
    account = await clients("user:shared")
    tool_a = await account.send("from tool a", target=demo)
    tool_b = await account.send("from tool b", target=demo)
    assert tool_a.inbox_id != tool_b.inbox_id
    bot = await clients("agent:demo/bot")
    for _ in range(2):
        turn = await bot.claim_turn([demo], wait_seconds=5)
        await bot.send_message(turn.reply_inbox_id, f"only for {turn.deliveries[0].message.text}")
        await bot.complete_turn(turn.turn_id)
    page_a = await account.read(tool_a.inbox_id)
    page_b = await account.read(tool_b.inbox_id)
    assert [m.text for m in page_a.messages] == ["only for from tool a"]
    assert [m.text for m in page_b.messages] == ["only for from tool b"]


async def test_only_the_bound_principal_may_use_an_inbox_A3_C3(clients, demo):
    """A3 C3: another principal can neither continue nor read someone's inbox."""
    alice = await clients("user:alice")
    mallory = await clients("user:mallory")
    receipt = await alice.send("secret", target=demo)
    with pytest.raises(NotFound):
        await mallory.send("let me in", inbox_id=receipt.inbox_id)
    with pytest.raises(NotFound):
        await mallory.read(receipt.inbox_id)
    with pytest.raises(NotFound):
        await mallory.read("00000000-0000-0000-0000-000000000000")


async def test_fifty_concurrent_retries_store_one_message_C4(clients, demo, database_url):
    """C4: 50 concurrent sends with one submission_id give one message, one receipt."""
    alice = await clients("user:alice")
    receipts = await asyncio.gather(
        *(alice.send("pay invoice 7", target=demo, submission_id="sub-7") for _ in range(50))
    )
    assert len({(r.message_id, r.conversation_id, r.inbox_id) for r in receipts}) == 1
    assert count(database_url, "messages") == 1
    assert count(database_url, "deliveries") == 1


async def test_retry_key_reused_for_other_content_is_refused_C4(clients, demo, database_url):
    """C4: same submission_id with different content -> ALREADY_EXISTS, nothing stored."""
    alice = await clients("user:alice")
    await alice.send("version one", target=demo, submission_id="k1")
    with pytest.raises(Conflict, match="submission_id 'k1' was already used"):
        await alice.send("version two", target=demo, submission_id="k1")
    assert count(database_url, "messages") == 1
    # The key is per caller: another caller may use the same key.
    bob = await clients("user:bob")
    await bob.send("version two", target=demo, submission_id="k1")
    assert count(database_url, "messages") == 2


async def test_retry_after_a_restart_and_on_another_replica_is_deduplicated_C4_P3(
    clients, demo, database_url, identity, start_messaging, messaging
):
    """C4 P3: the retry key holds across a service restart and across replicas."""
    alice = await clients("user:alice")
    first = await alice.send("hello", target=demo, submission_id="restart-1")
    await messaging.stop(0)  # the replica that took the first send is gone

    replica = await start_messaging()
    async with MessagingClient(replica.address, identity=identity("user:alice")) as other:
        again = await other.send("hello", target=demo, submission_id="restart-1")
    assert again == first
    assert count(database_url, "messages") == 1


async def test_accepted_messages_are_stored_and_queued_without_a_call_id_C5(clients, demo):
    """C5: an accepted message is in the history and in the turn queue; no call id."""
    alice = await clients("user:alice")
    receipt = await alice.send("status?", target=demo)
    assert not hasattr(receipt, "call_id")
    transcript = await alice.get_transcript(receipt.conversation_id)
    kinds = [e.WhichOneof("entry") for e in transcript.entries]
    assert kinds == ["message", "delivery"]
    delivery = transcript.entries[1].delivery
    assert delivery.status == pb.DELIVERY_STATUS_PENDING
    assert delivery.kind == pb.DELIVERY_KIND_MESSAGE


async def test_switch_off_refuses_every_programmatic_message_C8(clients, demo, database_url):
    """C8: free_text_ask=false refuses new sends and replies in existing conversations."""
    alice = await clients("user:alice")
    owner = await clients("user:owner")
    bot = await clients("agent:demo/bot")
    earlier = await alice.send("before the switch", target=demo)
    await owner.update_target(demo, free_text_ask=False)
    stored = count(database_url, "messages")

    with pytest.raises(PreconditionFailed, match="free_text_ask") as refused:
        await alice.send("new conversation", target=demo)
    # A program tells this refusal by its reason (P6): call a declared function instead.
    assert (refused.value.reason, refused.value.metadata) == (
        "MESSAGING_DISABLED",
        {"target": demo},
    )
    with pytest.raises(PreconditionFailed, match="free_text_ask") as refused:
        await alice.send("continuing", inbox_id=earlier.inbox_id)
    assert refused.value.reason == "MESSAGING_DISABLED"
    with pytest.raises(PreconditionFailed, match="free_text_ask"):
        await bot.send("agent to agent", target=demo)
    assert count(database_url, "messages") == stored

    # The crew's agents can still answer.
    await bot.send_message(earlier.inbox_id, "still here")
    with pytest.raises(InvalidArgument, match="channel app"):
        await bot.send("pretending", target=demo, channel=pb.CHANNEL_APP)


async def test_the_owners_app_chat_passes_the_switch_and_no_one_elses_does_C8_V5(
    clients, demo, database_url
):
    """C8, V5: with free_text_ask=false the target's owner still chats with it on the app
    channel, new conversations and continued ones; another user's app-channel message is
    refused like a programmatic one, naming the setting, and stores nothing."""
    alice = await clients("user:alice")
    owner = await clients("user:owner")
    earlier = await alice.send("before the switch", target=demo, channel=pb.CHANNEL_APP)
    await owner.update_target(demo, free_text_ask=False)
    stored = count(database_url, "messages")
    with pytest.raises(PreconditionFailed, match="free_text_ask"):
        await alice.send("from the app", target=demo, channel=pb.CHANNEL_APP)
    with pytest.raises(PreconditionFailed, match="free_text_ask"):
        await alice.send("continuing", inbox_id=earlier.inbox_id, channel=pb.CHANNEL_APP)
    assert count(database_url, "messages") == stored

    chat = await owner.send("hello crew", target=demo, channel=pb.CHANNEL_APP)
    assert chat.accepted
    again = await owner.send("and again", inbox_id=chat.inbox_id, channel=pb.CHANNEL_APP)
    assert again.conversation_id == chat.conversation_id
    with pytest.raises(PreconditionFailed, match="free_text_ask"):
        await owner.send("not from the app", inbox_id=chat.inbox_id)
    assert count(database_url, "messages") == stored + 2


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"text": ""}, "text is empty"),
        ({"text": "x" * (64 * 1024 + 1)}, "limit is 65536 bytes"),
        ({"text": "ok", "submission_id": "s" * 201}, "submission_id is 201 characters"),
        ({"text": "ok", "target": "crew:bad name"}, "target.name"),
    ],
)
async def test_bad_sends_are_refused_and_store_nothing_P6(
    clients, demo, database_url, kwargs, match
):
    """P6: oversized or malformed input gets INVALID_ARGUMENT; nothing is stored."""
    alice = await clients("user:alice")
    kwargs.setdefault("target", demo)
    with pytest.raises(InvalidArgument, match=match):
        await alice.send(**kwargs)
    assert count(database_url, "messages") == 0
    assert count(database_url, "conversations") == 0
    assert count(database_url, "submissions") == 0


async def test_unregistered_target_is_not_found_C2(clients, operator):
    """C2: sending to an unknown crew says so."""
    alice = await clients("user:alice")
    with pytest.raises(NotFound, match="crew:ghost is not registered"):
        await alice.send("anyone?", target="crew:ghost")


async def test_missing_destination_is_refused_C2(clients, demo):
    """C2: a send names a target or an inbox."""
    alice = await clients("user:alice")
    with pytest.raises(InvalidArgument, match="destination is missing"):
        await alice.send("to whom?")


def test_status_codes_are_the_documented_ones():
    """The domain errors map onto the gRPC codes the contract names."""
    assert Conflict.code == grpc.StatusCode.ALREADY_EXISTS
    assert PreconditionFailed.code == grpc.StatusCode.FAILED_PRECONDITION


async def test_concurrent_sends_keep_their_own_outcomes_when_stored_together_C2_C3_C4_C8(
    clients, operator, demo, database_url
):
    """C2 C3 C4 C8: concurrent new-conversation sends share statements (natural batching)
    yet each gets its own answer: stored, retried twin, unknown target, switched off."""
    owner = await clients("user:owner")
    await operator.register_target("crew:quiet", owner="user:owner")
    await owner.update_target("crew:quiet", free_text_ask=False)
    alice = await clients("user:alice")
    before = count(database_url, "messages")

    sends = [alice.send(f"m{n}", target=demo) for n in range(40)]
    sends += [alice.send("twin", target=demo, submission_id="same-key") for _ in range(6)]
    sends += [alice.send("lost", target="crew:nowhere") for _ in range(3)]
    sends += [alice.send("hush", target="crew:quiet") for _ in range(3)]
    results = await asyncio.gather(*sends, return_exceptions=True)

    assert all(not isinstance(r, BaseException) for r in results[:46]), results
    stored = [r for r in results[:40] if not isinstance(r, BaseException)]
    twins = [r for r in results[40:46] if not isinstance(r, BaseException)]
    assert all(r.accepted for r in stored)
    assert len({r.conversation_id for r in stored}) == 40
    assert len({(r.message_id, r.conversation_id, r.inbox_id) for r in twins}) == 1
    assert all(isinstance(r, NotFound) for r in results[46:49])
    assert all(isinstance(r, PreconditionFailed) for r in results[49:])
    assert count(database_url, "messages") == before + 41  # 40 + one twin, nothing else
