"""Turn workers: claim turns, keep their leases alive, run a handler, complete them (R1).

A `TurnWorker` long-polls `ClaimTurn` for the targets it serves. For each turn it starts a
background heartbeat, calls the handler with a `TurnContext`, and completes the turn.

Replies are explicit (C6): the handler sends messages with `TurnContext.send_message`,
which always goes to the turn's trusted reply address; `send_message(..., end_turn=True)`
also completes the turn in the same request (the worker then makes no CompleteTurn).
Whatever the handler returns is logged as ignored and never forwarded.

Wake-ups (S1): a worker given a scheduler address lets the handler ask for a durable
wake-up of its own conversation with `TurnContext.wake_me(after_seconds=... | at=...,
note=...)`. The scheduler later delivers it into the conversation's turn queue as a
`wake_up` delivery whose text is the note (S2); `TurnContext.scheduler` also lists,
cancels and reschedules.

Function calls (F13, F14): a worker given a functions address lets the handler call
declared functions as its agent: `TurnContext.list_functions`, `call_function`,
`get_function_call` and `reply_function_call`. `call_function` asks for the completion
notice in this conversation, so the call's end comes back as a later
`function_completed` turn; there is no need to wait for it in the turn.

Failure policy:

- A handler that runs past `turn_seconds` (B9; `AGENTWORKS_RUNTIME_TURN_SECONDS`,
  default 600) is cancelled (a turn command's sandbox is ended, SIGTERM then SIGKILL
  after the kill grace) and handled as one that raised (`TurnTimedOut`).
- A handler that raises is logged and its turn is still completed. The runtime is alive
  and chose to end the turn, so the conversation's queue is freed at once instead of
  being blocked until the lease expires; the deliveries are not resent (C5, C11). A
  handler that wants the caller to know about a failure says so with `send_message`.
  The completion carries why it failed (L12): `TurnContext.error_detail` when the
  handler set it (a turn command's stderr tail, `agentworks.runner.turn_runner`), else
  the exception as `Type: message`, at most 4 KiB (its end kept); the target's owner
  and the operator read it on the turn's deliveries in the transcript, the
  conversation's caller does not (A3).
- A lost lease (`FAILED_PRECONDITION` on heartbeat or complete) is logged and not
  retried: the service has recorded the turn as `interrupted` (C11). The handler may
  watch `TurnContext.lease_lost`.
- A worker that is cancelled after `abandon(reason)` (a second signal, or the drain time
  over: `serving.run_until_signal`) gives the turn it cuts short up at once
  (CompleteTurn `interrupted`): the service records it `interrupted` and the next turn of
  the conversation can be claimed. Cancelled without it (the process is going away
  without a graceful stop), the turn is left to its lease, which expires into the same
  `interrupted` record.
- `UNAVAILABLE` while claiming backs off exponentially (with jitter) and reconnects.
- `stop()` (SIGTERM) finishes the current turn, completes it, then `run()` returns. A
  claim long-poll in flight is cancelled; if the service had already granted it, the
  granted turn is handled before returning.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable, Sequence

import grpc
import structlog

from agentworks.client import FunctionsClient, MessagingClient, SchedulerClient
from agentworks.client.common import target_str
from agentworks.client.credentials import RuntimeIdentity
from agentworks.client.rpc import open_channel
from agentworks.core import errors
from agentworks.core.limits import MAX_TURN_ERROR_BYTES
from agentworks.core.tls import Tls
from agentworks.messaging.v1 import messaging_pb2 as m
from agentworks.runtime.config import DEFAULT_TURN_SECONDS
from agentworks.runtime.lease import Backoff, LeaseWorker, Work
from agentworks.runtime.reporting import describe, fit_tail
from agentworks.runtime.serving import GIVE_UP_SECONDS, unless_stopped
from agentworks.runtime.startup import check_turn_targets
from agentworks.runtime.turn_context import (
    _FATAL,
    _TRANSIENT,
    DELIVERY_KINDS,
    TurnContext,
    TurnHandler,
    TurnOutcome,
    delivery_attributes,
    delivery_kind,
)

log = structlog.get_logger("agentworks.runtime")

# gRPC backs reconnects off up to 120 s by default; a runtime should notice a restarted
# messaging service within seconds.
_RECONNECT_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 250),
    ("grpc.max_reconnect_backoff_ms", 5000),
]


class TurnTimedOut(Exception):
    """A turn's handler passed the worker's `turn_seconds` and was ended (B9)."""


class TurnWorker(LeaseWorker):
    """Claims turns for some targets and runs a handler for each (R1, C6, C10, C11).

    Args:
        messaging_address: `host:port[,host:port...]` of messaging (ignored with `client`).
        identity: mints the runtime's signed identity, e.g. `agent:demo/demo-bot`.
        targets: the crews/workflows served, e.g. `["crew:demo"]`.
        handler: `async (TurnContext) -> Any`; its return value is ignored (C6).
        client: an existing MessagingClient to use instead of opening a channel.
        scheduler_address: `host:port[,...]` of the scheduler, for `TurnContext.wake_me`.
        scheduler: an existing SchedulerClient to use instead (not closed by the worker).
        functions_address: `host:port[,...]` of functions, for `TurnContext.call_function`.
        functions: an existing FunctionsClient to use instead (not closed by the worker).
        wait_seconds: ClaimTurn long-poll, 0-25.
        lease_seconds: turn lease, 5-300; renewed every `heartbeat_seconds`.
        heartbeat_seconds: defaults to a third of the lease.
        concurrency: turns handled at once (each for a different conversation).
        turn_seconds: the most one turn's handler may take (B9); past it the handler is
            cancelled (a turn command's whole sandbox ended) and the turn completed as
            failed, so the conversation's next turn can be claimed. None: no bound.
        health_file: touched after every claim round-trip and heartbeat, for probes.
        on_finished: called with a `TurnOutcome` after each turn.
        tls: TLS (mutual TLS with a certificate) on the channels the worker opens (T5).

    `run()` may be called once; `stop()` ends it gracefully.
    """

    what = "turns"
    fatal = _FATAL

    def __init__(
        self,
        messaging_address: str | None,
        identity: RuntimeIdentity,
        targets: Sequence[str],
        handler: TurnHandler,
        *,
        client: MessagingClient | None = None,
        scheduler_address: str | None = None,
        scheduler: SchedulerClient | None = None,
        functions_address: str | None = None,
        functions: FunctionsClient | None = None,
        wait_seconds: int = 20,
        lease_seconds: int = 30,
        heartbeat_seconds: float | None = None,
        concurrency: int = 1,
        turn_seconds: float | None = DEFAULT_TURN_SECONDS,
        health_file: str = "",
        on_finished: Callable[[TurnOutcome], None] | None = None,
        tls: Tls | None = None,
        gateway_url: str = "",
    ) -> None:
        heartbeat_seconds = heartbeat_seconds or max(1.0, lease_seconds / 3)
        super().__init__(
            identity,
            targets,
            wait_seconds=wait_seconds,
            lease_seconds=lease_seconds,
            heartbeat_seconds=heartbeat_seconds,
            health_file=health_file,
            log=log,
        )
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if heartbeat_seconds >= lease_seconds:
            raise ValueError(
                f"heartbeat_seconds ({heartbeat_seconds}) must be shorter than the lease "
                f"({lease_seconds} s), or the lease expires between beats"
            )
        self.handler = handler
        self._channel: grpc.aio.Channel | None = None
        if client is None:
            if not messaging_address:
                raise ValueError("a messaging address (host:port[,host:port]) is required")
            self._channel = open_channel(messaging_address, tls, options=_RECONNECT_OPTIONS)
            client = MessagingClient(channel=self._channel, identity=identity, timeout=10)
        self.client = client
        # The scheduler and functions clients are made in run(): a grpc.aio channel
        # belongs to its loop.
        self.scheduler = scheduler
        self._scheduler_address = scheduler_address if scheduler is None else None
        self.functions = functions
        self._functions_address = functions_address if functions is None else None
        if turn_seconds is not None and turn_seconds <= 0:
            raise ValueError("turn_seconds must be positive (or None: no bound)")
        self.concurrency = concurrency
        self.turn_seconds = turn_seconds
        self.on_finished = on_finished
        self._tls = tls
        self.gateway_url = gateway_url  # external A2A agents, through the gateway (X4)

    async def run(self) -> None:
        """Serve turns until `stop()`; raises on configuration errors (bad key, targets)."""
        self.log.info(
            "worker.started",
            concurrency=self.concurrency,
            turn_seconds=self.turn_seconds,
            lease_seconds=self.lease_seconds,
            wake_ups=bool(self.scheduler or self._scheduler_address),
            function_calls=bool(self.functions or self._functions_address),
        )
        own_scheduler = own_functions = None
        if self.scheduler is None and self._scheduler_address:
            own_scheduler = SchedulerClient(
                self._scheduler_address, identity=self.identity, timeout=10, tls=self._tls
            )
            self.scheduler = own_scheduler
        if self.functions is None and self._functions_address:
            own_functions = FunctionsClient(
                self._functions_address, identity=self.identity, timeout=10, tls=self._tls
            )
            self.functions = own_functions
        try:
            await self._serve_slots(
                [
                    lambda: unless_stopped(check_turn_targets(self), self._stopping),
                    *(functools.partial(self._serve, slot) for slot in range(self.concurrency)),
                ]
            )
        finally:
            if own_scheduler is not None:
                await own_scheduler.close()
                self.scheduler = None
            if own_functions is not None:
                await own_functions.close()
                self.functions = None
            if self._channel is not None:
                await self._channel.close()
            self._worker_stopped()

    async def _serve(self, slot: int) -> None:
        backoff = Backoff()
        idle = time.monotonic()
        while not self._stopping.is_set():
            turn = await self._claim_next(backoff, idle)
            if turn is not None:
                await self._handle(turn)
                idle = time.monotonic()

    def _claim_call(self) -> Awaitable[m.Turn | None]:
        return self.client.claim_turn(
            self.targets, wait_seconds=self.wait_seconds, lease_seconds=self.lease_seconds
        )

    def _claim_failed_event(self, exc: errors.AgentWorksError) -> str:
        if isinstance(exc, _TRANSIENT):
            return "turn.claim_unavailable"
        # NOT_FOUND / PERMISSION_DENIED: the target may not be registered yet.
        return "turn.claim_failed"

    async def _handle(self, turn: m.Turn) -> None:
        attributes = {
            "agentworks.turn_id": turn.turn_id,
            "agentworks.conversation_id": turn.conversation_id,
        }
        with self._working(target_str(turn.target), turn.traceparent, attributes) as work:
            await self._run_turn(turn, work)

    async def _run_turn(self, turn: m.Turn, work: Work) -> None:
        bound = self.log.bind(turn_id=turn.turn_id, conversation_id=turn.conversation_id)
        ctx = TurnContext(
            turn=turn,
            client=self.client,
            log=bound,
            scheduler=self.scheduler,
            functions=self.functions,
            gateway_url=self.gateway_url,
        )
        bound.info(
            "turn.started",
            deliveries=len(turn.deliveries),
            kinds=",".join(delivery_kind(d) for d in turn.deliveries),
        )
        error: BaseException | None = None
        started = time.monotonic()
        async with self._holding(ctx):
            deadline = asyncio.timeout(self.turn_seconds)  # B9: the turn's wall time
            try:
                async with deadline:
                    result = await self.handler(ctx)
                if result is not None:
                    # C6: final chat text is never forwarded; only send_message replies.
                    bound.info("turn.return_value_ignored", type=type(result).__name__)
            except Exception as exc:
                if deadline.expired():
                    error = TurnTimedOut(
                        f"the turn passed its wall time ({self.turn_seconds} s) and was ended"
                    )
                    bound.warning("turn.wall_time_exceeded", turn_seconds=self.turn_seconds)
                else:
                    error = exc
                    bound.exception("turn.handler_failed", error=repr(exc))
        completed = ctx.ended  # a reply that ended the turn completed it
        if not completed and not ctx.lease_lost.is_set():
            completed = await self._complete(ctx, turn_error(ctx, error))
        if ctx.lease_lost.is_set():
            work.outcome = "lease_lost"
        elif not completed:
            work.outcome = "not_completed"
        else:
            work.outcome = "failed" if error is not None else "completed"
        bound.info(
            "turn.finished",
            completed=completed,
            lease_lost=ctx.lease_lost.is_set(),
            replies=len(ctx.sent),
            seconds=round(time.monotonic() - started, 3),
        )
        if self.on_finished is not None:
            self.on_finished(
                TurnOutcome(
                    turn_id=turn.turn_id,
                    conversation_id=turn.conversation_id,
                    completed=completed,
                    lease_lost=ctx.lease_lost.is_set(),
                    error=error,
                )
            )

    async def _renew(self, ctx: TurnContext) -> m.HeartbeatTurnResponse:
        return await self.client.heartbeat_turn(ctx.turn_id, lease_seconds=self.lease_seconds)

    def _renewed(self, ctx: TurnContext, answer: m.HeartbeatTurnResponse) -> None:
        if answer.capability:  # the turn's capability, renewed with the lease (T3)
            ctx._capability = answer.capability

    def _left_to_lease(self, ctx: TurnContext) -> None:
        ctx.log.warning("turn.abandoned", reason="worker cancelled; the lease will expire")

    async def _end_interrupted(self, ctx: TurnContext, reason: str) -> None:
        await self.client.complete_turn(ctx.turn_id, interrupted=True)

    async def _complete(self, ctx: TurnContext, error: str = "") -> bool:
        backoff = Backoff(initial=0.2, maximum=2.0)
        for attempt in range(1, 4):
            try:
                await self.client.complete_turn(ctx.turn_id, error=error)
                return True
            except errors.PreconditionFailed as exc:
                ctx.lease_lost.set()
                ctx.log.warning("turn.lease_lost", error=exc.message)
                return False
            except _TRANSIENT as exc:
                if attempt == 3:
                    ctx.log.error("turn.complete_failed", code=exc.code.name, error=exc.message)
                    return False
                await asyncio.sleep(backoff.next())
            except errors.AgentWorksError as exc:
                ctx.log.error("turn.complete_failed", code=exc.code.name, error=exc.message)
                return False
        return False


def turn_error(ctx: TurnContext, error: BaseException | None) -> str:
    """Why the turn failed, as CompleteTurn takes it (L12): "" when it did not; the
    handler's own detail or the exception, cleaned and cut to the limit (its end kept)."""
    if error is None:
        return ""
    return fit_tail(ctx.error_detail or describe(error), MAX_TURN_ERROR_BYTES)


# What `agentworks.runtime.turns` has always offered (moved to modules of their own).
__all__ = [
    "DELIVERY_KINDS",
    "GIVE_UP_SECONDS",
    "Backoff",
    "TurnContext",
    "TurnHandler",
    "TurnOutcome",
    "TurnTimedOut",
    "TurnWorker",
    "delivery_attributes",
    "delivery_kind",
]
