"""Heavy checks in a small pool of worker processes, each with a hard deadline (B2).

JSON Schema validation is pure Python: in a thread it holds the interpreter's lock, so a
few callers' costly checks slowed every other request of the process (issue 43: twelve
callers cut another tenant from 375 requests to 45). A check whose static bound is not
small (`validation.in_place`) runs here instead, in a worker process:

- `workers` processes (FUNCTIONS_CHECK_WORKERS, 2), forked from a forkserver that has the
  validation code loaded, started when first needed and stopped with the service; they
  run at a lower priority (nice 10) so the serving process keeps the CPU it needs.
- A check past `deadline` seconds (FUNCTIONS_CHECK_DEADLINE_SECONDS, 2) is stopped: its
  worker is killed and replaced, and the check raises `CheckDeadline`.
- One principal holds at most `share` workers at once (FUNCTIONS_CHECK_SHARE, 1): past
  it, `Busy` (reason PRINCIPAL_SHARE) with a retry delay; so does a check that found no
  free worker within the deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, TypeVar

import structlog

from agentworks.core.errors import Busy, InvalidArgument, Reason

T = TypeVar("T")
log = structlog.get_logger("agentworks.functions.checks")

DEFAULT_WORKERS = 2
DEFAULT_DEADLINE_SECONDS = 2.0
DEFAULT_SHARE = 1
# Priority of the workers (os.nice): below the serving process's.
WORKER_NICENESS = 10
# How long a check waits for a worker being started (a forkserver's first start loads
# Python and the validation code: about a second).
STARTUP_SECONDS = 30.0
_PRELOAD = ["agentworks_functions.schemas.validation"]


class CheckDeadline(Exception):
    """A check ran past the pool's deadline; its worker was stopped."""

    def __init__(self, deadline: float) -> None:
        super().__init__(f"the check ran past its deadline of {deadline:g} s and was stopped")
        self.deadline = deadline


def deadline_refusal(what: str, deadline: float) -> InvalidArgument:
    return InvalidArgument(
        f"{what} could not be checked: the check ran past its deadline of {deadline:g} s "
        "and was stopped; send smaller inputs, or ask the function's owner for a simpler "
        "schema; no call was created.",
        reason=Reason.CHECK_BUDGET,
        metadata={"deadline_seconds": f"{deadline:g}"},
    )


def _worker_main(conn: Connection) -> None:
    """A worker: run each (function, args) it is sent and send back its result."""
    with contextlib.suppress(OSError):
        os.nice(WORKER_NICENESS)
    for module in _PRELOAD:
        __import__(module)
    conn.send(("ready", None))
    while True:
        try:
            function, args = conn.recv()
        except (EOFError, OSError):
            return
        try:
            conn.send(("ok", function(*args)))
        except Exception as exc:  # sent back and raised there; the worker goes on
            conn.send(("error", f"{type(exc).__name__}: {exc}"))


def _wake(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)


class _Worker:
    def __init__(self, process: Any, conn: Connection) -> None:
        self.process = process
        self.conn = conn

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.process.kill()
        with contextlib.suppress(Exception):
            self.process.join(5)
        with contextlib.suppress(Exception):
            self.conn.close()


