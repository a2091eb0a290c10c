"""The gateway's HTTP surface (G1, G4): `/mcp`, `POST /api/v1/tools/<tool>`,
`GET /api/v1/tools`, `POST /api/v1/identity` (a runtime credential's exchange, T2),
`/healthz`, `POST /webhooks/<webhook_id>` (S5), and the web console at `/` (V3-V5,
`agentworks_gateway.console`).

Translation only: a bearer token becomes an identity, JSON becomes a tool call, and
`AgentWorksError` becomes a JSON error with the matching HTTP status (or an MCP tool
error). `app.start(config)` serves it on uvicorn.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import math
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import structlog
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentworks.core import errors
from agentworks.server.liveness import loop_healthy
from agentworks_gateway import credentials, metrics, tools
from agentworks_gateway.api import HTTP_STATUS, error_body, refusal_body
from agentworks_gateway.console import console_routes
from agentworks_gateway.mcp_server import IDENTITY_SCOPE_KEY, build_http_server, tool_list
from agentworks_gateway.service import Gateway

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
def _request_context(scope: Scope) -> Iterator[str]:
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
                error_body("UNAVAILABLE", SHUTTING_DOWN),
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
        with _request_context(scope):
            headers = dict(scope.get("headers") or ())
            limit = self.gateway.config.max_body_bytes
            authorization = headers.get(b"authorization")
            try:
                _check_declared_size(headers.get(b"content-length", b"").decode("latin-1"), limit)
                identity = await self.gateway.authenticate(
                    authorization.decode("latin-1") if authorization else None
                )
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
                        body = await _bounded_body(
                            Request(scope, receive), limit, self.gateway.config.body_timeout_seconds
                        )
                        await self.app(scope, _replay(body, receive), send)
                except errors.AgentWorksError as exc:
                    metrics.refused("mcp", exc)
                    await error_response(exc)(scope, receive, send)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that gives `body` whole, then what the connection says next."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def build_app(gateway: Gateway) -> Starlette:
    """The gateway's ASGI application."""
    config = gateway.config
    protect = "*" not in config.allowed_hosts
    manager = StreamableHTTPSessionManager(
        app=build_http_server(gateway),
        json_response=True,
        stateless=True,
        security_settings=TransportSecuritySettings(
            enable_dns_rebinding_protection=protect,
            allowed_hosts=list(config.allowed_hosts),
            allowed_origins=list(config.allowed_origins),
        ),
        max_request_body_size=config.max_body_bytes,
    )

    async def healthz(request: Request) -> Response:
        if not loop_healthy("gateway"):  # B3: the loop lagged past its limit just now
            return JSONResponse(
                {"status": "unavailable", "reason": "the serving loop is lagging"},
                status_code=503,
            )
        try:
            await gateway.tokens.ping()
        except errors.AgentWorksError as exc:
            return JSONResponse({"status": "unavailable", "reason": exc.message}, status_code=503)
        return JSONResponse({"status": "ok"})

    async def call_tool(request: Request) -> Response:
        with _request_context(request.scope):
            try:
                declared = request.headers.get("content-length", "")
                _check_declared_size(declared, config.max_body_bytes)
                identity = await gateway.authenticate(request.headers.get("authorization"))
            except errors.AgentWorksError as exc:
                metrics.refused("api", exc)
                return error_response(exc)
            try:
                with (
                    structlog.contextvars.bound_contextvars(principal=identity.principal),
                    gateway.admission.request(identity.principal),
                ):
                    try:
                        args = await _api_arguments(request)
                    except errors.AgentWorksError as exc:
                        metrics.refused("api", exc)
                        return error_response(exc)
                    result = await tools.call_tool(
                        gateway, identity, request.path_params["tool"], args, mcp=False
                    )
            except errors.AgentWorksError as exc:
                return error_response(exc)
            except Exception:
                log.exception("api.internal_error", tool=request.path_params["tool"])
                return error_response(errors.Internal("internal error: see the gateway's log"))
            return JSONResponse(result)

    async def list_tools(request: Request) -> Response:
        """`GET /api/v1/tools`: the MCP tools, for the CLI's stdio proxy (G1)."""
        with _request_context(request.scope):
            try:
                await gateway.authenticate(request.headers.get("authorization"))
            except errors.AgentWorksError as exc:
                metrics.refused("api", exc)
                return error_response(exc)
            return JSONResponse(tool_list())

    # Large bodies are parsed one at a time (B1, B5): parsing holds the serving loop
    # (about 30 ms per 0.75 MB), so with several at once another user's request would
    # wait for all of them; this way it waits for one at most.
    large_bodies = asyncio.Semaphore(1)

    async def _api_arguments(request: Request) -> Any:
        """The tool's arguments of an API request, or its refusal."""
        # Read as it streams in: a body past the limit is never all held (413).
        body = await _bounded_body(request, config.max_body_bytes, config.body_timeout_seconds)
        if len(body) <= LARGE_BODY_BYTES:
            return parse_arguments(body)
        async with large_bodies:
            await asyncio.sleep(0)  # what is ready to run goes first
            # Without the collector while it parses: tens of thousands of new containers
            # would otherwise start full collections of the whole process (each far
            # longer than the parse); refused arguments are freed by their counts.
            collecting = gc.isenabled()
            gc.disable()
            try:
                return parse_arguments(body)
            finally:
                if collecting:
                    gc.enable()

    async def exchange_identity(request: Request) -> Response:
        """`POST /api/v1/identity` (T2): a runtime credential for a scoped identity."""
        with _request_context(request.scope):
            try:
                result = await credentials.exchange(gateway, request.headers.get("authorization"))
            except errors.AgentWorksError as exc:
                metrics.refused("api", exc)
                return error_response(exc)
            return JSONResponse(result, headers={"Cache-Control": "no-store"})

    async def webhook(request: Request) -> Response:
        with _request_context(request.scope):
            return await receive_webhook(gateway, request)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    return Starlette(
        routes=[
            Route("/healthz", healthz, methods=["GET"]),
            Route("/api/v1/identity", exchange_identity, methods=["POST"]),
            Route("/api/v1/tools", list_tools, methods=["GET"]),
            Route("/api/v1/tools/{tool}", call_tool, methods=["POST"]),
            Route("/webhooks/{webhook_id}", webhook, methods=["POST"]),
            Route("/mcp", McpAuth(manager.handle_request, gateway)),
            *console_routes(gateway),
        ],
        middleware=[Middleware(DrainGuard, gateway=gateway)],
        lifespan=lifespan,
    )


