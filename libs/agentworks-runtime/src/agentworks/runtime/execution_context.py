"""What an execution handler gets: the call, reports, files, questions (R1, F7-F11)."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import pathlib
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentworks.client import target_str
from agentworks.client.functions import FunctionsClient
from agentworks.core import errors
from agentworks.core.jsontext import loads, loads_object
from agentworks.functions.v1 import functions_pb2 as f
from agentworks.runtime import capability_file
from agentworks.runtime.execution_calls import _TRANSIENT, FunctionCalls
from agentworks.runtime.folders import own_folders
from agentworks.runtime.lease import Backoff
from agentworks.runtime.reporting import clean_text
from agentworks.runtime.uploads import DEFAULT_UPLOAD_BYTES, _cleaned, _read

_FATAL = (errors.Unauthenticated, errors.InvalidArgument, errors.PermissionDenied)

# How long one AskInput long-poll waits before asking again (the service allows 0-25).
ASK_POLL_SECONDS = 20


class ExecutionStopped(Exception):
    """The execution was cancelled or lost its lease; stop working on it."""


@dataclass
class ExecutionContext(FunctionCalls):
    """What a handler gets for one execution: its inputs, folder and reporting tools;
    function calls of its own (`FunctionCalls`)."""

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
    # The execution's capability (T3), renewed by each heartbeat (`renew_capability`),
    # and the file a running command reads it from (the command runner sets it).
    _capability: str = field(default="", repr=False)
    capability_file: pathlib.Path | None = None
    # Uploads from the folder (T8): the uid its files must belong to (None: this
    # process's; the command runner sets its sandbox user), and the most bytes the
    # call's files may total, with what each uploaded name took.
    file_owner: int | None = None
    upload_limit_bytes: int = DEFAULT_UPLOAD_BYTES
    upload_sizes: dict[str, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        # Private to the execution (T8): 0700, and so is `.calls` when made here; a
        # real folder of the runner's, never a link or file a command left (B4).
        calls = self.output_dir.parent
        if calls.name == ".calls":
            own_folders(calls.parent, (calls.name,))
        self.output_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.output_dir.chmod(0o700)

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
        """The checked inputs, as the caller sent them."""
        return loads_object(self.execution.inputs_json, "inputs")

    @property
    def output_schema(self) -> dict[str, Any] | None:
        return loads(self.execution.output_schema_json, "output_schema", None)

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
        return loads_object(self.execution.variables_json, "variables")

    @functools.cached_property
    def output_dir(self) -> pathlib.Path:
        """The call's private output folder, `<root>/.calls/<call_id>/` (F4)."""
        return self.root / self.execution.output_folder

    @functools.cached_property
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

    @property
    def capability(self) -> str:
        """The execution's current capability (T3): an identity that allows this call's
        own operations only, until the lease's expiry; "" when the service issued none.
        Hand it to a process doing the work instead of the runtime's own identity."""
        return self._capability or self.execution.capability

    def renew_capability(self, token: str) -> None:
        """Keep the capability a heartbeat renewed, in `capability_file` too."""
        if not token:
            return
        self._capability = token
        if self.capability_file is not None:
            try:
                capability_file.write(self.capability_file, token, owner=self.file_owner)
            except OSError as exc:  # the command removed its folder
                self.log.warning("execution.capability_not_written", error=str(exc))

    def write_result(self, value: Any) -> None:
        """Write `value` as JSON to FUNCTION_RESULT_FILE."""
        self.result_file.write_text(json.dumps(value))

    # ------------------------------------------------------------ reporting

    def _check(self, status: int) -> None:
        if status == f.CALL_STATE_CANCELLED:
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
                if exc.reason == errors.Reason.CALL_CANCELLED:  # e.g. UploadFile's answer
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
        assert data is not None
        digest = hashlib.sha256(data).hexdigest()
        if self.uploaded.get(name) != digest:
            info = await self._retrying(
                lambda: self.client.upload_file(self.call_id, name, data, media_type=media_type)
            )
            self.uploaded[name] = digest
        else:
            info = None
        self.upload_sizes[name] = len(data)
        if stat is not None:
            self._stats[name] = stat
        return info

    async def ask(
        self, question: str, *, timeout: float | None = None, choices: Sequence[str] = ()
    ) -> str:
        """Ask a human-input question and wait for the caller's or owner's reply (F11).
        The question is cleaned (`clean_text`). With `choices` (at most 20, each 1-200
        characters, no two the same) the reply is one of them. With `timeout`,
        TimeoutError when no reply came in time: the question is withdrawn first (the
        status stops showing it, and another may be asked), unless a reply came
        meanwhile: that is returned."""
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
                functools.partial(
                    self.client.ask_input,
                    self.call_id,
                    ask_id,
                    question,
                    wait_seconds=wait,
                    choices=choices,
                )
            )
            self._check(response.status)
            if response.answered:
                return response.reply


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
