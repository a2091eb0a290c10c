"""Functions' own Prometheus metrics (P4): running calls and busy refusals, per target.

The core metrics (RPCs, pool, long-polls) are in `agentworks.server.metrics`. The gauges
describe the whole database, not this process: every replica reports the same values
(aggregate with max(), not sum()). `refresh` recomputes them with one query, every
`FUNCTIONS_METRICS_REFRESH_SECONDS`, only while metrics are served. The busy counter is
per process (aggregate with sum()).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

from prometheus_client import Counter, Gauge

from agentworks.core.errors import Busy
from agentworks.server.db import Database
from agentworks.server.metrics import publish, refresher
from agentworks_functions.config import Config
from agentworks_functions.models import TargetKey
from agentworks_functions.store.base import Q

CALLS_RUNNING = Gauge(
    "agentworks_functions_calls_running",
    "Open calls (running or waiting for input): what counts against the running limit (F5).",
    ["target"],
)
CALLS_UNCLAIMED = Gauge(
    "agentworks_functions_calls_unclaimed",
    "Running calls no runtime has claimed yet.",
    ["target"],
)
RUNNING_LIMIT = Gauge(
    "agentworks_functions_running_limit",
    "The target's effective running limit (its own, else FUNCTIONS_DEFAULT_RUNNING_LIMIT).",
    ["target"],
)
BUSY_REFUSALS = Counter(
    "agentworks_functions_busy_refusals_total",
    "Calls refused with RESOURCE_EXHAUSTED because the target was at its running limit.",
    ["target"],
)


@contextlib.contextmanager
def counting_busy(target: TargetKey) -> Iterator[None]:
    """Count a busy refusal (F5) raised inside the block, then let it through."""
    try:
        yield
    except Busy:
        BUSY_REFUSALS.labels(str(target)).inc()
        raise


async def refresh(db: Database, default_running_limit: int) -> None:
    """Recompute the per-target gauges: one statement, `running_calls` of queries.sql
    (open calls only, through the partial index calls_open)."""
    async with db.raw() as pg:
        rows = await Q.all(pg, "running_calls")
    publish(CALLS_RUNNING, {(f"{r.kind}:{r.name}",): r.running for r in rows})
    publish(CALLS_UNCLAIMED, {(f"{r.kind}:{r.name}",): r.unclaimed for r in rows})
    publish(
        RUNNING_LIMIT,
        {(f"{r.kind}:{r.name}",): r.running_limit or default_running_limit for r in rows},
    )


def start_refresh(db: Database, config: Config) -> list[asyncio.Task[None]]:
    """The task that keeps the gauges fresh while metrics are served (else none)."""
    return refresher(config.service, lambda: refresh(db, config.default_running_limit))
