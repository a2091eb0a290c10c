"""MCP tool results, written once for the two MCP servers (G1, G2): the gateway's `/mcp`
and the CLI's stdio proxy (`agentworks mcp stdio`), so both answer a call alike.

It needs the MCP SDK (the `mcp` extra, `agentworks-client[mcp]`); nothing else in the
client library imports it, so the runtime SDK and the services do without.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import mcp.types as types
from mcp.shared.exceptions import MCPError

from agentworks.core.errors import AgentWorksError, error_object


def ok_result(data: dict[str, Any]) -> types.CallToolResult:
    """A successful tool result: structured content, and the same JSON as text."""
    return types.CallToolResult(
        content=[types.TextContent(text=json.dumps(data, ensure_ascii=False))],
        structured_content=data,
    )


def error_result(
    code: str,
    message: str,
    *,
    reason: str = "",
    metadata: dict[str, str] | None = None,
    retry_after: float | None = None,
) -> types.CallToolResult:
    """A refused tool call: `isError`, the service's text, and in structured content the
    error object the HTTP API answers with (`agentworks.core.errors.error_object`: code,
    message, and the reason, metadata and retry delay when it has them)."""
    error = error_object(code, message, reason=reason, metadata=metadata, retry_after=retry_after)
    return types.CallToolResult(
        content=[types.TextContent(text=message)],
        structured_content={"error": error},
        is_error=True,
    )


def refused_result(exc: AgentWorksError) -> types.CallToolResult:
    """`error_result` of a raised error."""
    return error_result(
        exc.code.name,
        exc.message,
        reason=str(exc.reason or ""),
        metadata=exc.metadata,
        retry_after=exc.retry_after,
    )


def unknown_tool(name: str, known: Iterable[str]) -> MCPError:
    """The protocol error for a call of a tool that is not listed (not a tool result: MCP
    spec), naming the tools there are."""
    return MCPError(
        types.INVALID_PARAMS, f"unknown tool {name!r}: the tools are " + ", ".join(known)
    )
