"""The MCP tools' input schemas are ones common hosts' function calling takes (G2): one
flat object per tool (no `allOf`/`anyOf`/`oneOf`/`if`/`then`/`not` at any level), small,
and inside OpenAI's function-calling subset (`host_schemas`); what an action takes and
needs is checked by the gateway instead, and a fault is refused over MCP naming the
argument, with nothing stored.

The size bound: a host sends every tool's definition with every model request, so the
schemas are paid for in tokens on each turn. 4 KiB of compact JSON is about 1,000
tokens; five tools stay under 12 KiB (about 3,000 tokens, the largest being `functions`
at about 3.2 KiB). The `allOf`/`if`/`then` schema `functions` had was 5 KiB on its own.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentworks.server.testing import database_snapshot
from agentworks_gateway.tools.host_schemas import function_calling_faults
from agentworks_gateway.tools.toolkit import COMBINATORS, combinators

MAX_TOOL_SCHEMA_BYTES = 4096
MAX_ALL_SCHEMAS_BYTES = 12 * 1024
SCHEMAS = ["messaging", "functions", "gateway"]


def _size(schema: dict) -> int:
    return len(json.dumps(schema, separators=(",", ":")).encode())


async def test_every_mcp_tool_lists_a_flat_small_schema_that_openai_function_calling_takes_G2(
    gateway, alice_token, mcp_session
):
    """G2: as the official MCP client lists them, every tool's inputSchema has no
    combinator at any level, is at most 4 KiB (all together 12 KiB), and passes the
    OpenAI function-calling subset check; `functions` keeps its actions."""
    async with mcp_session(gateway.mcp_url, alice_token) as mcp:
        listed = (await mcp.list_tools()).tools
    schemas = {tool.name: tool.input_schema for tool in listed}
    assert schemas["functions"]["properties"]["action"]["enum"] == [
        "list", "call", "status", "read", "reply", "cancel"
    ]  # fmt: skip
    for name, schema in schemas.items():
        assert combinators(schema) == set(), name
        assert not COMBINATORS & set(json.dumps(schema).split('"')), name
        assert _size(schema) <= MAX_TOOL_SCHEMA_BYTES, (name, _size(schema))
        assert function_calling_faults(schema) == [], name
        for argument, prop in schema["properties"].items():
            assert prop.get("description"), f"{name}.{argument} says nothing"
    assert sum(_size(s) for s in schemas.values()) <= MAX_ALL_SCHEMAS_BYTES


@pytest.mark.parametrize(
    ("schema", "fault"),
    [
        (  # the shape `functions` had: a per-action rule in allOf/if/then
            {
                "type": "object",
                "properties": {"action": {"type": "string", "enum": ["status"]}},
                "allOf": [
                    {"if": {"properties": {"action": {"const": "status"}}}, "then": {}},
                ],
            },
            "parameters: allOf is not supported",
        ),
        ({"anyOf": [{"type": "object"}]}, "the root must be a schema of type object"),
        (
            {"type": "object", "properties": {"id": {"type": "string", "minLength": 1}}},
            "parameters.id: minLength is not supported",
        ),
        (
            {"type": "object", "properties": {"ids": {"type": "array"}}},
            "parameters.ids: an array needs items",
        ),
        (
            {"type": "object", "properties": {"x": {"description": "untyped"}}},
            "parameters.x: type must be one of",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]},
            "parameters: required names b, not properties",
        ),
        (
            {"type": "object", "properties": {"at": {"type": "string", "format": "cron"}}},
            "parameters.at: format 'cron' is not supported",
        ),
    ],
)
def test_the_function_calling_check_refuses_what_hosts_refuse_G2(schema, fault):
    """G2: the subset check is not vacuous: combinators, a non-object root, length
    bounds, arrays without items, untyped schemas, stray required names and unknown
    formats are each named."""
    faults = function_calling_faults(schema)
    assert any(f.startswith(fault) for f in faults), faults


BAD_CALLS: list[tuple[dict[str, Any], str]] = [
    (
        {"action": "call", "crew": "demo", "inputs": {"text": "x"}},
        "invalid arguments for functions: action 'call' needs function",
    ),
    (
        {"action": "call", "crew": "demo", "workflow_id": "wf", "function": "echo"},
        "invalid arguments for functions: action 'call' needs exactly one of crew or "
        "workflow_id (got crew, workflow_id)",
    ),
    (
        {"action": "call", "crew": "demo", "function": "echo", "call_id": "c", "file": "f"},
        "invalid arguments for functions: action 'call' does not take call_id, file; it "
        "takes crew, workflow_id, function, inputs, submission_id, wait_seconds",
    ),
    (
        {"action": "read", "call_id": "c"},
        "invalid arguments for functions: action 'read' needs file",
    ),
    (
        {"action": "reply", "call_id": "c"},
        "invalid arguments for functions: action 'reply' needs text",
    ),
    (
        {"file": "f"},
        "invalid arguments for get_crew_function_call: 'call_id' is a required property",
    ),
    (
        {"call_id": "c", "offset": 3},
        "invalid arguments for get_crew_function_call: offset needs file too",
    ),
]


async def test_bad_per_action_input_is_refused_over_mcp_naming_the_argument_G2_P6(
    gateway, alice_token, demo, echo, mcp_session, database_url
):
    """G2 P6: with the schema flat, the gateway checks what each action takes and needs:
    over MCP a missing, doubled or foreign argument is an `isError` result with
    INVALID_ARGUMENT naming it, and no call (or anything else) is stored."""
    before = database_snapshot(database_url, SCHEMAS)
    async with mcp_session(gateway.mcp_url, alice_token) as mcp:
        for args, message in BAD_CALLS:
            tool = "functions" if "action" in args else "get_crew_function_call"
            result = await mcp.call_tool(tool, args)
            assert result.is_error, (args, result.structured_content)
            error = result.structured_content["error"]
            assert (error["code"], error["message"]) == ("INVALID_ARGUMENT", message), args
            assert error["reason"] == "FIELD_RULE", args
            assert result.content[0].text == message
        listed = await mcp.call_tool("functions", {"action": "list", "crew": "demo"})
        assert not listed.is_error and listed.structured_content["functions"]
    assert database_snapshot(database_url, SCHEMAS) == before
