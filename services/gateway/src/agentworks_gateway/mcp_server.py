"""The gateway's MCP server (G1, G2) over Streamable HTTP at `/mcp`.

It lists the MCP tools of `agentworks_gateway.tools` and runs each call in-process as the
caller the bearer token names. A refused call is a tool result with `isError: true` whose
text is the service's own message and whose structured content is the HTTP API's error
object (code, message, reason, metadata); `agentworks.core.mcp_results` shapes the results.
The stdio server (`agentworks mcp stdio`) is the CLI's (`agentworks_cli.mcp_stdio`): it
fetches these instructions and tools from `GET /api/v1/tools`, forwards each call to
`POST /api/v1/tools/<tool>`, and shapes the results with the same module.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import mcp_types as types
import structlog
from mcp.server import Server, ServerRequestContext

from agentworks.core import errors, mcp_progress, progress
from agentworks.core.identity import Identity
from agentworks.core.limits import MAX_WAIT_SECONDS
from agentworks.core.mcp_results import ok_result, refused_result, unknown_tool
from agentworks_gateway import mcp_tasks, tools

log = structlog.get_logger("agentworks.gateway.mcp")

# Where the HTTP auth middleware leaves the caller's identity in the ASGI scope.
IDENTITY_SCOPE_KEY = "agentworks.identity"

INSTRUCTIONS = (
    "AgentWorks agent messaging and functions. Use `messages` (action send) or `ask_crew` / "
    "`chat` to message a crew or workflow; the result is a delivery receipt, not an answer. "
    "Agents reply when they choose to: read replies with `messages` action read, passing "
    "the receipt's inbox_id, the last next_cursor as `after`, and wait_seconds "
    f"(up to {MAX_WAIT_SECONDS}) to wait for new ones. Continue a conversation by sending "
    "with its inbox_id. To run a "
    "declared task, use `functions`: action list (crew or workflow_id) shows what you may "
    "call, action call returns a call_id at once; poll action status with that call_id "
    f"(wait_seconds up to {MAX_WAIT_SECONDS}) until the status is completed, failed, "
    "interrupted or cancelled, answer a pending question with action reply, and read "
    "produced files with "
    "action read. To look around, `list` (what: calls, conversations, inboxes, targets, "
    "wake_ups, schedules, webhooks, runtimes) pages through what you may see, and "
    "`transcript` reads a conversation whole, both directions, with every delivery. "
    "Clients that declare the Tasks extension (io.modelcontextprotocol/tasks) get a task "
    "from `functions` action call (and from no other tool): its taskId is the call_id; "
    "poll tasks/get (a call may run for hours, each poll answers at once), answer its "
    "question with tasks/update, stop it with tasks/cancel. Clients with elicitation are "
    "asked a call's pending question when they read its status. A call's files are "
    "resources: agentworks://calls/{call_id}/files/{name}; a conversation's transcript is "
    "agentworks://conversations/{conversation_id}/transcript."
)

ToolCaller = Callable[[str, dict[str, Any], ServerRequestContext[Any, Any]], Awaitable[dict]]


def _version() -> str:
    try:
        return version("agentworks-gateway")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0.0.0"


# How each MCP tool presents itself to hosts: a title, and hints that say whether it
# only reads, may destroy (cancel), or does the same when repeated. None reaches outside
# the suite (open world: no). Every tool returns a JSON object (its structured result,
# or with isError `{"error": {"code", "message", "reason", "metadata"}}`, docs/errors.md).
def _hints(*, read_only: bool, destructive: bool = False) -> types.ToolAnnotations:
    # A tool that only reads is idempotent too; the others change state each time.
    return types.ToolAnnotations(
        read_only_hint=read_only, destructive_hint=destructive, idempotent_hint=read_only
    )


_PRESENTATION: dict[str, tuple[str, types.ToolAnnotations]] = {
    "messages": ("Messages: send and read", _hints(read_only=False)),
    "ask_crew": ("Ask a crew", _hints(read_only=False)),
    "chat": ("Chat (send or read)", _hints(read_only=False)),
    # cancel ends a call; call with a submission_id is safe to repeat, without is not
    "functions": (
        "Functions: list, call, status, read, reply, cancel",
        _hints(read_only=False, destructive=True),
    ),
    "get_crew_function_call": ("Get a function call's status", _hints(read_only=True)),
    "list": ("List calls, conversations, targets and more", _hints(read_only=True)),
    "transcript": ("Read a conversation's transcript", _hints(read_only=True)),
}
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "The tool's result as JSON (the same object as its text content); a "
    'refusal is {"error": {"code": "<gRPC status name>", "message": "...", "reason": "...", '
    '"metadata": {...}}} with isError (reason and metadata: docs/errors.md).',
}


def tool_definitions() -> list[types.Tool]:
    """The MCP tool list: name, title, description, input and output schema and hints of
    every MCP tool."""
    out = []
    for t in tools.mcp_tools():
        title, hints = _PRESENTATION[t.name]
        out.append(
            types.Tool(
                name=t.name,
                title=title,
                description=t.description,
                input_schema=t.published_schema,
                output_schema=OUTPUT_SCHEMA,
                annotations=hints.model_copy(update={"title": title, "open_world_hint": False}),
            )
        )
    return out


def tool_list() -> dict[str, Any]:
    """What `/mcp` tells clients, as JSON (`GET /api/v1/tools`, for the stdio proxy): its
    instructions and its tools."""
    return {
        "instructions": INSTRUCTIONS,
        "tools": [
            t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tool_definitions()
        ],
    }


def build_server(call: ToolCaller) -> Server[Any]:
    """An MCP server listing the MCP tools and running each call through `call`.

    The tool list is fixed, so it is built once; the SDK's per-call schema lookup (for
    `Mcp-Param-*` headers) reads it directly instead of running tools/list each call.
    """
    definitions = tool_definitions()
    input_schemas = {t.name: t.input_schema for t in definitions}

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=definitions)

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if params.name not in input_schemas:
            raise unknown_tool(params.name, input_schemas)
        try:
            return ok_result(await call(params.name, params.arguments or {}, ctx))
        except errors.AgentWorksError as exc:
            return refused_result(exc)

    return Server(
        "agentworks",
        version=_version(),
        title="AgentWorks",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        get_tool_input_schema=input_schemas.get,
    )


def request_caller(ctx: ServerRequestContext[Any, Any]) -> Identity:
    """The caller of an MCP request: the identity the bearer token names."""
    identity = ctx.request.scope.get(IDENTITY_SCOPE_KEY) if ctx.request is not None else None
    if not isinstance(identity, Identity):
        raise errors.Unauthenticated(
            "no authenticated caller on this MCP request",
            reason=errors.Reason.CREDENTIALS_MISSING,
            metadata={"credential": "API token"},
        )
    return identity


def build_http_server(gateway: Any) -> Server[Any]:
    """The gateway's own MCP server: calls run in-process as the token's principal; calls
    as tasks, questions as elicitations, files as resources (`mcp_tasks`, M1-M3)."""

    async def call(name: str, args: dict[str, Any], ctx: ServerRequestContext[Any, Any]) -> dict:
        identity = request_caller(ctx)
        try:
            # The tools that wait send progress while they do, when the client asked (N3).
            with progress.reporting(mcp_progress.reporter(ctx)):
                return await tools.call_tool(gateway, identity, name, args, mcp=True)
        except errors.AgentWorksError:
            raise
        except Exception as exc:
            log.exception("tool.internal_error", tool=name)
            raise errors.Internal(f"internal error in tool {name}: {type(exc).__name__}") from exc

    server = build_server(call)
    mcp_tasks.install(server, gateway, request_caller)
    return server
