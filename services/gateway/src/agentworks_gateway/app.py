"""The gateway process: `start(config)` runs the HTTP surface (`server.build_app`) on
uvicorn in this event loop and returns a `RunningGateway`; `main()` is the process entry
(`python -m agentworks_gateway`, `agentworks-gateway`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import structlog
import uvicorn

from agentworks.server.db import Database
from agentworks.server.service import (
    StartFailed,
    check_keys,
    prepare_database,
    read_config,
    report_start_failure,
    start_metrics,
    wait_for_signal,
    warn_unknown_settings,
)
from agentworks_gateway import metrics
from agentworks_gateway.a2a.push import A2APush
from agentworks_gateway.a2a_out.replica import A2AOut
from agentworks_gateway.config import Config
from agentworks_gateway.connections import ConnectionGuard, guarded_protocol
from agentworks_gateway.server import build_app
from agentworks_gateway.service import Gateway
from agentworks_gateway.store import TokenStore
from agentworks_gateway.webhooks_out.worker import WebhooksOut

log = structlog.get_logger("agentworks.gateway")


class _Uvicorn(uvicorn.Server):
    """uvicorn that reports when it is listening and leaves signals to the caller."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.listening = asyncio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        self.listening.set()


async def _serve(server: _Uvicorn, listen: str) -> None:
    try:
        await server.serve()
    except SystemExit:
        # uvicorn exits the process when it cannot bind or start; here that is an error.
        raise OSError(f"gateway could not start on {listen} (see the log above)") from None


@dataclass
class RunningGateway:
    """A started gateway: its HTTP server, its database and its service channels."""

    gateway: Gateway
    database: Database
    server: _Uvicorn
    task: asyncio.Task[None]
    host: str
    port: int

    @property
    def address(self) -> str:
        """`host:port` the gateway listens on."""
        return f"{self.host}:{self.port}" if ":" not in self.host else f"[{self.host}]:{self.port}"

    @property
    def url(self) -> str:
        """The base URL, e.g. `http://127.0.0.1:8080`."""
        return f"http://{self.address}"

    @property
    def mcp_url(self) -> str:
        """The Streamable HTTP MCP endpoint."""
        return f"{self.url}/mcp"

    async def stop(self, grace: float = 5.0) -> None:
        """Stop taking requests; waiting long-polls return at once with what they have,
        other requests get `grace` s to finish, then answer 503 UNAVAILABLE."""
        if self.task.done() and self.server.should_exit:
            return
        self.gateway.begin_drain(max(grace, 0.05))
        # After `grace` seconds uvicorn cancels what still runs (uvicorn reads 0 as
        # "already late" and logs an error even when nothing runs, hence the floor).
        # uvicorn waits with asyncio.wait_for, so seconds may be a float (its hint says int).
        self.server.config.timeout_graceful_shutdown = max(grace, 0.05)  # type: ignore[assignment]
        self.server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError, SystemExit, Exception):
            await self.task
        a2a_push = getattr(self.gateway, "a2a_push", None)
        if a2a_push is not None:
            await a2a_push.stop()
        if self.gateway.webhooks_out is not None:
            await self.gateway.webhooks_out.stop()
        a2a_out = getattr(self.gateway, "a2a_out", None)
        if a2a_out is not None:
            await a2a_out.stop()
        await self.gateway.close()
        await self.database.close()
        log.info("server.stopped", service="gateway")


def _traced(app: Any) -> Any:
    """The app inside OpenTelemetry's ASGI middleware: a server span per HTTP request
    (`POST /api/v1/tools/{tool}`, `/mcp`, ...), parent of the gRPC calls it makes, and
    continuing the trace of a caller that sends `traceparent`."""
    from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware

    return OpenTelemetryMiddleware(app, excluded_urls="healthz")


