"""Starting and stopping the functions service: database, servicer, sweeper, outbox (P4)."""

from __future__ import annotations

import asyncio

from agentworks.client import MessagingClient
from agentworks.core.limits import MAX_REQUEST_BYTES
from agentworks.functions.v1 import functions_pb2 as pb
from agentworks.functions.v1 import functions_pb2_grpc
from agentworks.server.capabilities import CapabilityIssuer
from agentworks.server.db import Database
from agentworks.server.rpc import GrpcServer
from agentworks.server.service import (
    Running,
    main_for,
    prepare_database,
    read_config,
    service_minter,
)
from agentworks_functions.config import Config
from agentworks_functions.metrics import start_refresh
from agentworks_functions.notices import deliver_notices, notice_sender
from agentworks_functions.schemas import CheckPool
from agentworks_functions.server import FunctionsServicer
from agentworks_functions.service import FunctionsService
from agentworks_functions.store import (
    CALL_CHANNEL,
    EXECUTION_CHANNEL,
    NOTICE_CHANNEL,
    FunctionsStore,
)
from agentworks_functions.sweeper import sweep

# What a capability may call here (T3, L1, L8): an execution's its own call's operations,
# and the function tools as its runtime: list, call (a workflow's as a step of its run),
# read and answer the calls it made; a turn's the function tools as its agent: list,
# call notified into its conversation, and read, answer and read the files of the calls
# made from that conversation. Each checks the item (service/base.py).
_FUNCTION_TOOLS = frozenset({"ListFunctions", "Call", "GetStatus", "Reply"})
CAPABILITY_METHODS = {
    "execution": _FUNCTION_TOOLS
    | {"HeartbeatExecution", "Report", "UploadFile", "AskInput", "FinishExecution"},
    "turn": _FUNCTION_TOOLS | {"ReadFile"},
}


async def start(config: Config) -> Running:
    """Migrate, connect, and serve functions on `config.service.listen`."""
    identity = service_minter(config.service, config.principal, "FUNCTIONS_PRINCIPAL")
    await asyncio.to_thread(
        prepare_database, config.service, "functions", "agentworks_functions.migrations"
    )
    db = Database(config.service.database_url, pool_size=config.service.pool_size)
    # Costly schema checks run in worker processes, started when first needed (B2).
    checks = CheckPool(config.check_workers, config.check_deadline_seconds, config.check_share)
    await db.start([EXECUTION_CHANNEL, CALL_CHANNEL, NOTICE_CHANNEL])
    store = FunctionsStore(
        db,
        default_running_limit=config.default_running_limit,
        caller_share_percent=config.caller_share_percent,
    )
    service = FunctionsService(
        store,
        db.listener,
        poll_fallback_seconds=config.poll_fallback_seconds,
        min_lease_seconds=config.min_lease_seconds,
        max_lease_seconds=config.max_lease_seconds,
        notice_retry_seconds=config.notice_retry_seconds,
        claim_timeout_seconds=config.claim_timeout_seconds,
        question_timeout_seconds=config.question_timeout_seconds,
        target_file_quota_bytes=config.target_file_quota_bytes,
        checks=checks,
    )
    messaging = MessagingClient(
        config.messaging_address, identity=identity, timeout=10, tls=config.service.tls
    )

    async def drain() -> None:
        service.draining.set()
        db.listener.wake_all()

    server = GrpcServer(
        name="functions",
        listen=config.service.listen,
        trusted_keys=config.service.trusted_keys,
        tls=config.service.tls,
        health_listen=config.service.health_listen,
        register=lambda s: functions_pb2_grpc.add_FunctionsServiceServicer_to_server(
            FunctionsServicer(service, CapabilityIssuer(config.service.signing_key, "execution")),
            s,
        ),
        service_names=[pb.DESCRIPTOR.services_by_name["FunctionsService"].full_name],
        on_drain=drain,
        capability_methods=CAPABILITY_METHODS,
        max_receive_bytes=MAX_REQUEST_BYTES,
    )
    await server.start()
    background = [
        asyncio.create_task(sweep(service, store, config), name="functions-sweep"),
        asyncio.create_task(
            deliver_notices(service, notice_sender(messaging), config), name="functions-notices"
        ),
        *start_refresh(db, config),
    ]
    return Running(
        "functions", server, db, background=background, on_stop=[messaging.close, checks.stop]
    )


def main() -> None:
    config = read_config("functions", Config.from_env)
    main_for(config.service, lambda: start(config))
