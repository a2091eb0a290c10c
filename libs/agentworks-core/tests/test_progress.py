"""Progress while a tool waits (N3): `agentworks.core.progress` and the request bodies
`mcp_progress` answers as an event stream. Short intervals keep these fast; the 2 s
default is checked end to end with the MCP clients (gateway and agents tests)."""

from __future__ import annotations

import asyncio
import json

import pytest

from agentworks.core import progress
from agentworks.core.mcp_progress import asks_progress


async def test_without_a_reporter_waiting_is_a_plain_await_N3():
    """N3: with nothing to report to (the HTTP API, a request without a progressToken),
    the awaitable's result (or error) is all there is."""
    assert await progress.waiting(asyncio.sleep(0.05, "done"), "waiting", interval=0.01) == "done"

    async def fails() -> None:
        raise LookupError("gone")

    with pytest.raises(LookupError):
        await progress.waiting(fails(), "waiting", interval=0.01)


async def test_reports_come_each_interval_growing_until_the_wait_ends_N3():
    """N3: one report per interval while the wait runs, none after: progress (seconds
    waited) grows, total is the bound (None when there is none, or 0), the message says
    what is awaited and for how long."""
    reports: list[tuple[float, float | None, str | None]] = []

    async def report(done: float, total: float | None, message: str | None) -> None:
        reports.append((done, total, message))

    with progress.reporting(report):
        result = await progress.waiting(
            asyncio.sleep(0.35, "read"), "waiting for a message", bound=25, interval=0.1
        )
        assert result == "read"
        assert 2 <= len(reports) <= 3, reports
        assert [r[0] for r in reports] == sorted({r[0] for r in reports})
        assert {r[1] for r in reports} == {25}
        assert all(r[2] == "waiting for a message (0 s)" for r in reports), reports
        count = len(reports)
        await asyncio.sleep(0.25)
        assert len(reports) == count  # nothing once the wait has ended
        await progress.waiting(asyncio.sleep(0.15), "waiting", bound=0, interval=0.1)
        assert reports[-1][1] is None
    assert progress.message("waiting for the call to end", 11.6) == (
        "waiting for the call to end (12 s)"
    )


async def test_a_failing_or_stalled_report_never_fails_or_delays_the_wait_N3():
    """N3: progress is best effort: a report that raises, or hangs (a client that went
    away), is skipped; the wait ends on time with its own result."""

    async def broken(done: float, total: float | None, message: str | None) -> None:
        raise ConnectionError("closed stream")

    async def stalled(done: float, total: float | None, message: str | None) -> None:
        await asyncio.Event().wait()

    for report in (broken, stalled):
        with progress.reporting(report):
            started = asyncio.get_running_loop().time()
            assert await progress.waiting(asyncio.sleep(0.3, 7), "w", interval=0.05) == 7
            assert asyncio.get_running_loop().time() - started < 0.5


async def test_a_cancelled_wait_cancels_what_it_waits_for_N3():
    """N3: when the caller goes away (the request is cancelled), the wait it held is
    cancelled too, not left running."""
    inner_cancelled = asyncio.Event()

    async def long_poll() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            inner_cancelled.set()
            raise

    async def report(done: float, total: float | None, message: str | None) -> None:
        return None

    with progress.reporting(report):
        task = asyncio.create_task(progress.waiting(long_poll(), "w", interval=0.05))
        await asyncio.sleep(0.12)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert inner_cancelled.is_set()


def test_only_a_tools_call_with_a_progress_token_asks_for_a_stream_N3():
    """N3: the body of a tools/call whose _meta has a string or number progressToken
    asks for progress; no token, a boolean or null one, another method, or a body that
    is not JSON does not (and is answered with one JSON body)."""

    def body(method: str, meta: object) -> bytes:
        params = {"name": "messages", "arguments": {}, "_meta": meta}
        return json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()

    assert asks_progress(body("tools/call", {"progressToken": "t"}))
    assert asks_progress(body("tools/call", {"progressToken": 7}))
    for refused in (
        body("tools/call", {}),
        body("tools/call", {"progressToken": True}),
        body("tools/call", {"progressToken": None}),
        body("resources/read", {"progressToken": "t"}),
        b'{"progressToken": "t"',
        b'[{"method": "tools/call", "params": {"_meta": {"progressToken": "t"}}}]',
    ):
        assert not asks_progress(refused), refused
