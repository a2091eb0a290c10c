"""`agentworks mcp stdio`: an MCP server on stdin/stdout that forwards to a gateway (G1).

It serves what the gateway's `/mcp` serves: the instructions and the MCP tools that
`GET /api/v1/tools` lists (asked once, when it starts; if the gateway did not answer
then, again on the first tools/list or tools/call), and forwards each call to
`POST /api/v1/tools/<tool>` with the user's token; tasks, questions as elicitations and
resources go to `/mcp` itself (`agentworks_cli.mcp_forward`). Results are shaped as over `/mcp`
(`agentworks.core.mcp_results`): a refused call is a tool result with `isError: true`
whose text is the service's own message.
"""

from __future__ import annotations

import asyncio
import contextlib
from importlib.metadata import PackageNotFoundError, version
from typing import Any, cast

import mcp.types as types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError

from agentworks.core import mcp_progress
from agentworks.core.mcp_results import error_result, ok_result, unknown_tool
from agentworks_cli import mcp_forward
from agentworks_cli.api import ApiClient, ApiError

# How long the start waits for the gateway's listing: an MCP client waits for the
# handshake, and a proxy whose gateway is away still starts (its tools say why).
START_LISTING_SECONDS = 5.0


def _version() -> str:
    try:
        return version("agentworks-cli")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0.0.0"


class GatewayTools:
    """The gateway's MCP tools and instructions, asked for once (`GET /api/v1/tools`)."""

    def __init__(self, api: ApiClient) -> None:
        self.api = api
        self.tools: list[types.Tool] = []
        self.instructions: str | None = None
        self._lock = asyncio.Lock()

    async def get(self) -> list[types.Tool]:
        """The tools, asking the gateway if it has not answered yet; ApiError if refused."""
        async with self._lock:
            if not self.tools:
                listing = await self.api.list_tools()
                self.instructions = listing.instructions
                # The gateway's own definitions, title, hints and schemas as /mcp has them.
                self.tools = [types.Tool.model_validate(t) for t in listing.tools]
        return self.tools


def build_server(listed: GatewayTools) -> Server[Any]:
    """An MCP server giving the gateway's instructions and tools, forwarding each call."""
    server: Server[Any]

    async def definitions() -> list[types.Tool]:
        known = await listed.get()
        server.instructions = listed.instructions  # as `server/discover` answers from now
        return known

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
            return _error_result(exc)
        if params.name not in {t.name for t in known}:
            raise unknown_tool(params.name, (t.name for t in known))
        capabilities = mcp_forward.declared(ctx)
        if mcp_forward.wants_gateway(params, capabilities):  # a task or a form (M1, M2)
            raw = params.model_dump(by_alias=True, exclude_none=True, mode="json")
            answer = await mcp_forward.forward(listed.api, "tools/call", raw, capabilities)
            # The gateway's answer as it is: a tool result, a task or an input request
            # (the server serializes whatever it is given).
            return cast(types.CallToolResult, answer)
        try:
            return ok_result(await listed.api.call(params.name, params.arguments or {}))
        except ApiError as exc:
            return _error_result(exc)

    server = Server(
        "agentworks",
        version=_version(),
        title="AgentWorks",
        instructions=listed.instructions,
        on_list_tools=list_tools,
        # Progress while the gateway's answer is on its way, when asked (N3).
        on_call_tool=mcp_progress.reporting_calls(call_tool, "waiting for the gateway's answer"),
    )
    mcp_forward.install(server, listed.api)
    return server


async def serve_stdio(api: ApiClient) -> None:
    """Serve MCP over stdin/stdout until stdin closes."""
    from mcp.server.stdio import stdio_server

    listed = GatewayTools(api)
    # The handshake gives the gateway's instructions when it answers in time; else none,
    # and the tools are asked for again when a client wants them.
    with contextlib.suppress(ApiError, TimeoutError):
        await asyncio.wait_for(listed.get(), START_LISTING_SECONDS)
    server = build_server(listed)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def _error_result(exc: ApiError) -> types.CallToolResult:
    """The gateway's refusal as the tool result `/mcp` gives: its text, and its error
    object (code, message, reason, metadata) as structured content."""
    return error_result(
        exc.code,
        exc.message,
        reason=exc.reason,
        metadata=exc.metadata,
        retry_after=exc.retry_after,
    )
