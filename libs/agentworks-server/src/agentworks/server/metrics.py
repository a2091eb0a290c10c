"""Prometheus metrics shared by every service (P4): RPCs, database pool, long-polls.

Each process serves them on `<SERVICE>_METRICS_LISTEN` (host:port; empty = off).
Service-specific metrics live in each service's `metrics.py`: counters and histograms
are updated where their event happens; gauges of database-wide state are recomputed by
one background task per process (`refresher`), every `<SERVICE>_METRICS_REFRESH_SECONDS`.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import platform
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import TYPE_CHECKING

import sqlalchemy as sa
import structlog
from prometheus_client import REGISTRY, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily

if TYPE_CHECKING:
    from agentworks.server.config import ServiceConfig
    from agentworks.server.db import Database

log = structlog.get_logger("agentworks.metrics")

RPC_REQUESTS = Counter(
    "agentworks_rpc_requests_total",
    "gRPC requests handled, by method and status code.",
    ["service", "method", "code"],
)
RPC_DURATION = Histogram(
    "agentworks_rpc_duration_seconds",
    "gRPC request handling time (long-polls included), by method.",
    ["service", "method"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
POOL_CHECKED_OUT = Gauge(
    "agentworks_db_pool_checked_out", "Database connections in use.", ["service"]
)
LONG_POLL_WAITERS = Gauge(
    "agentworks_long_poll_waiters", "Requests waiting for a NOTIFY (reads, claims).", ["service"]
)
BUILD_INFO = Gauge(
    "agentworks_build_info",
    "Always 1: the process's service, AgentWorks version and Python version.",
    ["service", "version", "python"],
)


class _CountersFromSources:
    """Counters whose values live elsewhere (read when scraped): a Prometheus counter
    named `<name>_total` per labelled source."""

    def __init__(self, name: str, documentation: str) -> None:
        self.name, self.documentation = name, documentation
        self.sources: dict[str, Callable[[], float]] = {}

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(self.name, self.documentation, labels=["service"])
        for service, read in self.sources.items():
            family.add_metric([service], read())
        yield family


NOTIFY_WAKEUPS = _CountersFromSources(
    "agentworks_notify_wakeups", "Waiters woken by NOTIFY since the process started."
)
REGISTRY.register(NOTIFY_WAKEUPS)  # type: ignore[arg-type]
GAUGES_REFRESHED = Gauge(
    "agentworks_metrics_refreshed_timestamp_seconds",
    "Unix time of the last successful refresh of this service's database-wide gauges.",
    ["service"],
)


# The labelled children each (service, method, code) counts into: `labels()` takes a lock
# and builds its key on every call, a visible share of an empty request. Bounded by the
# methods served times the status codes.
_rpc_children: dict[tuple[str, str, str], tuple[Counter, Histogram]] = {}


def observe_rpc(service: str, method: str, code: str, seconds: float) -> None:
    children = _rpc_children.get((service, method, code))
    if children is None:
        children = _rpc_children[(service, method, code)] = (
            RPC_REQUESTS.labels(service, method, code),
            RPC_DURATION.labels(service, method),
        )
    children[0].inc()
    children[1].observe(seconds)


def watch_database(service: str, db: Database) -> None:
    """Report the pool and the listener of this process's database."""
    POOL_CHECKED_OUT.labels(service).set_function(lambda: db.pool.checked_out)
    LONG_POLL_WAITERS.labels(service).set_function(lambda: db.listener.waiting)
    NOTIFY_WAKEUPS.sources[service] = lambda: db.listener.wakeups
    BUILD_INFO.labels(service, _version(), platform.python_version()).set(1)


def _version() -> str:
    try:
        return importlib.metadata.version("agentworks-server")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


# The label sets each labelled gauge was last published with (see `publish`).
_published: dict[Gauge, set[tuple[str, ...]]] = {}


def publish(gauge: Gauge, values: Mapping[tuple[str, ...], float]) -> None:
    """Set a labelled gauge to exactly `values`; label sets no longer present are removed."""
    for labels, value in values.items():
        gauge.labels(*labels).set(value)
    for labels in _published.get(gauge, set()) - values.keys():
        gauge.remove(*labels)
    _published[gauge] = set(values)


def inline_sql(statement: sa.ClauseElement) -> str:
    """`statement` as PostgreSQL text with its constants written in (no parameters).

    The gauges' queries rely on partial indexes, and PostgreSQL matches an index's
    predicate only against constants: with parameters, a generic prepared plan could
    scan the whole table. Run the text with `exec_driver_sql`.
    """
    from sqlalchemy.dialects import postgresql

    return str(
        statement.compile(dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True})
    )


async def refresh_every(
    service: str, seconds: float, refresh: Callable[[], Awaitable[None]]
) -> None:
    """Recompute database-wide gauges every `seconds` until cancelled.

    A failed refresh (database away) keeps the last values and is tried again next time;
    `agentworks_metrics_refreshed_timestamp_seconds` tells how fresh they are.
    """
    while True:
        try:
            await refresh()
            GAUGES_REFRESHED.labels(service).set_to_current_time()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("metrics.refresh_failed", service=service, error=str(exc))
        await asyncio.sleep(seconds)


def refresher(
    config: ServiceConfig, refresh: Callable[[], Awaitable[None]]
) -> list[asyncio.Task[None]]:
    """The background task refreshing a service's gauges: none when metrics are off."""
    if not config.metrics_listen:
        return []
    loop = refresh_every(config.name, config.metrics_refresh_seconds, refresh)
    return [asyncio.create_task(loop, name=f"{config.name}-metrics")]


def serve_metrics(listen: str, *, variable: str = "METRICS_LISTEN") -> int:
    """Serve /metrics on `host:port` (port 0 picks one; no host: 127.0.0.1); returns the
    port, 0 when off. An address that is not host:port is a `ConfigError` naming
    `variable`; one that cannot be bound (taken, unknown host) an `OSError`."""
    if not listen:
        return 0
    from agentworks.client.settings import check_address

    host, port = check_address(variable, listen, empty_host=True)
    server, _thread = start_http_server(port, addr=host or "127.0.0.1")
    return server.server_port
