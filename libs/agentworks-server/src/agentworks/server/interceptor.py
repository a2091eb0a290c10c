"""The interceptor every service's gRPC server runs (`agentworks.server.rpc`).

For each call it verifies the signed identity (A2) from the call's metadata before the
request's body is read or parsed (B8: a call without a valid identity is refused without
reading its message); then the body is parsed and checked against its proto's field
rules (`agentworks.server.validation`) before the handler runs. Around the handler it
holds one of the principal's open requests for the call's length (B7,
`agentworks.server.shares`), binds request context for logs, and maps `AgentWorksError`
to status codes — the only place that mapping happens.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import grpc
import structlog

from agentworks.core import errors
from agentworks.core.identity import METADATA_KEY, current_identity, verify
from agentworks.core.keys import TrustedKeys
from agentworks.core.wire import ANSWERED_KEY, REQUEST_ID_KEY
from agentworks.server.capabilities import method_refusal
from agentworks.server.metrics import observe_rpc, rpc_started
from agentworks.server.shares import shares
from agentworks.server.validation import checked, checked_stream, lenient

# The identity (and request id) the interceptor verified from the call's metadata before
# its body was read (B8); each RPC runs in a task of its own, so this is the call's.
_verified: contextvars.ContextVar[tuple[Any, str | None] | None] = contextvars.ContextVar(
    "agentworks_verified", default=None
)

log = structlog.get_logger("agentworks.rpc")

_ANSWERED = ((ANSWERED_KEY, "1"),)
# Error messages travel percent-encoded in the grpc-message trailer, and clients refuse
# trailers above 8 KiB (at random) or 16 KiB (always), which turns the error into
# RESOURCE_EXHAUSTED "Stream removed". A message that quotes a huge input is cut so that
# its encoded form stays below this many bytes.
MAX_ERROR_MESSAGE_BYTES = 6000
_OPEN_METHODS = ("/grpc.health.", "/grpc.reflection.")


def refusal(exc: errors.AgentWorksError) -> tuple[str, tuple[tuple[str, Any], ...]]:
    """A refusal's message and trailers: that our service answered and, when it has them,
    its reason and metadata (google.rpc.ErrorInfo) and retry delay, in a google.rpc.Status
    whose message is left empty: clients read grpc-message, and a second, base64 copy made
    a 6 KB schema refusal 12 KB of trailers, which the client refused ("Stream removed")."""
    if not exc.reason and not exc.metadata and exc.retry_after is None:
        return bounded_message(exc.message), _ANSWERED
    message = bounded_message(exc.message)
    details = errors.status_details(exc, "")  # the message travels in grpc-message only
    return message, (*_ANSWERED, (errors.STATUS_DETAILS_KEY, details))


def bounded_message(message: str, limit: int = MAX_ERROR_MESSAGE_BYTES) -> str:
    """The message, cut so that its encoded form stays within `limit` bytes (see
    MAX_ERROR_MESSAGE_BYTES)."""
    if len(message) * 9 <= limit:  # even all-non-ASCII fits
        return message
    used = 0
    for index, char in enumerate(message):
        # Printable ASCII but '%' is sent as is; every other UTF-8 byte as %XX.
        used += 1 if " " <= char <= "~" and char != "%" else 3 * len(char.encode())
        if used > limit - 40:
            return message[:index] + " ... (message truncated)"
    return message


def _credentials(metadata: Any) -> tuple[str | None, str | None]:
    """The signed identity and the request id in a call's metadata (each None if absent)."""
    token = request_id = None
    for name, value in metadata or ():
        if name == METADATA_KEY:
            token = value
        elif name == REQUEST_ID_KEY:
            request_id = value
    return token, request_id


