"""The gRPC server bootstrap every service uses (clients: `agentworks.client.rpc`).

Every call passes one interceptor (`agentworks.server.interceptor`): the signed identity
(A2) from the metadata before the body is read (B8), then the body parsed and checked
against its proto's field rules (`agentworks.server.validation`) before the handler, the
principal's share of open requests (B7), log context, and the one mapping of
`AgentWorksError` to status codes. Health checking and reflection are served; SIGTERM
drains in-flight calls (P4). With a certificate the port serves TLS, with a client CA
mutual TLS (T5); a plain-text port of its own can serve health checking only, for probes
that cannot speak TLS (the kubelet's).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import grpc
import structlog
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from agentworks.core.keys import TrustedKeys
from agentworks.core.limits import MAX_MESSAGE_BYTES
from agentworks.core.tls import Tls
from agentworks.server import reflection
from agentworks.server.interceptor import (
    MAX_ERROR_MESSAGE_BYTES,
    ServiceInterceptor,
    bounded_message,
)
from agentworks.server.liveness import LoopWatch, watch_loop

__all__ = ["MAX_ERROR_MESSAGE_BYTES", "GrpcServer", "Registrar", "bounded_message"]

log = structlog.get_logger("agentworks.rpc")

# How long a request cut by the drain may take to end: psycopg waits up to 5 s for
# PostgreSQL to cancel a statement.
CUT_REQUEST_UNWIND_SECONDS = 6.0


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
        self._interceptor = ServiceInterceptor(name, trusted_keys, capability_methods)
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
