"""Messaging's own Prometheus metrics (P4): the turn queue, per target.

The core metrics (RPCs, pool, long-polls) are in `agentworks.server.metrics`. These gauges
describe the whole database, not this process: every replica reports the same values
(aggregate with max(), not sum()). `refresh` recomputes them with one query
(`MessagingStore.turn_queue`), every `MESSAGING_METRICS_REFRESH_SECONDS`, only while
metrics are served.
"""

from __future__ import annotations

import asyncio

from prometheus_client import Gauge

from agentworks.server.metrics import publish, refresher
from agentworks_messaging.config import Config
from agentworks_messaging.store import MessagingStore

TURNS_QUEUED = Gauge(
    "agentworks_messaging_turns_queued",
    "Conversations with pending deliveries and no turn running: turns waiting to be claimed.",
    ["target"],
)
TURN_QUEUE_AGE = Gauge(
    "agentworks_messaging_turn_queue_age_seconds",
    "How long the oldest pending delivery of a queued turn has waited (0: none queued).",
    ["target"],
)
TURNS_ACTIVE = Gauge(
    "agentworks_messaging_turns_active",
    "Turns claimed by a runtime and not completed or interrupted yet.",
    ["target"],
)


async def refresh(store: MessagingStore) -> None:
    """Recompute the turn-queue gauges (one statement)."""
    queues = await store.turn_queue()
    publish(TURNS_QUEUED, {(str(q.target),): q.queued for q in queues})
    publish(TURN_QUEUE_AGE, {(str(q.target),): q.age_seconds for q in queues})
    publish(TURNS_ACTIVE, {(str(q.target),): q.active for q in queues})


def start_refresh(store: MessagingStore, config: Config) -> list[asyncio.Task[None]]:
    """The task that keeps the gauges fresh while metrics are served (else none)."""
    return refresher(config.service, lambda: refresh(store))
