"""Prometheus metrics shared by every service (P4): RPCs, database pool, long-polls.

Each process serves them on `<SERVICE>_METRICS_LISTEN` (host:port; empty = off).
Service-specific metrics live in each service's `metrics.py`: counters and histograms
are updated where their event happens; gauges of database-wide state are recomputed by
one background task per process (`refresher`), every `<SERVICE>_METRICS_REFRESH_SECONDS`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import TYPE_CHECKING

import structlog
from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily

from agentworks.core.metrics import BUILD_INFO as BUILD_INFO
from agentworks.core.metrics import report_build
from agentworks.core.metrics import serve_metrics as serve_metrics

if TYPE_CHECKING:
    from agentworks.server.config import ServiceConfig
    from agentworks.server.db import Database

log = structlog.get_logger("agentworks.metrics")

# The gRPC server metrics under the names of the grpc-ecosystem Prometheus interceptors
# (go-grpc-prometheus, go-grpc-middleware/providers/prometheus, py-grpc-prometheus), so
# that their dashboards and alerts work as they are (docs/operations.md says why these
# and not OpenTelemetry's). `grpc_code` is spelled as they spell it (Go's code names).
_GRPC_LABELS = ["grpc_type", "grpc_service", "grpc_method"]
RPC_STARTED = Counter("grpc_server_started_total", "RPCs started on the server.", _GRPC_LABELS)
RPC_HANDLED = Counter(
    "grpc_server_handled_total",
    "RPCs completed on the server, whatever their status code.",
    [*_GRPC_LABELS, "grpc_code"],
)
RPC_HANDLING = Histogram(
    "grpc_server_handling_seconds",
    "Time the server took to handle an RPC (long-polls included), by method.",
    _GRPC_LABELS,
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
# grpc.StatusCode names (INVALID_ARGUMENT) as the grpc-prometheus `grpc_code` values
# (InvalidArgument): Go's code names, which those interceptors export.
GRPC_CODES = {
    "OK": "OK",
    "CANCELLED": "Canceled",
    "UNKNOWN": "Unknown",
    "INVALID_ARGUMENT": "InvalidArgument",
    "DEADLINE_EXCEEDED": "DeadlineExceeded",
    "NOT_FOUND": "NotFound",
    "ALREADY_EXISTS": "AlreadyExists",
    "PERMISSION_DENIED": "PermissionDenied",
    "RESOURCE_EXHAUSTED": "ResourceExhausted",
    "FAILED_PRECONDITION": "FailedPrecondition",
    "ABORTED": "Aborted",
    "OUT_OF_RANGE": "OutOfRange",
    "UNIMPLEMENTED": "Unimplemented",
    "INTERNAL": "Internal",
    "UNAVAILABLE": "Unavailable",
    "DATA_LOSS": "DataLoss",
    "UNAUTHENTICATED": "Unauthenticated",
}
POOL_CHECKED_OUT = Gauge(
    "agentworks_db_pool_checked_out", "Database connections in use.", ["service"]
)
LONG_POLL_WAITERS = Gauge(
    "agentworks_long_poll_waiters", "Requests waiting for a NOTIFY (reads, claims).", ["service"]
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


# The labelled children each method (and code) counts into: `labels()` takes a lock and
# builds its key on every call, a visible share of an empty request. Bounded by the
# methods served times the status codes.
_started: dict[tuple[str, str, str], Counter] = {}
_handled: dict[tuple[str, str, str, str], tuple[Counter, Histogram]] = {}


def rpc_started(grpc_type: str, grpc_service: str, grpc_method: str) -> None:
    """Count an RPC the server started (`grpc_server_started_total`)."""
    key = (grpc_type, grpc_service, grpc_method)
    child = _started.get(key)
    if child is None:
        child = _started[key] = RPC_STARTED.labels(*key)
    child.inc()


def observe_rpc(
    grpc_type: str, grpc_service: str, grpc_method: str, code: str, seconds: float
) -> None:
    """Count an RPC handled with `code` (a grpc.StatusCode name) after `seconds`."""
    key = (grpc_type, grpc_service, grpc_method, code)
    children = _handled.get(key)
    if children is None:
        children = _handled[key] = (
            RPC_HANDLED.labels(grpc_type, grpc_service, grpc_method, GRPC_CODES.get(code, code)),
            RPC_HANDLING.labels(grpc_type, grpc_service, grpc_method),
        )
    children[0].inc()
    children[1].observe(seconds)


def watch_database(service: str, db: Database) -> None:
    """Report the pool and the listener of this process's database."""
    POOL_CHECKED_OUT.labels(service).set_function(lambda: db.pool.checked_out)
    LONG_POLL_WAITERS.labels(service).set_function(lambda: db.listener.waiting)
    NOTIFY_WAKEUPS.sources[service] = lambda: db.listener.wakeups
    report_build(service, "agentworks-server")


# The label sets each labelled gauge was last published with (see `publish`).
_published: dict[Gauge, set[tuple[str, ...]]] = {}


def publish(gauge: Gauge, values: Mapping[tuple[str, ...], float]) -> None:
    """Set a labelled gauge to exactly `values`; label sets no longer present are removed."""
    for labels, value in values.items():
        gauge.labels(*labels).set(value)
    for labels in _published.get(gauge, set()) - values.keys():
        gauge.remove(*labels)
    _published[gauge] = set(values)


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
