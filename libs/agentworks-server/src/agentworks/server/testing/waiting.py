"""Waiting for a condition with a deadline, instead of sleeping a fixed time.

Where an event exists (a future, an `asyncio.Event`, a log line read from a pipe, the
scheduler's ticks) the test awaits it. `until` is for state that lives in another process,
thread or the database, where no event crosses over: it polls, bounded by a timeout, and
fails the test naming what it waited for.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

DEFAULT_TIMEOUT = 20.0
EVERY = 0.05  # seconds between two looks: short next to any timeout, cheap on 2 cores


async def until(
    check: Callable[[], Any],
    timeout: float = DEFAULT_TIMEOUT,
    *,
    every: float = EVERY,
    between: Callable[[], Awaitable[object]] | None = None,
    what: str = "",
) -> Any:
    """Call `check()` (plain or async) until it returns something true, and return that.

    Between two looks it sleeps `every` seconds, or awaits `between()` when given (an
    event that may change the answer, e.g. the scheduler's `wait_ticks`). After `timeout`
    seconds the test fails with an AssertionError naming `what` (else the check).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return result
        remaining = deadline - loop.time()
        if remaining <= 0:
            raise AssertionError(f"not reached within {timeout} s: {what or _name(check)}")
        if between is None:
            await asyncio.sleep(min(every, remaining))
            continue
        try:
            async with asyncio.timeout(remaining):
                await between()
        except TimeoutError:
            pass  # looked at once more, then failed above


def until_sync(
    check: Callable[[], T | None],
    timeout: float = DEFAULT_TIMEOUT,
    *,
    every: float = EVERY,
    what: str = "",
) -> T:
    """`until` for tests without an event loop: blocks between looks."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"not reached within {timeout} s: {what or _name(check)}")
        time.sleep(min(every, remaining))


def _name(check: Callable[..., object]) -> str:
    code = getattr(check, "__code__", None)
    if code is None:
        return repr(check)
    return f"{getattr(check, '__qualname__', 'check')} ({code.co_filename}:{code.co_firstlineno})"


async def read_until(client: Any, inbox_id: str, count: int, timeout: float = 10.0) -> list[str]:
    """Long-poll an inbox (a MessagingClient's `read`) until it holds `count` messages;
    their texts. Fails the test at the deadline, naming what arrived."""
    from agentworks.core.limits import MAX_WAIT_SECONDS

    deadline = time.monotonic() + timeout
    texts: list[str] = []
    cursor = ""
    while len(texts) < count:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"only {texts} arrived within {timeout} s"
        page = await client.read(
            inbox_id, after=cursor, wait_seconds=max(1, min(MAX_WAIT_SECONDS, int(remaining)))
        )
        texts += [msg.text for msg in page.messages]
        cursor = page.next_cursor or cursor
    return texts
