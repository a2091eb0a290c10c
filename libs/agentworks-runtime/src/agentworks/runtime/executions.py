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
and must nest at most 24 deep: `agentworks.client.checks.MAX_JSON_DEPTH`).
After the handler returns (or raises), every regular file left in the output folder is
uploaded, the result file first (`upload_folder`; files the handler uploaded itself with
`ctx.upload_file` and left unchanged are not sent twice), and the execution is finished.
When the service asks for the one correction turn (F10), the same handler is called again
with `ctx.correction_prompt` set, and the worker finishes a second time.

Failure policy:

- A handler that raises ends the execution `failed` with the exception as the error; no
  correction turn (F10). The error is made to fit what FinishExecution accepts: NUL
  characters are replaced and it is cut to `MAX_ERROR_BYTES`.
- An answer that cannot be reported (not JSON, nested too deep, a result file the service
  refuses, or a final message FinishExecution refuses: too big, NUL characters) ends the
  execution `failed` with "the handler's answer could not be reported: <why>".
- A finish refused even then, or failing after its retries, is logged and the worker
  moves on (the lease expires and the service records the call `interrupted`); a worker
  never stops because of one execution.
- Free text a handler sends through the context (progress, message text, event text,
  a step's detail, a question) is cleaned with `clean_text`, as the command runner
  cleans its output: NUL characters, which PostgreSQL text cannot store, and lone
  surrogates, which cannot be sent, become U+FFFD instead of getting the report
  refused. Names (roles, kinds, tool names, steps, groups, statuses) are not changed: the
  service refuses a bad one, naming it. Nor is the answer: it is the call's result, so
  an answer with a NUL fails the call, saying so, rather than being altered.
- A cancel (F15) or a lost lease (F12) is learned from the next heartbeat, report, ask
  or upload: the handler task is cancelled and nothing more is reported.
- A worker that is itself cancelled leaves its executions unfinished; their leases expire
  and the service records them `interrupted` (F12). When the runtime is stopping
  (`abandon(reason)` before the cancel: `serving.run_until_signal` does it on a second
  signal or when the drain time is over), each execution cut short is given up at once
  instead: it ends `interrupted` with that reason and its saved evidence (F12), so its
  caller learns at once and may call again.
- Whatever the handler leaves in the output folder is uploaded when it ends, successful
  or not (`upload_folder`), except after a cancel or a lost lease.
- At start, the worker looks up the functions of its targets and warns once about a
  target the service does not know (`worker.target_not_registered`) and about declared
  functions it has no handler for (`worker.unhandled_functions`): it claims every
  function of its targets, and their calls fail here.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import pathlib
import re
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog

from agentworks.client import errors, target_ref, target_str
from agentworks.client.checks import check_json_depth
from agentworks.client.functions import FunctionsClient
from agentworks.client.identity import Minter
from agentworks.client.structs import struct_json
from agentworks.functions.v1 import functions_pb2 as f
from agentworks.runtime.config import RuntimeConfig
from agentworks.runtime.serving import GIVE_UP_SECONDS, run_until_signal, unless_stopped
from agentworks.runtime.turns import Backoff

log = structlog.get_logger("agentworks.runtime.executions")

_TRANSIENT = (errors.Unavailable, errors.DeadlineExceeded)
_FATAL = (errors.Unauthenticated, errors.InvalidArgument, errors.PermissionDenied)
# How long one AskInput long-poll waits before asking again (the service allows 0-25).
ASK_POLL_SECONDS = 20
# Executions run at once when the concurrency is not set: the targets' running limits,
# at most this many (each idle one holds a ClaimExecution long-poll); a target whose limit
# cannot be read counts as the functions service's default limit.
AUTO_CONCURRENCY_MAX = 32
DEFAULT_RUNNING_LIMIT = 4
# What FinishExecution accepts as the error of a failed execution; no NUL characters.
MAX_ERROR_BYTES = 16 * 1024
UNREPORTABLE = "the handler's answer could not be reported: "
# Files the service keeps per call; past it, uploads are refused (and skipped here).
MAX_FILES_PER_CALL = 500
# The worker's own note on the call (the files it could not upload).
NOTE_BYTES = 16 * 1024


# What text cannot hold to be stored and sent: NUL (PostgreSQL text refuses it) and lone
# surrogates (not encodable as UTF-8, so protobuf refuses them).
_UNSENDABLE = re.compile("[\x00\ud800-\udfff]")


def clean_text(text: str) -> str:
    """`text` as the services can store it: each NUL character and lone surrogate
    replaced with U+FFFD. The runner's output and the SDK's free text both go through it."""
    if text.isascii():
        return text.replace("\x00", "\ufffd")
    return _UNSENDABLE.sub("\ufffd", text)


def fit_text(text: str, limit: int) -> str:
    """`text` cleaned (`clean_text`) and at most `limit` UTF-8 bytes, cut at a character
    boundary with a note saying so."""
    text = clean_text(text)
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    note = f" [... cut: {len(data)} bytes in all]"
    kept = data[: max(0, limit - len(note.encode()))].decode("utf-8", "ignore")
    return kept + note


def describe(exc: BaseException) -> str:
    """An exception as one line of an error: the service's message, or `Type: message`."""
    if isinstance(exc, errors.AgentWorksError):
        return exc.message
    return f"{type(exc).__name__}: {exc}"


class ExecutionStopped(Exception):
    """The execution was cancelled or lost its lease; stop working on it."""


@dataclass
class ExecutionContext:
    """What a handler gets for one execution: its inputs, folder and reporting tools."""

    execution: f.Execution
    client: FunctionsClient
    root: pathlib.Path
    log: Any
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    lease_lost: asyncio.Event = field(default_factory=asyncio.Event)
    correction_prompt: str = ""
    uploaded: dict[str, str] = field(default_factory=dict)
    _sequence: int = 0
    _reporting: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)
    _asks: int = 0
    # Size and modification time of each folder file when it was last uploaded (or found
    # uploaded already): `upload_folder` skips an unchanged one without reading it.
    _stats: dict[str, tuple[int, int]] = field(default_factory=dict, repr=False)
    _round: int = 0  # the correction round being run (F10), for a finish on stopping

    def __post_init__(self) -> None:
        self.output_dir.mkdir(parents=True, exist_ok=True)

    # ------------------------------------------------------------- the call

    @property
    def call_id(self) -> str:
        return self.execution.call_id

    @property
    def target(self) -> str:
        """`crew:<name>` / `workflow:<id>`."""
        return target_str(self.execution.target)

    @property
    def function(self) -> str:
        return self.execution.function

    @property
    def caller(self) -> str:
        return self.execution.caller

    @property
    def inputs(self) -> dict[str, Any]:
        """The checked inputs, as plain JSON (whole numbers as ints)."""
        return struct_json(self.execution.inputs)

    @property
    def output_schema(self) -> dict[str, Any] | None:
        if not self.execution.has_output_schema:
            return None
        return struct_json(self.execution.output_schema)

    @property
    def starts_work(self) -> bool:
        """Whether the function only starts work and completes with a start receipt (F9)."""
        return self.execution.starts_work

    @property
    def run_id(self) -> str:
        """Workflow functions: the run this call records its steps in (F14)."""
        return self.execution.run_id

    @property
    def variables(self) -> dict[str, Any]:
        """Workflow functions: the run's typed variable values."""
        return struct_json(self.execution.variables)

    @property
    def output_dir(self) -> pathlib.Path:
        """The call's private output folder, `<root>/.calls/<call_id>/` (F4)."""
        return self.root / self.execution.output_folder

    @property
    def result_file(self) -> pathlib.Path:
        """FUNCTION_RESULT_FILE: where the result JSON goes when there is an output schema."""
        return self.output_dir / (self.execution.result_file or "result.json")

    @property
    def is_correction(self) -> bool:
        """True during the one correction turn (F10)."""
        return bool(self.correction_prompt)

    @property
    def stopped(self) -> bool:
        return self.cancelled.is_set() or self.lease_lost.is_set()

    def write_result(self, value: Any) -> None:
        """Write `value` as JSON to FUNCTION_RESULT_FILE."""
        self.result_file.write_text(json.dumps(value))

    # ------------------------------------------------------------ reporting

    def _check(self, status: str) -> None:
        if status == "cancelled":
            self._stop(self.cancelled, "execution.cancelled")

    def _stop(self, event: asyncio.Event, what: str) -> None:
        if not event.is_set():
            self.log.info(what)
        event.set()
        raise ExecutionStopped(f"call {self.call_id}: {what.split('.')[-1].replace('_', ' ')}")

    async def _retrying(self, make: Callable[[], Awaitable[Any]], attempts: int = 4) -> Any:
        if self.stopped:
            raise ExecutionStopped(f"call {self.call_id} is no longer running here")
        backoff = Backoff(initial=0.2, maximum=2.0)
        for attempt in range(1, attempts + 1):
            try:
                return await make()
            except errors.PreconditionFailed as exc:
                if "has already ended (cancelled)" in exc.message:  # UploadFile's answer
                    self._stop(self.cancelled, "execution.cancelled")
                self.log.warning("execution.lease_lost", error=exc.message)
                self._stop(self.lease_lost, "execution.lease_lost")
            except _TRANSIENT as exc:
                if attempt == attempts:
                    raise
                delay = backoff.next()
                self.log.warning("execution.retry", error=exc.message, retry_in=round(delay, 2))
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    async def report(
        self,
        *,
        progress: str | None = None,
        messages: Sequence[str | f.ExecutionMessage] = (),
        events: Sequence[Mapping[str, Any] | f.ExecutionEvent] = (),
        steps: Sequence[Mapping[str, Any] | f.WorkflowStep] = (),
    ) -> None:
        """Send progress, messages, events and steps in one report (retried safely).

        Free text (progress, message and event text, step detail) is cleaned with
        `clean_text`: a NUL character becomes U+FFFD instead of a refusal."""
        progress = None if progress is None else clean_text(progress)
        messages = [clean_text(m) if isinstance(m, str) else _cleaned(m, "text") for m in messages]
        events = [_cleaned(e, "text") for e in events]
        steps = [_cleaned(s, "detail") for s in steps]
        # One report at a time, retries included: messages are stored in the order the
        # handler made them, even when it reports from several tasks at once.
        async with self._reporting:
            self._sequence += 1
            sequence = self._sequence
            response = await self._retrying(
                lambda: self.client.report(
                    self.call_id,
                    progress=progress,
                    messages=messages,
                    events=events,
                    steps=steps,
                    sequence=sequence,
                )
            )
        self._check(response.status)

    async def progress(self, text: str) -> None:
        """Replace the call's progress line; progress never completes a call (F9)."""
        await self.report(progress=text)

    async def message(self, text: str, *, role: str = "assistant") -> None:
        """Add an execution message (paged by `after` in status)."""
        await self.report(messages=[f.ExecutionMessage(role=role, text=clean_text(text))])

    async def event(self, kind: str, text: str = "", *, tool_name: str = "") -> None:
        """Add a conversation event; tool_call/tool_result events keep the tool name only."""
        await self.report(events=[{"kind": kind, "text": text, "tool_name": tool_name}])

    async def step(self, step: str, status: str, *, group: str = "", detail: str = "") -> None:
        """Workflow functions: add an entry to the run's step history (F14)."""
        await self.report(
            steps=[{"step": step, "status": status, "group": group, "detail": detail}]
        )

    async def upload_file(
        self,
        name: str,
        data: bytes | None = None,
        *,
        path: pathlib.Path | str | None = None,
        media_type: str = "",
    ) -> f.FileInfo | None:
        """Upload `data` (or the file at `path`, default `output_dir / name`) as `name`
        in the call's output folder.

        Skips (returns None) a file already uploaded with the same content. A file of the
        output folder uploaded here is not uploaded again when the handler ends unless it
        changed since (its size or modification time).
        """
        stat = None
        folder_file = self.output_dir / name
        if data is None:
            source = pathlib.Path(path) if path is not None else folder_file
            stat, data = await asyncio.to_thread(_read, source)
            if source.absolute() != folder_file:
                stat = None  # another file: says nothing of the folder's `name`
        digest = hashlib.sha256(data).hexdigest()
        if self.uploaded.get(name) != digest:
            info = await self._retrying(
                lambda: self.client.upload_file(self.call_id, name, data, media_type=media_type)
            )
            self.uploaded[name] = digest
        else:
            info = None
        if stat is not None:
            self._stats[name] = stat
        return info

    async def ask(self, question: str, *, timeout: float | None = None) -> str:
        """Ask a human-input question and wait for the caller's or owner's reply (F11).
        The question is cleaned (`clean_text`). With `timeout`, TimeoutError when no
        reply came in time: the question is withdrawn first (the status stops showing
        it, and another may be asked), unless a reply came meanwhile: that is returned."""
        question = clean_text(question)
        self._asks += 1
        ask_id = f"ask-{self._asks}"
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            wait = ASK_POLL_SECONDS
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    withdrawn = await self._retrying(
                        lambda: self.client.ask_input(self.call_id, ask_id, "", withdraw=True)
                    )
                    self._check(withdrawn.status)
                    if withdrawn.answered:
                        return withdrawn.reply
                    raise TimeoutError(f"no reply to {question!r} within {timeout} s")
                wait = max(0, min(wait, int(remaining)))
            response = await self._retrying(
                lambda w=wait: self.client.ask_input(self.call_id, ask_id, question, wait_seconds=w)
            )
            self._check(response.status)
            if response.answered:
                return response.reply


