"""Turn workers: claim turns, keep their leases alive, run a handler, complete them (R1).

A `TurnWorker` long-polls `ClaimTurn` for the targets it serves. For each turn it starts a
background heartbeat, calls the handler with a `TurnContext`, and completes the turn.

Replies are explicit (C6): the handler sends messages with `TurnContext.send_message`,
which always goes to the turn's trusted reply address. Whatever the handler returns is
logged as ignored and never forwarded.

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

- A handler that raises is logged and its turn is still completed. The runtime is alive
  and chose to end the turn, so the conversation's queue is freed at once instead of
  being blocked until the lease expires; the deliveries are not resent (C5, C11). A
  handler that wants the caller to know about a failure says so with `send_message`.
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
import contextlib
import math
import pathlib
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

import grpc
import structlog

from agentworks.client import (
    FunctionsClient,
    MessagingClient,
    SchedulerClient,
    errors,
    target_ref,
    target_str,
)
from agentworks.client.identity import Minter
from agentworks.client.rpc import channel_options, channel_target
from agentworks.client.structs import struct_json
from agentworks.common.v1 import common_pb2
from agentworks.functions.v1 import functions_pb2 as f
from agentworks.messaging.v1 import messaging_pb2 as m
from agentworks.runtime.serving import GIVE_UP_SECONDS, unless_stopped
from agentworks.scheduler.v1 import scheduler_pb2 as s

log = structlog.get_logger("agentworks.runtime")

T = TypeVar("T")

DELIVERY_KINDS: dict[int, str] = {
    m.DELIVERY_KIND_MESSAGE: "message",
    m.DELIVERY_KIND_WAKE_UP: "wake_up",
    m.DELIVERY_KIND_SCHEDULE: "schedule",
    m.DELIVERY_KIND_WEBHOOK: "webhook",
    m.DELIVERY_KIND_FUNCTION_COMPLETED: "function_completed",
}

# gRPC backs reconnects off up to 120 s by default; a runtime should notice a restarted
# messaging service within seconds.
_RECONNECT_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 250),
    ("grpc.max_reconnect_backoff_ms", 5000),
]

# Errors that mean the configuration is wrong; retrying cannot help.
_FATAL = (errors.Unauthenticated, errors.InvalidArgument)
# Errors worth retrying quickly: the service or the network is briefly away.
_TRANSIENT = (errors.Unavailable, errors.DeadlineExceeded)


def delivery_kind(delivery: m.Delivery) -> str:
    """The contract name of a delivery's kind: message, wake_up, schedule, webhook, ..."""
    return DELIVERY_KINDS.get(delivery.kind, "unknown")


def delivery_attributes(delivery: m.Delivery) -> dict[str, Any]:
    """A delivery's attributes as plain JSON, whole numbers as ints: a schedule's
    `{"schedule_id": ..., "occurrence": ..., "missed_occurrences": 2, ...}`, a webhook's
    `{"webhook_id": ..., "content_type": ..., "signed_at": 1764554400, ...}` (the table
    in docs/scheduler.md). `delivery.attributes` itself is a protobuf Struct, whose
    numbers are all floats (2.0)."""
    return struct_json(delivery.attributes)


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


