"""Execution workers: claim function executions, keep their leases, run a handler (R1, R2).

An `ExecutionWorker` long-polls `ClaimExecution` for the targets it serves. For each
execution it creates the output folder `<root>/.calls/<call_id>/`, starts a background
heartbeat, and calls the handler with an `ExecutionContext`:

    async def handle(ctx: ExecutionContext) -> str:
        await ctx.progress("reading")
        await ctx.message("looking at the inputs")
        answer = await ctx.ask("Which format?")          # waits for the caller's reply
        ctx.result_file.write_text(json.dumps({...}))     # FUNCTION_RESULT_FILE (F10)
        return "done"                                      # the final message

What the handler returns is the execution's final message (a non-string is sent as JSON,
and must nest at most 24 deep: `agentworks.core.checks.MAX_JSON_DEPTH`).
After the handler returns (or raises), every regular file left in the output folder is
uploaded, the result file first (`upload_folder`; files the handler uploaded itself with
`ctx.upload_file` and left unchanged are not sent twice), and the execution is finished.
When the service asks for the one correction turn (F10), the same handler is called again
with `ctx.correction_prompt` set, and the worker finishes a second time.

How the outcome is reported, and what happens when it cannot be: `finishing` (the failure
policy).
"""

from __future__ import annotations

import asyncio
import pathlib
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import structlog

from agentworks.client.common import target_str
from agentworks.client.credentials import RuntimeIdentity
from agentworks.client.functions import FunctionsClient, state_name
from agentworks.core.limits import MAX_ERROR_BYTES
from agentworks.core.tls import Tls
from agentworks.functions.v1 import functions_pb2 as f
from agentworks.runtime.config import RuntimeConfig
from agentworks.runtime.execution_context import (
    _FATAL,
    ExecutionContext,
    ExecutionHandler,
    ExecutionOutcome,
    ExecutionStopped,
)
from agentworks.runtime.finishing import answer_text, finish, upload_outputs
from agentworks.runtime.lease import Backoff, LeaseWorker
from agentworks.runtime.reporting import (
    UNREPORTABLE,
    clean_text,
    describe,
    fit_text,
)
from agentworks.runtime.serving import run_until_signal, unless_stopped
from agentworks.runtime.startup import check_targets, running_limits
from agentworks.runtime.uploads import upload_folder

log = structlog.get_logger("agentworks.runtime.executions")