def _read(path: pathlib.Path) -> tuple[tuple[int, int], bytes]:
    """A file's (size, modification time in ns) as read, and its bytes."""
    with path.open("rb") as file:
        stat = os.fstat(file.fileno())
        return (stat.st_size, stat.st_mtime_ns), file.read()


def _folder_files(
    folder: pathlib.Path, entries: Sequence[os.DirEntry[str]]
) -> dict[str, tuple[int, int]]:
    """The regular files under `folder` (symlinks skipped, subfolders walked), by name
    relative to it, with their (size, modification time in ns). `entries`: its top level."""
    found: dict[str, tuple[int, int]] = {}
    pending = [("", list(entries))]
    while pending:
        prefix, level = pending.pop()
        for entry in level:
            try:
                if entry.is_dir(follow_symlinks=False):
                    with os.scandir(entry.path) as inner:
                        pending.append((f"{prefix}{entry.name}/", list(inner)))
                elif entry.is_file(follow_symlinks=False):
                    stat = entry.stat(follow_symlinks=False)
                    found[prefix + entry.name] = (stat.st_size, stat.st_mtime_ns)
            except OSError:
                continue  # removed meanwhile
    return found


async def upload_folder(ctx: ExecutionContext) -> dict[str, str]:
    """Upload the regular files left in the call's output folder (F4); those skipped,
    each with the reason.

    `result.json` (FUNCTION_RESULT_FILE) goes first. Symlinks are skipped without a word;
    so is a file the handler uploaded itself (`ExecutionContext.upload_file`) that has not
    changed since. A file the service refuses, or that cannot be read, is skipped and the
    rest are still uploaded; the skipped files are logged and named, with the reasons, in
    one message (role `runner`) on the call. An empty folder costs one scandir.
    """
    folder = ctx.output_dir
    try:
        with os.scandir(folder) as entries:
            top = list(entries)
    except OSError:  # the handler removed its folder
        return {}
    if not top:
        return {}
    found = await asyncio.to_thread(_folder_files, folder, top)
    result = ctx.result_file.name
    names = sorted(found, key=lambda name: (name != result, name))
    skipped: dict[str, str] = {}
    for name in names:
        if ctx._stats.get(name) == found[name]:
            continue  # uploaded as it is now
        reason = ""
        if len(ctx.uploaded) >= MAX_FILES_PER_CALL and name not in ctx.uploaded:
            reason = f"the call already has {MAX_FILES_PER_CALL} files, the most it can keep"
        elif not _is_utf8(name):
            reason = "its name is not valid UTF-8"
        else:
            try:
                await ctx.upload_file(name, path=folder / name)
            except errors.InvalidArgument as exc:
                reason = exc.message
            except OSError as exc:  # removed or unreadable meanwhile
                reason = describe(exc)
        if reason:
            ctx.log.warning("execution.file_skipped", file=name, reason=reason)
            skipped[name] = reason
    if skipped:
        await _note_skipped(ctx, skipped, len(names))
    return skipped


