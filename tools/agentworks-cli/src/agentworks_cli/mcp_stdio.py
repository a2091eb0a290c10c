"""`agentworks mcp stdio`: an MCP server on stdin/stdout that forwards to a gateway (G1).

It serves the gateway's MCP tools (the list `GET /api/v1/tools` gives, fetched once, on
the first tools/list or tools/call) and forwards each call to `POST /api/v1/tools/<tool>`
with the user's token. A refused call is a tool result with `isError: true` whose text is
the service's own message, as over `/mcp`.
"""

from __future__ import annotations

import asyncio
import json
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import mcp.types as types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError

from agentworks_cli.api import ApiClient, ApiError

# What the gateway's own MCP server says to clients (agentworks_gateway.mcp_server).
INSTRUCTIONS = (
    "AgentWorks agent messaging and functions. Use `messages` (action send) or `ask_crew` / "
    "`chat` to message a crew or workflow; the result is a delivery receipt, not an answer. "
    "Agents reply when they choose to: read replies with `messages` action read, passing "
    "the receipt's inbox_id, the last next_cursor as `after`, and wait_seconds (up to 25) "
    "to wait for new ones. Continue a conversation by sending with its inbox_id. To run a "
    "declared task, use `functions`: action list (crew or workflow_id) shows what you may "
    "call, action call returns a call_id at once; poll action status with that call_id "
    "(wait_seconds up to 25) until the status is completed, failed, interrupted or "
    "cancelled, answer a pending question with action reply, and read produced files with "
    "action read."
)


def _version() -> str:
    try:
        return version("agentworks-cli")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0.0.0"


async def fetch_tools(api: ApiClient) -> list[types.Tool]:
    """The gateway's MCP tools (`GET /api/v1/tools` with the token); ApiError if refused."""
    return [
        types.Tool(name=t["name"], description=t.get("description"), input_schema=t["inputSchema"])
        for t in await api.list_tools()
    ]


def ok_result(data: dict[str, Any]) -> types.CallToolResult:
    """A successful tool result: structured content, and the same JSON as text."""
    return types.CallToolResult(
        content=[types.TextContent(text=json.dumps(data, ensure_ascii=False))],
        structured_content=data,
    )


def error_result(code: str, message: str) -> types.CallToolResult:
    """A refused tool call: `isError`, the service's text, and the code in structured content."""
    return types.CallToolResult(
        content=[types.TextContent(text=message)],
        structured_content={"error": {"code": code, "message": message}},
        is_error=True,
    )


def build_server(api: ApiClient) -> Server[Any]:
    """An MCP server listing the gateway's MCP tools and forwarding each call to it."""
    listed: list[types.Tool] = []
    lock = asyncio.Lock()

    async def definitions() -> list[types.Tool]:
        async with lock:
            if not listed:
                listed[:] = await fetch_tools(api)
        return listed

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        try:
            return types.ListToolsResult(tools=await definitions())
        except ApiError as exc:
            raise MCPError(types.INTERNAL_ERROR, exc.message) from None

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        try:
            known = await definitions()
        except ApiError as exc:
            return error_result(exc.code, exc.message)
        if params.name not in {t.name for t in known}:
            # An unknown tool is a protocol error, not a tool result (MCP spec).
            raise MCPError(
                types.INVALID_PARAMS,
                f"unknown tool {params.name!r}: the tools are " + ", ".join(t.name for t in known),
            )
        try:
            return ok_result(await api.call(params.name, params.arguments or {}))
        except ApiError as exc:
            return error_result(exc.code, exc.message)

    return Server(
        "agentworks",
        version=_version(),
        title="AgentWorks",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve_stdio(api: ApiClient) -> None:
    """Serve MCP over stdin/stdout until stdin closes."""
    from mcp.server.stdio import stdio_server

    server = build_server(api)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
