"""Liveness that sees a stuck serving loop (B3).

Every service process watches its own asyncio event loop:

- a task on the loop wakes every `TICK_SECONDS` and records how late it woke (the loop's
  lag); `agentworks_event_loop_lag_seconds{service}` shows it. The metrics endpoint runs
  in a thread of its own, so a stuck loop's lag keeps growing on the scrape while it is
  stuck (the time since the last tick counts);
- gRPC health checking (and the gateway's /healthz, `loop_healthy`) answers NOT_SERVING
  while the lag is over `<NAME>_LOOP_LAG_LIMIT_SECONDS` (default 5 s), and for as long
  again after it came back under; a loop stuck outright answers nothing at all, which
  probes count as a failure too (their timeout);
- a watchdog thread ends the process with status `STUCK_EXIT` (3) once the loop has not
  ticked for `<NAME>_LOOP_STUCK_SECONDS` (default 30 s; 0: never), logging
  `service.loop_stuck` first: a loop that never comes back is restarted by whoever
  restarts the process (`agentworks up`, Kubernetes, Docker's restart policy), within
  that bound plus the restart's own delay, even when no probe is configured.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
import time

import structlog
from prometheus_client import Gauge

log = structlog.get_logger("agentworks.liveness")

# How often the loop is looked at (its lag is measured this often).
TICK_SECONDS = 0.25
DEFAULT_LAG_LIMIT_SECONDS = 5.0
DEFAULT_STUCK_SECONDS = 30.0
# The exit status of a process whose loop was stuck (1: start failed, 2: a setting).
STUCK_EXIT = 3

LOOP_LAG = Gauge(
    "agentworks_event_loop_lag_seconds",
    "How late the service's event loop is: its last measured lag, or the time since it "
    "last ran its check when that is longer (a stuck loop's grows while it is stuck).",
    ["service"],
)


class LoopWatch:
    """The lag of one event loop, its health, and the watchdog that ends a stuck one."""

    def __init__(
        self,
        service: str,
        *,
        lag_limit: float = DEFAULT_LAG_LIMIT_SECONDS,
        stuck_seconds: float = 0.0,
        tick: float = TICK_SECONDS,
    ) -> None:
        self.service = service
        self.lag_limit = lag_limit
        self.stuck_seconds = stuck_seconds
        self.tick = tick
        self.last_tick = time.monotonic()
        self.last_lag = 0.0
        # Unhealthy until then: a lag over the limit keeps the health NOT_SERVING for
        # `lag_limit` seconds after the loop came back (a check queued behind the stall
        # would otherwise answer SERVING the moment it runs).
        self.unhealthy_until = 0.0
        self.loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()

    def lag(self) -> float:
        """The loop's lag now: the last measured, or how overdue its next check is."""
        overdue = time.monotonic() - self.last_tick - self.tick
        return max(self.last_lag, overdue, 0.0)

    def healthy(self) -> bool:
        """Whether the loop's lag is within the limit (and was, for `lag_limit` seconds)."""
        return self.lag() <= self.lag_limit and time.monotonic() >= self.unhealthy_until

    def start(self) -> None:
        """Start watching the running loop (and, with `stuck_seconds`, the watchdog)."""
        self.loop = asyncio.get_running_loop()
        self.last_tick = time.monotonic()
        self._task = self.loop.create_task(self._ticks(), name=f"{self.service}-loop-watch")
        LOOP_LAG.labels(self.service).set_function(self.lag)
        self.arm(self.stuck_seconds)

    def arm(self, stuck_seconds: float) -> None:
        """End the process when the loop has not ticked for `stuck_seconds` (0: never)."""
        self.stuck_seconds = stuck_seconds
        if stuck_seconds > 0 and self._thread is None:
            self._thread = threading.Thread(
                target=self._watchdog, name=f"{self.service}-watchdog", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._task is not None:
            self._task.cancel()

    async def _ticks(self) -> None:
        while True:
            before = time.monotonic()
            await asyncio.sleep(self.tick)
            now = time.monotonic()
            self.last_lag = max(0.0, now - before - self.tick)
            self.last_tick = now
            if self.last_lag > self.lag_limit:
                self.unhealthy_until = now + self.lag_limit
                log.warning("service.loop_lagged", service=self.service, lag=self.last_lag)

    def _watchdog(self) -> None:
        every = min(1.0, max(self.stuck_seconds / 4, 0.05))
        while not self._stopped.wait(every):
            loop = self.loop
            if loop is None or loop.is_closed() or not loop.is_running():
                return  # the loop ended (a test's, a stopped service's): nothing to watch
            stale = time.monotonic() - self.last_tick
            if self.stuck_seconds > 0 and stale > self.stuck_seconds:
                log.error(
                    "service.loop_stuck",
                    service=self.service,
                    stuck_seconds=round(stale, 1),
                    limit=self.stuck_seconds,
                    exit_status=STUCK_EXIT,
                    action="exiting, to be restarted",
                )
                with contextlib.suppress(Exception):
                    sys.stdout.flush()
                    sys.stderr.flush()
                os._exit(STUCK_EXIT)


# The watch of each service in this process (one per service name and loop).
_watches: dict[str, LoopWatch] = {}


def watch_loop(
    service: str,
    *,
    lag_limit: float = DEFAULT_LAG_LIMIT_SECONDS,
    stuck_seconds: float = 0.0,
) -> LoopWatch:
    """Watch the running loop for `service` (B3); the same watch again on the same loop
    (its watchdog armed when `stuck_seconds` is given now)."""
    loop = asyncio.get_running_loop()
    watch = _watches.get(service)
    if watch is not None and watch.loop is loop and not loop.is_closed():
        if stuck_seconds > 0:
            watch.arm(stuck_seconds)
        return watch
    if watch is not None:
        watch.stop()
    watch = _watches[service] = LoopWatch(service, lag_limit=lag_limit, stuck_seconds=stuck_seconds)
    watch.start()
    return watch


def loop_healthy(service: str) -> bool:
    """Whether `service`'s loop is within its lag limit (True when it is not watched):
    for a health endpoint such as the gateway's /healthz."""
    watch = _watches.get(service)
    return watch is None or watch.healthy()
