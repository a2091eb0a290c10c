"""The ASGI pieces around the gateway's routes (G1): a refusal as its JSON answer, the
request id bound for logs, the drain's guard (a request cut by the drain answers 503),
and `/mcp`'s bearer-token wrapper."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import uuid
from collections.abc import Iterator
from typing import Any

import structlog
from mcp_types import INVALID_REQUEST
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentworks.core import errors
from agentworks_gateway import metrics, stream_auth
from agentworks_gateway.api import HTTP_STATUS, error_body, refusal_body
from agentworks_gateway.bodies import (
    LARGE_BODY_BYTES,
    BodyTooLarge,
    RequestTimeout,
    bounded_body,
    check_declared_size,
)
from agentworks_gateway.mcp_server import IDENTITY_SCOPE_KEY
from agentworks_gateway.models import TokenRecord
from agentworks_gateway.service import Gateway, bearer_token

log = structlog.get_logger("agentworks.gateway")

SHUTTING_DOWN = "the gateway is shutting down; retry"


def error_response(exc: errors.AgentWorksError) -> JSONResponse:
    """An AgentWorksError as a JSON error body with the matching HTTP status: its reason
    and metadata (ErrorInfo) in the body, its retry delay as `Retry-After` (B7)."""
    code = exc.code.name
    headers = {}
    if code == "UNAUTHENTICATED":
        headers["WWW-Authenticate"] = 'Bearer realm="agentworks"'
    if exc.retry_after is not None:
        headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after)))
    if isinstance(exc, RequestTimeout):
        status = 408
    elif isinstance(exc, BodyTooLarge):
        status = 413
    else:
        status = HTTP_STATUS.get(code, 500)
    return JSONResponse(refusal_body(exc), status_code=status, headers=headers)


@contextlib.contextmanager
def request_context(scope: Scope) -> Iterator[str]:
    headers = dict(scope.get("headers") or ())
    request_id = headers.get(b"x-request-id", b"").decode("latin-1")[:64] or uuid.uuid4().hex
    with structlog.contextvars.bound_contextvars(request_id=request_id):
        yield request_id


class DrainGuard:
    """ASGI middleware: a request still running when the drain ends answers 503.

    Waiting long-polls return as the drain starts (`Gateway.long_poll`); what still runs
    when `GATEWAY_DRAIN_SECONDS` have passed is cancelled by uvicorn. Such a request gets
    `UNAVAILABLE` "the gateway is shutting down; retry" as JSON, not uvicorn's plain-text
    500 and traceback.
    """

    def __init__(self, app: ASGIApp, gateway: Gateway) -> None:
        self.app = app
        self.gateway = gateway

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except asyncio.CancelledError:
            if not self.gateway.drain_ended():
                raise  # not the drain's cut (the client went away, a cancel scope): not ours
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()  # handled here: answered below
            log.warning(
                "request.cut",
                method=scope.get("method"),
                path=scope.get("path"),
                reason="still running when the drain ended (GATEWAY_DRAIN_SECONDS)",
                answered=not started,
            )
            if started:
                return  # a partial answer: the connection closes
            response = JSONResponse(
                error_body("UNAVAILABLE", SHUTTING_DOWN, reason=errors.Reason.DRAINING),
                status_code=503,
                headers={"Connection": "close", "Retry-After": "1"},
            )
            await response(scope, receive, send)


class McpAuth:
    """ASGI wrapper of `/mcp`: a bearer token is required; its identity rides in the scope."""

    def __init__(self, app: ASGIApp, gateway: Gateway) -> None:
        self.app = app
        self.gateway = gateway

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("method") == "GET":
            # Stateless: there is no session whose stream anything could be pushed on.
            # The MCP transport spec's answer for a server without that stream is 405.
            response = JSONResponse(
                error_body("UNIMPLEMENTED", "GET /mcp: this server has no event stream; POST"),
                status_code=405,
                headers={"Allow": "POST"},
            )
            await response(scope, receive, send)
            return
        with request_context(scope):
            headers = dict(scope.get("headers") or ())
            limit = self.gateway.config.max_body_bytes
            authorization = headers.get(b"authorization")
            try:
                check_declared_size(headers.get(b"content-length", b"").decode("latin-1"), limit)
                record = await self.gateway.token_record(
                    bearer_token(
                        authorization.decode("latin-1") if authorization else None, "API token"
                    )
                )
                identity = self.gateway.identity_of(record)
            except errors.AgentWorksError as exc:
                metrics.refused("mcp", exc)
                await error_response(exc)(scope, receive, send)
                return
            scope[IDENTITY_SCOPE_KEY] = identity
            with structlog.contextvars.bound_contextvars(principal=identity.principal):
                try:
                    with self.gateway.admission.request(identity.principal):
                        # Read here, bounded in size and time (413 and 408 as on /api),
                        # then handed to the MCP transport whole.
                        body = await bounded_body(
                            Request(scope, receive), limit, self.gateway.config.body_timeout_seconds
                        )
                        if len(body) <= LARGE_BODY_BYTES:
                            listen = _listen_id(body)
                        else:
                            listen = await self.gateway.large_bodies.run(lambda: _listen_id(body))
                        if listen is None:
                            await self.app(scope, replay(body, receive), send)
                    if listen is not None:
                        await self._listen(scope, replay(body, receive), send, record, listen)
                except errors.AgentWorksError as exc:
                    metrics.refused("mcp", exc)
                    await error_response(exc)(scope, receive, send)

    async def _listen(
        self, scope: Scope, receive: Receive, send: Send, record: TokenRecord, request_id: Any
    ) -> None:
        """A `subscriptions/listen`, which may stay open for hours: it holds one of the
        waits, not a request (B6, B7), and ends with a JSON-RPC error once its token is
        revoked or expires (A1), nothing sent after that."""
        principal = self.gateway.identity_of(record).principal
        with (
            self.gateway.admission.stream(principal),
            self.gateway.open_tokens.hold(record.token_id) as held,
        ):
            await stream_auth.respond(
                held,
                self.app,
                scope,
                receive,
                send,
                final=lambda exc: _mcp_refusal(request_id, exc),
            )


# The MCP method whose answer stays open while the calls it follows run (M1).
LISTEN = "subscriptions/listen"


def _listen_id(body: bytes) -> Any:
    """The JSON-RPC id of a `subscriptions/listen` request; None for anything else (the
    MCP transport parses and refuses what is not a request)."""
    try:
        request = json.loads(body)
    except ValueError:
        return None
    if isinstance(request, dict) and request.get("method") == LISTEN:
        return request.get("id")
    return None


def _mcp_refusal(request_id: Any, exc: errors.AgentWorksError) -> bytes:
    """The last event of a listen whose token ended: the request's JSON-RPC error
    (invalid request: its credential no longer lets in), the refusal's reason and
    metadata in `data` as in the task methods' errors."""
    error = {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {
            "code": INVALID_REQUEST,
            "message": exc.message,
            "data": {"reason": str(exc.reason or ""), "metadata": exc.metadata},
        },
    }
    return f"event: message\r\ndata: {json.dumps(error, separators=(',', ':'))}\r\n\r\n".encode()


def replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that gives `body` whole, then what the connection says next."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed
