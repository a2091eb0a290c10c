"""Natural batching of concurrent requests (the send path's group commit, C2-C5)."""

from __future__ import annotations

import asyncio

import pytest

from agentworks.server.batching import Batcher


async def test_concurrent_requests_share_executions_and_each_gets_its_own_result_C3():
    """C3: many concurrent sends, few executions; results stay matched to their requests."""
    calls: list[list[int]] = []

    async def execute(items):
        calls.append(list(items))
        await asyncio.sleep(0.01)  # the statement's time, so that requests pile up
        return [item * 10 for item in items]

    batcher: Batcher[int, int] = Batcher(execute, max_size=16, concurrency=2)
    results = await asyncio.gather(*(batcher.submit(n) for n in range(100)))
    assert results == [n * 10 for n in range(100)]
    assert sorted(n for batch in calls for n in batch) == list(range(100))  # each once
    assert len(calls) < 20 and max(len(b) for b in calls) <= 16
    # Alone, a request runs at once, by itself.
    assert await batcher.submit(7) == 70 and calls[-1] == [7]


async def test_a_failing_request_fails_alone_C2():
    """C2: a request the statement refuses does not take the rest of its batch with it."""

    async def execute(items):
        await asyncio.sleep(0)  # a statement yields to the loop
        if "bad" in items:
            raise ValueError("bad item")
        return [item.upper() for item in items]

    batcher: Batcher[str, str] = Batcher(execute, concurrency=1)
    blocker = asyncio.create_task(batcher.submit("first"))  # holds the only slot
    await asyncio.sleep(0)  # one turn of the loop: the task takes the slot (no wait)
    results = await asyncio.gather(
        *(batcher.submit(i) for i in ("a", "bad", "b")), return_exceptions=True
    )
    assert await blocker == "FIRST"
    assert results[0] == "A" and results[2] == "B"
    assert isinstance(results[1], ValueError)


async def test_a_request_cancelled_while_queued_is_not_executed_C4():
    """C4: a caller that gave up before its batch started stores nothing."""
    executed: list[str] = []
    release = asyncio.Event()

    async def execute(items):
        executed.extend(items)
        await release.wait()
        return list(items)

    batcher: Batcher[str, str] = Batcher(execute, concurrency=1)
    first = asyncio.create_task(batcher.submit("first"))
    await asyncio.sleep(0)  # one turn of the loop: `first` takes the slot
    queued = asyncio.create_task(batcher.submit("gave-up"))
    kept = asyncio.create_task(batcher.submit("kept"))
    await asyncio.sleep(0)  # one turn: both are queued behind it
    queued.cancel()
    release.set()
    assert await first == "first" and await kept == "kept"
    with pytest.raises(asyncio.CancelledError):
        await queued
    assert executed == ["first", "kept"]