@dataclass
class TurnContext:
    """What a handler gets for one turn: its deliveries and the explicit reply tool."""

    turn: m.Turn
    client: MessagingClient
    log: Any
    lease_lost: asyncio.Event = field(default_factory=asyncio.Event)
    sent: list[m.SendReceipt] = field(default_factory=list)
    # Set when the worker has a scheduler address; acts as the runtime's agent identity.
    scheduler: SchedulerClient | None = None
    wake_ups: list[s.WakeUp] = field(default_factory=list)
    # Set when the worker has a functions address; acts as the runtime's agent identity.
    functions: FunctionsClient | None = None
    function_calls: list[f.CallReceipt] = field(default_factory=list)

    @property
    def turn_id(self) -> str:
        """The claimed turn's id."""
        return self.turn.turn_id

    @property
    def conversation_id(self) -> str:
        """The conversation this turn belongs to."""
        return self.turn.conversation_id

    @property
    def target(self) -> str:
        """The crew or workflow served, as `crew:<name>` / `workflow:<id>`."""
        return target_str(self.turn.target)

    @property
    def reply_inbox_id(self) -> str:
        """The trusted reply address: the conversation's inbox (C6)."""
        return self.turn.reply_inbox_id

    @property
    def deliveries(self) -> list[m.Delivery]:
        """The deliveries in this turn, oldest first."""
        return list(self.turn.deliveries)

    @property
    def messages(self) -> list[m.Message]:
        """The messages among the deliveries, oldest first."""
        return [d.message for d in self.turn.deliveries if d.kind == m.DELIVERY_KIND_MESSAGE]

    async def send_message(
        self, text: str, *, parts: Sequence[common_pb2.Part] = (), attempts: int = 3
    ) -> m.SendReceipt:
        """Send `text` as this agent to the conversation's inbox (the only reply path, C6).

        Retries on UNAVAILABLE with a per-turn submission id, so a retry never sends
        the message twice (C4).
        """
        submission_id = f"turn:{self.turn_id}:{len(self.sent) + 1}"
        backoff = Backoff(initial=0.2, maximum=2.0)
        for attempt in range(1, attempts + 1):
            try:
                receipt = await self.client.send_message(
                    self.reply_inbox_id, text, parts=parts, submission_id=submission_id
                )
            except _TRANSIENT as exc:
                if attempt == attempts:
                    raise
                delay = backoff.next()
                self.log.warning("reply.retry", error=exc.message, retry_in=round(delay, 2))
                await asyncio.sleep(delay)
                continue
            self.sent.append(receipt)
            self.log.info("reply.sent", message_id=receipt.message_id)
            return receipt
        raise AssertionError("unreachable")

    async def wake_me(
        self,
        *,
        after_seconds: float | None = None,
        at: datetime | None = None,
        note: str = "",
    ) -> s.WakeUp:
        """Ask the scheduler for a durable wake-up of this conversation (S1).

        Give `after_seconds` (rounded up to whole seconds) or `at` (an aware datetime).
        When due, the scheduler delivers a `wake_up` into this conversation's turn queue
        with `note` as its text (S2); a later turn gets it. Messages do not cancel it;
        `self.scheduler.cancel_wake_up(w.wake_up_id)` or `reschedule_wake_up` do.

        Retried on UNAVAILABLE with a per-turn retry key (`turn:<turn_id>:wake:<n>`),
        so a retry after a lost answer gets the same wake-up, never a second (S1).
        Raises `PreconditionFailed` when the runtime has no scheduler address
        (AGENTWORKS_SCHEDULER_ADDRESS), and the scheduler's errors (`InvalidArgument`
        for a bad time or note, `Busy` past 100 pending).
        """
        if self.scheduler is None:
            raise errors.PreconditionFailed(
                "this runtime has no scheduler: set AGENTWORKS_SCHEDULER_ADDRESS "
                "(or --scheduler-address) to request wake-ups"
            )
        if (after_seconds is None) == (at is None):
            raise ValueError("wake_me needs exactly one of after_seconds or at")
        if at is not None and at.tzinfo is None:
            raise ValueError("wake_me(at=...) needs an aware datetime, e.g. datetime.now(UTC)")
        delay = None if after_seconds is None else max(0, math.ceil(after_seconds))
        submission_id = f"turn:{self.turn_id}:wake:{len(self.wake_ups) + 1}"
        scheduler = self.scheduler
        wake_up = await self._retried(
            "wake_up.retry",
            lambda: scheduler.create_wake_up(
                self.conversation_id,
                at=at,
                delay_seconds=delay,
                note=note,
                submission_id=submission_id,
            ),
        )
        self.wake_ups.append(wake_up)
        self.log.info(
            "wake_up.requested",
            wake_up_id=wake_up.wake_up_id,
            due_at=wake_up.due_at.ToJsonString(),
        )
        return wake_up

    async def _retried(self, event: str, make: Callable[[], Awaitable[T]]) -> T:
        """`make()`, tried 3 times on UNAVAILABLE / DEADLINE_EXCEEDED (the request carries
        its retry key, so a retry after a lost answer gets the same result)."""
        backoff = Backoff(initial=0.2, maximum=2.0)
        for attempt in range(1, 4):
            try:
                return await make()
            except _TRANSIENT as exc:
                if attempt == 3:
                    raise
                pause = backoff.next()
                self.log.warning(event, error=exc.message, retry_in=round(pause, 2))
                await asyncio.sleep(pause)
        raise AssertionError("unreachable")

    def _functions_client(self) -> FunctionsClient:
        if self.functions is None:
            raise errors.PreconditionFailed(
                "this runtime has no functions service: set AGENTWORKS_FUNCTIONS_ADDRESS "
                "(or --functions-address) to call functions"
            )
        return self.functions

    async def list_functions(self, target: str) -> list[f.Function]:
        """The functions this agent may call on `target`, e.g. `crew:tools` (F2)."""
        return await self._functions_client().list_functions(target)

    async def call_function(
        self,
        target: str,
        function: str,
        inputs: Mapping[str, Any] | None = None,
        *,
        submission_id: str | None = None,
        wait_seconds: int = 0,
    ) -> f.CallReceipt:
        """Call a declared function as this agent; keep `receipt.call_id` (F3-F6, F13).

        The completion notice is delivered to this conversation: the call's end comes
        back as a later `function_completed` turn whose attributes name the `call_id`
        and `status` (read the output with `get_function_call`). With `wait_seconds`
        (up to 25) the receipt carries the ended call as `outcome` if it ends in time.

        Retried on UNAVAILABLE with one retry key, `submission_id` or, by default, one
        per turn and call (`turn:<turn_id>:call:<n>`), so a retry after a lost answer
        gets the same call, never a second (F6). Raises `PreconditionFailed` when the
        runtime has no functions address (AGENTWORKS_FUNCTIONS_ADDRESS), and the
        service's errors (`InvalidArgument` for bad inputs, `Busy` at the running limit).
        """
        functions = self._functions_client()
        key = submission_id or f"turn:{self.turn_id}:call:{len(self.function_calls) + 1}"
        receipt = await self._retried(
            "function.retry",
            lambda: functions.call(
                target,
                function,
                inputs,
                submission_id=key,
                notify_conversation_id=self.conversation_id,
                wait_seconds=wait_seconds,
            ),
        )
        self.function_calls.append(receipt)
        self.log.info(
            "function.called",
            call_id=receipt.call_id,
            function=f"{target}/{function}",
            created=receipt.created,
        )
        return receipt

    async def get_function_call(self, call_id: str) -> f.CallStatus:
        """A call's status, progress, question, answer/result, error and files (F7)."""
        return await self._functions_client().get_status(call_id)

    async def reply_function_call(self, call_id: str, text: str) -> f.CallStatus:
        """Answer the human-input question a call is `waiting_for_input` on (F11)."""
        return await self._functions_client().reply(call_id, text)


