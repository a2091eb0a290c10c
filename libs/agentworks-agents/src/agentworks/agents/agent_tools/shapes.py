"""The agent tools in the shapes of the OpenAI and Anthropic APIs, and their dispatchers
(L3).

`openai_tools(toolbox)` goes into a Chat Completions request's `tools`;
`dispatch_openai(toolbox, tool_call)` runs one of the model's `tool_calls` and answers
the `{"role": "tool", ...}` message to append. `anthropic_tools` / `dispatch_anthropic`
do the same for the Messages API (`tools`, and a `tool_result` content block for a
`tool_use` block). A tool's result is compact JSON text; a refusal or bad input is a
result too (`{"error": {"code", "message"}}`, and `is_error` for Anthropic), never an
exception to the loop, so the model reads what was wrong and can try again.

Tool calls may be plain dicts or the official SDKs' objects (anything with
`model_dump()`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from agentworks.agents.agent_tools.toolbox import Toolbox, ToolError


def dumps(value: Any) -> str:
    """Compact JSON text, UTF-8 kept as it is."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _plain(value: Any) -> dict[str, Any]:
    if isinstance(value, Mapping):
        return dict(value)
    dump = getattr(value, "model_dump", None)
    if dump is not None:
        return dict(dump())
    raise TypeError(f"a tool call must be a mapping or an SDK object, got {type(value).__name__}")


def openai_tools(toolbox: Toolbox) -> list[dict[str, Any]]:
    """Chat Completions tool definitions: `[{"type": "function", "function": {...}}]`."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.input_schema,
            },
        }
        for tool in toolbox.tools
    ]


def anthropic_tools(toolbox: Toolbox) -> list[dict[str, Any]]:
    """Messages API tool definitions: `[{"name", "description", "input_schema"}]`."""
    return [
        {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema}
        for tool in toolbox.tools
    ]


async def run_tool(toolbox: Toolbox, name: str, arguments: Any) -> tuple[dict[str, Any], bool]:
    """(result, is_error): the tool's result, or its refusal as a result."""
    try:
        return await toolbox.call(name, arguments), False
    except ToolError as exc:
        return exc.as_result(), True


async def dispatch_openai(toolbox: Toolbox, tool_call: Any) -> dict[str, Any]:
    """Run one Chat Completions tool call; the `{"role": "tool", ...}` message to append.

    `tool_call` is `{"id", "type": "function", "function": {"name", "arguments"}}` with
    `arguments` JSON text (as the API sends it) or an object.
    """
    call = _plain(tool_call)
    function = _plain(call.get("function") or {})
    name = str(function.get("name", ""))
    raw = function.get("arguments")
    result: dict[str, Any]
    try:
        arguments = json.loads(raw) if isinstance(raw, str) and raw.strip() else raw or {}
    except json.JSONDecodeError as exc:
        result = ToolError(
            f"the arguments of {name} are not valid JSON ({exc.msg} at character {exc.pos})"
        ).as_result()
    else:
        result, _ = await run_tool(toolbox, name, arguments)
    return {"role": "tool", "tool_call_id": call.get("id", ""), "content": dumps(result)}


async def dispatch_anthropic(toolbox: Toolbox, tool_use_block: Any) -> dict[str, Any]:
    """Run one Messages API `tool_use` block; the `tool_result` block to send back.

    `tool_use_block` is `{"type": "tool_use", "id", "name", "input"}`.
    """
    block = _plain(tool_use_block)
    result, is_error = await run_tool(toolbox, str(block.get("name", "")), block.get("input"))
    return {
        "type": "tool_result",
        "tool_use_id": block.get("id", ""),
        "content": dumps(result),
        "is_error": is_error,
    }
