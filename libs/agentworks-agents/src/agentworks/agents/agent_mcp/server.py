"""The agent's MCP server (L2): one turn's or one execution's toolbox over MCP.

`build_server(toolbox)` is an MCP server (the official SDK's low-level `Server`) that
lists the toolbox's tools (name, title, description, input and output schema, and the
read-only / destructive / idempotent hints) and runs each call through `Toolbox.call`.
A refusal (`ToolError`) is a tool result with `isError: true` whose text is the refusal
and whose structured content is `{"error": {"code", "message"}}`, as the gateway's MCP
server answers (`agentworks.core.mcp_results`).

It gives the host `instructions` and `resources` when given (L11: a turn's or
execution's, `resources.py`): `resources/list` lists them and `resources/read` reads
one by its URI; there are no templates and no subscriptions.

`Endpoint` serves it over Streamable HTTP (stateless, JSON responses) on a Unix socket
or on a loopback TCP port, for as long as its `async with` lasts: one turn or one
execution. Every request must carry the endpoint's bearer token (`Authorization:
Bearer <token>`), a random secret made for that endpoint only. A tool that waits
(`ask_human`, `call_function` with `wait_seconds`) sends MCP progress every 2 s while it
does when the call has a `progressToken`; that call is answered as an event stream
(`agentworks.core.mcp_progress`, N3).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import os
import pathlib
import secrets
import socket
from collections.abc import Generator, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import mcp.types as types
import structlog
import uvicorn
from mcp.server import Server, ServerRequestContext
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from starlette.types import Receive, Scope, Send

from agentworks.agents.agent_mcp.bridge import bind_unix
from agentworks.agents.agent_mcp.resources import AgentResource
from agentworks.agents.agent_tools import AgentTool, Toolbox, ToolError
from agentworks.core import mcp_progress, progress
from agentworks.core.mcp_results import error_result, ok_result, unknown_tool
from agentworks.runtime.execution_context import ExecutionStopped

log = structlog.get_logger("agentworks.agents.agent_mcp")

PATH = "/mcp"

# A tool's result without an output schema of its own: a JSON object.
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "The tool's result as JSON (the same object as its text content); a "
    'refusal is {"error": {"code": "<status name>", "message": "..."}} with isError.',
}

# The largest request body the endpoint reads (a tool call's arguments).
MAX_BODY_BYTES = 1024 * 1024

# How long a stopping endpoint lets calls in flight end before it closes them.
STOP_GRACE_SECONDS = 2


def _version() -> str:
    try:
        return version("agentworks-runtime")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0.0.0"


def tool_definition(tool: AgentTool) -> types.Tool:
    """The MCP definition of one agent tool, with its title and hints."""
    return types.Tool(
        name=tool.name,
        title=tool.title,
        description=tool.description,
        input_schema=tool.input_schema,
        output_schema=tool.output_schema or OUTPUT_SCHEMA,
        annotations=types.ToolAnnotations(
            title=tool.title,
            read_only_hint=tool.read_only,
            destructive_hint=tool.destructive,
            idempotent_hint=tool.idempotent,
            open_world_hint=False,
        ),
    )


def build_server(
    toolbox: Toolbox,
    *,
    instructions: str | None = None,
    resources: Sequence[AgentResource] = (),
) -> Server[Any]:
    """An MCP server listing `toolbox`'s tools and running each call through it, with
    `instructions` and `resources` (L11)."""
    by_uri = {r.uri: r for r in resources}

    async def list_resources(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=r.uri,
                    name=r.name,
                    title=r.title,
                    description=r.description,
                    mime_type=r.mime_type,
                )
                for r in resources
            ]
        )

    async def read_resource(
        ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        resource = by_uri.get(uri)
        if resource is None:
            known = ", ".join(by_uri)
            raise MCPError(types.INVALID_PARAMS, f"unknown resource {uri!r}: there are {known}")
        try:
            text = await resource.read()
        except ToolError as exc:
            raise MCPError(types.INTERNAL_ERROR, f"cannot read {uri}: {exc.message}") from exc
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type=resource.mime_type, text=text)]
        )

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool_definition(t) for t in toolbox.tools])

    def input_schema(name: str) -> dict[str, Any] | None:
        return next((t.input_schema for t in toolbox.tools if t.name == name), None)

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        names = [t.name for t in toolbox.tools]
        if params.name not in names:
            raise unknown_tool(params.name, names)
        try:
            with progress.reporting(mcp_progress.reporter(ctx)):  # N3, when asked
                return ok_result(await toolbox.call(params.name, params.arguments or {}))
        except ToolError as exc:
            return error_result(exc.code, exc.message)
        except ExecutionStopped as exc:
            return error_result("FAILED_PRECONDITION", f"{exc}: stop working on it")
        except Exception as exc:
            log.exception("tool.internal_error", tool=params.name)
            return error_result("INTERNAL", f"internal error in tool {params.name}: {exc!r}")

    return Server(
        "agentworks-agent",
        version=_version(),
        title="AgentWorks agent tools",
        instructions=instructions,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources if resources else None,
        on_read_resource=read_resource if resources else None,
        get_tool_input_schema=input_schema,
    )


class _Uvicorn(uvicorn.Server):
    """A uvicorn server that leaves the process's signals alone: the runtime has its
    own handler (`serving.run_until_signal`), and uvicorn's would take it over."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


