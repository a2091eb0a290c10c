"""What turn and execution workers share: the lease-worker base and its backoff (R1)."""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

import structlog

from agentworks.client import target_ref
from agentworks.client.credentials import RuntimeIdentity
from agentworks.core import errors
from agentworks.runtime import metrics
from agentworks.runtime.serving import GIVE_UP_SECONDS, unless_stopped
from agentworks.runtime.tracing import work_span


class Leased(Protocol):
    """What the base uses of a TurnContext or an ExecutionContext."""

    log: structlog.stdlib.BoundLogger
    lease_lost: asyncio.Event


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


class Work:
    """One turn or execution in hand: how it ended, set by the worker (the outcome label
    of `agentworks_runtime_finished_total`); `abandoned` when it was cut short."""

    outcome = "abandoned"


class LeaseWorker:
    """The base of `TurnWorker` and `ExecutionWorker`: serve leased work for targets.

    Both claim work for their targets in concurrent slots (each a claim long-poll), keep
    each claim's lease alive with heartbeats while a handler runs, and stop the same
    ways: `stop()` finishes what is in hand and claims no more; `abandon(reason)` before
    a cancel gives up what the cancel cuts short, so the service records it
    `interrupted` at once (C11, F12) instead of when its lease expires. `what` names the
    work in messages ("turns", "executions").

    A subclass says how to claim (`_claim_call`), renew (`_renew`) and give up
    (`_end_interrupted`) one piece of work; the loops around them are here.
    """

    what = "work"
    # Claim errors that no retry mends (a bad key, a bad request): raised from run().
    fatal: tuple[type[errors.AgentWorksError], ...] = (
        errors.Unauthenticated,
        errors.InvalidArgument,
    )
    # The field of the `<kind>.abandoned` log line that says whether the give-up landed.
    given_up_field = "given_up"

    def __init__(
        self,
        identity: RuntimeIdentity,
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

    # ------------------------------------------------------------------ claiming

    def _claim_call(self) -> Awaitable[Any]:
        """The claim long-poll for this worker's targets (a subclass says which)."""
        raise NotImplementedError

    def _claim_failed_event(self, exc: errors.AgentWorksError) -> str:
        """The log event for a claim that failed and is retried after a pause."""
        return f"{self.kind}.claim_failed"

    async def _claim_next(self, backoff: Backoff, idle_since: float | None = None) -> Any:
        """One claim round trip: what it claimed, or None (nothing came, the worker is
        stopping, or the claim failed and the backoff pause is over). A fatal refusal is
        logged and raised. `idle_since`: when the slot became free (monotonic), for
        `agentworks_runtime_claim_wait_seconds`."""
        try:
            claimed = await unless_stopped(self._claim_call(), self._stopping)
        except self.fatal as exc:
            self.log.error(f"{self.kind}.claim_refused", code=exc.code.name, error=exc.message)
            raise
        except errors.AgentWorksError as exc:
            await self._pause(self._claim_failed_event(exc), exc, backoff)
            return None
        backoff.reset()
        self._touch_health()
        if claimed is not None and idle_since is not None:
            metrics.CLAIM_WAIT.labels(self.kind).observe(time.monotonic() - idle_since)
        return claimed

    @contextlib.contextmanager
    def _working(
        self, target: str, traceparent: str, attributes: Mapping[str, str], what: str = ""
    ) -> Iterator[Work]:
        """Around the handling of one claimed turn or execution: its span `<kind>
        <target>[ <what>]` (continuing the trace that queued it, `traceparent`) and its
        metrics (claimed, busy slots, handler time, outcome)."""
        work = Work()
        metrics.CLAIMED.labels(self.kind, target).inc()
        busy = metrics.BUSY_SLOTS.labels(self.kind)
        busy.inc()
        started = time.monotonic()
        try:
            name = f"{self.kind} {target}" + (f" {what}" if what else "")
            with work_span(name, traceparent, attributes) as span:
                try:
                    yield work
                finally:
                    span.set_attribute("agentworks.outcome", work.outcome)
        finally:
            busy.dec()
            metrics.HANDLER_SECONDS.labels(self.kind, target).observe(time.monotonic() - started)
            metrics.FINISHED.labels(self.kind, target, work.outcome).inc()

    async def _pause(self, event: str, exc: errors.AgentWorksError, backoff: Backoff) -> None:
        delay = backoff.next()
        self.log.warning(event, code=exc.code.name, error=exc.message, retry_in=round(delay, 2))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), delay)

    # ------------------------------------------------------------------ holding a lease

    async def _renew(self, ctx: Any) -> Any:
        """One heartbeat of `ctx`'s lease; its answer (a subclass says how)."""
        raise NotImplementedError

    def _renewed(self, ctx: Any, answer: Any) -> None:
        """What a subclass learns from a heartbeat's answer (e.g. a cancel)."""

    def _heartbeats_done(self, ctx: Any) -> bool:
        """Whether to stop heartbeating after a beat: by default once the lease is lost."""
        return bool(ctx.lease_lost.is_set())

    async def _heartbeat(self, ctx: Any) -> None:
        """Renew the lease every `heartbeat_seconds` while the handler runs. A lost lease
        (FAILED_PRECONDITION) sets `ctx.lease_lost`; other errors are transient: the
        next beat, a third of the lease later, tries again before the lease expires."""
        while True:
            await asyncio.sleep(self.heartbeat_seconds)
            try:
                answer = await self._renew(ctx)
            except errors.PreconditionFailed as exc:
                ctx.log.warning(f"{self.kind}.lease_lost", error=exc.message)
                ctx.lease_lost.set()
            except errors.AgentWorksError as exc:
                ctx.log.warning(
                    f"{self.kind}.heartbeat_failed", code=exc.code.name, error=exc.message
                )
                continue
            else:
                self._touch_health()
                self._renewed(ctx, answer)
            if self._heartbeats_done(ctx):
                return

    @contextlib.asynccontextmanager
    async def _holding(self, ctx: Any) -> AsyncIterator[None]:
        """Heartbeat `ctx`'s lease for the duration of the block. A cancel of the block
        (the runtime stops) gives the work up at once after `abandon()`, otherwise it is
        left to its lease (`_left_to_lease`)."""
        heartbeat = asyncio.create_task(self._heartbeat(ctx))
        try:
            yield
        except asyncio.CancelledError:
            if self._abandon_reason:
                await self._give_up(ctx)
            else:
                self._left_to_lease(ctx)
            raise
        finally:
            heartbeat.cancel()
            await asyncio.wait({heartbeat})

    def _left_to_lease(self, ctx: Any) -> None:
        """A cancel without `abandon()`: the lease expires into `interrupted`."""

    async def _end_interrupted(self, ctx: Any, reason: str) -> None:
        """Tell the service the work ends `interrupted` (a subclass says how)."""
        raise NotImplementedError

    async def _give_up(self, ctx: Any) -> None:
        """The runtime is stopping and has cancelled this work's handler: end it
        `interrupted` with the reason (`abandon`) at once, in at most `GIVE_UP_SECONDS`
        (it is stopping); if that fails, the lease expires into the same record."""
        reason = self._abandon_reason
        try:
            async with asyncio.timeout(GIVE_UP_SECONDS):
                await self._end_interrupted(ctx, reason)
        except (errors.AgentWorksError, TimeoutError) as exc:
            ctx.log.warning(
                f"{self.kind}.abandoned",
                reason=reason,
                **{self.given_up_field: False},
                error=str(exc),
            )
        else:
            ctx.log.warning(f"{self.kind}.abandoned", reason=reason, **{self.given_up_field: True})
