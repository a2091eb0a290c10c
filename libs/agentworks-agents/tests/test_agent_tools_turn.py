"""A turn handler that drives the agent tools, against real messaging, scheduler and
functions services and real TurnWorker / ExecutionWorker runtimes (L1, L3).

Covers L1 (the turn tools: reply, wake-ups requested, listed, rescheduled, cancelled,
a function called and its completion read, the transcript; bad arguments refused naming
the field, nothing stored), L3 (OpenAI and Anthropic tool calls dispatched in a real
turn), and through them C6, C12, S1, S2, F13.
"""

# The fixtures imported by name below are the tests' parameters.
# ruff: noqa: F811

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agentworks.agents.agent_tools import (
    ToolError,
    dispatch_anthropic,
    dispatch_openai,
    turn_toolbox,
)
from agentworks.client import SchedulerClient
from agentworks.runtime import TurnContext, delivery_attributes, delivery_kind
from agentworks.server.testing import read_until
from tests.fixtures.agent_tools import (  # noqa: F401 - fixtures, used by name
    AGENT,
    CREW,
    WAIT,
    alice,
    checked,
    functions,
    scheduler,
    tools_crew,
    turn_worker,
)


def recorded(failures: list[BaseException], handler):
    """The handler, with what it raises kept for the test (the worker only logs it)."""

    async def run(ctx: TurnContext) -> None:
        try:
            await handler(ctx)
        except BaseException as exc:
            failures.append(exc)
            raise

    return run


async def test_a_turn_handler_drives_the_toolbox_replies_wake_ups_function_transcript_l1(
    messaging, scheduler, functions, tools_crew, alice, identity
):
    """L1 (S1, S2, F13, C12, C6): in its first turn the handler replies with send_message,
    requests two wake-ups, lists them, reschedules and cancels one, lists again (the
    cancelled one only with include_finished), lists and calls crew:tools' `shout`, and
    moves the other wake-up to now. It comes back as a wake_up turn, where the handler
    reads the transcript; the call's end comes back as a function_completed turn, where
    get_function_call reads the answer."""
    tools = await tools_crew()
    failures: list[BaseException] = []
    seen: dict[str, Any] = {}

    async def handler(ctx: TurnContext) -> None:
        box = checked(turn_toolbox(ctx))
        for delivery in ctx.deliveries:
            kind = delivery_kind(delivery)
            if kind == "message":
                text = delivery.message.text
                seen["receipt"] = await box.call("send_message", {"text": f"got: {text}"})
                a = await box.call("request_wake_up", {"after_seconds": 3600, "note": "check A"})
                later = (datetime.now(UTC) + timedelta(hours=2)).isoformat()
                b = await box.call("request_wake_up", {"at": later, "note": "later B"})
                seen["listed"] = await box.call("list_wake_ups", {})
                seen["moved"] = await box.call(
                    "reschedule_wake_up", {"wake_up_id": b["wake_up_id"], "after_seconds": 7200}
                )
                seen["cancelled"] = await box.call(
                    "cancel_wake_up", {"wake_up_id": b["wake_up_id"]}
                )
                seen["pending"] = await box.call("list_wake_ups", {})
                seen["all"] = await box.call("list_wake_ups", {"include_finished": True})
                seen["functions"] = await box.call("list_functions", {"target": tools})
                seen["call"] = await box.call(
                    "call_function",
                    {"target": tools, "function": "shout", "inputs": {"text": text}},
                )
                seen["a"], seen["b"] = a, b
                await box.call(
                    "reschedule_wake_up", {"wake_up_id": a["wake_up_id"], "after_seconds": 0}
                )
            elif kind == "wake_up":
                seen["transcript"] = await box.call("read_transcript", {"limit": 200})
                await box.call("send_message", {"text": f"woke: {delivery.text}"})
            elif kind == "function_completed":
                call_id = delivery_attributes(delivery)["call_id"]
                status = await box.call("get_function_call", {"call_id": call_id})
                seen["status"] = status
                await box.call("send_message", {"text": f"{status['status']}: {status['answer']}"})

    async with turn_worker(
        messaging,
        identity(AGENT),
        recorded(failures, handler),
        scheduler_address=scheduler.address,
        functions_address=functions.address,
    ):
        receipt = await alice.send("hello", target=CREW)
        texts = await read_until(alice, receipt.inbox_id, 3, timeout=WAIT)
    assert not failures, failures
    assert texts[0] == "got: hello"
    assert sorted(texts[1:]) == ["completed: HELLO!", "woke: check A"]

    assert seen["receipt"]["accepted"] is True
    assert seen["receipt"]["conversation_id"] == receipt.conversation_id
    a, b = seen["a"]["wake_up_id"], seen["b"]["wake_up_id"]
    assert [w["wake_up_id"] for w in seen["listed"]["wake_ups"]] == [a, b]
    assert [w["note"] for w in seen["listed"]["wake_ups"]] == ["check A", "later B"]
    moved = datetime.fromisoformat(seen["moved"]["due_at"])
    assert moved > datetime.fromisoformat(seen["b"]["due_at"]) - timedelta(seconds=1)
    assert moved - datetime.now(UTC) > timedelta(seconds=7000)
    assert seen["cancelled"]["status"] == "cancelled"
    assert [w["wake_up_id"] for w in seen["pending"]["wake_ups"]] == [a]
    assert {w["wake_up_id"]: w["status"] for w in seen["all"]["wake_ups"]} == {
        a: "pending",
        b: "cancelled",
    }
    assert [f["name"] for f in seen["functions"]["functions"]] == ["shout"]
    assert seen["functions"]["functions"][0]["input_schema"]["required"] == ["text"]
    assert seen["call"]["created"] is True and seen["call"]["call_id"]
    assert seen["status"]["call_id"] == seen["call"]["call_id"]
    assert seen["status"]["answer"] == "HELLO!"

    entries = seen["transcript"]["entries"]
    messages = [(e["direction"], e["text"]) for e in entries if e["type"] == "message"]
    assert ("to_target", "hello") in messages and ("to_inbox", "got: hello") in messages
    kinds = [e["kind"] for e in entries if e["type"] == "delivery"]
    assert kinds[0] == "message" and "wake_up" in kinds
    assert seen["transcript"]["next_cursor"]