# Credentials are not the webhook's business: the HMAC signature is its authentication.
_NOT_FORWARDED = frozenset({"authorization", "proxy-authorization", "cookie"})


# Bodies larger than this are parsed one at a time (see `_api_arguments`).
LARGE_BODY_BYTES = 64 * 1024


class BodyTooLarge(errors.InvalidArgument):
    """A request body past the limit (answered 413, as soon as the limit is passed)."""

    def __init__(self, limit: int, what: str = "request body") -> None:
        super().__init__(
            f"{what} passes the limit: the limit is {limit} bytes (GATEWAY_MAX_BODY_BYTES); "
            "send smaller arguments"
        )


class RequestTimeout(errors.DeadlineExceeded):
    """A request body stalled (answered 408, not 504: the client is the slow side)."""


def _check_declared_size(declared: str, limit: int) -> None:
    """BodyTooLarge when the request's Content-Length says it passes `limit`: refused
    before a byte of it is read."""
    if declared.strip().isdigit() and int(declared) > limit:
        raise BodyTooLarge(limit)


async def _bounded_body(request: Request, limit: int, seconds: float = 30.0) -> bytes:
    """The raw body, or BodyTooLarge as soon as it passes `limit` bytes (never all read);
    RequestTimeout when it has not all arrived within `seconds` (B6: a body dripping
    one byte at a time holds a connection no longer than one that stops)."""
    _check_declared_size(request.headers.get("content-length", ""), limit)
    body = bytearray()
    chunks = aiter(request.stream())
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        left = deadline - asyncio.get_running_loop().time()
        try:
            if left <= 0:
                raise TimeoutError
            chunk = await asyncio.wait_for(anext(chunks), left)
        except StopAsyncIteration:
            return bytes(body)
        except TimeoutError:
            got = f"{len(body)} bytes of it came" if body else "no byte of it came"
            raise RequestTimeout(
                f"the request body did not arrive within {seconds:g} s ({got}; "
                "GATEWAY_BODY_TIMEOUT_SECONDS): send it whole"
            ) from None
        body += chunk
        if len(body) > limit:
            raise BodyTooLarge(limit)