def _is_utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # undecodable bytes in the name (surrogate escapes)
        return False
    return True


async def _note_skipped(ctx: ExecutionContext, skipped: dict[str, str], total: int) -> None:
    """Say on the call which files were not uploaded and why (one `runner` message)."""
    by_reason: dict[str, list[str]] = {}
    for name, reason in skipped.items():
        by_reason.setdefault(reason, []).append(name)
    parts = []
    for reason, names in by_reason.items():
        shown = ", ".join(repr(name) for name in names[:20])
        more = f" and {len(names) - 20} more" if len(names) > 20 else ""
        parts.append(f"{shown}{more}: {reason}")
    text = f"{len(skipped)} of {total} files in the output folder were not uploaded: " + "; ".join(
        parts
    )
    try:
        await ctx.message(fit_text(text, NOTE_BYTES), role="runner")
    except errors.InvalidArgument as exc:  # the call's message limit: the log has it
        ctx.log.warning("execution.note_refused", error=exc.message)


def _cleaned(item: Any, field: str) -> Any:
    """A report item (a mapping or a message) with its free-text `field` cleaned; a
    message is copied when that changes it, never altered in place."""
    if isinstance(item, Mapping):
        value = item.get(field)
        return {**item, field: clean_text(value)} if isinstance(value, str) else item
    clean = clean_text(getattr(item, field))
    if clean == getattr(item, field):
        return item
    copy = type(item)()
    copy.CopyFrom(item)
    setattr(copy, field, clean)
    return copy


