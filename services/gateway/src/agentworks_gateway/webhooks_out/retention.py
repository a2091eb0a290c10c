"""What webhooks out keeps, and for how long (N2, X2).

A finished delivery (delivered or given up) stays listed and redeliverable for
`GATEWAY_WEBHOOKS_KEEP_SECONDS` (7 days) after it finished; an A2A push config as long
after its call ended, once nothing of it is still being sent. Then they are deleted, a
bounded batch per statement, by whichever replica gets there first (SKIP LOCKED:
replicas never wait on each other's deletes). Without this the gateway's tables would
grow with every event for good. Pending and failing deliveries are never deleted here:
they end by `GATEWAY_WEBHOOKS_RETRY_SECONDS`, then wait their own retention.
"""

from __future__ import annotations

import asyncio

import structlog

from agentworks.core import errors
from agentworks_gateway.webhooks_out.settings import WebhooksOutConfig
from agentworks_gateway.webhooks_out.store import WebhookStore

log = structlog.get_logger("agentworks.gateway.webhooks_out")

# Rows one statement deletes at most (a long backlog goes in several).
PURGE_BATCH = 1000
# A replica looks for what to delete at most this far apart (sooner for a short keep).
PURGE_EVERY_SECONDS = 3600.0


def purge_every(config: WebhooksOutConfig) -> float:
    """Seconds between a replica's looks: half the retention, at most an hour."""
    return min(PURGE_EVERY_SECONDS, max(config.keep_seconds / 2, 0.1))


async def keep_within(store: WebhookStore, config: WebhooksOutConfig) -> None:
    """Delete what is past the retention, every `purge_every`, until cancelled."""
    while True:
        await asyncio.sleep(purge_every(config))
        try:
            while True:
                deliveries, pushes = await store.purge(config.keep_seconds, PURGE_BATCH)
                if deliveries or pushes:
                    log.info("webhooks.purged", deliveries=deliveries, a2a_push_configs=pushes)
                if deliveries < PURGE_BATCH and pushes < PURGE_BATCH:
                    break
        except errors.Unavailable as exc:
            log.warning("webhooks.purge_failed", error=exc.message)
        except Exception:  # never stop for one bad round
            log.exception("webhooks.purge_failed")
