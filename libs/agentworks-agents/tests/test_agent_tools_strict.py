"""The agent tools pass OpenAI strict mode as given (L10): the OpenAI Agents SDK's own
strict converter leaves every definition unchanged; a strict model's calls (every field
there, the optional ones null) do what leaving them out does, through the real toolbox
and against real messaging, scheduler and functions services."""

# The fixtures imported by name below are the tests' parameters.
# ruff: noqa: F811

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from agents.strict_schema import ensure_strict_json_schema

from agentworks.agents.agent_tools import (
    AgentTool,
    Toolbox,
    ToolError,
    execution_toolbox,
    openai_tools,
    turn_toolbox,
)
from agentworks.agents.agent_tools.execution_tools import (
    EVENT_KINDS,
    MESSAGE_ROLES,
    STEP_STATUSES,
)
from agentworks.functions.v1 import functions_pb2 as f
from agentworks.messaging.v1 import messaging_pb2 as m
from agentworks.runtime import TurnContext, delivery_kind
from agentworks.scheduler.v1 import scheduler_pb2 as s
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


def toolboxes(ctx: Any = None) -> list[Toolbox]:
    ctx = ctx or SimpleNamespace()
    return [turn_toolbox(ctx), execution_toolbox(ctx)]


def strict(tool: AgentTool, **given: Any) -> dict[str, Any]:
    """A strict model's arguments: every field there, those not given null."""
    return {name: given.get(name) for name in tool.input_schema["properties"]}


@pytest.mark.parametrize(
    "box,index",
    [(box, i) for box in toolboxes() for i in range(len(box.tools))],
    ids=[f"{box.names[0]}-{name}" for box in toolboxes() for name in box.names],
)
def test_the_agents_sdks_strict_converter_leaves_every_tool_schema_unchanged_L10(
    box: Toolbox, index: int
):
    """L10: `agents.strict_schema.ensure_strict_json_schema` (the OpenAI Agents SDK's own
    conversion, refusing open objects) gives back each tool's input schema unchanged, as
    it goes out in the OpenAI shape: every property required, additionalProperties false,
    the optional fields nullable."""
    schema = openai_tools(box)[index]["function"]["parameters"]
    assert schema == box.tools[index].input_schema
    assert ensure_strict_json_schema(copy.deepcopy(schema), _reject_open_objects=True) == schema
    assert schema["required"] == list(schema["properties"])
    assert schema["additionalProperties"] is False
    for prop in schema["properties"].values():
        assert prop.get("type") not in ("object", "array"), "no free objects (L10)"
        if "enum" in prop and isinstance(prop["type"], list):
            assert None in prop["enum"]  # a nullable enum takes null too


def test_closed_sets_are_enums_and_call_function_inputs_is_json_text_L10():
    """L10: record_step.status, post_message.role and record_event.kind are enums; the
    wake-up `at`/`after_seconds` pair is nullable; call_function's inputs are JSON text
    (a string whatever the function's schema: the documented strict variant)."""
    box = execution_toolbox(SimpleNamespace())  # type: ignore[arg-type]
    props = {t.name: t.input_schema["properties"] for t in box.tools}
    assert props["record_step"]["status"]["enum"] == list(STEP_STATUSES)
    assert props["post_message"]["role"]["enum"] == [*MESSAGE_ROLES, None]
    assert props["record_event"]["kind"]["enum"] == list(EVENT_KINDS)
    turn = {t.name: t.input_schema["properties"] for t in turn_toolbox(SimpleNamespace()).tools}  # type: ignore[arg-type]
    assert turn["request_wake_up"]["after_seconds"]["type"] == ["integer", "null"]
    assert turn["request_wake_up"]["at"]["type"] == ["string", "null"]
    for inputs in (props["call_function"]["inputs"], turn["call_function"]["inputs"]):
        assert inputs["type"] == ["string", "null"] and "JSON text" in inputs["description"]


