"""Internal conversations (L5): crew X's agent talks to crew Y from a turn, and Y's
replies come back as X's turns, against a real messaging service and real TurnWorkers.

A conversation started with `TurnContext.start_conversation` is tied to the turn's
conversation; Y's explicit replies into it are queued there as `conversation_reply`
deliveries in the statement that stores them; X's agent-messaging switch (C8) off
refuses them, storing nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import psycopg
import pytest

from agentworks.client import MessagingClient, errors
from agentworks.client.capability_identity import CapabilityIdentity
from agentworks.messaging.v1 import messaging_pb2 as m
from agentworks.runtime import TurnContext, TurnWorker, delivery_attributes
from agentworks.runtime.agent_tools import turn_toolbox
from agentworks.server.testing import read_until

X, X_AGENT = "crew:x", "agent:x/bot"
Y, Y_AGENT = "crew:y", "agent:y/bot"
WAIT = 15  # seconds any single condition may take before the test fails


@pytest.fixture
async def ops(messaging, identity) -> AsyncIterator[MessagingClient]:
    """An operator on messaging, with crew:x and crew:y registered (owned by user:x-owner
    and user:y-owner)."""
    client = MessagingClient(messaging.address, identity=identity("user:ops", {"operator"}))
    await client.register_target(X, owner="user:x-owner")
    await client.register_target(Y, owner="user:y-owner")
    yield client
    await client.close()


@pytest.fixture
async def client(messaging, identity):
    """`client(principal)` -> a MessagingClient as that principal (closed at the end)."""
    made: list[MessagingClient] = []

    def make(principal: str) -> MessagingClient:
        made.append(MessagingClient(messaging.address, identity=identity(principal)))
        return made[-1]

    yield make
    for one in made:
        await one.close()


@contextlib.asynccontextmanager
async def worker(messaging, minter, target: str, handler) -> AsyncIterator[TurnWorker]:
    """A TurnWorker of `target` running in the background."""
    running = TurnWorker(
        messaging.address, minter, [target], handler, wait_seconds=2, lease_seconds=5
    )
    task = asyncio.create_task(running.run())
    try:
        yield running
    finally:
        running.stop()
        await asyncio.wait_for(task, WAIT)


async def test_crew_x_asks_crew_y_and_ys_replies_come_back_as_xs_turns_L5(
    messaging, ops, client, identity, database_url
):
    """L5/C5/C6: alice asks crew X; X's agent starts a conversation with crew Y from its
    turn (with the start_conversation agent tool); Y's agent replies into it; the reply
    arrives as a `conversation_reply` turn of alice's conversation with X (naming Y's
    conversation and sender), where X answers alice and continues the conversation with
    Y; Y hears it. Every reply stored in Y's
    conversation has its delivery in X's (one statement stores both)."""
    replies: list[m.Delivery] = []
    started: list[m.SendReceipt] = []
    heard_by_y: list[str] = []

    async def x_handler(ctx: TurnContext) -> None:
        for delivery in ctx.deliveries:
            if delivery.kind == m.DELIVERY_KIND_MESSAGE:
                # The agent tool (L1) a model would use: start_conversation.
                tool = await turn_toolbox(ctx).call(
                    "start_conversation", {"target": Y, "text": f"X asks: {delivery.message.text}"}
                )
                started.append(
                    m.SendReceipt(
                        conversation_id=tool["conversation_id"], inbox_id=tool["inbox_id"]
                    )
                )
            elif delivery.kind == m.DELIVERY_KIND_CONVERSATION_REPLY:
                replies.append(delivery)
                await ctx.send_message(f"Y says: {delivery.message.text}")
                inbox = delivery_attributes(delivery)["inbox_id"]
                await ctx.continue_conversation(inbox, "thanks, Y")

    async def y_handler(ctx: TurnContext) -> None:
        for message in ctx.messages:
            heard_by_y.append(f"{message.sender}: {message.text}")
            if message.text.startswith("X asks"):
                await ctx.send_message("4")

    alice = client("user:alice")
    async with (
        worker(messaging, identity(X_AGENT), X, x_handler),
        worker(messaging, identity(Y_AGENT), Y, y_handler),
    ):
        receipt = await alice.send("what is 2 + 2?", target=X)
        assert await read_until(alice, receipt.inbox_id, 1, WAIT) == ["Y says: 4"]
        for _ in range(WAIT * 10):
            if len(heard_by_y) == 2:
                break
            await asyncio.sleep(0.1)

    assert heard_by_y == [f"{X_AGENT}: X asks: what is 2 + 2?", f"{X_AGENT}: thanks, Y"]
    [conversation] = started
    [reply] = replies
    assert reply.conversation_id == receipt.conversation_id  # a turn of X's conversation
    assert reply.message.text == "4" and reply.message.sender == Y_AGENT
    assert reply.message.conversation_id == conversation.conversation_id
    attributes = delivery_attributes(reply)
    assert attributes == {
        "conversation_id": conversation.conversation_id,
        "inbox_id": conversation.inbox_id,
        "target": Y,
        "sender": Y_AGENT,
        "message_id": reply.message.message_id,
    }
    assert Y_AGENT in reply.text and conversation.inbox_id in reply.text

    # X's transcript shows the reply as a delivery of its own conversation (C12).
    page = await ops.get_transcript(receipt.conversation_id, limit=50)
    kinds = [e.delivery.kind for e in page.entries if e.WhichOneof("entry") == "delivery"]
    assert kinds == [m.DELIVERY_KIND_MESSAGE, m.DELIVERY_KIND_CONVERSATION_REPLY]

    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        rows = await (
            await conn.execute(
                """
                SELECT c.origin_conversation_id, c.origin_target_kind, c.origin_target_name,
                       (SELECT count(*) FROM messaging.messages msg
                        WHERE msg.conversation_id = c.id AND msg.direction = 'to_inbox'),
                       (SELECT count(*) FROM messaging.deliveries d
                        JOIN messaging.messages msg ON msg.id = d.message_id
                        WHERE d.kind = 'conversation_reply' AND msg.conversation_id = c.id
                          AND d.conversation_id = c.origin_conversation_id)
                FROM messaging.conversations c WHERE c.id = %s
                """,
                (conversation.conversation_id,),
            )
        ).fetchall()
    [(origin, kind, name, stored, queued)] = rows
    assert (str(origin), kind, name) == (receipt.conversation_id, "crew", "x")
    assert stored == queued == 1


