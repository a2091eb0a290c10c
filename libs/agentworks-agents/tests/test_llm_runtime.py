"""The reference LLM runtime (L4) against real messaging and functions services, with the
model played by the scripted OpenAI-compatible server of `tests/fixtures/scripted_llm.py`
(the only stand-in): a conversation whose memory comes from its transcript, a function
call whose invalid first result gets the one correction turn in the same chat (F10),
tool use recorded as events without raw arguments or results (F7), the bounded tool
loop, the openai client's retries on 429/5xx, a turn failing at the endpoint, and the
workers `agentworks-runtime llm` runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentworks.agents.llm import LlmAgent, LlmConfig, ModelUnavailable, llm_workers
from agentworks.client import FunctionsClient, MessagingClient
from agentworks.client.functions import state_name
from agentworks.runtime import RuntimeConfig, TurnOutcome, TurnWorker
from agentworks.server.testing import read_until, served_requests, signer_for
from tests.fixtures.scripted_llm import ScriptedLLM, call, calls, fail, say

CREW = "crew:demo"
AGENT = "agent:demo/demo-bot"
WAIT = 20  # seconds any single condition may take before the test fails
TEXT_SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
    "additionalProperties": False,
}
SUMMARY_SCHEMA = {
    "type": "object",
    "properties": {"summary": {"type": "string"}, "words": {"type": "integer"}},
    "required": ["summary", "words"],
    "additionalProperties": False,
}


def llm_config(llm: ScriptedLLM, **extra: Any) -> LlmConfig:
    return LlmConfig(model="scripted-model", base_url=llm.base_url, **extra)


@contextlib.asynccontextmanager
async def llm_turns(messaging, identity, llm: ScriptedLLM, **kwargs) -> AsyncIterator[LlmAgent]:
    """A TurnWorker for crew:demo whose handler is a fresh LlmAgent (a fresh process)."""
    agent = LlmAgent(llm_config(llm))
    worker = TurnWorker(
        messaging.address, identity(AGENT), [CREW], agent.handle_turn, wait_seconds=2, **kwargs
    )
    task = asyncio.create_task(worker.run())
    try:
        yield agent
    finally:
        worker.stop()
        await asyncio.wait_for(task, WAIT)
        await agent.close()


@contextlib.asynccontextmanager
async def llm_executions(
    functions, signing_keys, tmp_path, config: LlmConfig
) -> AsyncIterator[LlmAgent]:
    """crew:demo's executions served by an LlmAgent, with the workers `agentworks-runtime
    llm --serve executions` runs (`llm_workers`)."""
    key, _ = signing_keys.ensure(signer_for(AGENT))
    runtime = RuntimeConfig(
        messaging_address="",
        signing_key=key,
        principal=AGENT,
        targets=(CREW,),
        functions_address=functions.address,
        root=str(tmp_path),
        wait_seconds=2,
    )
    agent = LlmAgent(config)
    [worker] = llm_workers(runtime, agent, ("executions",))
    task = asyncio.ensure_future(worker.run())  # a Worker's run() is an Awaitable
    try:
        yield agent
    finally:
        worker.stop()
        await asyncio.wait_for(task, WAIT)
        await agent.close()


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
async def crew(functions, identity) -> AsyncIterator[FunctionsClient]:
    """crew:demo on functions with `summarize` (output schema) and `greet` (none);
    user:alice's client to call them."""
    async with (
        FunctionsClient(functions.address, identity=identity("user:ops", {"operator"})) as ops,
        FunctionsClient(functions.address, identity=identity("user:owner")) as owner,
    ):
        await ops.register_target(CREW, owner="user:owner")
        await owner.declare_function(
            CREW,
            "summarize",
            input_schema=TEXT_SCHEMA,
            output_schema=SUMMARY_SCHEMA,
            allowed_callers=["user:*"],
        )
        await owner.declare_function(
            CREW, "greet", input_schema=TEXT_SCHEMA, allowed_callers=["user:*"]
        )
    async with FunctionsClient(functions.address, identity=identity("user:alice")) as client:
        yield client


async def ended(client: FunctionsClient, call_id: str) -> Any:
    """The call's status once it has ended (all its events)."""
    status = await client.get_status(call_id, wait_seconds=WAIT, until_ended=True)
    assert state_name(status.status) not in ("running", "waiting_for_input"), status
    return status


async def test_llm_runtime_replies_with_send_message_and_remembers_from_the_transcript_L4(
    messaging, alice, identity
):
    """L4/C6: the model answers a message by calling send_message; its final text is not
    forwarded. The second message is served by a new agent and worker (a restarted
    runtime): what the model is sent includes the first exchange, read back from the
    conversation's transcript; the tool's result (the delivery receipt) was fed back."""
    llm = ScriptedLLM([call("send_message", text="Hello Ada, noted."), say("(not forwarded)")])
    async with llm:
        async with llm_turns(messaging, identity, llm):
            receipt = await alice.send("My name is Ada.", target=CREW)
            assert await read_until(alice, receipt.inbox_id, 1, WAIT) == ["Hello Ada, noted."]
        # A restart: nothing of the first turn is left in any process memory.
        llm.add(call("send_message", text="You are Ada."), say("done"))
        async with llm_turns(messaging, identity, llm):
            await alice.send("What is my name?", inbox_id=receipt.inbox_id)
            texts = await read_until(alice, receipt.inbox_id, 2, WAIT)
    assert texts == ["Hello Ada, noted.", "You are Ada."]
    first, fed_back, second, _ = llm.requests
    assert all(r["model"] == "scripted-model" for r in llm.requests)
    names = {t["function"]["name"] for t in first["tools"]}
    assert {"send_message", "request_wake_up", "read_transcript"} <= names
    assert "return_function_result" not in names
    # The tool's result went back to the model as a `tool` message answering its call.
    tool = fed_back["messages"][-1]
    assert tool["role"] == "tool"
    assert tool["tool_call_id"] == fed_back["messages"][-2]["tool_calls"][0]["id"]
    sent = json.loads(tool["content"])
    assert sent["message_id"]
    # Memory from the transcript: the first exchange, then what is new.
    chat = [(m["role"], m["content"]) for m in second["messages"][1:]]
    assert chat == [
        ("user", "[message from user:alice]\nMy name is Ada."),
        ("assistant", "Hello Ada, noted."),
        ("user", "[message from user:alice]\nWhat is my name?"),
    ]
    assert second["messages"][0]["role"] == "system"


async def test_a_long_conversations_turn_reads_only_the_newest_of_its_transcript_L4_B1(
    messaging, alice, identity
):
    """L4 B1: a turn's memory costs the same however long its conversation is: with 250
    earlier replies (over a GetTranscript page) and a memory of 20 entries, the turn reads
    the transcript once, from its end, and the model sees the newest entries only."""
    receipt = await alice.send("count for me", target=CREW)
    async with MessagingClient(messaging.address, identity=identity(AGENT)) as bot:
        turn = await bot.claim_turn([CREW], wait_seconds=5)
        assert turn is not None
        for i in range(250):
            await bot.send_message(turn.reply_inbox_id, f"r{i}")
        await bot.complete_turn(turn.turn_id)
    llm = ScriptedLLM([call("send_message", text="done counting"), say("ok")])
    async with llm:
        agent = LlmAgent(llm_config(llm, history_entries=20))
        worker = TurnWorker(messaging.address, identity(AGENT), [CREW], agent.handle_turn)
        task = asyncio.create_task(worker.run())
        try:
            before = served_requests("messaging", "GetTranscript")
            await alice.send("how far?", inbox_id=receipt.inbox_id)
            texts = await read_until(alice, receipt.inbox_id, 251, WAIT)
            read = served_requests("messaging", "GetTranscript") - before
        finally:
            worker.stop()
            await asyncio.wait_for(task, WAIT)
            await agent.close()
    assert texts[-1] == "done counting"
    assert read == 1, f"the turn read the transcript in {read} requests"
    chat = [m["content"] for m in llm.requests[0]["messages"][1:]]
    assert chat[-1] == "[message from user:alice]\nhow far?"
    assert "r249" in chat and "r230" not in chat and len(chat) <= 20, chat


async def test_llm_turn_failing_at_the_endpoint_ends_and_its_message_stays_in_memory_L4(
    messaging, alice, identity
):
    """L4/C11: the endpoint refusing a turn's request ends the turn (completed, the
    failure logged, nothing sent), so the conversation is not blocked; the next message is
    served, and the model then sees the earlier message too, from the transcript."""
    llm = ScriptedLLM([fail(400), call("send_message", text="sorry, back now"), say("done")])
    outcomes: asyncio.Queue[TurnOutcome] = asyncio.Queue()
    async with llm, llm_turns(messaging, identity, llm, on_finished=outcomes.put_nowait):
        receipt = await alice.send("first", target=CREW)
        failed = await asyncio.wait_for(outcomes.get(), WAIT)
        await alice.send("second", inbox_id=receipt.inbox_id)
        texts = await read_until(alice, receipt.inbox_id, 1, WAIT)
    assert failed.completed and isinstance(failed.error, ModelUnavailable)
    assert f"{llm.base_url} answered 400" in str(failed.error)
    assert texts == ["sorry, back now"]
    chat = [m["content"] for m in llm.requests[1]["messages"][1:]]
    assert chat == ["[message from user:alice]\nfirst", "[message from user:alice]\nsecond"]


async def test_llm_runtime_function_call_gets_its_correction_turn_in_the_same_chat_L4_F10(
    functions, crew, signing_keys, tmp_path
):
    """L4/F10/F7: the model's first result breaks the output schema; the platform's one
    correction turn re-enters the same chat (the model is sent its earlier answer and
    the correction message) and the call ends completed with the valid result. The
    events hold the tools' names and the model's text, never a tool's arguments or
    result; the tool's result was fed back to the model."""

    def corrected(body: dict[str, Any]) -> Any:
        *_, answer, correction = body["messages"]
        assert answer == {"role": "assistant", "content": '{"summary": "hi", "words": "two"}'}
        assert correction["role"] == "user" and "FUNCTION_RESULT_FILE" in correction["content"]
        return say('```json\n{"summary": "hi", "words": 2}\n```')

    llm = ScriptedLLM(
        [
            calls(("report_progress", {"text": "SECRET-ARG counting"}), text="Counting."),
            say('{"summary": "hi", "words": "two"}'),
            corrected,
        ]
    )
    config = llm_config(llm)
    async with llm, llm_executions(functions, signing_keys, tmp_path, config) as agent:
        receipt = await crew.call(CREW, "summarize", {"text": "hello world"})
        status = await ended(crew, receipt.call_id)
    assert state_name(status.status) == "completed", status.error
    assert json.loads(status.result_json) == {"summary": "hi", "words": 2}
    assert status.correction_turn
    assert agent._chats == {}  # the ended execution's chat was dropped (on_finished)
    assert status.progress == "SECRET-ARG counting"  # the tool did its work
    # One chat: the third request carries everything the first two did.
    first, second, third = llm.requests
    assert third["messages"][: len(second["messages"])] == second["messages"]
    assert "words" in first["messages"][0]["content"]  # the system prompt has the schema
    assert "Inputs: " in first["messages"][1]["content"]
    assert "hello world" in first["messages"][1]["content"]
    tool = second["messages"][-1]
    assert (tool["role"], json.loads(tool["content"])) == ("tool", {"ok": True})
    events = [(e.kind, e.tool_name, e.text) for e in status.events]
    assert events[:3] == [
        ("assistant", "", "Counting."),
        ("tool_call", "report_progress", ""),
        ("tool_result", "report_progress", ""),
    ]
    # The platform's correction (its event) is what the model was sent, word for word.
    [(kind, _, prompt)] = events[3:]
    assert kind == "correction"
    assert third["messages"][-1]["content"].startswith(prompt)
    recorded = json.dumps([[e.kind, e.text] for e in status.events])
    recorded += json.dumps([m.text for m in status.messages])
    assert "SECRET-ARG" not in recorded and '"ok"' not in recorded


async def test_llm_runtime_answer_survives_429_and_503_with_the_clients_retries_L4(
    functions, crew, signing_keys, tmp_path
):
    """L4/F10: a function without an output schema answers with the model's final text;
    a 429 and a 503 from the endpoint are retried by the openai client (with the
    server's retry-after-ms) and the call still completes."""
    llm = ScriptedLLM([fail(429, retry_after_ms=20), fail(503, retry_after_ms=20), say("Hi!")])
    config = llm_config(llm, max_retries=2)
    async with llm, llm_executions(functions, signing_keys, tmp_path, config):
        receipt = await crew.call(CREW, "greet", {"text": "Ada"})
        status = await ended(crew, receipt.call_id)
    assert (state_name(status.status), status.answer) == ("completed", "Hi!")
    assert len(llm.requests) == 3


async def test_llm_runtime_stops_a_model_that_calls_tools_forever_with_an_error_event_L4(
    functions, crew, signing_keys, tmp_path
):
    """L4: the tool loop is bounded: past AGENTWORKS_LLM_MAX_TOOL_ROUNDS the execution
    fails saying so, with an `error` event; the endpoint failing for good (after the
    retries) fails the call naming the endpoint."""
    progress = call("report_progress", text="again")
    llm = ScriptedLLM([progress, progress, progress, fail(500), fail(500)])
    config = llm_config(llm, max_tool_rounds=2, max_retries=1)
    async with llm, llm_executions(functions, signing_keys, tmp_path, config):
        looping = await ended(crew, (await crew.call(CREW, "greet", {"text": "x"})).call_id)
        broken = await ended(crew, (await crew.call(CREW, "greet", {"text": "y"})).call_id)
    assert state_name(looping.status) == "failed"
    assert "ToolRoundsExhausted" in looping.error
    assert "AGENTWORKS_LLM_MAX_TOOL_ROUNDS" in looping.error
    assert [e.kind for e in looping.events][-1] == "error"
    assert [e.tool_name for e in looping.events if e.kind == "tool_call"] == ["report_progress"] * 2
    assert state_name(broken.status) == "failed"
    assert f"{llm.base_url} answered 500" in broken.error
    assert len(llm.requests) == 5


def test_llm_command_without_a_model_is_refused_saying_what_to_set_L4():
    """L4: `agentworks-runtime llm` without AGENTWORKS_LLM_MODEL exits 2 naming it (and a
    bad OPENAI_BASE_URL likewise), before connecting anywhere."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTWORKS_", "OPENAI_"))}
    run = [sys.executable, "-m", "agentworks.runtime", "llm"]
    done = subprocess.run(run, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "AGENTWORKS_LLM_MODEL is not set" in done.stderr
    env.update(AGENTWORKS_LLM_MODEL="m", OPENAI_BASE_URL="localhost:11434")
    done = subprocess.run(run, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "OPENAI_BASE_URL must be an http(s) URL" in done.stderr


def test_memory_shows_each_message_once_and_a_delivered_reply_as_someone_elses_L4_L5():
    """L4/L5: a message and its delivery are one chat message; the agent's own sent
    message is `assistant`; a wake-up says what it is; another target's reply delivered
    into this conversation (stored in the other one, sent to an inbox) is a `user`
    message naming its sender, not the agent's own; the current turn is left out."""
    from agentworks.agents.llm.memory import render_transcript
    from agentworks.messaging.v1 import messaging_pb2 as pb

    def message(mid: str, direction: str, sender: str, text: str) -> pb.Message:
        return pb.Message(message_id=mid, direction=direction, sender=sender, text=text)

    asked = message("m1", "to_target", "user:alice", "hi")
    answered = message("m2", "to_inbox", AGENT, "hello")
    reply = message("m3", "to_inbox", "agent:tools/bot", "tools here")
    new = message("m4", "to_target", "user:alice", "and now?")
    MESSAGE, WAKE_UP = pb.DELIVERY_KIND_MESSAGE, pb.DELIVERY_KIND_WAKE_UP
    entries = [
        pb.TranscriptEntry(message=asked),
        pb.TranscriptEntry(delivery=pb.Delivery(kind=MESSAGE, message=asked, turn_id="t1")),
        pb.TranscriptEntry(message=answered),
        pb.TranscriptEntry(delivery=pb.Delivery(kind=WAKE_UP, text="reminder: x", turn_id="t2")),
        pb.TranscriptEntry(delivery=pb.Delivery(kind=MESSAGE, message=reply, turn_id="t3")),
        pb.TranscriptEntry(message=new),
        pb.TranscriptEntry(delivery=pb.Delivery(kind=MESSAGE, message=new, turn_id="t4")),
    ]
    assert pb.DELIVERY_KIND_MESSAGE == 1 and pb.DELIVERY_KIND_WAKE_UP == 2
    assert render_transcript(entries, exclude_turn="t4") == [
        {"role": "user", "content": "[message from user:alice]\nhi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "[wake_up]\nreminder: x"},
        {"role": "user", "content": "[message from agent:tools/bot]\ntools here"},
    ]