class ExecutionWorker(LeaseWorker):
    """Claims executions for some targets and runs a handler for each (R1, F9-F12, F15).

    `concurrency`: executions run at once. Not given, the worker reads its targets'
    running limits at start and runs that many (at most `AUTO_CONCURRENCY_MAX`): calls
    run in parallel (F5), so a worker that took them one at a time would hold the
    others, accepted, until the first ended. `tls`: TLS (mutual TLS with a certificate)
    on the channel the worker opens (T5).
    """

    what = "executions"
    fatal = _FATAL
    given_up_field = "finished"

    def __init__(
        self,
        functions_address: str | None,
        identity: RuntimeIdentity,
        targets: Sequence[str],
        handler: ExecutionHandler | Mapping[str, ExecutionHandler],
        *,
        client: FunctionsClient | None = None,
        root: pathlib.Path | str = ".",
        wait_seconds: int = 20,
        lease_seconds: int = 30,
        heartbeat_seconds: float | None = None,
        concurrency: int | None = None,
        health_file: str = "",
        on_finished: Callable[[ExecutionOutcome], None] | None = None,
        tls: Tls | None = None,
    ) -> None:
        super().__init__(
            identity,
            targets,
            wait_seconds=wait_seconds,
            lease_seconds=lease_seconds,
            heartbeat_seconds=heartbeat_seconds or max(0.3, lease_seconds / 3),
            health_file=health_file,
            log=log,
        )
        if concurrency is not None and concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.handler = handler
        self._owns_client = client is None
        self._address = functions_address
        self._tls = tls
        # Made in run(): a grpc.aio channel belongs to the event loop that creates it.
        self.client: FunctionsClient = client  # type: ignore[assignment]
        self.root = pathlib.Path(root).resolve()
        self.concurrency = concurrency
        self.on_finished = on_finished
        self._running: dict[str, asyncio.Task[Any]] = {}  # call_id -> its handler's run

    async def run(self) -> None:
        """Serve executions until `stop()`; raises on configuration errors."""
        if self._owns_client:
            self.client = FunctionsClient(
                self._address, identity=self.identity, timeout=10, tls=self._tls
            )
        if self.concurrency is None:
            self.concurrency = await running_limits(self)
        self.log.info("worker.started", concurrency=self.concurrency, root=str(self.root))
        try:
            await self._serve_slots(
                [
                    lambda: unless_stopped(check_targets(self), self._stopping),
                    *([self._serve] * self.concurrency),
                ]
            )
        finally:
            if self._owns_client:
                await self.client.close()
            self._worker_stopped()

    async def _serve(self) -> None:
        backoff = Backoff()
        idle = time.monotonic()
        execution: f.Execution | None = None  # claimed by the last finish, to run next
        while execution is not None or not self._stopping.is_set():
            if execution is not None:
                _, execution = await self._handle(execution, claim_next=True)
                idle = time.monotonic()
                continue
            execution = await self._claim_next(backoff, idle)

    def _claim_call(self) -> Awaitable[f.Execution | None]:
        return self.client.claim_execution(
            self.targets, wait_seconds=self.wait_seconds, lease_seconds=self.lease_seconds
        )

    def _handler_for(self, function: str) -> ExecutionHandler | None:
        if isinstance(self.handler, Mapping):
            return self.handler.get(function)
        return self.handler

    async def handle(self, execution: f.Execution) -> ExecutionOutcome:
        """Run one claimed execution to its end (public so tests and runners can drive it)."""
        outcome, _ = await self._handle(execution, claim_next=False)
        return outcome

    async def _handle(
        self, execution: f.Execution, *, claim_next: bool
    ) -> tuple[ExecutionOutcome, f.Execution | None]:
        """Run one execution; with `claim_next`, its finish also claims the next one."""
        attributes = {
            "agentworks.call_id": execution.call_id,
            "agentworks.function": execution.function,
        }
        target = target_str(execution.target)
        with self._working(target, execution.traceparent, attributes, execution.function) as work:
            outcome, next_execution = await self._run_execution(execution, claim_next)
            work.outcome = outcome.status
        return outcome, next_execution

    async def _run_execution(
        self, execution: f.Execution, claim_next: bool
    ) -> tuple[ExecutionOutcome, f.Execution | None]:
        bound = self.log.bind(call_id=execution.call_id, function=execution.function)
        ctx = ExecutionContext(execution=execution, client=self.client, root=self.root, log=bound)
        bound.info("execution.started")
        outcome = ExecutionOutcome(execution.call_id, "unknown")
        next_execution = None
        async with self._holding(ctx):
            try:
                outcome, next_execution = await self._rounds(ctx, claim_next)
            except Exception as exc:
                # Never let one execution stop the worker: the call's lease expires and
                # the service records it `interrupted` (F12).
                bound.exception("execution.unreported", error=describe(exc))
                outcome = ExecutionOutcome(execution.call_id, "unreported", error=exc)
            finally:
                self._running.pop(execution.call_id, None)
        bound.info("execution.finished", status=outcome.status, corrected=outcome.corrected)
        if self.on_finished is not None:
            self.on_finished(outcome)
        return outcome, next_execution

    async def _rounds(
        self, ctx: ExecutionContext, claim_next: bool
    ) -> tuple[ExecutionOutcome, f.Execution | None]:
        handler = self._handler_for(ctx.function)
        correction_round = 0
        while True:
            failed, final, error, exc = False, "", "", None
            if handler is None:
                failed, error = True, f"this runtime has no handler for function {ctx.function!r}"
            else:
                task = asyncio.ensure_future(handler(ctx))
                self._running[ctx.call_id] = task
                try:
                    await asyncio.wait({task})
                except asyncio.CancelledError:
                    task.cancel()
                    raise
                if ctx.stopped:
                    if not task.cancelled():
                        task.exception()  # retrieved: ExecutionStopped is the expected end
                    return self._stopped(ctx), None
                if task.cancelled():
                    failed, error = True, "the handler was cancelled"
                elif (exc := task.exception()) is not None:
                    if isinstance(exc, ExecutionStopped):
                        return ExecutionOutcome(ctx.call_id, "cancelled"), None
                    ctx.log.warning("execution.handler_failed", error=repr(exc)[:2000])
                    failed, error = True, f"{type(exc).__name__}: {exc}"
                else:
                    try:
                        final = answer_text(ctx, task.result())
                    except Exception as bad:  # not JSON, too deep, unwritable result file
                        ctx.log.warning("execution.answer_unreportable", error=describe(bad))
                        failed, error, exc = True, UNREPORTABLE + describe(bad), bad
            try:
                if handler is not None:
                    refused = await upload_outputs(ctx)
                    if not failed and ctx.result_file.name in refused:
                        why = refused[ctx.result_file.name]
                        ctx.log.warning("execution.result_unreportable", error=why)
                        failed, final = True, ""
                        error = f"{UNREPORTABLE}the result file: {why}"
                response = await self._finish(
                    ctx, failed, final, error, correction_round, claim_next
                )
            except ExecutionStopped:
                return self._stopped(ctx), None
            if response is None:
                return ExecutionOutcome(ctx.call_id, "unreported", error=exc), None
            if response.correction_requested and correction_round == 0:
                correction_round = ctx._round = 1
                ctx.correction_prompt = response.correction_prompt
                ctx.log.info("execution.correction_turn")
                continue
            next_execution = response.next if response.HasField("next") else None
            return ExecutionOutcome(
                ctx.call_id,
                state_name(response.status),
                corrected=correction_round == 1,
                error=exc,
            ), next_execution

    async def _end_interrupted(self, ctx: ExecutionContext, reason: str) -> None:
        """Give the execution up: the call ends `interrupted` with the reason at once,
        keeping what it saved (F12)."""
        await self.client.finish_execution(
            ctx.call_id,
            interrupted=True,
            error=fit_text(reason, MAX_ERROR_BYTES),
            correction_round=ctx._round,
        )

    @staticmethod
    def _stopped(ctx: ExecutionContext) -> ExecutionOutcome:
        return ExecutionOutcome(
            ctx.call_id, "cancelled" if ctx.cancelled.is_set() else "lease_lost"
        )

    async def _finish(
        self,
        ctx: ExecutionContext,
        failed: bool,
        final: str,
        error: str,
        correction_round: int,
        claim_next: bool,
    ) -> f.FinishExecutionResponse | None:
        # While serving, the finish also claims the next execution (none when stopping):
        # one request per execution while work is queued.
        return await finish(
            self.client,
            ctx,
            failed=failed,
            final=final,
            error=error,
            correction_round=correction_round,
            claim_next=self.targets if claim_next and not self._stopping.is_set() else [],
            lease_seconds=self.lease_seconds,
        )

    async def _renew(self, ctx: ExecutionContext) -> f.HeartbeatExecutionResponse:
        return await self.client.heartbeat_execution(ctx.call_id, lease_seconds=self.lease_seconds)

    def _renewed(self, ctx: ExecutionContext, answer: f.HeartbeatExecutionResponse) -> None:
        ctx.renew_capability(answer.capability)
        if answer.status == f.CALL_STATE_CANCELLED:
            ctx.log.info("execution.cancelled")
            ctx.cancelled.set()

    def _heartbeats_done(self, ctx: ExecutionContext) -> bool:
        """A cancel (F15) or a lost lease (F12) stops the handler and the heartbeats."""
        if not ctx.stopped:
            return False
        task = self._running.get(ctx.call_id)
        if task is not None and not task.done():
            task.cancel()
        return True