def _refusing(rpc: _Method, exc: errors.AgentWorksError) -> grpc.RpcMethodHandler:
    """A handler that refuses the call with `exc` without reading its request (B8).

    Request-streaming in shape whatever the method's: gRPC reads a unary request before
    it calls the handler, a request stream only when the handler iterates it, which this
    one never does; on the wire both are the same, so the client sees the refusal.
    """

    async def refuse(request_iterator: Any, context: grpc.aio.ServicerContext) -> None:
        rpc_started(rpc.grpc_type, rpc.grpc_service, rpc.short)
        observe_rpc(rpc.grpc_type, rpc.grpc_service, rpc.short, exc.code.name, 0.0)
        await context.abort(exc.code, *refusal(exc))

    if rpc.grpc_type in ("server_stream", "bidi_stream"):
        return grpc.stream_stream_rpc_method_handler(refuse)
    return grpc.stream_unary_rpc_method_handler(refuse)


@dataclass(frozen=True)
class _Method:
    """What the interceptor knows of one method, worked out on its first request."""

    service: str
    method: str
    short: str
    trusted: TrustedKeys
    # grpc-prometheus labels: unary, server_stream, client_stream; the full service name.
    grpc_type: str
    grpc_service: str
    # The methods an identity with a capability may call, by capability kind (T3).
    capability_methods: dict[str, frozenset[str]] = field(default_factory=dict)
    # The server's requests running now (their tasks), for the drain (`GrpcServer.stop`).
    in_flight: set[asyncio.Task[Any]] = field(default_factory=set)


class _Scope:
    """One RPC's identity check, log context, metrics and error mapping.

    An async context manager around the servicer method; a plain class, because the
    generator-based kind costs a measurable share of an empty request.
    """

    __slots__ = ("_context", "_principal", "_request_id", "_rpc", "_started", "_task")

    def _observe(self, code: str) -> None:
        rpc = self._rpc
        seconds = time.perf_counter() - self._started
        observe_rpc(rpc.grpc_type, rpc.grpc_service, rpc.short, code, seconds)

    def __init__(self, rpc: _Method, context: grpc.aio.ServicerContext) -> None:
        self._rpc = rpc
        self._context = context
        self._principal: str | None = None

    async def __aenter__(self) -> None:
        self._task = task = asyncio.current_task()
        if task is not None:
            self._rpc.in_flight.add(task)
        try:
            await self._enter()
        except BaseException:
            self._rpc.in_flight.discard(task)  # type: ignore[arg-type]
            raise

    async def _enter(self) -> None:
        self._started = time.perf_counter()
        rpc = self._rpc
        rpc_started(rpc.grpc_type, rpc.grpc_service, rpc.short)
        verified = _verified.get()
        if verified is not None:  # by the interceptor, before the body was read (B8)
            identity, request_id = verified
        else:
            token, request_id = _credentials(self._context.invocation_metadata())
            try:
                identity = verify(token, rpc.trusted)
            except errors.AgentWorksError as exc:
                log.info("rpc.unauthenticated", method=rpc.method, reason=exc.message)
                self._observe(exc.code.name)
                await self._context.abort(exc.code, *refusal(exc))
                raise  # abort() has raised already
        self._request_id = request_id = request_id or os.urandom(16).hex()
        if identity.capability is not None:
            await self._capability_check(identity)
        try:
            shares().enter_request(identity.principal)  # B7: one of its open requests
        except errors.AgentWorksError as exc:
            log.info("rpc.share_refused", method=rpc.method, principal=identity.principal)
            self._observe(exc.code.name)
            await self._context.abort(exc.code, *refusal(exc))
            raise  # abort() has raised already
        self._principal = identity.principal
        current_identity.set(identity)
        structlog.contextvars.bind_contextvars(
            request_id=request_id, principal=identity.principal, method=rpc.short
        )

    async def _capability_check(self, identity: Any) -> None:
        """A capability reaches only its kind's methods on this service (T3)."""
        rpc = self._rpc
        why = method_refusal(identity, rpc.short, rpc.capability_methods)
        if why:
            log.info("rpc.capability_refused", method=rpc.method, reason=why)
            self._observe("PERMISSION_DENIED")
            await self._context.abort(grpc.StatusCode.PERMISSION_DENIED, why, _ANSWERED)

    async def __aexit__(self, kind: type[BaseException] | None, exc: Any, tb: Any) -> bool:
        rpc, context = self._rpc, self._context
        code = "OK"
        try:
            if exc is None:
                return False
            if isinstance(exc, asyncio.CancelledError):
                code = "CANCELLED"
            elif isinstance(exc, grpc.aio.AbortError):
                code = context.code().name if context.code() else "UNKNOWN"
            elif isinstance(exc, errors.AgentWorksError):
                code = exc.code.name
                await context.abort(exc.code, *refusal(exc))
            elif isinstance(exc, Exception):
                code = "INTERNAL"
                log.exception("rpc.internal_error", method=rpc.method, exc_info=exc)
                await context.abort(
                    grpc.StatusCode.INTERNAL,
                    f"internal error (request_id={self._request_id})",
                    _ANSWERED,
                )
            return False
        finally:
            if self._principal is not None:
                shares().leave_request(self._principal)
            self._observe(code)
            rpc.in_flight.discard(self._task)  # type: ignore[arg-type]


