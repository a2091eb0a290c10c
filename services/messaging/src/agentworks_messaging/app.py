"""Starting and stopping the messaging service: database, servicer, sweeper (P4)."""

from __future__ import annotations

import asyncio

from agentworks.messaging.v1 import messaging_pb2 as pb
from agentworks.server.capabilities import CapabilityIssuer
from agentworks.server.db import Database
from agentworks.server.rpc import GrpcServer
from agentworks.server.service import Running, main_for, prepare_database, read_config
from agentworks_messaging.config import Config
from agentworks_messaging.metrics import start_refresh
from agentworks_messaging.server import MessagingServicer
from agentworks_messaging.service import MessagingService
from agentworks_messaging.sizes import RECEIVE_BYTES, add_to_server
from agentworks_messaging.store import INBOX_CHANNEL, TURN_CHANNEL, MessagingStore
from agentworks_messaging.sweeper import sweep

# What a turn's capability may call here (T3); each checks the turn and its lease.
CAPABILITY_METHODS = {
    "turn": frozenset(
        {"SendMessage", "SendFromTurn", "HeartbeatTurn", "CompleteTurn", "GetTranscript"}
    )
}


async def start(config: Config) -> Running:
    """Migrate, connect, and serve messaging on `config.service.listen`."""
    await asyncio.to_thread(
        prepare_database, config.service, "messaging", "agentworks_messaging.migrations"
    )
    db = Database(config.service.database_url, pool_size=config.service.pool_size)
    await db.start([INBOX_CHANNEL, TURN_CHANNEL])
    store = MessagingStore(db)
    service = MessagingService(
        store, db.listener, poll_fallback_seconds=config.poll_fallback_seconds
    )

    async def drain() -> None:
        service.draining.set()
        db.listener.wake_all()

    server = GrpcServer(
        name="messaging",
        listen=config.service.listen,
        trusted_keys=config.service.trusted_keys,
        tls=config.service.tls,
        health_listen=config.service.health_listen,
        register=lambda s: add_to_server(
            MessagingServicer(service, CapabilityIssuer(config.service.signing_key, "turn")), s
        ),
        service_names=[pb.DESCRIPTOR.services_by_name["MessagingService"].full_name],
        on_drain=drain,
        capability_methods=CAPABILITY_METHODS,
        max_receive_bytes=RECEIVE_BYTES,
    )
    await server.start()
    sweeper = asyncio.create_task(sweep(service, store, config), name="messaging-sweep")
    return Running("messaging", server, db, background=[sweeper, *start_refresh(store, config)])


def main() -> None:
    config = read_config("messaging", Config.from_env)
    main_for(config.service, lambda: start(config))
