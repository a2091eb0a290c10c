"""The gateway's HTTP surface (G1, G4): `/mcp`, `POST /api/v1/tools/<tool>`,
`GET /api/v1/tools`, `POST /api/v1/identity` (a runtime credential's exchange, T2),
`GET /api/v1/streams/...` (event streams, N1: `streams`),
`/healthz`, `POST /webhooks/<webhook_id>` (S5), and the web console at `/` (V3-V5,
`agentworks_gateway.console`).

Translation only: a bearer token becomes an identity, JSON becomes a tool call, and
`AgentWorksError` becomes a JSON error with the matching HTTP status (or an MCP tool
error). Request bodies are read by `bodies`, refusals answered and `/mcp` guarded by
`middleware`. `app.start(config)` serves it on uvicorn.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import structlog
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agentworks.core import errors
from agentworks.core.mcp_progress import McpTransport
from agentworks.server.liveness import loop_healthy
from agentworks_gateway import credentials, metrics, tools
from agentworks_gateway.a2a import a2a_routes
from agentworks_gateway.a2a_out.routes import a2a_out_routes
from agentworks_gateway.api import HTTP_STATUS, error_body, refusal_body
from agentworks_gateway.bodies import (
    LARGE_BODY_BYTES,
    BodyTooLarge,
    RequestTimeout,
    bounded_body,
    check_declared_size,
    parse_arguments,
)
from agentworks_gateway.console import console_routes
from agentworks_gateway.mcp_server import build_http_server, tool_list
from agentworks_gateway.middleware import DrainGuard, McpAuth, error_response, request_context
from agentworks_gateway.service import Gateway
from agentworks_gateway.streams import stream_routes
from agentworks_gateway.tools.arguments import refuse_oversized

log = structlog.get_logger("agentworks.gateway")


def build_app(gateway: Gateway) -> Starlette:
    """The gateway's ASGI application."""
    config = gateway.config
    protect = "*" not in config.allowed_hosts
    # JSON answers; an event stream for a tools/call asking for progress (N3).
    manager = McpTransport(
        build_http_server(gateway),
        security_settings=TransportSecuritySettings(
            enable_dns_rebinding_protection=protect,
            allowed_hosts=list(config.allowed_hosts),
            allowed_origins=list(config.allowed_origins),
        ),
        max_body_bytes=config.max_body_bytes,
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
        with request_context(request.scope):
            try:
                declared = request.headers.get("content-length", "")
                check_declared_size(declared, config.max_body_bytes)
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
        with request_context(request.scope):
            try:
                await gateway.authenticate(request.headers.get("authorization"))
            except errors.AgentWorksError as exc:
                metrics.refused("api", exc)
                return error_response(exc)
            return JSONResponse(tool_list())

    async def _api_arguments(request: Request) -> Any:
        """The tool's arguments of an API request, or its refusal."""
        # Read as it streams in: a body past the limit is never all held (413).
        body = await bounded_body(request, config.max_body_bytes, config.body_timeout_seconds)
        if len(body) <= LARGE_BODY_BYTES:
            return parse_arguments(body)
        tool = tools.TOOLS.get(request.path_params["tool"])  # unknown: call_tool says so

        def parsed() -> Any:
            args = parse_arguments(body)
            if tool is not None:
                refuse_oversized(tool, args)  # refused arguments are freed in the gate
            return args

        return await gateway.large_bodies.run(parsed)

    async def exchange_identity(request: Request) -> Response:
        """`POST /api/v1/identity` (T2): a runtime credential for a scoped identity."""
        with request_context(request.scope):
            try:
                result = await credentials.exchange(gateway, request.headers.get("authorization"))
            except errors.AgentWorksError as exc:
                metrics.refused("api", exc)
                return error_response(exc)
            return JSONResponse(result, headers={"Cache-Control": "no-store"})

    async def webhook(request: Request) -> Response:
        with request_context(request.scope):
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
            *a2a_out_routes(gateway),
            *stream_routes(gateway),
            Route("/webhooks/{webhook_id}", webhook, methods=["POST"]),
            Route("/mcp", McpAuth(manager.handle_request, gateway)),
            *a2a_routes(gateway),
            *console_routes(gateway),
        ],
        middleware=[Middleware(DrainGuard, gateway=gateway)],
        lifespan=lifespan,
    )


# Credentials are not the webhook's business: the HMAC signature is its authentication.
_NOT_FORWARDED = frozenset({"authorization", "proxy-authorization", "cookie"})


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
        body = await bounded_body(request, limit, gateway.config.body_timeout_seconds)
        headers = {k: v for k, v in request.headers.items() if k not in _NOT_FORWARDED}
        result = await gateway.receive_webhook(webhook_id, headers=headers, body=body)
    except BodyTooLarge:
        log.info("webhook.refused", webhook_id=webhook_id, code="TOO_LARGE", limit=limit)
        return JSONResponse(
            error_body(
                "INVALID_ARGUMENT",
                f"webhook body is larger than {limit} bytes, the limit: send a smaller event "
                "(for example a reference to the data); nothing was delivered",
                reason=errors.Reason.REQUEST_LIMIT,
                metadata={"limit": str(limit), "setting": "GATEWAY_WEBHOOK_MAX_BODY_BYTES"},
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