def parse_arguments(body: bytes) -> Any:
    """A request body's JSON, or InvalidArgument saying why it is none. Integers of more
    than `MAX_INTEGER_DIGITS` digits are refused naming where they are (B10)."""
    try:
        return json.loads(body or b"{}")
    except RecursionError:  # nested past what the parser follows
        raise errors.InvalidArgument(
            "request body nests objects and arrays too deep to read: the arguments may "
            "nest at most 24 deep"
        ) from None
    except ValueError as exc:
        # Python refuses an integer past its digits limit with a ValueError too: which
        # one it was is found by parsing again, never by reading the exception's words.
        refusal = _long_integer(body)
        if refusal is not None:
            raise refusal from None
        raise errors.InvalidArgument(
            f"request body is not JSON ({exc}): send the tool's arguments as a JSON object",
            reason=errors.Reason.MALFORMED,
        ) from None


# JSON numbers (B10): integers of up to this many digits (Python's own bound on turning
# text into an int, whose cost grows with the square of the length); longer ones are
# refused, naming the argument. Numbers with a fraction or exponent are IEEE doubles.
MAX_INTEGER_DIGITS = 4300


class _LongInteger:
    def __init__(self, digits: int) -> None:
        self.digits = digits


def _long_integer(body: bytes) -> errors.InvalidArgument | None:
    """The refusal of a body with an integer of more than MAX_INTEGER_DIGITS digits,
    naming where it is (parsed again, keeping such integers as their length); None when
    it has none (or is not JSON)."""

    def number(text: str) -> Any:
        digits = len(text.lstrip("-"))
        return _LongInteger(digits) if digits > MAX_INTEGER_DIGITS else int(text)

    where, digits = "the arguments", 0
    try:
        value = json.loads(body, parse_int=number)
    except (ValueError, RecursionError):
        return None
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, _LongInteger):
            where, digits = path or "the arguments", item.digits
            break
        if isinstance(item, dict):
            stack.extend((v, f"{path}.{k}" if path else str(k)) for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((v, f"{path}.{i}" if path else str(i)) for i, v in enumerate(item))
    if not digits:
        return None
    return errors.InvalidArgument(
        f"{where} holds an integer of {digits} digits: integers in arguments may have at "
        f"most {MAX_INTEGER_DIGITS} digits; send a longer number as a string",
        reason=errors.Reason.REQUEST_LIMIT,
        metadata={"field": where, "limit": str(MAX_INTEGER_DIGITS)},
    )


async def receive_webhook(gateway: Gateway, request: Request) -> Response:
    """`POST /webhooks/<webhook_id>` (G4, S5): no token; the scheduler checks the signature.

    202 `{"delivery_id", "created"}` once the raw body is in the conversation's turn queue;
    otherwise the scheduler's refusal with its HTTP status (401 bad or stale signature,
    400 malformed, 404 unknown webhook, 409 replay, 503 unavailable, 504 a service did not
    answer in time), or 413 for a body above GATEWAY_WEBHOOK_MAX_BODY_BYTES.
    """
    webhook_id = request.path_params["webhook_id"]
    limit = gateway.config.webhook_max_body_bytes
    try:
        body = await _bounded_body(request, limit, gateway.config.body_timeout_seconds)
        headers = {k: v for k, v in request.headers.items() if k not in _NOT_FORWARDED}
        result = await gateway.receive_webhook(webhook_id, headers=headers, body=body)
    except BodyTooLarge:
        log.info("webhook.refused", webhook_id=webhook_id, code="TOO_LARGE", limit=limit)
        return JSONResponse(
            error_body(
                "INVALID_ARGUMENT",
                f"webhook body is larger than {limit} bytes, the limit: send a smaller event "
                "(for example a reference to the data); nothing was delivered",
            ),
            status_code=413,
        )
    except errors.AgentWorksError as exc:
        code = exc.code.name
        log.info("webhook.refused", webhook_id=webhook_id, code=code, reason=exc.message)
        status = 408 if isinstance(exc, RequestTimeout) else HTTP_STATUS.get(code, 500)
        return JSONResponse(refusal_body(exc), status_code=status)
    except Exception:
        log.exception("webhook.internal_error", webhook_id=webhook_id)
        return error_response(errors.Internal("internal error: see the gateway's log"))
    log.info(
        "webhook.accepted",
        webhook_id=webhook_id,
        delivery_id=result.delivery_id,
        created=result.created,
        bytes=len(body),
    )
    return JSONResponse(
        {"delivery_id": result.delivery_id, "created": result.created}, status_code=202
    )