ExecutionHandler = Callable[[ExecutionContext], Awaitable[Any]]


@dataclass(frozen=True)
class ExecutionOutcome:
    """How one execution ended here, for callers that watch the worker (tests, metrics)."""

    call_id: str
    # The service's status after finish, or "cancelled" / "lease_lost", or "unreported"
    # when no finish was accepted (the lease then expires: `interrupted`).
    status: str
    corrected: bool = False
    error: BaseException | None = None


class ExecutionWorker:
    """Claims executions for some targets and runs a handler for each (R1, F9-F12, F15).

    `concurrency`: executions run at once. Not given, the worker reads its targets'
    running limits at start and runs that many (at most `AUTO_CONCURRENCY_MAX`): calls
    run in parallel (F5), so a worker that took them one at a time would hold the
    others, accepted, until the first ended.
    """

    def __init__(
        self,
        functions_address: str | None,
        identity: Minter,
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
    ) -> None:
        if not targets:
            raise ValueError("an execution worker needs at least one target, e.g. crew:demo")
        for target in targets:
            target_ref(target)  # raises ValueError naming the bad target
        if concurrency is not None and concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.targets = tuple(targets)
        self.handler = handler
        self.identity = identity
        self._owns_client = client is None
        self._address = functions_address
        # Made in run(): a grpc.aio channel belongs to the event loop that creates it.
        self.client: FunctionsClient = client  # type: ignore[assignment]
        self.root = pathlib.Path(root).resolve()
        self.wait_seconds = wait_seconds
        self.lease_seconds = lease_seconds
        self.heartbeat_seconds = heartbeat_seconds or max(0.3, lease_seconds / 3)
        self.concurrency = concurrency
        self.health_file = pathlib.Path(health_file) if health_file else None
        self.on_finished = on_finished
        self._stopping = asyncio.Event()
        self._abandon_reason = ""
        self.log = log.bind(principal=identity.principal, targets=",".join(self.targets))

    def stop(self) -> None:
        """Finish the executions in hand, claim no more, and let `run()` return."""
        if not self._stopping.is_set():
            self.log.info("worker.stopping")
        self._stopping.set()

    def abandon(self, reason: str) -> None:
        """Say why `run()` is about to be cancelled (the runtime stops: a second signal,
        or the drain time is over). Each execution the cancel cuts short is then given
        up: it ends `interrupted` with `reason` as its error, so its caller learns at
        once instead of when the lease expires (F12). Without it, a cancel leaves them to
        lease expiry (`interrupted` too, later)."""
        self._abandon_reason = reason
        self.stop()

    async def run(self) -> None:
        """Serve executions until `stop()`; raises on configuration errors."""
        if self._owns_client:
            self.client = FunctionsClient(self._address, identity=self.identity, timeout=10)
        if self.concurrency is None:
            self.concurrency = await self._running_limits()
        self.log.info("worker.started", concurrency=self.concurrency, root=str(self.root))
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(unless_stopped(self._check_targets(), self._stopping))
                for _ in range(self.concurrency):
                    group.create_task(self._serve())
        except BaseExceptionGroup as group:
            raise group.exceptions[0] from None
        finally:
            if self._owns_client:
                await self.client.close()
            self._stopping.set()  # a later stop() (a sibling failed) has nothing to say
            self.log.info("worker.stopped")

    async def _running_limits(self) -> int:
        """How many executions to run at once when not configured: as many as the
        targets' running limits let be open (F5: calls run in parallel, so a runtime
        that took them one at a time would queue them), at most AUTO_CONCURRENCY_MAX. A
        target the service cannot tell about counts as its default limit."""
        total = 0
        for target in self.targets:
            try:
                async with asyncio.timeout(5):
                    total += (await self.client.get_target(target)).effective_running_limit
            except (errors.AgentWorksError, TimeoutError) as exc:
                total += DEFAULT_RUNNING_LIMIT
                self.log.warning(
                    "worker.running_limit_unknown",
                    target=target,
                    assumed=DEFAULT_RUNNING_LIMIT,
                    error=describe(exc),
                )
        return max(1, min(total, AUTO_CONCURRENCY_MAX))

    def _handled_functions(self) -> set[str] | None:
        """The functions this worker has a handler for; None: all of them."""
        if isinstance(self.handler, Mapping):
            return set(self.handler)
        # A CommandRunner handles its configured commands. Looked up, not imported: the
        # runner imports this module, and a worker without one need not load it.
        runner = sys.modules.get("agentworks.runtime.runner")
        if runner is not None and isinstance(self.handler, runner.CommandRunner):
            return set(self.handler.commands)
        return None

    async def _check_targets(self) -> None:
        """At start, warn about what would otherwise go unnoticed: a target the functions
        service does not know (`worker.target_not_registered`: nothing is ever claimed
        for it) and declared functions this worker has no handler for
        (`worker.unhandled_functions`: their calls are claimed here all the same and
        fail). ListFunctions shows only the functions the runtime's principal may call
        (F2), so those are the ones checked. Never fails the start: a target may be
        registered after its runtime starts."""
        handled = self._handled_functions()
        unregistered: list[str] = []
        unhandled: dict[str, list[str]] = {}
        for target in self.targets:
            try:
                declared = await self.client.list_functions(target)
            except errors.NotFound:
                unregistered.append(target)
                continue
            except Exception as exc:  # a hint only: it never stops the worker
                self.log.debug("worker.functions_unknown", target=target, error=describe(exc))
                continue
            if handled is None:
                continue
            missing = sorted(fn.name for fn in declared if fn.name not in handled)
            if missing:
                unhandled[target] = missing
        if unregistered:
            self.log.warning(
                "worker.target_not_registered",
                unregistered=unregistered,
                effect="the functions service does not know these targets: no call of "
                "theirs can be claimed until they are registered (check the spelling)",
            )
        if unhandled:
            self.log.warning(
                "worker.unhandled_functions",
                functions=unhandled,
                effect="this worker claims every function of its targets: calls of these "
                "fail with 'this runtime has no handler for function ...'; serve them here "
                "or run their runtime on other targets",
            )

    async def _serve(self) -> None:
        backoff = Backoff()
        execution: f.Execution | None = None  # claimed by the last finish, to run next
        while execution is not None or not self._stopping.is_set():
            if execution is not None:
                _, execution = await self._handle(execution, claim_next=True)
                continue
            try:
                execution = await self._claim()
            except _FATAL as exc:
                self.log.error("execution.claim_refused", code=exc.code.name, error=exc.message)
                raise
            except errors.AgentWorksError as exc:
                delay = backoff.next()
                self.log.warning(
                    "execution.claim_failed",
                    code=exc.code.name,
                    error=exc.message,
                    retry_in=round(delay, 2),
                )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), delay)
                continue
            backoff.reset()
            self._touch_health()

    async def _claim(self) -> f.Execution | None:
        return await unless_stopped(
            self.client.claim_execution(
                self.targets, wait_seconds=self.wait_seconds, lease_seconds=self.lease_seconds
            ),
            self._stopping,
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
        bound = self.log.bind(call_id=execution.call_id, function=execution.function)
        ctx = ExecutionContext(execution=execution, client=self.client, root=self.root, log=bound)
        bound.info("execution.started")
        current: dict[str, asyncio.Task[Any]] = {}
        heartbeat = asyncio.create_task(self._heartbeat(ctx, current))
        outcome = ExecutionOutcome(execution.call_id, "unknown")
        next_execution = None
        try:
            outcome, next_execution = await self._rounds(ctx, current, claim_next)
        except asyncio.CancelledError:
            if self._abandon_reason:
                await self._give_up(ctx)
            raise
        except Exception as exc:
            # Never let one execution stop the worker: the call's lease expires and the
            # service records it `interrupted` (F12).
            bound.exception("execution.unreported", error=describe(exc))
            outcome = ExecutionOutcome(execution.call_id, "unreported", error=exc)
        finally:
            heartbeat.cancel()
            await asyncio.wait({heartbeat})
        bound.info("execution.finished", status=outcome.status, corrected=outcome.corrected)
        if self.on_finished is not None:
            self.on_finished(outcome)
        return outcome, next_execution

    async def _rounds(
        self, ctx: ExecutionContext, current: dict[str, asyncio.Task[Any]], claim_next: bool
    ) -> tuple[ExecutionOutcome, f.Execution | None]:
        handler = self._handler_for(ctx.function)
        correction_round = 0
        while True:
            failed, final, error, exc = False, "", "", None
            if handler is None:
                failed, error = True, f"this runtime has no handler for function {ctx.function!r}"
            else:
                task = asyncio.create_task(handler(ctx))
                current["task"] = task
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
                        final = self._answer(ctx, task.result())
                    except Exception as bad:  # not JSON, too deep, unwritable result file
                        ctx.log.warning("execution.answer_unreportable", error=describe(bad))
                        failed, error, exc = True, UNREPORTABLE + describe(bad), bad
            try:
                if handler is not None:
                    refused = await self._upload_folder(ctx)
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
                ctx.call_id, response.status, corrected=correction_round == 1, error=exc
            ), next_execution

    async def _give_up(self, ctx: ExecutionContext) -> None:
        """The runtime is stopping and has cancelled this execution: give it up, so the
        call ends `interrupted` with the reason (`abandon`) at once, keeping what it saved
        (F12), in at most `GIVE_UP_SECONDS` (it is stopping)."""
        reason = self._abandon_reason
        try:
            async with asyncio.timeout(GIVE_UP_SECONDS):
                await self.client.finish_execution(
                    ctx.call_id,
                    interrupted=True,
                    error=fit_text(reason, MAX_ERROR_BYTES),
                    correction_round=ctx._round,
                )
        except (errors.AgentWorksError, TimeoutError) as exc:
            ctx.log.warning("execution.abandoned", reason=reason, finished=False, error=str(exc))
        else:
            ctx.log.warning("execution.abandoned", reason=reason, finished=True)

    @staticmethod
    async def _upload_folder(ctx: ExecutionContext) -> dict[str, str]:
        """`upload_folder` after each run of the handler; the files refused. A service
        still failing after the retries is logged: the finish says the rest."""
        try:
            return await upload_folder(ctx)
        except errors.AgentWorksError as exc:
            ctx.log.warning("execution.upload_failed", code=exc.code.name, error=exc.message)
            return {}

    @staticmethod
    def _stopped(ctx: ExecutionContext) -> ExecutionOutcome:
        return ExecutionOutcome(
            ctx.call_id, "cancelled" if ctx.cancelled.is_set() else "lease_lost"
        )

    @staticmethod
    def _answer(ctx: ExecutionContext, value: Any) -> str:
        """The final message for what the handler returned (a non-string as JSON)."""
        if value is None:
            return ""
        if isinstance(value, str):
            value.encode("utf-8")  # a lone surrogate cannot be sent (UnicodeEncodeError)
            return value
        check_json_depth(value, "the handler's return value")
        final = json.dumps(value)
        if ctx.output_schema is not None and not ctx.result_file.exists():
            ctx.write_result(value)
        return final

    async def _finish(
        self,
        ctx: ExecutionContext,
        failed: bool,
        final: str,
        error: str,
        correction_round: int,
        claim_next: bool,
    ) -> f.FinishExecutionResponse | None:
        """FinishExecution; a refused outcome is reported again as a failure with the
        service's reason. None when no finish was accepted (logged; the lease expires)."""
        error = fit_text(error, MAX_ERROR_BYTES) if failed else ""
        for attempt in (1, 2):
            # While serving, the finish also claims the next execution (none when
            # stopping): one request per execution while work is queued.
            targets = self.targets if claim_next and not self._stopping.is_set() else []
            try:
                return await ctx._retrying(
                    lambda failed=failed, final=final, error=error, t=targets: (
                        self.client.finish_execution(
                            ctx.call_id,
                            final_message=final,
                            failed=failed,
                            error=error,
                            correction_round=correction_round,
                            claim_next=t,
                            lease_seconds=self.lease_seconds,
                        )
                    )
                )
            except errors.InvalidArgument as refused:
                ctx.log.warning("execution.finish_refused", error=refused.message, failed=failed)
                if attempt == 2:
                    break
                what = "error" if failed else "answer"
                failed, final = True, ""
                error = fit_text(
                    f"the handler's {what} could not be reported: {refused.message}",
                    MAX_ERROR_BYTES,
                )
            except ExecutionStopped:
                raise
            except errors.AgentWorksError as failure:
                ctx.log.error(
                    "execution.finish_failed", code=failure.code.name, error=failure.message
                )
                return None
        ctx.log.error("execution.unreported", reason="FinishExecution refused the outcome")
        return None

    async def _heartbeat(
        self, ctx: ExecutionContext, current: dict[str, asyncio.Task[Any]]
    ) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_seconds)
            try:
                response = await self.client.heartbeat_execution(
                    ctx.call_id, lease_seconds=self.lease_seconds
                )
            except errors.PreconditionFailed as exc:
                ctx.log.warning("execution.lease_lost", error=exc.message)
                ctx.lease_lost.set()
            except errors.AgentWorksError as exc:
                # Transient: the next beat (a third of the lease later) tries again.
                ctx.log.warning("execution.heartbeat_failed", code=exc.code.name, error=exc.message)
                continue
            else:
                self._touch_health()
                if response.status == "cancelled":
                    ctx.log.info("execution.cancelled")
                    ctx.cancelled.set()
            if ctx.stopped:
                task = current.get("task")
                if task is not None and not task.done():
                    task.cancel()
                return

    def _touch_health(self) -> None:
        if self.health_file is not None:
            with contextlib.suppress(OSError):
                self.health_file.touch()


def execution_worker(
    config: RuntimeConfig,
    handler: ExecutionHandler | Mapping[str, ExecutionHandler],
    *,
    root: pathlib.Path | str | None = None,
) -> ExecutionWorker:
    """An ExecutionWorker for `config` (functions address, identity, targets, leases).

    `root` is the project root the `.calls/<call_id>/` folders go under; default
    `config.root` (AGENTWORKS_RUNTIME_ROOT, else the working directory).
    """
    return ExecutionWorker(
        config.functions_address,
        Minter(config.principal, config.internal_key),
        config.targets,
        handler,
        root=config.root if root is None else root,
        wait_seconds=config.wait_seconds,
        lease_seconds=config.lease_seconds,
        concurrency=config.concurrency or None,
        health_file=config.health_file,
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