async def test_bad_arguments_give_a_tool_error_naming_the_field_and_store_nothing_l1(
    messaging, scheduler, functions, tools_crew, alice, identity
):
    """L1 (P6): bad arguments are refused with a ToolError naming each field (unknown,
    missing, mistyped, out of range, both or neither of after_seconds/at, a malformed
    time, a target that is not crew:/workflow:, inputs the function's schema refuses,
    another conversation's wake-up); nothing is sent, no wake-up is made."""
    tools = await tools_crew()
    failures: list[BaseException] = []
    refusals: dict[str, ToolError] = {}
    after: dict[str, Any] = {}
    other = SchedulerClient(scheduler.address, identity=identity(AGENT))

    bad: dict[str, tuple[str, Any]] = {  # arguments of every shape, some not an object
        "unknown": ("send_message", {"txt": "hi"}),
        "too long": ("send_message", {"text": "x" * 70_000}),
        "mistyped": ("request_wake_up", {"after_seconds": "soon", "note": "n"}),
        "negative": ("request_wake_up", {"after_seconds": -5}),
        "neither": ("request_wake_up", {"note": "n"}),
        "both": ("request_wake_up", {"after_seconds": 5, "at": "2030-01-01T00:00:00Z"}),
        "naive": ("request_wake_up", {"at": "2030-01-01T00:00:00"}),
        "target": ("call_function", {"target": "tools", "function": "shout"}),
        "inputs": ("call_function", {"target": tools, "function": "shout", "inputs": {"t": 1}}),
        "not mine": ("cancel_wake_up", {"wake_up_id": ""}),
        "arguments": ("list_wake_ups", ["not", "an", "object"]),
    }

    async def handler(ctx: TurnContext) -> None:
        box = checked(turn_toolbox(ctx))
        # A wake-up of another conversation the runtime's agent can see (its crew's).
        foreign = await other.create_wake_up(after["other_conversation"], delay_seconds=3600)
        bad["not mine"] = ("cancel_wake_up", {"wake_up_id": foreign.wake_up_id})
        for label, (name, arguments) in bad.items():
            try:
                await box.call(name, arguments)
            except ToolError as exc:
                refusals[label] = exc
        after["wake_ups"] = await box.call("list_wake_ups", {"include_finished": True})
        after["transcript"] = await box.call("read_transcript", {})
        await box.call("send_message", {"text": "done"})

    first = await alice.send("first conversation", target=CREW)
    after["other_conversation"] = first.conversation_id
    async with turn_worker(
        messaging,
        identity(AGENT),
        recorded(failures, handler),
        scheduler_address=scheduler.address,
        functions_address=functions.address,
    ):
        # The worker takes the first conversation's turn too; only the second is checked.
        receipt = await alice.send("check me", target=CREW)
        assert await read_until(alice, receipt.inbox_id, 1, timeout=WAIT) == ["done"]
    await other.close()
    assert not failures, failures
    assert set(refusals) == set(bad), set(bad) - set(refusals)
    words = {label: refusals[label].message for label in bad}
    assert "unknown field txt" in words["unknown"] and "text is required" in words["unknown"]
    assert "text must be at most 65536 characters" in words["too long"]
    assert "after_seconds must be of type integer" in words["mistyped"]
    assert "after_seconds must be at least 0" in words["negative"]
    assert "exactly one of after_seconds or at" in words["neither"]
    assert "exactly one of after_seconds or at (both were given)" in words["both"]
    assert "at '2030-01-01T00:00:00' is not an RFC 3339 time with an offset" in words["naive"]
    assert "target 'tools' does not match" in words["target"]
    assert refusals["inputs"].code == "INVALID_ARGUMENT" and "t" in words["inputs"]
    assert refusals["not mine"].code == "NOT_FOUND"
    assert "must be a JSON object" in words["arguments"]
    assert all(r.code == "INVALID_ARGUMENT" for k, r in refusals.items() if k != "not mine")
    # Nothing stored: no wake-up in this conversation, no message but alice's and "done".
    assert after["wake_ups"]["wake_ups"] == []
    sent = [e for e in after["transcript"]["entries"] if e["type"] == "message"]
    assert [m["text"] for m in sent] == ["check me"]


