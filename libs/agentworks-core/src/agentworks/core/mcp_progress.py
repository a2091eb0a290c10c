"""MCP progress for the suite's MCP servers (N3): the gateway's `/mcp`, the agent's
endpoint and the CLI's stdio proxy.

- `reporter(ctx)`: the `progress.Report` of one MCP request, or None when its client gave
  no `progressToken` (then nothing is ever sent for it).
- `reporting_calls(handler, doing)`: a `tools/call` handler that reports progress while
  the whole call runs (the CLI's stdio proxy, whose HTTP API answer comes in one piece).
- `McpTransport`: Streamable HTTP (stateless) that answers a request with one JSON body,
  as before, unless it is a `tools/call` with a `progressToken`: that one is answered as
  an event stream, so its progress notifications reach the client before the result.
  (The SDK's JSON-response mode has no wire for a notification and drops it; its event
  stream mode would answer every request as a stream, which clients that read a JSON
  body, or proxies that buffer, do not expect.)

Needs the MCP SDK (the `mcp` extra).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from mcp.server import Server, ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params
from starlette.types import Message, Receive, Scope, Send

from agentworks.core import progress
from agentworks.core.progress import Report

R = TypeVar("R")

# What a request asking for progress has in its body (a cheap look before parsing it).
_MARK = b'"progressToken"'


def reporter(ctx: ServerRequestContext[Any, Any]) -> Report | None:
    """How to report progress for this MCP request: None without a `progressToken`."""
    if progress_token_from_params(ctx.params) is None:
        return None
    return ctx.session.report_progress


def reporting_calls(
    handler: Callable[[ServerRequestContext[Any, Any], Any], Awaitable[R]], doing: str
) -> Callable[[ServerRequestContext[Any, Any], Any], Awaitable[R]]:
    """`handler` (an `on_call_tool`) sending progress every 2 s while a call runs, when
    its client gave a `progressToken`; `total` is the call's `wait_seconds`, if any."""

    async def call_tool(ctx: ServerRequestContext[Any, Any], params: Any) -> R:
        wait = (getattr(params, "arguments", None) or {}).get("wait_seconds")
        bound = wait if isinstance(wait, int) and not isinstance(wait, bool) else None
        with progress.reporting(reporter(ctx)):
            return await progress.waiting(handler(ctx, params), doing, bound=bound)

    return call_tool


def asks_progress(body: bytes) -> bool:
    """Whether a request body is a `tools/call` with a `progressToken` in its `_meta`."""
    if _MARK not in body:
        return False
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return False
    return (
        isinstance(message, dict)
        and message.get("method") == "tools/call"
        and isinstance(message.get("params"), dict)
        and progress_token_from_params(message["params"]) is not None
    )


class McpTransport:
    """The SDK's stateless Streamable HTTP transport of `app`, in two answer modes: one
    JSON body per request, or an event stream for a tools/call asking for progress.

    `kwargs` are `StreamableHTTPSessionManager`'s (security settings, body limit);
    `max_body_bytes` bounds what is read to decide (past it, the JSON mode refuses the
    body as it would have). `run()` for the application's lifespan, `handle_request` as
    the ASGI endpoint.
    """

    def __init__(self, app: Server[Any], *, max_body_bytes: int, **kwargs: Any) -> None:
        self.max_body_bytes = max_body_bytes
        options = {"stateless": True, "max_request_body_size": max_body_bytes, **kwargs}
        self.json = StreamableHTTPSessionManager(app=app, json_response=True, **options)
        self.stream = StreamableHTTPSessionManager(app=app, json_response=False, **options)

    @contextlib.asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """Both managers' task groups, for as long as the block lasts."""
        async with self.json.run(), self.stream.run():
            yield

    async def handle_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one request, in the mode it asks for."""
        if scope.get("type") != "http" or scope.get("method") != "POST":
            await self.json.handle_request(scope, receive, send)
            return
        read: list[Message] = []
        body = b""
        while len(body) <= self.max_body_bytes:
            message = await receive()
            read.append(message)
            if message.get("type") != "http.request":
                break
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        else:  # too large to be anything but refused: as it would have been
            await self.json.handle_request(scope, _replay(read, receive), send)
            return
        manager = self.stream if asks_progress(body) else self.json
        await manager.handle_request(scope, _replay(read, receive), send)


def _replay(read: list[Message], receive: Receive) -> Receive:
    """A `receive` that gives the messages already read, then what the connection says."""
    pending = list(read)

    async def replay() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replay
