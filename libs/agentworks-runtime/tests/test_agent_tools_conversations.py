"""Crew-to-crew conversations through the turn tools alone (L9, L5), against a real
messaging service and real TurnWorkers: start_conversation, then continue_conversation
back and forth; the scope and switch (C8) refusals of continue_conversation; and the
reference runtime's memory showing another crew's reply with its text."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentworks.client import MessagingClient
from agentworks.messaging.v1 import messaging_pb2 as m
from agentworks.runtime import TurnContext, TurnWorker, delivery_attributes, delivery_kind
from agentworks.runtime.agent_tools import ToolError, turn_toolbox
from agentworks.runtime.llm.memory import render_delivery
from agentworks.server.testing import read_until

X, X_AGENT = "crew:x", "agent:x/bot"
Y, Y_AGENT = "crew:y", "agent:y/bot"
WAIT = 15  # seconds any single condition may take before the test fails
EXCHANGES = 3


@pytest.fixture
async def ops(messaging, identity) -> AsyncIterator[MessagingClient]:
    """An operator on messaging, with crew:x and crew:y registered."""
    client = MessagingClient(messaging.address, identity=identity("user:ops", {"operator"}))
    await client.register_target(X, owner="user:x-owner")
    await client.register_target(Y, owner="user:y-owner")
    yield client
    await client.close()


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