class Recorder:
    """A context whose every method records how it was called and answers an empty
    reply of the right type, so each tool runs to its view."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        answers: dict[str, Any] = {
            "send_message": m.SendReceipt(),
            "start_conversation": m.SendReceipt(),
            "continue_conversation": m.SendReceipt(),
            "wake_me": s.WakeUp(),
            "list_wake_ups": s.ListWakeUpsResponse(),
            "cancel_wake_up": s.WakeUp(),
            "reschedule_wake_up": s.WakeUp(),
            "transcript": m.GetTranscriptResponse(),
            "a2a": {},
            "list_functions": [],
            "call_function": f.CallReceipt(),
            "get_function_call": f.CallStatus(),
            "reply_function_call": f.CallStatus(),
            "progress": None,
            "message": None,
            "event": None,
            "step": None,
            "ask": "yes",
        }
        for name, answer in answers.items():
            setattr(self, name, self._method(name, answer))

    def _method(self, name: str, answer: Any) -> Any:
        async def method(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, args, kwargs))
            return answer

        return method


ARGUMENTS: dict[str, dict[str, Any]] = {
    "send_message": {"text": "hi"},
    "start_conversation": {"target": "crew:y", "text": "hi"},
    "continue_conversation": {"inbox_id": "i1", "text": "hi"},
    "request_wake_up": {"after_seconds": 60},
    "list_wake_ups": {},
    "cancel_wake_up": {"wake_up_id": "w1"},
    "reschedule_wake_up": {"wake_up_id": "w1", "at": "2030-01-01T00:00:00Z"},
    "list_functions": {"target": "crew:tools"},
    "call_function": {"target": "crew:tools", "function": "shout"},
    "get_function_call": {"call_id": "c1"},
    "reply_function_call": {"call_id": "c1", "text": "yes"},
    "read_transcript": {},
    "a2a_send": {"agent": "peer", "text": "hi"},
    "a2a_call": {"agent": "peer", "skill": "double", "inputs": '{"n": 1}'},
    "report_progress": {"text": "half"},
    "post_message": {"text": "hi"},
    "record_event": {"kind": "note"},
    "record_step": {"step": "fetch", "status": "started"},
    "ask_human": {"question": "go?"},
}


async def test_every_tool_called_with_nulls_does_what_leaving_them_out_does_L10():
    """L10: each of the 21 tools, called as a strict model calls it (every optional
    field null), reaches its context exactly as when the optional fields are left out;
    call_function's inputs given as JSON text, as null, or (a caller that is not strict)
    as an object arrive as the same object, and bad JSON text is a ToolError."""
    for kind in ("turn", "execution"):
        omitted, nulled = Recorder(), Recorder()
        box_omitted = turn_toolbox(omitted) if kind == "turn" else execution_toolbox(omitted)  # type: ignore[arg-type]
        box_nulled = turn_toolbox(nulled) if kind == "turn" else execution_toolbox(nulled)  # type: ignore[arg-type]
        for tool in box_nulled.tools:
            given = ARGUMENTS[tool.name]
            assert await box_omitted.call(tool.name, given) == await box_nulled.call(
                tool.name, strict(tool, **given)
            )
        assert omitted.calls == nulled.calls and len(nulled.calls) == len(box_nulled.tools)

    ctx = Recorder()
    box = turn_toolbox(ctx)  # type: ignore[arg-type]
    call = box.tool("call_function")
    for inputs in ('{"text": "hi"}', {"text": "hi"}):
        await box.call("call_function", strict(call, **ARGUMENTS["call_function"], inputs=inputs))
    await box.call("call_function", strict(call, **ARGUMENTS["call_function"], inputs=None))
    assert [c[1][2] for c in ctx.calls] == [{"text": "hi"}, {"text": "hi"}, {}]
    for bad, wording in (("{not json", "inputs"), ("[1]", "JSON text of an object")):
        with pytest.raises(ToolError) as refused:
            await box.call("call_function", strict(call, **ARGUMENTS["call_function"], inputs=bad))
        assert refused.value.code == "INVALID_ARGUMENT" and wording in refused.value.message
    with pytest.raises(ToolError) as refused:
        await box.call("send_message", {"text": None})
    assert "text must be of type string, got None" in refused.value.message


async def test_a_strict_model_requests_wake_ups_and_calls_functions_with_nulls_L10_L1(
    messaging, scheduler, functions, tools_crew, alice, identity
):
    """L10 (L1, S1, F4, F7): in a real turn, arguments as a strict model sends them:
    request_wake_up with after_seconds and at null, and with at and after_seconds null,
    both made; list_wake_ups and read_transcript with every field null; reschedule with
    after_seconds null; call_function with inputs as JSON text and the rest null, then
    get_function_call with after and message_limit null reads its answer."""
    tools = await tools_crew()
    failures: list[BaseException] = []
    seen: dict[str, Any] = {}

    async def handler(ctx: TurnContext) -> None:
        try:
            box = checked(turn_toolbox(ctx))
            if delivery_kind(ctx.deliveries[0]) != "message":
                return

            def args(name: str, **given: Any) -> dict[str, Any]:
                return strict(box.tool(name), **given)

            later = (datetime.now(UTC) + timedelta(hours=2)).isoformat()
            seen["after"] = await box.call(
                "request_wake_up", args("request_wake_up", after_seconds=3600)
            )
            seen["at"] = await box.call(
                "request_wake_up", args("request_wake_up", at=later, note="b")
            )
            seen["moved"] = await box.call(
                "reschedule_wake_up",
                args("reschedule_wake_up", wake_up_id=seen["at"]["wake_up_id"], at=later),
            )
            seen["listed"] = await box.call("list_wake_ups", args("list_wake_ups"))
            receipt = await box.call(
                "call_function",
                args(
                    "call_function",
                    target=tools,
                    function="shout",
                    inputs=json.dumps({"text": "hi"}),
                    wait_seconds=10,
                ),
            )
            seen["status"] = await box.call(
                "get_function_call", args("get_function_call", call_id=receipt["call_id"])
            )
            seen["transcript"] = await box.call("read_transcript", args("read_transcript"))
            await box.call("send_message", args("send_message", text="done"))
        except BaseException as exc:
            failures.append(exc)
            raise

    async with turn_worker(
        messaging,
        identity(AGENT),
        handler,
        scheduler_address=scheduler.address,
        functions_address=functions.address,
    ):
        receipt = await alice.send("go", target=CREW)
        assert await read_until(alice, receipt.inbox_id, 1, timeout=WAIT) == ["done"]
    assert not failures, failures
    assert seen["after"]["status"] == seen["at"]["status"] == "pending"
    assert "note" not in seen["after"] and seen["at"]["note"] == "b"
    assert seen["moved"]["wake_up_id"] == seen["at"]["wake_up_id"]
    assert len(seen["listed"]["wake_ups"]) == 2
    assert seen["status"]["status"] == "completed" and seen["status"]["answer"] == "HI!"
    assert [e["text"] for e in seen["transcript"]["entries"] if e["type"] == "message"] == ["go"]