TurnHandler = Callable[[TurnContext], Awaitable[object]]


@dataclass(frozen=True)
class TurnOutcome:
    """How one turn ended, for callers that watch the worker (tests, metrics)."""

    turn_id: str
    conversation_id: str
    completed: bool
    lease_lost: bool
    error: BaseException | None = None


class TurnWorker:
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
        health_file: touched after every claim round-trip and heartbeat, for probes.
        on_finished: called with a `TurnOutcome` after each turn.

    `run()` may be called once; `stop()` ends it gracefully.
    """

    def __init__(
        self,
        messaging_address: str | None,
        identity: Minter,
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
        health_file: str = "",
        on_finished: Callable[[TurnOutcome], None] | None = None,
    ) -> None:
        if not targets:
            raise ValueError("a turn worker needs at least one target, e.g. crew:demo")
        for target in targets:
            target_ref(target)  # raises ValueError naming the bad target
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        heartbeat_seconds = heartbeat_seconds or max(1.0, lease_seconds / 3)
        if heartbeat_seconds >= lease_seconds:
            raise ValueError(
                f"heartbeat_seconds ({heartbeat_seconds}) must be shorter than the lease "
                f"({lease_seconds} s), or the lease expires between beats"
            )
        self.targets = tuple(targets)
        self.handler = handler
        self.identity = identity
        self._channel: grpc.aio.Channel | None = None
        if client is None:
            if not messaging_address:
                raise ValueError("a messaging address (host:port[,host:port]) is required")
            self._channel = grpc.aio.insecure_channel(
                channel_target(messaging_address),
                options=[*channel_options(), *_RECONNECT_OPTIONS],
            )
            client = MessagingClient(channel=self._channel, identity=identity, timeout=10)
        self.client = client
        # The scheduler and functions clients are made in run(): a grpc.aio channel
        # belongs to its loop.
        self.scheduler = scheduler
        self._scheduler_address = scheduler_address if scheduler is None else None
        self.functions = functions
        self._functions_address = functions_address if functions is None else None
        self.wait_seconds = wait_seconds
        self.lease_seconds = lease_seconds
        self.heartbeat_seconds = heartbeat_seconds
        self.concurrency = concurrency
        self.health_file = pathlib.Path(health_file) if health_file else None
        self.on_finished = on_finished
        self._stopping = asyncio.Event()
        self._abandon_reason = ""
        self.log = log.bind(principal=identity.principal, targets=",".join(self.targets))

    @property
    def stopping(self) -> bool:
        """Whether `stop()` was called."""
        return self._stopping.is_set()

    def stop(self) -> None:
        """Finish the turns in hand, claim no more, and let `run()` return."""
        if not self._stopping.is_set():
            self.log.info("worker.stopping")
        self._stopping.set()

    def abandon(self, reason: str) -> None:
        """Say why `run()` is about to be cancelled (the runtime stops: a second signal, or
        the drain time is over). Each turn the cancel cuts short is then given up at once
        (recorded `interrupted`, C11) instead of holding its conversation until the lease
        expires; `reason` is logged."""
        self._abandon_reason = reason
        self.stop()

    async def run(self) -> None:
        """Serve turns until `stop()`; raises on configuration errors (bad key, targets)."""
        self.log.info(
            "worker.started",
            concurrency=self.concurrency,
            lease_seconds=self.lease_seconds,
            wake_ups=bool(self.scheduler or self._scheduler_address),
            function_calls=bool(self.functions or self._functions_address),
        )
        own_scheduler = own_functions = None
        if self.scheduler is None and self._scheduler_address:
            own_scheduler = SchedulerClient(
                self._scheduler_address, identity=self.identity, timeout=10
            )
            self.scheduler = own_scheduler
        if self.functions is None and self._functions_address:
            own_functions = FunctionsClient(
                self._functions_address, identity=self.identity, timeout=10
            )
            self.functions = own_functions
        try:
            async with asyncio.TaskGroup() as group:
                for slot in range(self.concurrency):
                    group.create_task(self._serve(slot))
        except BaseExceptionGroup as group:
            # Every slot fails the same way (bad key, unknown target): report it plainly.
            raise group.exceptions[0] from None
        finally:
            if own_scheduler is not None:
                await own_scheduler.close()
                self.scheduler = None
            if own_functions is not None:
                await own_functions.close()
                self.functions = None
            if self._channel is not None:
                await self._channel.close()
            self._stopping.set()  # a later stop() (a sibling failed) has nothing to say
            self.log.info("worker.stopped")

    async def _serve(self, slot: int) -> None:
        backoff = Backoff()
        while not self._stopping.is_set():
            try:
                turn = await self._claim()
            except _FATAL as exc:
                self.log.error("turn.claim_refused", code=exc.code.name, error=exc.message)
                raise
            except _TRANSIENT as exc:
                await self._pause("turn.claim_unavailable", exc, backoff)
                continue
            except errors.AgentWorksError as exc:
                # NOT_FOUND / PERMISSION_DENIED: the target may not be registered yet.
                await self._pause("turn.claim_failed", exc, backoff)
                continue
            backoff.reset()
            self._touch_health()
            if turn is not None:
                await self._handle(turn)

    async def _pause(self, event: str, exc: errors.AgentWorksError, backoff: Backoff) -> None:
        delay = backoff.next()
        self.log.warning(event, code=exc.code.name, error=exc.message, retry_in=round(delay, 2))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), delay)

    async def _claim(self) -> m.Turn | None:
        return await unless_stopped(
            self.client.claim_turn(
                self.targets, wait_seconds=self.wait_seconds, lease_seconds=self.lease_seconds
            ),
            self._stopping,
        )

    async def _handle(self, turn: m.Turn) -> None:
        bound = self.log.bind(turn_id=turn.turn_id, conversation_id=turn.conversation_id)
        ctx = TurnContext(
            turn=turn,
            client=self.client,
            log=bound,
            scheduler=self.scheduler,
            functions=self.functions,
        )
        bound.info(
            "turn.started",
            deliveries=len(turn.deliveries),
            kinds=",".join(delivery_kind(d) for d in turn.deliveries),
        )
        heartbeat = asyncio.create_task(self._heartbeat(ctx))
        error: BaseException | None = None
        started = time.monotonic()
        try:
            result = await self.handler(ctx)
            if result is not None:
                # C6: final chat text is never forwarded; only send_message replies.
                bound.info("turn.return_value_ignored", type=type(result).__name__)
        except asyncio.CancelledError:
            if self._abandon_reason:
                await self._give_up(ctx)
            else:
                bound.warning("turn.abandoned", reason="worker cancelled; the lease will expire")
            raise
        except Exception as exc:
            error = exc
            bound.exception("turn.handler_failed", error=repr(exc))
        finally:
            heartbeat.cancel()
            await asyncio.wait({heartbeat})
        completed = False
        if not ctx.lease_lost.is_set():
            completed = await self._complete(ctx)
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

    async def _heartbeat(self, ctx: TurnContext) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_seconds)
            try:
                await self.client.heartbeat_turn(ctx.turn_id, lease_seconds=self.lease_seconds)
            except errors.PreconditionFailed as exc:
                ctx.log.warning("turn.lease_lost", error=exc.message)
                ctx.lease_lost.set()
                return
            except errors.AgentWorksError as exc:
                # Transient: the next beat (lease/3 later) tries again before expiry.
                ctx.log.warning("turn.heartbeat_failed", code=exc.code.name, error=exc.message)
            else:
                self._touch_health()

    async def _give_up(self, ctx: TurnContext) -> None:
        """The runtime is stopping and has cancelled this turn's handler: end the turn
        `interrupted` (`abandon`), in at most `GIVE_UP_SECONDS`."""
        reason = self._abandon_reason
        try:
            async with asyncio.timeout(GIVE_UP_SECONDS):
                await self.client.complete_turn(ctx.turn_id, interrupted=True)
        except (errors.AgentWorksError, TimeoutError) as exc:
            # Left to the lease, which expires into the same record.
            ctx.log.warning("turn.abandoned", reason=reason, given_up=False, error=str(exc))
        else:
            ctx.log.warning("turn.abandoned", reason=reason, given_up=True)

    async def _complete(self, ctx: TurnContext) -> bool:
        backoff = Backoff(initial=0.2, maximum=2.0)
        for attempt in range(1, 4):
            try:
                await self.client.complete_turn(ctx.turn_id)
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

    def _touch_health(self) -> None:
        if self.health_file is not None:
            try:
                self.health_file.touch()
            except OSError as exc:
                self.log.warning(
                    "health_file.unwritable", path=str(self.health_file), error=str(exc)
                )