@pytest.mark.parametrize("shape", ["openai", "anthropic"])
async def test_openai_and_anthropic_tool_calls_round_trip_through_the_dispatcher_l3(
    messaging, scheduler, alice, identity, shape
):
    """L3: a model's tool call in the OpenAI shape (JSON text arguments) or the Anthropic
    shape (a tool_use block) is run by the dispatcher in a real turn: the reply is sent,
    the wake-up made, and the answer is the API's tool message / tool_result block with
    compact JSON; a bad call comes back as an error result (is_error), not an exception."""
    failures: list[BaseException] = []
    answers: list[dict[str, Any]] = []

    def openai_call(n: int, name: str, arguments: str) -> dict[str, Any]:
        return {
            "id": f"call_{n}",
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }

    def anthropic_call(n: int, name: str, arguments: Any) -> dict[str, Any]:
        return {"type": "tool_use", "id": f"toolu_{n}", "name": name, "input": arguments}

    async def handler(ctx: TurnContext) -> None:
        box = checked(turn_toolbox(ctx))
        if shape == "openai":
            calls = [
                openai_call(1, "send_message", '{"text": "hi from openai"}'),
                openai_call(2, "request_wake_up", '{"after_seconds": 3600, "note": "n"}'),
                openai_call(3, "send_message", '{"text": '),
                openai_call(4, "send_message", '{"text": ""}'),
            ]
            answers.extend([await dispatch_openai(box, call) for call in calls])
        else:
            calls = [
                anthropic_call(1, "send_message", {"text": "hi from anthropic"}),
                anthropic_call(2, "request_wake_up", {"after_seconds": 3600, "note": "n"}),
                anthropic_call(3, "send_message", None),
                anthropic_call(4, "send_message", {"text": ""}),
            ]
            answers.extend([await dispatch_anthropic(box, call) for call in calls])

    async with turn_worker(
        messaging, identity(AGENT), recorded(failures, handler), scheduler_address=scheduler.address
    ):
        receipt = await alice.send("go", target=CREW)
        texts = await read_until(alice, receipt.inbox_id, 1, timeout=WAIT)
    assert not failures, failures
    assert texts == [f"hi from {shape}"]
    contents = [json.loads(a["content"]) for a in answers]
    assert all(":" in a["content"] and ", " not in a["content"] for a in answers[:2])
    assert contents[0]["conversation_id"] == receipt.conversation_id
    assert contents[1]["status"] == "pending" and contents[1]["note"] == "n"
    if shape == "openai":
        assert [a["role"] for a in answers] == ["tool"] * 4
        assert [a["tool_call_id"] for a in answers] == ["call_1", "call_2", "call_3", "call_4"]
        assert "not valid JSON" in contents[2]["error"]["message"]
    else:
        assert [a["type"] for a in answers] == ["tool_result"] * 4
        assert [a["tool_use_id"] for a in answers] == ["toolu_1", "toolu_2", "toolu_3", "toolu_4"]
        assert [a["is_error"] for a in answers] == [False, False, True, True]
        assert "text is required" in contents[2]["error"]["message"]
    assert "text must be at least 1 characters long" in contents[3]["error"]["message"]
