"""The messaging sweeper: expired turn leases and old retry keys, on every replica."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import structlog

from agentworks_messaging.config import Config
from agentworks_messaging.service import MessagingService
from agentworks_messaging.store import MessagingStore

log = structlog.get_logger("agentworks.messaging")


async def sweep(service: MessagingService, store: MessagingStore, config: Config) -> None:
    """Interrupt turns whose lease expired (C11) and forget old retry keys (C4)."""
    window = timedelta(hours=config.dedup_window_hours)
    purge_every = 600.0
    last_purge = 0.0
    loop = asyncio.get_running_loop()
    while True:
        try:
            await service.interrupt_expired_turns()
            if loop.time() - last_purge > purge_every:
                await store.purge_submissions(window)
                last_purge = loop.time()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the database may be away; try again next time
            log.warning("sweep.failed", error=str(exc))
        await asyncio.sleep(config.sweep_seconds)