class CheckPool:
    """Worker processes for checks, shared by the callers of one service replica."""

    def __init__(
        self,
        workers: int = DEFAULT_WORKERS,
        deadline: float = DEFAULT_DEADLINE_SECONDS,
        share: int = DEFAULT_SHARE,
    ) -> None:
        self.size = workers
        self.deadline = deadline
        self.share = max(1, min(share, workers))
        self._idle: asyncio.Queue[_Worker] | None = None
        self._all: set[_Worker] = set()
        self._starting = 0
        self._held: dict[str, int] = {}
        self._closed = False
        self._stopping: set[asyncio.Future[None]] = set()

    # ------------------------------------------------------------------ lifecycle

    def _spawn(self) -> _Worker:
        """Start one worker and wait until it is ready (blocking: run in a thread)."""
        context = multiprocessing.get_context("forkserver")
        with contextlib.suppress(Exception):  # ignored once the forkserver runs
            context.set_forkserver_preload(_PRELOAD)
        ours, theirs = context.Pipe()
        process = context.Process(
            target=_worker_main, args=(theirs,), name="functions-check", daemon=True
        )
        process.start()
        theirs.close()
        worker = _Worker(process, ours)
        if not ours.poll(60) or ours.recv()[0] != "ready":
            worker.stop()
            raise RuntimeError("a check worker did not start")
        return worker

    async def _add_worker(self) -> None:
        """Start one worker (`_starting` was counted up by the caller)."""
        try:
            worker = await asyncio.to_thread(self._spawn)
        except Exception as exc:
            log.warning("checks.worker_failed", error=str(exc))
            return
        finally:
            self._starting -= 1
        if self._closed:
            await asyncio.to_thread(worker.stop)
            return
        self._all.add(worker)
        assert self._idle is not None
        self._idle.put_nowait(worker)

    async def _take(self, budget: float) -> _Worker:
        if self._idle is None:
            self._idle = asyncio.Queue()
        if self._idle.empty() and len(self._all) + self._starting < self.size:
            self._starting += 1
            asyncio.get_running_loop().create_task(self._add_worker())
        # A worker being started is waited for (its start is not the check's time).
        wait = budget if not self._starting else max(budget, STARTUP_SECONDS)
        try:
            return await asyncio.wait_for(self._idle.get(), wait)
        except TimeoutError:
            raise Busy(
                f"every check worker of this replica is busy; retry in {self.deadline:g} s",
                reason=Reason.PRINCIPAL_SHARE,
                retry_after=self.deadline,
                metadata={"share": "check_workers"},
            ) from None

    async def stop(self) -> None:
        """Stop every worker (the service's stop)."""
        self._closed = True
        workers, self._all = list(self._all), set()
        for worker in workers:
            await asyncio.to_thread(worker.stop)
        if self._stopping:
            await asyncio.gather(*self._stopping, return_exceptions=True)

    @property
    def processes(self) -> list[int]:
        return [w.process.pid for w in self._all]

    # ------------------------------------------------------------------ checks

    def check_share(self, principal: str) -> None:
        """Busy if `principal` holds its share of the workers now (a cheap early refusal,
        before a request does any other work)."""
        if principal and self._held.get(principal, 0) >= self.share:
            raise Busy(
                f"{principal} holds its share of this replica's check workers (at most "
                f"{self.share} of {self.size} at once); retry in {self.deadline:g} s",
                reason=Reason.PRINCIPAL_SHARE,
                retry_after=self.deadline,
                metadata={"share": "check_workers", "principal": principal},
            )

    async def run(self, principal: str, function: Callable[..., T], *args: Any) -> T:
        """`function(*args)` in a worker; CheckDeadline past the deadline, Busy past the
        principal's share of the workers."""
        if self._closed:
            raise RuntimeError("the check pool is stopped")
        self.check_share(principal)
        if principal:
            self._held[principal] = self._held.get(principal, 0) + 1
        try:
            worker = await self._take(self.deadline)
            return await self._run_on(worker, function, args)
        finally:
            if principal:
                self._held[principal] -= 1
                if not self._held[principal]:
                    del self._held[principal]

    async def _run_on(self, worker: _Worker, function: Callable[..., T], args: Any) -> T:
        loop = asyncio.get_running_loop()
        ready = loop.create_future()
        fd = worker.conn.fileno()
        started = time.monotonic()
        healthy = False
        try:
            # Off the loop: a large input fills the pipe, and the write then waits for the
            # worker (at a lower priority) to read it; so does a large answer below.
            await loop.run_in_executor(None, worker.conn.send, (function, args))
            loop.add_reader(fd, _wake, ready)
            try:
                await asyncio.wait_for(ready, self.deadline)
            except TimeoutError:
                log.warning(
                    "checks.deadline",
                    function=getattr(function, "__name__", "?"),
                    seconds=round(time.monotonic() - started, 3),
                )
                raise CheckDeadline(self.deadline) from None
            finally:
                loop.remove_reader(fd)
            kind, value = await loop.run_in_executor(None, worker.conn.recv)
            healthy = True
        finally:
            if healthy and not self._closed:
                assert self._idle is not None
                self._idle.put_nowait(worker)
            else:  # stopped at the deadline, cancelled or broken: replace it
                self._all.discard(worker)
                stopping = loop.run_in_executor(None, worker.stop)
                self._stopping.add(stopping)
                stopping.add_done_callback(self._stopping.discard)
        if kind == "error":
            raise RuntimeError(f"a check failed in its worker: {value}")
        return value  # type: ignore[no-any-return]