class ServiceInterceptor(grpc.aio.ServerInterceptor):
    """Identity check, request context, metrics and error mapping for every RPC.

    Each method's wrapped handler is built once and kept: the per-request work is the
    `_Scope` around the servicer call, nothing else.
    """

    def __init__(
        self,
        service: str,
        trusted_keys: TrustedKeys,
        capability_methods: Mapping[str, frozenset[str]] | None = None,
    ) -> None:
        self._service = service
        self._trusted = trusted_keys
        self._capability_methods = dict(capability_methods or {})
        self._handlers: dict[str, grpc.RpcMethodHandler] = {}
        self._methods: dict[str, _Method] = {}
        self.in_flight: set[asyncio.Task[Any]] = set()

    async def intercept_service(  # type: ignore[override]
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        method: str = handler_call_details.method
        handler = self._handlers.get(method)
        if handler is None:
            handler = await continuation(handler_call_details)
            if handler is None:  # unknown method: not kept (the names are the caller's)
                return None
            if not method.startswith(_OPEN_METHODS):
                handler = self._wrap(method, handler)
            self._handlers[method] = handler
        rpc = self._methods.get(method)
        if rpc is None:  # health checking and reflection: open to all
            return handler
        # The identity before the body (B8): a call without a valid one is refused
        # before gRPC reads (let alone parses) its request message.
        token, request_id = _credentials(handler_call_details.invocation_metadata)
        try:
            identity = verify(token, rpc.trusted)
        except errors.AgentWorksError as exc:
            log.info("rpc.unauthenticated", method=method, reason=exc.message)
            return _refusing(rpc, exc)
        _verified.set((identity, request_id))
        return handler

    def _wrap(self, method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        if handler.unary_unary:
            grpc_type = "unary"
        elif handler.unary_stream:
            grpc_type = "server_stream"
        elif handler.stream_unary:
            grpc_type = "client_stream"
        else:
            grpc_type = "bidi_stream"
        grpc_service, _, short = method.strip("/").rpartition("/")
        rpc = _Method(
            self._service,
            method,
            short,
            self._trusted,
            grpc_type,
            grpc_service,
            self._capability_methods,
            self.in_flight,
        )
        self._methods[method] = rpc
        parse = lenient(handler.request_deserializer)
        if handler.unary_unary:
            inner = handler.unary_unary

            async def unary_unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
                async with _Scope(rpc, context):
                    return await inner(checked(request), context)

            return grpc.unary_unary_rpc_method_handler(
                unary_unary,
                request_deserializer=parse,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream:
            inner_us = handler.unary_stream

            async def unary_stream(
                request: Any, context: grpc.aio.ServicerContext
            ) -> AsyncIterator[Any]:
                async with _Scope(rpc, context):
                    async for item in inner_us(checked(request), context):
                        yield item

            return grpc.unary_stream_rpc_method_handler(
                unary_stream,
                request_deserializer=parse,
                response_serializer=handler.response_serializer,
            )
        if handler.stream_unary:
            inner_su = handler.stream_unary

            async def stream_unary(
                request_iterator: AsyncIterator[Any], context: grpc.aio.ServicerContext
            ) -> Any:
                async with _Scope(rpc, context):
                    return await inner_su(checked_stream(request_iterator), context)

            return grpc.stream_unary_rpc_method_handler(
                stream_unary,
                request_deserializer=parse,
                response_serializer=handler.response_serializer,
            )
        return handler
