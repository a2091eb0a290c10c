"""Natural batching: concurrent requests for the same statement share one execution.

A request never waits for a batch to fill. When fewer than `concurrency` batches are in
flight it starts one at once (alone, at low load: no added latency); otherwise it queues,
and the next batch to start takes everything queued, up to `max_size`. Under load each
execution then carries many requests: one statement, one commit and one round trip
instead of one each — group commit done by the application.

If a batch fails, each of its requests is run again alone, so one bad request fails
only itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

In = TypeVar("In")
Out = TypeVar("Out")


class Batcher(Generic[In, Out]):
    """Run `execute(items) -> results` (one result per item, in order) in natural batches."""

    def __init__(
        self,
        execute: Callable[[Sequence[In]], Awaitable[Sequence[Out]]],
        *,
        max_size: int = 64,
        concurrency: int = 4,
    ) -> None:
        self._execute = execute
        self._max_size = max_size
        self._concurrency = concurrency
        self._queue: list[tuple[In, asyncio.Future[Out]]] = []
        self._running = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self.batches = 0
        self.items = 0

    async def submit(self, item: In) -> Out:
        future: asyncio.Future[Out] = asyncio.get_running_loop().create_future()
        self._queue.append((item, future))
        if self._running < self._concurrency:
            self._running += 1
            task = asyncio.get_running_loop().create_task(self._drain())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return await future

    async def _drain(self) -> None:
        try:
            while self._queue:
                batch = self._queue[: self._max_size]
                del self._queue[: self._max_size]
                # A request cancelled while queued (its caller gave up) is not run.
                batch = [(item, future) for item, future in batch if not future.done()]
                if batch:
                    await self._run(batch)
        finally:
            self._running -= 1

    async def _run(self, batch: list[tuple[In, asyncio.Future[Out]]]) -> None:
        self.batches += 1
        self.items += len(batch)
        try:
            results = await self._execute([item for item, _ in batch])
        except Exception as exc:
            if len(batch) == 1:
                _settle(batch[0][1], exc=exc)
                return
            for one in batch:  # one bad request must not fail the others
                await self._run([one])
            return
        except BaseException as exc:  # cancelled: the waiters learn it too
            for _, future in batch:
                _settle(future, exc=exc)
            raise
        for (_, future), result in zip(batch, results, strict=True):
            _settle(future, result=result)


def _settle(
    future: asyncio.Future[Out], *, result: Out | None = None, exc: BaseException | None = None
) -> None:
    if future.done():  # its request was cancelled meanwhile
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)  # type: ignore[arg-type]
