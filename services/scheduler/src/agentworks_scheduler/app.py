"""Starting the scheduler: migrate, connect, serve, and run the tick (firing.py) and the
metrics refresh; `main()` is the `agentworks-scheduler` command."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from agentworks.scheduler.v1 import scheduler_pb2 as pb
from agentworks.scheduler.v1 import scheduler_pb2_grpc
from agentworks.server.db import Database
from agentworks.server.rpc import GrpcServer
from agentworks.server.service import (
    CONFIG_ERROR,
    Running,
    StartFailed,
    main_for,
    prepare_database,
    read_config,
    service_minter,
)
from agentworks_scheduler.config import Config
from agentworks_scheduler.deliveries import SERVICE_PRINCIPAL, MessagingConversations
from agentworks_scheduler.firing import tick_loop
from agentworks_scheduler.metrics import start_refresh
from agentworks_scheduler.server import SchedulerServicer
from agentworks_scheduler.service import SchedulerService
from agentworks_scheduler.store import SchedulerStore


@dataclass
class SchedulerRunning(Running):
    """A started scheduler; `service` lets tests wait for ticks and inject faults."""

    service: SchedulerService | None = None


async def start(config: Config) -> SchedulerRunning:
    """Migrate, connect, and serve the scheduler on `config.service.listen`."""
    if not config.webhook_key:
        raise StartFailed(
            "no webhook key: set SCHEDULER_WEBHOOK_KEY to a long random string; webhook "
            "secrets are derived from it (docs/scheduler.md)",
            status=CONFIG_ERROR,
        )
    identity = service_minter(config.service, SERVICE_PRINCIPAL)
    await asyncio.to_thread(
        prepare_database, config.service, "scheduler", "agentworks_scheduler.migrations"
    )
    db = Database(config.service.database_url, pool_size=config.service.pool_size)
    await db.start()
    conversations = MessagingConversations(
        config.messaging_address,
        identity,
        timeout=config.delivery_timeout_seconds,
        tls=config.service.tls,
    )
    store = SchedulerStore(db)
    service = SchedulerService(store, conversations, config)

    async def drain() -> None:
        service.draining.set()

    server = GrpcServer(
        name="scheduler",
        listen=config.service.listen,
        trusted_keys=config.service.trusted_keys,
        tls=config.service.tls,
        health_listen=config.service.health_listen,
        register=lambda s: scheduler_pb2_grpc.add_SchedulerServiceServicer_to_server(
            SchedulerServicer(service), s
        ),
        service_names=[pb.DESCRIPTOR.services_by_name["SchedulerService"].full_name],
        on_drain=drain,
    )
    await server.start()
    ticker = asyncio.create_task(tick_loop(service, config.tick_seconds), name="scheduler-tick")
    return SchedulerRunning(
        "scheduler",
        server,
        db,
        background=[ticker, *start_refresh(store, config)],
        on_stop=[conversations.close],
        service=service,
    )


def main() -> None:
    config = read_config("scheduler", Config.from_env)
    main_for(config.service, lambda: start(config))