def execution_worker(
    config: RuntimeConfig,
    handler: ExecutionHandler | Mapping[str, ExecutionHandler],
    *,
    root: pathlib.Path | str | None = None,
) -> ExecutionWorker:
    """An ExecutionWorker for `config` (functions address, identity, targets, leases, TLS).

    `root` is the project root the `.calls/<call_id>/` folders go under; default
    `config.root` (AGENTWORKS_RUNTIME_ROOT, else the working directory).
    """
    return ExecutionWorker(
        config.functions_address,
        config.minter(),
        config.targets,
        handler,
        root=config.root if root is None else root,
        wait_seconds=config.wait_seconds,
        lease_seconds=config.lease_seconds,
        concurrency=config.concurrency or None,
        health_file=config.health_file,
        tls=config.tls,
    )


async def serve_executions(
    config: RuntimeConfig,
    handler: ExecutionHandler | Mapping[str, ExecutionHandler],
    *,
    root: pathlib.Path | str | None = None,
) -> int:
    """Run an execution worker until SIGTERM/SIGINT; the process exit code.

    The first signal finishes the executions in hand (for at most `config.drain_seconds`)
    and exits; a second, or the end of the drain time, cancels them at once and gives
    each up (`interrupted`, saying the runtime stopped; see `run_until_signal`). To serve turns
    in the same process, pass both workers to `serving.run_until_signal` instead: it
    installs one signal handler that stops every worker.
    """
    return await run_until_signal(
        execution_worker(config, handler, root=root), drain_seconds=config.drain_seconds
    )


# Constants `agentworks.runtime.executions` has always offered (now in their own modules).
from agentworks.runtime.execution_context import ASK_POLL_SECONDS  # noqa: E402
from agentworks.runtime.reporting import NOTE_BYTES  # noqa: E402
from agentworks.runtime.serving import GIVE_UP_SECONDS  # noqa: E402
from agentworks.runtime.startup import AUTO_CONCURRENCY_MAX, DEFAULT_RUNNING_LIMIT  # noqa: E402
from agentworks.runtime.uploads import MAX_FILES_PER_CALL  # noqa: E402

# What `agentworks.runtime.executions` has always offered (moved to modules of their own).
__all__ = [
    "ASK_POLL_SECONDS",
    "AUTO_CONCURRENCY_MAX",
    "DEFAULT_RUNNING_LIMIT",
    "GIVE_UP_SECONDS",
    "MAX_FILES_PER_CALL",
    "NOTE_BYTES",
    "ExecutionContext",
    "ExecutionHandler",
    "ExecutionOutcome",
    "ExecutionStopped",
    "ExecutionWorker",
    "clean_text",
    "describe",
    "execution_worker",
    "serve_executions",
    "upload_folder",
]
