"""The runtime SDK's function calls from turns, against real messaging and functions.

Covers F13 (a call made by an agent in a turn notifies that conversation: the call's end
comes back as a later `function_completed` turn), F14/F6 (agent steps list, call, get
and reply to functions; the default retry key is scoped to the turn and call, so a retry
gets the same call), F11 (the calling agent answers a question) and R1 (the TurnWorker
and ExecutionWorker are the runtimes on both sides).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
import structlog

from agentworks.client import FunctionsClient, MessagingClient
from agentworks.client.functions import state_name
from agentworks.core import capability
from agentworks.core.capability_identity import CapabilityIdentity
from agentworks.core.errors import PreconditionFailed
from agentworks.core.identity import mint
from agentworks.messaging.v1 import messaging_pb2 as m
from agentworks.runtime import (
    ExecutionContext,
    ExecutionWorker,
    TurnContext,
    TurnOutcome,
    TurnWorker,
    delivery_attributes,
)
from agentworks.server.testing import read_until

CREW = "crew:demo"
AGENT = "agent:demo/demo-bot"
TOOLS = "crew:tools"
TOOLS_AGENT = "agent:tools/bot"
WAIT = 15  # seconds any single condition may take before the test fails
SHOUT_SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
    "additionalProperties": False,
}


@pytest.fixture
async def functions(start_functions, messaging):
    """The functions service in-process, sending completion notices to `messaging`."""
    return await start_functions(FUNCTIONS_MESSAGING_ADDRESS=messaging.address)


@pytest.fixture
async def alice(messaging, identity) -> AsyncIterator[MessagingClient]:
    """user:alice on messaging, with crew:demo registered there."""
    ops = MessagingClient(messaging.address, identity=identity("user:ops", {"operator"}))
    await ops.register_target(CREW, owner="user:dev")
    await ops.close()
    client = MessagingClient(messaging.address, identity=identity("user:alice"))
    yield client
    await client.close()


@pytest.fixture
async def tools(functions, identity, tmp_path) -> AsyncIterator[str]:
    """crew:tools with `shout` and `confirm` (callable by crew demo's agents), served by an
    ExecutionWorker as agent:tools/bot."""
    async with (
        FunctionsClient(functions.address, identity=identity("user:ops", {"operator"})) as ops,
        FunctionsClient(functions.address, identity=identity("user:owner")) as owner,
    ):
        await ops.register_target(TOOLS, owner="user:owner")
        for name in ("shout", "confirm"):
            await owner.declare_function(
                TOOLS, name, input_schema=SHOUT_SCHEMA, allowed_callers=["agent:demo/*"]
            )

    async def shout(ctx: ExecutionContext) -> str:
        return ctx.inputs["text"].upper() + "!"

    async def confirm(ctx: ExecutionContext) -> str:
        return f"{ctx.inputs['text']}: {await ctx.ask('go ahead?')}"

    worker = ExecutionWorker(
        functions.address,
        identity(TOOLS_AGENT),
        [TOOLS],
        {"shout": shout, "confirm": confirm},
        root=tmp_path,
        wait_seconds=2,
    )
    task = asyncio.create_task(worker.run())
    yield TOOLS
    worker.stop()
    await asyncio.wait_for(task, WAIT)


@contextlib.asynccontextmanager
async def turn_worker(messaging, minter, handler, **kwargs) -> AsyncIterator[TurnWorker]:
    """A TurnWorker for crew:demo running in the background."""
    worker = TurnWorker(
        messaging.address, minter, [CREW], handler, wait_seconds=2, lease_seconds=5, **kwargs
    )
    task = asyncio.create_task(worker.run())
    try:
        yield worker
    finally:
        worker.stop()
        await asyncio.wait_for(task, WAIT)


async def test_call_function_notice_returns_as_a_later_turn_of_the_conversation_f13_f14_r1(
    messaging, functions, tools, alice, identity
):
    """F13/F14/F6/R1: a turn handler calls crew:tools' `shout` with ctx.call_function; an
    ExecutionWorker finishes it; the completion notice arrives as a later
    `function_completed` turn of the same conversation, where get_function_call shows the
    terminal status. A retry with the turn-scoped key gets the same call."""
    turns: list[TurnContext] = []
    calls: list[str] = []
    retried: list[str] = []
    listed: list[list[str]] = []
    outcomes: asyncio.Queue[TurnOutcome] = asyncio.Queue()

    async def handler(ctx: TurnContext) -> None:
        turns.append(ctx)
        for delivery in ctx.deliveries:
            if delivery.kind == m.DELIVERY_KIND_FUNCTION_COMPLETED:
                attributes = delivery_attributes(delivery)
                status = await ctx.get_function_call(attributes["call_id"])
                await ctx.send_message(
                    f"{attributes['status']}: {state_name(status.status)} {status.answer}"
                )
            else:
                listed.append([fn.name for fn in await ctx.list_functions(TOOLS)])
                receipt = await ctx.call_function(TOOLS, "shout", {"text": delivery.message.text})
                calls.append(receipt.call_id)
                # What a retry after a lost answer sends: the same key, the same call
                # (with the turn's capability, as call_function sends it: L6).
                assert ctx.functions is not None
                in_turn = FunctionsClient(
                    channel=ctx.functions.channel, identity=CapabilityIdentity(ctx.capability)
                )
                again = await in_turn.call(
                    TOOLS,
                    "shout",
                    {"text": delivery.message.text},
                    submission_id=f"turn:{ctx.turn_id}:call:1",
                    notify_conversation_id=ctx.conversation_id,
                )
                assert not again.created
                retried.append(again.call_id)
                await ctx.send_message(f"calling {receipt.call_id}")

    async with turn_worker(
        messaging,
        identity(AGENT),
        handler,
        functions_address=functions.address,
        on_finished=outcomes.put_nowait,
    ):
        receipt = await alice.send("hello", target=CREW)
        texts = await read_until(alice, receipt.inbox_id, 2, WAIT)
        first = await asyncio.wait_for(outcomes.get(), WAIT)
        second = await asyncio.wait_for(outcomes.get(), WAIT)

    [call_id] = calls
    assert retried == [call_id]
    assert [sorted(names) for names in listed] == [["confirm", "shout"]]
    assert texts == [f"calling {call_id}", "completed: completed HELLO!"]
    # Two turns of one conversation: the call's, then the notice's.
    assert [t.conversation_id for t in turns] == [receipt.conversation_id] * 2
    assert first.turn_id == turns[0].turn_id and second.turn_id == turns[1].turn_id
    assert first.completed and second.completed and first.turn_id != second.turn_id
    [notice] = turns[1].deliveries
    assert notice.kind == m.DELIVERY_KIND_FUNCTION_COMPLETED
    assert delivery_attributes(notice)["call_id"] == call_id
    page = await alice.get_transcript(receipt.conversation_id, limit=100)
    kinds = [e.delivery.kind for e in page.entries if e.WhichOneof("entry") == "delivery"]
    assert kinds == [m.DELIVERY_KIND_MESSAGE, m.DELIVERY_KIND_FUNCTION_COMPLETED]

    # The call is the agent's (F14: calls identify their source) and ended completed.
    async with FunctionsClient(functions.address, identity=identity(AGENT)) as agent:
        status = await agent.get_status(call_id)
    assert (state_name(status.status), status.caller, status.answer) == (
        "completed",
        AGENT,
        "HELLO!",
    )


async def test_reply_function_call_answers_the_question_of_the_agents_call_f11_f14(
    functions, tools, alice, identity, signing_keys
):
    """F11/F14: the calling agent reads its call waiting for input with get_function_call
    and answers it with reply_function_call; a given submission_id is used as is."""
    conversation_id = (await alice.send("confirm please", target=CREW)).conversation_id
    # The capability messaging gives this turn: call_function sends it (L6).
    token = mint(
        AGENT,
        signing_keys.ensure("service:messaging")[0],
        capability=capability.turn("t-1", conversation_id),
    )
    async with FunctionsClient(functions.address, identity=identity(AGENT)) as client:
        ctx = TurnContext(
            turn=m.Turn(turn_id="t-1", conversation_id=conversation_id, capability=token),
            client=None,  # type: ignore[arg-type]  # no messages are sent here
            log=structlog.get_logger("test"),
            functions=client,
        )
        receipt = await ctx.call_function(
            TOOLS, "confirm", {"text": "deploy"}, submission_id="my-key"
        )
        again = await ctx.call_function(
            TOOLS, "confirm", {"text": "deploy"}, submission_id="my-key"
        )
        assert again.call_id == receipt.call_id and not again.created
        waiting = await client.wait(receipt.call_id, until={"waiting_for_input"}, timeout=WAIT)
        assert waiting.question == "go ahead?"
        assert (
            state_name((await ctx.get_function_call(receipt.call_id)).status) == "waiting_for_input"
        )
        await ctx.reply_function_call(receipt.call_id, "yes")
        ended = await client.wait(receipt.call_id, timeout=WAIT)
        assert (state_name(ended.status), ended.answer) == ("completed", "deploy: yes")
        assert state_name((await ctx.get_function_call(receipt.call_id)).status) == "completed"


async def test_function_calls_need_a_functions_address_f13_f14(messaging, alice, identity):
    """F13/F14: a worker without a functions address hands the handler a context whose
    call_function (and list/get/reply) raise PreconditionFailed naming the variable."""
    refused: list[str] = []

    async def handler(ctx: TurnContext) -> None:
        assert ctx.functions is None
        for attempt in (
            ctx.call_function(TOOLS, "shout", {"text": "hi"}),
            ctx.list_functions(TOOLS),
            ctx.get_function_call("c"),
            ctx.reply_function_call("c", "yes"),
        ):
            with pytest.raises(PreconditionFailed, match="AGENTWORKS_FUNCTIONS_ADDRESS") as exc:
                await attempt
            refused.append(exc.value.message)
        await ctx.send_message("cannot call functions here")

    async with turn_worker(messaging, identity(AGENT), handler):
        receipt = await alice.send("shout hi", target=CREW)
        assert await read_until(alice, receipt.inbox_id, 1, WAIT) == ["cannot call functions here"]
    assert len(refused) == 4
