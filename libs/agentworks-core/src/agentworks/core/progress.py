"""Progress while a tool waits (N3): a heartbeat every few seconds, so a client's tool
timeout (5 s in some frameworks) can be reset while the answer is on its way.

The tools that wait (a read with `wait_seconds`, a waiting function call, `ask_human`)
wrap the wait in `waiting(...)`. The MCP servers put the request's reporter in the
context for the call (`reporting`; `mcp_progress.reporter` builds it from an MCP
request, and is None unless the client gave a `progressToken`). Without a reporter
(the HTTP API, the reference runtime calling its tools directly, an MCP request with no
token) `waiting` is a plain `await`: nothing is sent and nothing else changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from typing import TypeVar

import structlog

log = structlog.get_logger("agentworks.progress")

T = TypeVar("T")

# Below the shortest tool timeout met in hosts (5 s), with room for a late tick.
INTERVAL_SECONDS = 2.0

# `report(progress, total, message)`: one MCP progress notification (`notifications/
# progress` with the request's token). `progress` grows with each call (seconds waited);
# `total` is the most the wait can last, when known.
Report = Callable[[float, float | None, str | None], Awaitable[None]]

_report: ContextVar[Report | None] = ContextVar("agentworks_progress_report", default=None)


@contextlib.contextmanager
def reporting(report: Report | None) -> Iterator[None]:
    """Within the block, `waiting` sends progress through `report` (None: none)."""
    token = _report.set(report)
    try:
        yield
    finally:
        _report.reset(token)


def message(doing: str, elapsed: float) -> str:
    """A progress line: what is awaited and for how long so far."""
    return f"{doing} ({round(elapsed)} s)"


async def waiting(
    awaitable: Awaitable[T],
    doing: str,
    *,
    bound: float | None = None,
    interval: float = INTERVAL_SECONDS,
) -> T:
    """`await awaitable`, reporting progress every `interval` seconds while it runs.

    `doing` says what is awaited ("waiting for the call to end"); `bound` is the most
    the wait can last in seconds (the notifications' `total`), when known. Reports go to
    the reporter `reporting` set, if any. A report that fails or stalls is logged and
    skipped: progress never fails or delays the wait it describes.
    """
    report = _report.get()
    if report is None:
        return await awaitable
    task = asyncio.ensure_future(awaitable)
    started = time.monotonic()
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=interval)
            if done:
                return task.result()
            elapsed = time.monotonic() - started
            try:
                await asyncio.wait_for(
                    report(round(elapsed, 3), bound or None, message(doing, elapsed)), interval
                )
            except Exception as exc:  # the client went away, a closed stream: keep waiting
                log.info("progress.not_sent", doing=doing, error=type(exc).__name__)
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
