"""The runtime's own Prometheus metrics (P4), served on AGENTWORKS_RUNTIME_METRICS_LISTEN.

`kind` is `turn` or `execution`, `target` one of the worker's targets. Everything here
counts what this process did: aggregate runtimes with sum().

- claims: work claimed (`agentworks_runtime_claimed_total`), and how long a free slot
  waited for it (`agentworks_runtime_claim_wait_seconds`, across empty long-polls);
- handlers: how long each ran (`agentworks_runtime_handler_seconds`) and how the work
  ended (`agentworks_runtime_finished_total{outcome}`: for turns `completed`,
  `lease_lost`, `failed` (the handler raised; the turn is completed all the same),
  `not_completed`; for executions the call's status: `completed`, `failed`,
  `cancelled`, `lease_lost`, `unreported`, ...);
- slots: work in hand now (`agentworks_runtime_busy_slots`);
- the command runner: commands launched (`agentworks_runtime_sandbox_launches_total
  {sandbox}`, `bwrap` or `none`) and launches that failed before the command ran
  (`agentworks_runtime_sandbox_failures_total{stage}`: `prepare`, `spawn`, `sandbox`,
  `exec`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from prometheus_client import Counter, Gauge, Histogram

from agentworks.core.metrics import report_build, serve_metrics

T = TypeVar("T")

VARIABLE = "AGENTWORKS_RUNTIME_METRICS_LISTEN"

_SECONDS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600)

CLAIMED = Counter(
    "agentworks_runtime_claimed_total", "Turns and executions claimed.", ["kind", "target"]
)
FINISHED = Counter(
    "agentworks_runtime_finished_total",
    "Turns and executions this runtime finished handling, by outcome.",
    ["kind", "target", "outcome"],
)
CLAIM_WAIT = Histogram(
    "agentworks_runtime_claim_wait_seconds",
    "How long a free slot waited until a claim brought it work (empty long-polls included).",
    ["kind"],
    buckets=_SECONDS,
)
HANDLER_SECONDS = Histogram(
    "agentworks_runtime_handler_seconds",
    "How long handling one turn or execution took (the handler, uploads, the finish).",
    ["kind", "target"],
    buckets=_SECONDS,
)
BUSY_SLOTS = Gauge("agentworks_runtime_busy_slots", "Turns and executions in hand now.", ["kind"])
SANDBOX_LAUNCHES = Counter(
    "agentworks_runtime_sandbox_launches_total",
    "Commands the command runner started, by sandbox (bwrap, none).",
    ["sandbox"],
)
SANDBOX_FAILURES = Counter(
    "agentworks_runtime_sandbox_failures_total",
    "Command launches that failed before the command ran, by stage (prepare: setting the "
    "sandbox up; spawn: starting it; sandbox: bubblewrap ended without running it; exec: "
    "the command could not start inside).",
    ["stage"],
)


def counting_failure(stage: str, step: Callable[..., T]) -> Callable[..., T]:
    """`step`, counting a sandbox failure at `stage` each time it raises."""

    def counted(*args: Any, **kwargs: Any) -> T:
        try:
            return step(*args, **kwargs)
        except BaseException:
            SANDBOX_FAILURES.labels(stage).inc()
            raise

    return counted


def serve(listen: str) -> int:
    """Serve /metrics on `listen` (AGENTWORKS_RUNTIME_METRICS_LISTEN; empty: off); the
    port. One that cannot be bound is an OSError naming the variable."""
    if not listen:
        return 0
    report_build("runtime", "agentworks-runtime")
    try:
        return serve_metrics(listen, variable=VARIABLE)
    except OSError as exc:
        raise OSError(
            f"cannot serve metrics on {listen} ({VARIABLE}): {exc.strerror or exc}"
        ) from None
