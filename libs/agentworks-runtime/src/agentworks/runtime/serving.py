"""Run one or more workers in a process until SIGTERM/SIGINT, with ONE signal handler.

Every worker (`TurnWorker`, `ExecutionWorker`, or anything with `run()` and `stop()`)
is stopped by the same handler, so a process serving turns and executions together
stops both: a worker must not install its own handlers, because `add_signal_handler`
keeps only the last one per signal and the first worker would never hear SIGTERM.

    sys.exit(asyncio.run(main()))  # main(): return await run_until_signal(...)

- first SIGTERM/SIGINT: `stop()` every worker; each finishes the work in hand, for at
  most `drain_seconds` (AGENTWORKS_RUNTIME_DRAIN_SECONDS, default 30);
- a second signal, or the end of the drain time: cancel them all at once. A worker with
  an `abandon(reason)` method is told why first: `ExecutionWorker` then gives each
  execution it cancels up (FinishExecution `interrupted`, with "the runtime stopped
  (SIGTERM) before the execution ended; call again"), so the caller learns at once
  (F12), and `TurnWorker` gives each
  turn it cancels up (CompleteTurn `interrupted`): messaging records it `interrupted` at
  once, as at lease expiry (C11), and the conversation's next turn can be claimed. Each
  gets at most `GIVE_UP_SECONDS` for that. The exit code is then 130;
- a worker that fails (bad key, bad target) stops the others gracefully and the
  process exits 1 with the reason on stderr.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Awaitable
from typing import Protocol, TypeVar

from agentworks.core import errors
from agentworks.runtime.config import drain_seconds_from_env

SIGNALS = (signal.SIGTERM, signal.SIGINT)
# How long a stopping runtime tries to end, with the service, each execution or turn it
# cancelled (`abandon`): it is going away and should not hang on a service that is down.
GIVE_UP_SECONDS = 5


T = TypeVar("T")


async def unless_stopped(claim: Awaitable[T], stopping: asyncio.Event) -> T | None:
    """Await a claim (a long-poll) unless `stopping` is set first: then cancel it and
    answer None. A claim the service granted just before the cancel still lands, so
    the caller serves what it now holds instead of leaving it to lease expiry."""
    claimed = asyncio.ensure_future(claim)
    stop = asyncio.ensure_future(stopping.wait())
    try:
        await asyncio.wait({claimed, stop}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
        if not claimed.done():
            claimed.cancel()
        await asyncio.wait({claimed})  # never raises
    if claimed.cancelled():
        return None
    return claimed.result()


class Worker(Protocol):
    """What `run_until_signal` needs of a worker."""

    def stop(self) -> None: ...

    def run(self) -> Awaitable[None]: ...


async def run_until_signal(*workers: Worker, drain_seconds: float | None = None) -> int:
    """Run `workers` together until a signal; the process exit code (0, 1 or 130).

    Use the code: `sys.exit(asyncio.run(main()))` with `main` returning it, so a refused
    runtime (a bad key, a target it may not serve) exits 1, not 0. `drain_seconds`: after
    the first signal, how long the work in hand may take before it is cancelled as on a
    second signal; default AGENTWORKS_RUNTIME_DRAIN_SECONDS (30).
    """
    if not workers:
        raise ValueError("run_until_signal needs at least one worker")
    if drain_seconds is None:
        drain_seconds = drain_seconds_from_env()
    loop = asyncio.get_running_loop()
    tasks = [asyncio.ensure_future(worker.run()) for worker in workers]
    signals = 0
    drain: asyncio.TimerHandle | None = None

    def stop_all() -> None:
        for worker in workers:
            worker.stop()

    def abandon_all(reason: str) -> None:
        for worker in workers:
            abandon = getattr(worker, "abandon", None)
            if abandon is not None:
                abandon(reason)
        for task in tasks:
            task.cancel()

    def on_signal(sig: signal.Signals) -> None:
        nonlocal signals, drain
        signals += 1
        if signals == 1:
            stop_all()
            drain = loop.call_later(
                drain_seconds,
                abandon_all,
                f"the runtime stopped ({sig.name}) before the execution ended (drain time "
                f"of {drain_seconds:g} s over); call again",
            )
        else:
            abandon_all(f"the runtime stopped ({sig.name}) before the execution ended; call again")

    for sig in SIGNALS:
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        pending: set[asyncio.Task[None]] = set(tasks)
        failure: BaseException | None = None
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if task.cancelled() or task.exception() is None:
                    continue
                if failure is None:
                    failure = task.exception()
                    stop_all()  # one worker cannot serve: stop the rest gracefully
    except asyncio.CancelledError:
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks)
        raise
    else:
        if any(task.cancelled() for task in tasks):
            return 130
        if failure is not None:
            message = failure.message if isinstance(failure, errors.AgentWorksError) else failure
            print(f"agentworks-runtime: {message}", file=sys.stderr)
            return 1
        return 0
    finally:
        if drain is not None:
            drain.cancel()
        for sig in SIGNALS:
            loop.remove_signal_handler(sig)