class _Guarded:
    """`/mcp` only, and only with the endpoint's bearer token."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        headers = dict(scope.get("headers") or ())
        given = headers.get(b"authorization", b"")
        if scope.get("path") != PATH:
            await _refuse(send, 404, f"not found: the MCP endpoint is {PATH}")
        elif not hmac.compare_digest(given, self.expected):
            await _refuse(send, 401, "this MCP endpoint needs its bearer token")
        elif scope.get("method") != "POST":
            # Stateless: no session, so no event stream to GET (the transport spec's 405).
            await _refuse(send, 405, "POST only: this endpoint has no event stream")
        else:
            await self.app(scope, receive, send)


async def _refuse(send: Send, status: int, text: str) -> None:
    body = text.encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"text/plain"), (b"content-length", b"%d" % len(body))],
        }
    )
    await send({"type": "http.response.body", "body": body})


class Endpoint:
    """The MCP endpoint of one turn or execution, while `async with` lasts.

    With `socket_path`, it listens on that Unix socket (mode 0600, owned by `owner`
    when given: the sandbox's user), removed when it stops; else on 127.0.0.1 at `port`
    (0: a free one). `url` and `token` say how to reach it; `socket_path` too.
    """

    def __init__(
        self,
        toolbox: Toolbox,
        *,
        socket_path: pathlib.Path | None = None,
        port: int = 0,
        owner: int | None = None,
        instructions: str | None = None,
        resources: Sequence[AgentResource] = (),
    ) -> None:
        self.toolbox = toolbox
        self.socket_path = socket_path
        self.port = port
        self.owner = owner
        self.token = secrets.token_urlsafe(32)
        self.url = ""
        manager = mcp_progress.McpTransport(
            build_server(toolbox, instructions=instructions, resources=resources),
            # A Unix socket has no Host to rebind; on TCP the bearer token guards it.
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            max_body_bytes=MAX_BODY_BYTES,
        )
        self._manager = manager
        self._stack = contextlib.AsyncExitStack()
        self._server: _Uvicorn | None = None
        self._task: asyncio.Task[None] | None = None

    def _listen(self) -> socket.socket:
        if self.socket_path is None:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", self.port))
            self.port = sock.getsockname()[1]
            self.url = f"http://127.0.0.1:{self.port}{PATH}"
        else:
            sock = bind_unix(self.socket_path, owner=self.owner)
            self.url = f"http://localhost{PATH}"
        sock.listen(64)
        sock.setblocking(False)
        return sock

    async def __aenter__(self) -> Endpoint:
        sock = self._listen()
        try:
            await self._stack.enter_async_context(self._manager.run())
            config = uvicorn.Config(
                _Guarded(self._manager.handle_request, self.token),
                lifespan="off",
                access_log=False,
                log_level="warning",
                timeout_graceful_shutdown=STOP_GRACE_SECONDS,
            )
            self._server = _Uvicorn(config)
            self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
            while not self._server.started:
                if self._task.done():
                    self._task.result()  # raises why it did not start
                    raise RuntimeError("the MCP endpoint stopped before it started")
                await asyncio.sleep(0.01)
        except BaseException:
            sock.close()
            await self._close()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._close()

    async def _close(self) -> None:
        """Stop listening (no new connection is taken), end the calls in flight."""
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            try:
                await asyncio.wait_for(asyncio.shield(self._task), STOP_GRACE_SECONDS + 3)
            except TimeoutError:
                self._server.force_exit = True
                self._task.cancel()
                with contextlib.suppress(BaseException):
                    await self._task
        await self._stack.aclose()
        if self.socket_path is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.socket_path)
