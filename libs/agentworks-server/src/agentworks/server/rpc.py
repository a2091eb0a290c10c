"""The gRPC server bootstrap every service uses (clients: `agentworks.client.rpc`).

One interceptor verifies the signed identity (A2) from the call's metadata before the
request's body is read or parsed (B8: a call without a valid identity is refused without
reading its message), holds one of the principal's open requests for the call's length
(B7, `agentworks.server.shares`), binds request context for logs, and maps
`AgentWorksError` to status codes — the only place that mapping happens.
Health checking and reflection are served; SIGTERM drains in-flight calls (P4). With a
certificate the port serves TLS, with a client CA mutual TLS (T5); a plain-text port of
its own can serve health checking only, for probes that cannot speak TLS (the kubelet's).
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
import structlog
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from agentworks.core import errors
from agentworks.core.identity import METADATA_KEY, current_identity, verify
from agentworks.core.keys import TrustedKeys
from agentworks.core.limits import MAX_MESSAGE_BYTES
from agentworks.core.tls import Tls
from agentworks.core.wire import ANSWERED_KEY, REQUEST_ID_KEY
from agentworks.server import reflection
from agentworks.server.capabilities import method_refusal
from agentworks.server.liveness import LoopWatch, watch_loop
from agentworks.server.metrics import observe_rpc, rpc_started
from agentworks.server.shares import shares

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
# How long a request cut by the drain may take to end: psycopg waits up to 5 s for
# PostgreSQL to cancel a statement.
CUT_REQUEST_UNWIND_SECONDS = 6.0


def _trailers(exc: errors.AgentWorksError, message: str) -> tuple[tuple[str, Any], ...]:
    """What a refusal carries besides its code and message: that our service answered, and
    its reason and metadata (google.rpc.ErrorInfo) and retry delay when it has them."""
    if not exc.reason and not exc.metadata and exc.retry_after is None:
        return _ANSWERED
    return (*_ANSWERED, (errors.STATUS_DETAILS_KEY, errors.status_details(exc, message)))


def bounded_message(message: str) -> str:
    """The message, cut so that it reaches the client (see MAX_ERROR_MESSAGE_BYTES)."""
    if len(message) * 9 <= MAX_ERROR_MESSAGE_BYTES:  # even all-non-ASCII fits
        return message
    used = 0
    for index, char in enumerate(message):
        # Printable ASCII but '%' is sent as is; every other UTF-8 byte as %XX.
        used += 1 if " " <= char <= "~" and char != "%" else 3 * len(char.encode())
        if used > MAX_ERROR_MESSAGE_BYTES - 40:
            return message[:index] + " ... (message truncated)"
    return message


class _Unparsable:
    """A request message protobuf could not parse (too deeply nested, malformed bytes)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _lenient(deserializer: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    """Parse failures become a value the handler refuses with INVALID_ARGUMENT; raised
    inside gRPC they would end the call UNKNOWN, naming an internal exception."""
    if deserializer is None:
        return None

    def parse(data: bytes) -> Any:
        try:
            return deserializer(data)
        except Exception as exc:
            return _Unparsable(str(exc))

    return parse


def _parsed(request: Any) -> Any:
    if isinstance(request, _Unparsable):
        raise errors.InvalidArgument(
            f"the request could not be parsed as the method's message: {request.reason}"
        )
    return request


async def _parsed_stream(requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
    async for request in requests:
        yield _parsed(request)


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
        await context.abort(exc.code, bounded_message(exc.message), _ANSWERED)

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
                await self._context.abort(exc.code, bounded_message(exc.message), _ANSWERED)
                raise  # abort() has raised already
        self._request_id = request_id = request_id or os.urandom(16).hex()
        if identity.capability is not None:
            await self._capability_check(identity)
        try:
            shares().enter_request(identity.principal)  # B7: one of its open requests
        except errors.AgentWorksError as exc:
            log.info("rpc.share_refused", method=rpc.method, principal=identity.principal)
            self._observe(exc.code.name)
            message = bounded_message(exc.message)
            await self._context.abort(exc.code, message, _trailers(exc, message))
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
                message = bounded_message(exc.message)
                await context.abort(exc.code, message, _trailers(exc, message))
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


class _ServiceInterceptor(grpc.aio.ServerInterceptor):
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

    async def intercept_service(self, continuation, handler_call_details):  # type: ignore[override]
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
        parse = _lenient(handler.request_deserializer)
        if handler.unary_unary:
            inner = handler.unary_unary

            async def unary_unary(request, context):
                async with _Scope(rpc, context):
                    return await inner(_parsed(request), context)

            return grpc.unary_unary_rpc_method_handler(
                unary_unary,
                request_deserializer=parse,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream:
            inner_us = handler.unary_stream

            async def unary_stream(request, context):
                async with _Scope(rpc, context):
                    async for item in inner_us(_parsed(request), context):
                        yield item

            return grpc.unary_stream_rpc_method_handler(
                unary_stream,
                request_deserializer=parse,
                response_serializer=handler.response_serializer,
            )
        if handler.stream_unary:
            inner_su = handler.stream_unary

            async def stream_unary(request_iterator, context):
                async with _Scope(rpc, context):
                    return await inner_su(_parsed_stream(request_iterator), context)

            return grpc.stream_unary_rpc_method_handler(
                stream_unary,
                request_deserializer=parse,
                response_serializer=handler.response_serializer,
            )
        return handler


Registrar = Callable[[grpc.aio.Server], None]


class _LoopAwareHealth(health.aio.HealthServicer):
    """Health checking that answers NOT_SERVING while the serving loop lags past its
    limit (B3); a loop stuck outright answers nothing, which probes count as failing."""

    loop_watch: LoopWatch | None = None

    async def Check(self, request: Any, context: Any) -> Any:
        watch = self.loop_watch
        if watch is not None and not watch.healthy():
            return health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.NOT_SERVING)
        return await super().Check(request, context)


class GrpcServer:
    """A `grpc.aio` server with identity, health, reflection and a graceful drain."""

    def __init__(
        self,
        *,
        name: str,
        listen: str,
        trusted_keys: TrustedKeys | None,
        register: Registrar,
        service_names: Sequence[str],
        on_drain: Callable[[], Awaitable[None]] | None = None,
        tls: Tls | None = None,
        health_listen: str = "",
        capability_methods: Mapping[str, frozenset[str]] | None = None,
        max_receive_bytes: int = MAX_MESSAGE_BYTES,
    ) -> None:
        """`capability_methods`: by capability kind (turn, execution), the methods an
        identity bound to one item may call here (T3); none when not given.
        `max_receive_bytes`: the largest request message the service takes (B8: fit it
        to the service's largest legal request; gRPC refuses a larger one
        RESOURCE_EXHAUSTED before reading it)."""
        if trusted_keys is None:
            raise ValueError("trusted keys are required: set AGENTWORKS_TRUSTED_KEYS")
        self.name = name
        self._listen = listen
        self._tls = tls if tls is not None and tls.serves_tls else None
        self._health_listen = health_listen
        self._on_drain = on_drain
        self._service_names = list(service_names)
        self._interceptor = _ServiceInterceptor(name, trusted_keys, capability_methods)
        self.server = grpc.aio.server(
            interceptors=[self._interceptor],
            options=[
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_receive_message_length", max_receive_bytes),
                ("grpc.so_reuseport", 0),
                # Clients reconnect (and re-resolve DNS) at least every 5 minutes, so new
                # replicas behind a headless Service get their share of the traffic.
                ("grpc.max_connection_age_ms", 300_000),
                ("grpc.max_connection_age_grace_ms", 60_000),
            ],
        )
        register(self.server)
        self.health = _LoopAwareHealth()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        reflection.enable([*self._service_names, health.SERVICE_NAME], self.server)
        self.port = 0
        # Health checking only, in plain text, on `health_listen` (off when empty).
        self.health_server: grpc.aio.Server | None = None
        self.health_port = 0

    @property
    def transport(self) -> str:
        """`plain text`, `TLS` or `mutual TLS`: what the service port speaks."""
        return (self._tls or Tls()).describe(server=True)

    async def start(self) -> int:
        if self._tls is None:
            self.port = self.server.add_insecure_port(self._listen)
        else:
            self.port = self.server.add_secure_port(self._listen, self._tls.server_credentials())
        if self.port == 0:
            raise OSError(f"cannot listen on {self._listen}")
        if self._health_listen:
            self.health_server = grpc.aio.server()
            health_pb2_grpc.add_HealthServicer_to_server(self.health, self.health_server)
            self.health_port = self.health_server.add_insecure_port(self._health_listen)
            if self.health_port == 0:
                raise OSError(f"cannot listen on {self._health_listen}")
        # B3: health follows the serving loop's lag (`agentworks.server.liveness`).
        self.health.loop_watch = watch_loop(self.name)
        await self.server.start()
        if self.health_server is not None:
            await self.health_server.start()
        for svc in ["", *self._service_names]:
            await self.health.set(svc, health_pb2.HealthCheckResponse.SERVING)
        log.info(
            "server.started",
            service=self.name,
            port=self.port,
            transport=self.transport,
            health_port=self.health_port or None,
        )
        return self.port

    async def stop(self, grace: float = 10.0) -> None:
        """Stop taking calls, let in-flight calls (and long-polls) finish, then stop."""
        await self.health.enter_graceful_shutdown()
        if self._on_drain is not None:
            await self._on_drain()
        await self.server.stop(grace)
        await self._unwind_cut_requests(grace)
        if self.health_server is not None:
            await self.health_server.stop(0)
        log.info("server.stopped", service=self.name)

    async def _unwind_cut_requests(self, grace: float) -> None:
        """Wait for the requests still running after `grace` to end.

        grpc.aio's stop cancels them but returns without waiting; the service would then
        close its database under their statements, and the loop's own cancellation at
        exit would interrupt psycopg while it cancels the statement in PostgreSQL
        (errors and tracebacks logged, a connection left mid-statement). Cancelled once,
        each ends within psycopg's cancel wait; what is still running after that is
        cancelled again.
        """
        cut = [task for task in self._interceptor.in_flight if not task.done()]
        if not cut:
            return
        log.warning("server.requests_cut", service=self.name, count=len(cut), grace=grace)
        _, stuck = await asyncio.wait(cut, timeout=CUT_REQUEST_UNWIND_SECONDS)
        for task in stuck:
            task.cancel()
        if stuck:
            await asyncio.wait(stuck, timeout=1.0)