async def test_xs_switch_off_refuses_ys_reply_and_stores_nothing_L5_C8(
    messaging, ops, client, identity
):
    """L5/C8: X's agent started a conversation with Y; X's owner turns agent messaging
    off; Y's reply into that conversation is refused FAILED_PRECONDITION naming crew:x
    and the setting, and neither conversation gets anything. Turned on again, the same
    reply goes through and comes back as X's turn."""
    started: list[m.SendReceipt] = []

    async def x_handler(ctx: TurnContext) -> None:
        for message in ctx.messages:
            started.append(await ctx.start_conversation(Y, message.text))

    x_owner = MessagingClient(messaging.address, identity=identity("user:x-owner"))
    y_agent = client(Y_AGENT)
    x_agent = client(X_AGENT)
    alice = client("user:alice")
    try:
        async with worker(messaging, identity(X_AGENT), X, x_handler):
            receipt = await alice.send("ask Y something", target=X)
            y_turn = await y_agent.claim_turn([Y], wait_seconds=WAIT)
            assert y_turn is not None and y_turn.deliveries[0].message.sender == X_AGENT
        await x_owner.update_target(X, free_text_ask=False)
        before_x = await ops.get_transcript(receipt.conversation_id, limit=50)
        before_y = await ops.get_transcript(y_turn.conversation_id, limit=50)

        with pytest.raises(errors.PreconditionFailed) as refused:
            await y_agent.send_message(y_turn.reply_inbox_id, "here is my answer")
        assert "started by crew:x" in refused.value.message
        assert "free_text_ask = false" in refused.value.message
        assert "nothing was stored" in refused.value.message
        assert await ops.get_transcript(receipt.conversation_id, limit=50) == before_x
        assert await ops.get_transcript(y_turn.conversation_id, limit=50) == before_y
        assert await x_agent.claim_turn([X], wait_seconds=0) is None

        await x_owner.update_target(X, free_text_ask=True)
        await y_agent.send_message(y_turn.reply_inbox_id, "here is my answer")
        x_turn = await x_agent.claim_turn([X], wait_seconds=WAIT)
        assert x_turn is not None and x_turn.conversation_id == receipt.conversation_id
        [delivery] = x_turn.deliveries
        assert delivery.kind == m.DELIVERY_KIND_CONVERSATION_REPLY
        assert delivery.message.text == "here is my answer"
    finally:
        await x_owner.close()


async def test_send_from_turn_acts_only_with_a_turn_capability_and_for_its_own_L5_T3(
    messaging, ops, client, identity
):
    """L5/T3 (attacker): SendFromTurn without a turn capability (the runtime's own
    identity, a user) is PERMISSION_DENIED; a capability of another conversation cannot
    continue a conversation it did not start (NOT_FOUND, nothing stored); a target with
    agent messaging off refuses the start (C8). Nothing is stored by any of them."""
    x_agent = client(X_AGENT)
    alice = client("user:alice")
    one = await alice.send("first", target=X)
    two = await alice.send("second", target=X)
    turn_one = await x_agent.claim_turn([X], wait_seconds=WAIT)
    turn_two = await x_agent.claim_turn([X], wait_seconds=WAIT)
    assert {turn_one.conversation_id, turn_two.conversation_id} == {
        one.conversation_id,
        two.conversation_id,
    }
    cap_one = MessagingClient(messaging.address, identity=CapabilityIdentity(turn_one.capability))
    cap_two = MessagingClient(messaging.address, identity=CapabilityIdentity(turn_two.capability))
    try:
        for stranger in (x_agent, alice):
            with pytest.raises(errors.PermissionDenied, match="the turn's capability"):
                await stranger.send_from_turn("hi", target=Y)

        started = await cap_one.send_from_turn("hello Y", target=Y)
        before = await ops.get_transcript(started.conversation_id, limit=50)
        with pytest.raises(errors.NotFound, match="not found"):
            await cap_two.send_from_turn("me too", inbox_id=started.inbox_id)
        assert await ops.get_transcript(started.conversation_id, limit=50) == before
        # Its own conversation's capability continues it.
        again = await cap_one.send_from_turn("more", inbox_id=started.inbox_id)
        assert again.conversation_id == started.conversation_id

        with pytest.raises(errors.InvalidArgument, match="destination"):
            await cap_one.send_from_turn("where to?")

        await ops.update_target(Y, free_text_ask=False)
        with pytest.raises(errors.PreconditionFailed, match="crew:y has agent messaging"):
            await cap_one.send_from_turn("hello again", target=Y)
        with pytest.raises(errors.PreconditionFailed, match="crew:y has agent messaging"):
            await cap_one.send_from_turn("more", inbox_id=started.inbox_id)
        assert len((await ops.get_transcript(started.conversation_id, limit=50)).entries) == 4
    finally:
        await cap_one.close()
        await cap_two.close()
