"""Internal conversations (L5): crew X's agent talks to crew Y from a turn, and Y's
replies come back as X's turns, against a real messaging service and real TurnWorkers.

A conversation started with `TurnContext.start_conversation` is tied to the turn's
conversation; Y's explicit replies into it are queued there as `conversation_reply`
deliveries in the statement that stores them; X's agent-messaging switch (C8) off
refuses them, storing nothing.

The same through the turn tools alone (L9): start_conversation, then
continue_conversation back and forth; the scope and switch (C8) refusals of
continue_conversation; and the reference runtime's memory showing another crew's reply
with its text.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from agentworks.agents.agent_tools import ToolError, turn_toolbox
from agentworks.agents.llm.memory import render_delivery
from agentworks.client import MessagingClient
from agentworks.core import errors
from agentworks.core.capability_identity import CapabilityIdentity
from agentworks.messaging.v1 import messaging_pb2 as m
from agentworks.runtime import TurnContext, TurnWorker, delivery_attributes, delivery_kind
from agentworks.server.testing import read_until

X, X_AGENT = "crew:x", "agent:x/bot"
Y, Y_AGENT = "crew:y", "agent:y/bot"
WAIT = 15  # seconds any single condition may take before the test fails
EXCHANGES = 3  # L9: messages each way in the tools-only conversation


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


def recorded(failures: list[BaseException], handler):
    """The handler, with what it raises kept for the test (the worker only logs it)."""

    async def run(ctx: TurnContext) -> None:
        try:
            await handler(ctx)
        except BaseException as exc:
            failures.append(exc)
            raise

    return run


async def test_two_crews_hold_a_three_exchange_conversation_through_the_tools_alone_L9_L5(
    messaging, ops, identity
):
    """L9/L5 (C6): alice asks crew X to count with crew Y. X's agent, using only turn
    tools, starts a conversation with Y (start_conversation); Y answers each message with
    send_message; each answer comes back to X as a conversation_reply turn that carries
    Y's text, and X goes on with continue_conversation and the delivery's inbox_id, three
    exchanges in all, then tells alice with send_message. Every message stays in Y's one
    conversation."""
    failures: list[BaseException] = []
    inboxes: list[str] = []
    heard_by_y: list[str] = []
    heard_by_x: list[str] = []
    others: list[str] = []

    async def x_turn(ctx: TurnContext) -> None:
        box = turn_toolbox(ctx)
        for delivery in ctx.deliveries:
            if delivery_kind(delivery) == "message":
                receipt = await box.call("start_conversation", {"target": Y, "text": "1"})
                inboxes.append(receipt["inbox_id"])
                others.append(receipt["conversation_id"])
            elif delivery_kind(delivery) == "conversation_reply":
                heard_by_x.append(delivery.message.text)
                inbox = delivery_attributes(delivery)["inbox_id"]
                inboxes.append(inbox)
                others.append(delivery_attributes(delivery)["conversation_id"])
                if len(heard_by_x) < EXCHANGES:
                    count = str(int(delivery.message.text) + 1)
                    await box.call("continue_conversation", {"inbox_id": inbox, "text": count})
                else:
                    await box.call("send_message", {"text": f"Y counted to {heard_by_x[-1]}"})

    async def y_turn(ctx: TurnContext) -> None:
        box = turn_toolbox(ctx)
        for message in ctx.messages:
            heard_by_y.append(message.text)
            await box.call("send_message", {"text": str(int(message.text) * 10)})

    alice = MessagingClient(messaging.address, identity=identity("user:alice"))
    async with (
        worker(messaging, identity(X_AGENT), X, recorded(failures, x_turn)),
        worker(messaging, identity(Y_AGENT), Y, recorded(failures, y_turn)),
    ):
        receipt = await alice.send("count with Y", target=X)
        answer = await read_until(alice, receipt.inbox_id, 1, WAIT)
    await alice.close()

    assert not failures, failures
    assert heard_by_y == ["1", "11", "111"]
    assert heard_by_x == ["10", "110", "1110"]
    assert answer == ["Y counted to 1110"]
    # One conversation with Y, continued twice.
    assert len(inboxes) == len(others) == EXCHANGES + 1
    assert len(set(inboxes)) == len(set(others)) == 1
    y_conversation = others[0]
    page = await ops.get_transcript(y_conversation, limit=50)
    texts = [e.message.text for e in page.entries if e.WhichOneof("entry") == "message"]
    assert texts == ["1", "10", "11", "110", "111", "1110"]


async def test_continue_conversation_takes_only_inboxes_its_conversation_started_and_c8_L9(
    messaging, ops, identity
):
    """L9 (C8, T3, attacker): continue_conversation with the inbox of a conversation
    another conversation started, or the turn's own reply inbox, is NOT_FOUND; with Y's
    agent messaging off it is FAILED_PRECONDITION naming the setting; nothing reaches Y.
    Turned on again, the same tool call goes through."""
    failures: list[BaseException] = []
    seen: dict[str, Any] = {}
    y_owner = MessagingClient(messaging.address, identity=identity("user:y-owner"))
    alice = MessagingClient(messaging.address, identity=identity("user:alice"))

    async def x_turn(ctx: TurnContext) -> None:
        box = turn_toolbox(ctx)
        text = ctx.messages[0].text
        if text == "first":
            seen["first"] = await box.call("start_conversation", {"target": Y, "text": "a"})
            await box.call("send_message", {"text": "started"})
            return
        refusals: dict[str, ToolError] = {}
        for label, inbox in (
            ("other conversation's", seen["first"]["inbox_id"]),
            ("own reply inbox", ctx.reply_inbox_id),
        ):
            try:
                await box.call("continue_conversation", {"inbox_id": inbox, "text": "b"})
            except ToolError as exc:
                refusals[label] = exc
        mine = await box.call("start_conversation", {"target": Y, "text": "c"})
        await y_owner.update_target(Y, free_text_ask=False)
        try:
            await box.call("continue_conversation", {"inbox_id": mine["inbox_id"], "text": "d"})
        except ToolError as exc:
            refusals["switch off"] = exc
        await y_owner.update_target(Y, free_text_ask=True)
        seen["on again"] = await box.call(
            "continue_conversation", {"inbox_id": mine["inbox_id"], "text": "e"}
        )
        seen["refusals"] = refusals
        seen["mine"] = mine
        await box.call("send_message", {"text": "checked"})

    try:
        async with worker(messaging, identity(X_AGENT), X, recorded(failures, x_turn)):
            first = await alice.send("first", target=X)
            assert await read_until(alice, first.inbox_id, 1, WAIT) == ["started"]
            second = await alice.send("second", target=X)
            assert await read_until(alice, second.inbox_id, 1, WAIT) == ["checked"]
    finally:
        await y_owner.close()
        await alice.close()

    assert not failures, failures
    refusals = seen["refusals"]
    assert set(refusals) == {"other conversation's", "own reply inbox", "switch off"}
    assert refusals["other conversation's"].code == "NOT_FOUND"
    assert refusals["own reply inbox"].code == "NOT_FOUND"
    assert refusals["switch off"].code == "FAILED_PRECONDITION"
    assert "free_text_ask" in refusals["switch off"].message
    assert seen["on again"]["inbox_id"] == seen["mine"]["inbox_id"]
    page = await ops.get_transcript(seen["mine"]["conversation_id"], limit=50)
    texts = [e.message.text for e in page.entries if e.WhichOneof("entry") == "message"]
    assert texts == ["c", "e"]
    page = await ops.get_transcript(seen["first"]["conversation_id"], limit=50)
    assert [e.message.text for e in page.entries if e.WhichOneof("entry") == "message"] == ["a"]


def test_memory_renders_every_delivery_kind_with_its_text_and_names_the_tool_L9_L4():
    """L9/L4: the reference runtime shows a conversation_reply turn with the notice, the
    other crew's message (sender and text) and the tool that answers it; every other
    kind with its text (and a message it carries)."""
    reply = m.Message(message_id="m9", direction="to_inbox", sender=Y_AGENT, text="the answer is 4")
    delivery = m.Delivery(
        kind=m.DELIVERY_KIND_CONVERSATION_REPLY,
        text=f"{Y_AGENT} (crew:y) wrote in conversation c2",
        message=reply,
    )
    delivery.attributes_json = '{"inbox_id": "i2", "conversation_id": "c2"}'
    shown = render_delivery(delivery)["content"]
    assert shown.startswith("[conversation_reply]\n")
    assert f"[message from {Y_AGENT}]\nthe answer is 4" in shown
    assert "continue_conversation tool, inbox_id i2" in shown
    for kind in (
        m.DELIVERY_KIND_WAKE_UP,
        m.DELIVERY_KIND_SCHEDULE,
        m.DELIVERY_KIND_WEBHOOK,
        m.DELIVERY_KIND_FUNCTION_COMPLETED,
    ):
        content = render_delivery(m.Delivery(kind=kind, text="what it says"))["content"]
        assert "what it says" in content, kind
