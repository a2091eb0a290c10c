"""The agent tool set's definitions (L1) and their OpenAI / Anthropic shapes (L3), checked
without services: what every tool-calling API and MCP host needs of a definition."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

import jsonschema
import pytest

from agentworks.agents.agent_tools import (
    AgentTool,
    Toolbox,
    ToolError,
    anthropic_tools,
    dispatch_anthropic,
    dispatch_openai,
    execution_toolbox,
    openai_tools,
    turn_toolbox,
)

TURN_TOOLS = [
    "send_message",
    "start_conversation",
    "continue_conversation",
    "request_wake_up",
    "list_wake_ups",
    "cancel_wake_up",
    "reschedule_wake_up",
    "list_functions",
    "call_function",
    "get_function_call",
    "reply_function_call",
    "read_transcript",
    "a2a_send",
    "a2a_call",
]
EXECUTION_TOOLS = [
    "report_progress",
    "post_message",
    "record_event",
    "record_step",
    "ask_human",
    "list_functions",
    "call_function",
    "get_function_call",
    "reply_function_call",
]
READ_ONLY = {"list_wake_ups", "list_functions", "get_function_call", "read_transcript"}
DESTRUCTIVE = {"cancel_wake_up"}
# What OpenAI's and Anthropic's tool schemas refuse or ignore at the top, and what would
# make a schema other than flat.
COMPOSITION = {"allOf", "anyOf", "oneOf", "not", "if", "then", "else", "$ref", "$defs"}


def toolboxes() -> list[tuple[str, Toolbox]]:
    # The definitions do not depend on the context: a stand-in with no methods is enough.
    return [
        ("turn", turn_toolbox(SimpleNamespace())),  # type: ignore[arg-type]
        ("execution", execution_toolbox(SimpleNamespace())),  # type: ignore[arg-type]
    ]


def keywords(schema: Any) -> set[str]:
    """Every key used anywhere in a schema (property names included: none collide)."""
    if isinstance(schema, dict):
        return set(schema) | {k for v in schema.values() for k in keywords(v)}
    if isinstance(schema, list):
        return {k for v in schema for k in keywords(v)}
    return set()


def test_the_turn_and_execution_toolboxes_offer_the_contract_tools_and_no_return_result_l1():
    """L1: the turn and execution tools are the contract's, in its order; there is no
    return_function_result (the result is JSON written to FUNCTION_RESULT_FILE)."""
    boxes = dict(toolboxes())
    assert boxes["turn"].names == TURN_TOOLS
    assert boxes["execution"].names == EXECUTION_TOOLS
    assert "return_function_result" not in boxes["turn"].names + boxes["execution"].names
    description = " ".join(t.description for t in boxes["execution"].tools)
    assert "return_function_result" not in description


@pytest.mark.parametrize("kind,tool", [(k, t) for k, box in toolboxes() for t in box.tools])
def test_each_tool_schema_is_flat_valid_2020_12_and_annotated_l1(kind: str, tool: AgentTool):
    """L1: each tool's input schema passes the JSON Schema 2020-12 meta-schema, is a flat
    object (simple types or typed lists of them, no composition keywords, unknown fields
    refused, every property described),
    and the tool has a title, a description written for a model, an output schema and
    consistent read-only / destructive / idempotent annotations."""
    assert re.fullmatch(r"[a-z][a-z0-9_]{2,63}", tool.name)
    jsonschema.Draft202012Validator.check_schema(tool.input_schema)
    schema = tool.input_schema
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert not keywords(schema) & COMPOSITION, f"{tool.name} is not flat"
    for name, prop in schema["properties"].items():
        kinds = prop.get("type")
        kinds = kinds if isinstance(kinds, list) else [kinds]
        if "array" in kinds:  # a list of simple values, items typed (ask_human's choices)
            assert prop["items"]["type"] in ("string", "integer"), name
            kinds = [k for k in kinds if k != "array"]
        assert set(kinds) - {"null"} <= {"string", "integer", "boolean"}, name
        assert len(prop.get("description", "")) >= 10, f"{tool.name}.{name} has no description"
    assert schema["required"] == list(schema["properties"])  # L10: all listed
    assert tool.title and tool.title[0].isupper() and len(tool.title) <= 60
    assert 60 <= len(tool.description) <= 1024, tool.name
    assert tool.output_schema is not None
    jsonschema.Draft202012Validator.check_schema(tool.output_schema)
    assert tool.read_only is (tool.name in READ_ONLY)
    assert tool.destructive is (tool.name in DESTRUCTIVE)
    assert not (tool.read_only and tool.destructive)
    if tool.read_only:
        assert tool.idempotent


def test_openai_and_anthropic_definitions_carry_each_tool_whole_l3():
    """L3: the OpenAI shape is `{"type": "function", "function": {name, description,
    parameters}}` and the Anthropic shape `{name, description, input_schema}`, with the
    tool's own schema."""
    for _, box in toolboxes():
        openai = openai_tools(box)
        anthropic = anthropic_tools(box)
        assert len(openai) == len(anthropic) == len(box.tools)
        for tool, o, a in zip(box.tools, openai, anthropic, strict=True):
            assert o == {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.input_schema,
                },
            }
            assert a == {
                "name": tool.name,
                "description": tool.description,
                "input_schema": tool.input_schema,
            }


