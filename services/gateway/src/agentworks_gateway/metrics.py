"""The gateway's own metrics and log lines about its database (P4).

`agentworks_gateway_tool_calls_total` (in `tools`) counts the tool calls; what is refused
before any tool runs (no or a bad token, the gateway's database away, a bad body) is
counted here, and so is each failed use of the gateway's own database.

The gateway does not LISTEN, so of the shared database gauges it reports only the pool:
the long-poll waiter and NOTIFY wake-up gauges would always read 0.
"""

from __future__ import annotations

import threading
import time

import structlog
from prometheus_client import Counter

from agentworks.core import errors
from agentworks.core.metrics import report_build
from agentworks.server.db import Database
from agentworks.server.metrics import POOL_CHECKED_OUT

log = structlog.get_logger("agentworks.gateway")

REQUESTS_REFUSED = Counter(
    "agentworks_gateway_requests_refused_total",
    "Requests the gateway refused before any tool ran, by surface (mcp/api) and status name "
    "(UNAUTHENTICATED, UNAVAILABLE when its database is away, INVALID_ARGUMENT, ...).",
    ["surface", "code"],
)
DATABASE_ERRORS = Counter(
    "agentworks_gateway_database_errors_total",
    "Failed uses of the gateway's own database (token lookup, token admin, /healthz).",
    ["operation"],
)
OPERATIONS = ("authenticate", "tokens", "healthz")
for _operation in OPERATIONS:  # present at 0, so rate() and alerts work from the start
    DATABASE_ERRORS.labels(_operation)

# At most one warning per operation this often; the failures in between are counted
# in the metric and in the next warning's `suppressed`.
WARN_EVERY_SECONDS = 10.0


class _WarnLimiter:
    """Per-key rate limit of warnings: `allow(key)` -> None, or the number suppressed."""

    def __init__(self, every: float) -> None:
        self.every = every
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}
        self._lock = threading.Lock()

    def allow(self, key: str) -> int | None:
        now = time.monotonic()
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last < self.every:
                self._suppressed[key] = self._suppressed.get(key, 0) + 1
                return None
            self._last[key] = now
            return self._suppressed.pop(key, 0)


_limiter = _WarnLimiter(WARN_EVERY_SECONDS)


def database_failed(operation: str, exc: errors.AgentWorksError) -> None:
    """Count a failed use of the gateway's database and log it (rate-limited)."""
    DATABASE_ERRORS.labels(operation).inc()
    suppressed = _limiter.allow(operation)
    if suppressed is None:
        return
    cause = exc.__cause__
    log.warning(
        "database.unavailable",
        service="gateway",
        operation=operation,
        code=exc.code.name,
        reason=exc.message,
        error=f"{type(cause).__name__}: {cause}".strip() if cause else None,
        suppressed=suppressed,
    )


def refused(surface: str, exc: errors.AgentWorksError) -> None:
    """Count a request refused before any tool ran; log a refused token."""
    code = exc.code.name
    REQUESTS_REFUSED.labels(surface, code).inc()
    if code == "UNAUTHENTICATED":
        log.info(f"{surface}.refused", code=code, reason=exc.message)


def watch_pool(database: Database) -> None:
    """Report the gateway's pool (`agentworks_db_pool_checked_out{service="gateway"}`)
    and what it runs (`agentworks_build_info{service="gateway"}`)."""
    POOL_CHECKED_OUT.labels("gateway").set_function(lambda: database.pool.checked_out)
    report_build("gateway", "agentworks-gateway")
