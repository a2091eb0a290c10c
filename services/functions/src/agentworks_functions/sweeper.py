"""The functions sweeper: lost leases and unclaimed executions, on every replica (F12)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import structlog

from agentworks_functions.config import Config
from agentworks_functions.service import FunctionsService
from agentworks_functions.store import (
    FunctionsStore,
)

log = structlog.get_logger("agentworks.functions")


async def sweep(service: FunctionsService, store: FunctionsStore, config: Config) -> None:
    """Interrupt executions whose lease expired (F12) and purge unfinished uploads."""
    purge_every = 600.0
    last_purge = 0.0
    loop = asyncio.get_running_loop()
    while True:
        try:
            await service.interrupt_expired()
            if loop.time() - last_purge > purge_every:
                await store.purge_unlinked_blobs(timedelta(seconds=config.stale_upload_seconds))
                last_purge = loop.time()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the database may be away; try again next time
            log.warning("sweep.failed", error=str(exc))
        await asyncio.sleep(config.sweep_seconds)
