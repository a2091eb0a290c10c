"""Starting and stopping one service process: the same steps for every service."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import structlog

from agentworks.core.config import ServiceConfig
from agentworks.core.db import Database, migrate
from agentworks.core.logging import configure_logging
from agentworks.core.metrics import serve_metrics, watch_database
from agentworks.core.rpc import GrpcServer
from agentworks.core.tracing import configure_tracing, trace_database

log = structlog.get_logger("agentworks.service")


@dataclass
class Running:
    """A started service: its gRPC server, its database and its background tasks."""

    name: str
    server: GrpcServer
    database: Database
    background: list[asyncio.Task[None]] = field(default_factory=list)
    on_stop: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    stopped: bool = False

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server.port}"

    async def stop(self, grace: float = 5.0) -> None:
        """Drain and stop; calling it again does nothing."""
        if self.stopped:
            return
        self.stopped = True
        await self.server.stop(grace)
        for task in self.background:
            task.cancel()
        for task in self.background:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for hook in self.on_stop:
            await hook()
        await self.database.close()


async def wait_for_signal() -> None:
    """Return when the process receives SIGTERM or SIGINT."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


def prepare_database(config: ServiceConfig, schema: str, migrations: str) -> None:
    """Apply this service's migrations (serialized across replicas by an advisory lock)."""
    if not config.database_url:
        raise SystemExit(
            f"{config.name}: no database configured; set {config.name.upper()}_DATABASE_URL "
            "or DATABASE_URL (`agentworks up` starts an embedded one)"
        )
    migrate(config.database_url, schema, migrations)


def warn_unknown_settings(config: ServiceConfig) -> None:
    """Log each of the service's variables that no setting read (a typo, or a removed
    setting), so that an operator learns it had no effect."""
    for problem in config.env.unknown() if config.env else ():
        log.warning("config.unknown_setting", service=config.name, problem=problem)


def main_for(config: ServiceConfig, start: Callable[[], Awaitable[Running]]) -> None:
    """Run a service until SIGTERM/SIGINT, then drain and stop."""
    configure_logging(config.name, level=config.log_level, json=config.log_json)
    warn_unknown_settings(config)

    tracing = configure_tracing(config.name)

    async def run() -> None:
        running = await start()
        if tracing:
            trace_database(running.database)
        watch_database(config.name, running.database)
        metrics_port = serve_metrics(config.metrics_listen)
        log.info("service.ready", address=running.address, metrics_port=metrics_port or None)
        print(f"{config.name} listening on {running.address}", flush=True)
        await wait_for_signal()
        log.info("service.draining", service=config.name, grace=config.drain_seconds)
        await running.stop(config.drain_seconds)

    asyncio.run(run())