async def test_a_tool_whose_context_method_is_missing_is_a_clear_tool_error_l1_l3():
    """L1/L3: a tool whose context method this runtime lacks answers ToolError
    UNIMPLEMENTED naming it; through a dispatcher that is an error result, not an
    exception."""
    box = execution_toolbox(SimpleNamespace())  # type: ignore[arg-type]
    with pytest.raises(ToolError) as refused:
        await box.call("list_functions", {"target": "crew:tools"})
    assert refused.value.code == "UNIMPLEMENTED"
    assert "ExecutionContext.list_functions" in refused.value.message
    block = await dispatch_anthropic(
        box, {"type": "tool_use", "id": "t1", "name": "list_functions", "input": {}}
    )
    assert block["is_error"] is True and "target is required" in block["content"]
    message = await dispatch_openai(
        box,
        {"id": "c1", "type": "function", "function": {"name": "nope", "arguments": "{}"}},
    )
    assert message["role"] == "tool" and message["tool_call_id"] == "c1"
    assert "there is no tool 'nope'" in message["content"]
    assert '"code":"NOT_FOUND"' in message["content"]


async def test_start_conversation_says_when_this_sdk_cannot_start_one_l1():
    """L1: start_conversation calls the context's start_conversation(target, text) and
    answers its receipt; a context without the method (an SDK without it) gets a
    ToolError UNIMPLEMENTED saying so."""
    box = turn_toolbox(SimpleNamespace())  # type: ignore[arg-type]
    arguments = {"target": "crew:other", "text": "hello"}
    with pytest.raises(ToolError) as refused:
        await box.call("start_conversation", arguments)
    assert refused.value.code == "UNIMPLEMENTED"
    assert "TurnContext.start_conversation" in refused.value.message
    sent: list[tuple[str, str]] = []

    async def start_conversation(target: str, text: str) -> Any:
        sent.append((target, text))
        return SimpleNamespace(accepted=True, message_id="m1", conversation_id="c2", inbox_id="i2")

    box = turn_toolbox(SimpleNamespace(start_conversation=start_conversation))  # type: ignore[arg-type]
    assert await box.call("start_conversation", arguments) == {
        "accepted": True,
        "message_id": "m1",
        "conversation_id": "c2",
        "inbox_id": "i2",
    }
    assert sent == [("crew:other", "hello")]


@pytest.mark.parametrize(
    "name,arguments,wording",
    [
        ("call_function", {}, "target and function are required"),
        ("call_function", {"target": "crew:x"}, "function is required"),
        ("send_message", {"text": 3}, "text must be of type string, got 3"),
        ("send_message", {"text": "a", "to": "b"}, "unknown field to (the fields are text)"),
        ("list_wake_ups", {"limit": 0}, "limit must be at least 1, got 0"),
        ("list_wake_ups", {"include_finished": "yes"}, "include_finished must be of type boolean"),
        ("get_function_call", {"call_id": "c", "after": 2.5}, "after must be of type integer"),
    ],
)
async def test_bad_arguments_are_refused_before_the_context_is_touched_naming_the_field_l1(
    name: str, arguments: dict[str, Any], wording: str
):
    """L1: the schema check runs before the tool: a context with no methods at all is
    never reached, and the refusal names the field."""
    box = turn_toolbox(SimpleNamespace())  # type: ignore[arg-type]
    with pytest.raises(ToolError) as refused:
        await box.call(name, arguments)
    assert refused.value.code == "INVALID_ARGUMENT"
    assert refused.value.message.startswith(f"invalid arguments for {name}: ")
    assert wording in refused.value.message
