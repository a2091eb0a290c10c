"""Two crews hold a conversation through the reference LLM runtime's tools alone (L9):
crew X's and crew Y's turns are served by `LlmAgent`s against a real messaging service,
each model played by a scripted OpenAI-compatible server (`tests/fixtures/scripted_llm.py`)
that answers from what it is sent, as a model reads its context: the other crew's text
and the inbox to answer it with come from the rendered delivery, nowhere else.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from agentworks.agents.llm import LlmAgent, LlmConfig
from agentworks.client import MessagingClient
from agentworks.runtime import TurnWorker
from agentworks.server.testing import read_until
from tests.fixtures.scripted_llm import Answer, ScriptedLLM, call, say

X, X_AGENT = "crew:x", "agent:x/bot"
Y, Y_AGENT = "crew:y", "agent:y/bot"
WAIT = 20  # seconds any single condition may take before the test fails
EXCHANGES = 3
# Each turn is at most two requests (a tool call, then done); room for them all.
STEPS = 4 * (EXCHANGES + 1)


@contextlib.asynccontextmanager
async def llm_crew(messaging, minter, target: str, llm: ScriptedLLM) -> AsyncIterator[None]:
    """`target`'s turns served by a fresh LlmAgent whose model is `llm`."""
    agent = LlmAgent(LlmConfig(model="scripted-model", base_url=llm.base_url))
    worker = TurnWorker(messaging.address, minter, [target], agent.handle_turn, wait_seconds=2)
    task = asyncio.create_task(worker.run())
    try:
        yield
    finally:
        worker.stop()
        await asyncio.wait_for(task, WAIT)
        await agent.close()


def last_user(body: dict[str, Any]) -> str:
    return str(body["messages"][-1]["content"])


def the_other_crews_reply(content: str) -> tuple[str, str]:
    """From a rendered conversation_reply: (the other crew's text, the inbox to answer)."""
    lines = content.splitlines()
    text = lines[lines.index(f"[message from {Y_AGENT}]") + 1]
    [attributes] = [line for line in lines if line.startswith("attributes: ")]
    return text, json.loads(attributes.removeprefix("attributes: "))["inbox_id"]


async def test_two_llm_crews_hold_a_three_exchange_conversation_through_the_tools_L9_L4(
    messaging, identity
):
    """L9/L4/L5: alice asks crew X to count with crew Y. X's model starts a conversation
    with Y (start_conversation); Y's model answers each message with send_message; each
    answer reaches X's model as a conversation_reply whose rendering carries Y's text and
    the inbox_id, and X's model goes on with continue_conversation, three exchanges in
    all, then tells alice with send_message. X's model sees the earlier replies again in
    its memory (from the transcript), each with its text."""
    seen_by_x: list[str] = []
    memory: list[list[str]] = []

    def x_model(body: dict[str, Any]) -> Answer:
        if body["messages"][-1]["role"] == "tool":
            return say("done")
        content = last_user(body)
        if content.startswith("[message from user:alice]"):
            return call("start_conversation", target=Y, text="1")
        assert content.startswith("[conversation_reply]\n"), content
        text, inbox = the_other_crews_reply(content)
        seen_by_x.append(text)
        memory.append([str(m["content"]) for m in body["messages"][1:-1]])
        if len(seen_by_x) < EXCHANGES:
            return call("continue_conversation", inbox_id=inbox, text=str(int(text) + 1))
        return call("send_message", text=f"Y counted to {text}")

    def y_model(body: dict[str, Any]) -> Answer:
        if body["messages"][-1]["role"] == "tool":
            return say("done")
        text = last_user(body).splitlines()[-1]
        return call("send_message", text=str(int(text) * 10))

    ops = MessagingClient(messaging.address, identity=identity("user:ops", {"operator"}))
    await ops.register_target(X, owner="user:x-owner")
    await ops.register_target(Y, owner="user:y-owner")
    await ops.close()
    alice = MessagingClient(messaging.address, identity=identity("user:alice"))
    async with (
        ScriptedLLM([x_model] * STEPS) as x_llm,
        ScriptedLLM([y_model] * STEPS) as y_llm,
        llm_crew(messaging, identity(X_AGENT), X, x_llm),
        llm_crew(messaging, identity(Y_AGENT), Y, y_llm),
    ):
        receipt = await alice.send("count with Y", target=X)
        answer = await read_until(alice, receipt.inbox_id, 1, WAIT)
    await alice.close()

    assert answer == ["Y counted to 1110"]
    assert seen_by_x == ["10", "110", "1110"]
    said_to_y = [json.loads(r["messages"][-1]["content"]) for r in y_llm.requests[1::2]]
    assert [r["message_id"] != "" for r in said_to_y] == [True] * EXCHANGES
    assert [last_user(r).splitlines()[-1] for r in y_llm.requests[::2]] == ["1", "11", "111"]
    names = {t["function"]["name"] for t in x_llm.requests[0]["tools"]}
    assert {"start_conversation", "continue_conversation", "send_message"} <= names
    # The third reply's turn remembers the first two, each with Y's text.
    earlier = "\n".join(memory[-1])
    assert f"[message from {Y_AGENT}]\n10\n" in earlier
    assert f"[message from {Y_AGENT}]\n110\n" in earlier