async def start(config: Config, *, traced: bool = False) -> RunningGateway:
    """Start the gateway in this event loop; returns once it accepts connections.
    `traced`: a span per HTTP request (tracing is on, `configure_tracing`)."""
    check_keys(config.service)
    # Metrics first: a taken metrics port fails the start, naming GATEWAY_METRICS_LISTEN.
    metrics_port = start_metrics(config.service)
    if metrics_port:
        log.info("metrics.serving", port=metrics_port)
    await asyncio.to_thread(
        prepare_database, config.service, "gateway", "agentworks_gateway.migrations"
    )
    database = Database(config.database_url, pool_size=config.service.pool_size, schema="gateway")
    metrics.watch_pool(database)
    gateway = Gateway(config, TokenStore(database))
    webhooks_out = gateway.webhooks_out = WebhooksOut(gateway, database, config.webhooks_out)
    a2a_out = gateway.a2a_out = A2AOut(gateway, database, config.a2a_out)  # type: ignore[attr-defined]
    # A2A push configs (X2) ride webhooks out; off: the cards say so and the methods refuse.
    a2a_push = A2APush(gateway, database, webhooks_out) if config.webhooks_out.a2a_push else None
    gateway.a2a_push = a2a_push  # type: ignore[attr-defined]
    host, port = config.host_port
    app = build_app(gateway)
    server = _Uvicorn(
        uvicorn.Config(
            _traced(app) if traced else app,
            host=host,
            port=port,
            lifespan="on",
            log_config=None,
            access_log=False,
            timeout_graceful_shutdown=config.service.drain_seconds,  # type: ignore[arg-type]
            # B6: not uvicorn's limit_concurrency, which counts idle connections against
            # the requests served; `connections` bounds connections, `admission` requests.
            http=guarded_protocol(
                ConnectionGuard(
                    header_timeout=config.header_timeout_seconds,
                    per_address=config.max_connections_per_address,
                    max_connections=config.max_connections,
                )
            ),
            timeout_keep_alive=config.idle_timeout_seconds,  # type: ignore[arg-type]
            h11_max_incomplete_event_size=config.max_header_bytes,
        )
    )
    task = asyncio.create_task(_serve(server, config.listen), name="gateway-http")
    listening = asyncio.create_task(server.listening.wait())
    await asyncio.wait({task, listening}, return_when=asyncio.FIRST_COMPLETED)
    if not server.listening.is_set():
        listening.cancel()
        await webhooks_out.sender.close()
        await gateway.close()
        await database.close()
        exc = task.exception() if not task.cancelled() else None
        reason = f": {exc}" if exc is not None else ""
        raise StartFailed(f"cannot listen on {config.listen} (GATEWAY_LISTEN){reason}")
    port = server.servers[0].sockets[0].getsockname()[1]
    webhooks_out.start()
    a2a_out.start()
    if a2a_push is not None:
        a2a_push.start()
    log.info(
        "server.started",
        service="gateway",
        host=host,
        port=port,
        # How the gateway calls the services (T5).
        grpc_transport=config.service.tls.describe(server=False),
    )
    return RunningGateway(gateway, database, server, task, host, port)


def main() -> int:
    """Run the gateway until SIGTERM/SIGINT, then drain and stop; the exit status."""
    from agentworks.core.logging import configure_logging
    from agentworks.core.tracing import TracingUnavailable
    from agentworks.server.service import CONFIG_ERROR
    from agentworks.server.tracing import configure_tracing, trace_database

    config = read_config("gateway", Config.from_env)
    configure_logging("gateway", level=config.service.log_level, json=config.service.log_json)
    warn_unknown_settings(config.service)
    try:
        tracing = configure_tracing("gateway", grpc_server=False)
    except TracingUnavailable as exc:
        report_start_failure("gateway", StartFailed(str(exc), status=CONFIG_ERROR))

    async def run() -> None:
        running = await start(config, traced=tracing)
        if tracing:
            trace_database(running.database)
        print(f"gateway listening on {running.address} (MCP: {running.mcp_url})", flush=True)
        await wait_for_signal()
        log.info("service.draining", service="gateway", grace=config.service.drain_seconds)
        await running.stop(config.service.drain_seconds)

    try:
        asyncio.run(run())
    except StartFailed as failure:
        report_start_failure("gateway", failure)
    return 0
