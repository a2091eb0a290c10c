"""What turn and execution workers share: the lease-worker base and its backoff (R1)."""

from __future__ import annotations

import asyncio
import pathlib
import random
from collections.abc import Awaitable, Callable, Sequence

import structlog

from agentworks.client import target_ref
from agentworks.client.identity import Minter


class Backoff:
    """Exponential backoff with full jitter, reset after a success."""

    def __init__(self, initial: float = 0.5, maximum: float = 10.0) -> None:
        self.initial = initial
        self.maximum = maximum
        self.attempt = 0

    def next(self) -> float:
        """The delay before the next attempt."""
        ceiling = min(self.maximum, self.initial * (2**self.attempt))
        self.attempt += 1
        return random.uniform(ceiling / 2, ceiling)

    def reset(self) -> None:
        """Start again from the initial delay."""
        self.attempt = 0


class LeaseWorker:
    """The base of `TurnWorker` and `ExecutionWorker`: serve leased work for targets.

    Both claim work for their targets in concurrent slots (each a claim long-poll), keep
    each claim's lease alive with heartbeats while a handler runs, and stop the same
    ways: `stop()` finishes what is in hand and claims no more; `abandon(reason)` before
    a cancel gives up what the cancel cuts short, so the service records it
    `interrupted` at once (C11, F12) instead of when its lease expires. `what` names the
    work in messages ("turns", "executions").
    """

    what = "work"

    def __init__(
        self,
        identity: Minter,
        targets: Sequence[str],
        *,
        wait_seconds: int,
        lease_seconds: int,
        heartbeat_seconds: float,
        health_file: str,
        log: structlog.stdlib.BoundLogger,
    ) -> None:
        if not targets:
            article = "an" if self.kind[0] in "aeiou" else "a"
            raise ValueError(
                f"{article} {self.kind} worker needs at least one target, e.g. crew:demo"
            )
        for target in targets:
            target_ref(target)  # raises ValueError naming the bad target
        self.targets = tuple(targets)
        self.identity = identity
        self.wait_seconds = wait_seconds
        self.lease_seconds = lease_seconds
        self.heartbeat_seconds = heartbeat_seconds
        self.health_file = pathlib.Path(health_file) if health_file else None
        self._stopping = asyncio.Event()
        self._abandon_reason = ""
        self.log = log.bind(principal=identity.principal, targets=",".join(self.targets))

    @property
    def kind(self) -> str:
        """ "turn" or "execution": the work, in the singular."""
        return self.what.removesuffix("s")

    @property
    def stopping(self) -> bool:
        """Whether `stop()` was called."""
        return self._stopping.is_set()

    def stop(self) -> None:
        """Finish the work in hand, claim no more, and let `run()` return."""
        if not self._stopping.is_set():
            self.log.info("worker.stopping")
        self._stopping.set()

    def abandon(self, reason: str) -> None:
        """Say why `run()` is about to be cancelled (the runtime stops: a second signal,
        or the drain time is over). What the cancel cuts short is then given up at once
        (recorded `interrupted`, with `reason`) instead of waiting for its lease to
        expire."""
        self._abandon_reason = reason
        self.stop()

    async def _serve_slots(self, slots: Sequence[Callable[[], Awaitable[None]]]) -> None:
        """Run the slots until they all end; the first failure is raised plainly (every
        slot fails the same way: a bad key, an unknown target). Whatever way it ends,
        the worker is stopped after."""
        try:
            async with asyncio.TaskGroup() as group:
                for slot in slots:
                    group.create_task(slot())  # type: ignore[arg-type]
        except BaseExceptionGroup as failed:
            raise failed.exceptions[0] from None

    def _worker_stopped(self) -> None:
        self._stopping.set()  # a later stop() (a sibling failed) has nothing to say
        self.log.info("worker.stopped")

    def _touch_health(self) -> None:
        """Touch the health file (after each claim round trip and heartbeat), for probes."""
        if self.health_file is not None:
            try:
                self.health_file.touch()
            except OSError as exc:
                self.log.warning(
                    "health_file.unwritable", path=str(self.health_file), error=str(exc)
                )
