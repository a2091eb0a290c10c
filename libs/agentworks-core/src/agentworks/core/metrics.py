"""Prometheus metrics shared by every service (P4): RPCs, database pool, long-polls.

Each process serves them on `<SERVICE>_METRICS_LISTEN` (host:port; empty = off).
Service-specific metrics are declared next to the code that updates them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import Counter, Gauge, Histogram, start_http_server

if TYPE_CHECKING:
    from agentworks.core.db import Database

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
NOTIFY_WAKEUPS = Gauge(
    "agentworks_notify_wakeups", "Waiters woken by NOTIFY since the process started.", ["service"]
)


def observe_rpc(service: str, method: str, code: str, seconds: float) -> None:
    RPC_REQUESTS.labels(service, method, code).inc()
    RPC_DURATION.labels(service, method).observe(seconds)


def watch_database(service: str, db: Database) -> None:
    """Report the pool and the listener of this process's database."""
    pool = db.engine.sync_engine.pool
    POOL_CHECKED_OUT.labels(service).set_function(lambda: pool.checkedout())  # type: ignore[attr-defined]
    LONG_POLL_WAITERS.labels(service).set_function(lambda: db.listener.waiting)
    NOTIFY_WAKEUPS.labels(service).set_function(lambda: db.listener.wakeups)


def serve_metrics(listen: str) -> int:
    """Serve /metrics on `host:port` (port 0 picks one); returns the port, 0 when off."""
    if not listen:
        return 0
    host, _, port = listen.rpartition(":")
    server, _thread = start_http_server(int(port), addr=host or "127.0.0.1")
    return server.server_port
