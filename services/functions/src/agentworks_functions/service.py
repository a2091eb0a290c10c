"""Functions use cases: declarations, calls, the execution protocol. No gRPC, no SQL here."""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import dataclasses
import json
import mimetypes
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

import structlog

from agentworks.client.checks import bounded, check_json_depth, check_no_nul, request_hash
from agentworks.client.errors import InvalidArgument, NotFound, PermissionDenied, PreconditionFailed
from agentworks.client.identity import Identity, check_principal
from agentworks.server.db import Listener, Waiter
from agentworks_functions.config import MAX_RUNNING_LIMIT
from agentworks_functions.metrics import counting_busy
from agentworks_functions.models import (
    CANCELLED,
    COMPLETED,
    FAILED,
    INTERRUPTED,
    OPEN_STATUSES,
    RESULT_FILE,
    RUNNING,
    Call,
    CallSource,
    Ending,
    FileInfo,
    FilePage,
    FinishOutcome,
    Function,
    FunctionSpec,
    Notice,
    Receipt,
    StatusView,
    Target,
    TargetKey,
)
from agentworks_functions.schemas import (
    check_caller_patterns,
    check_schema,
    check_workflow_binding,
    closed_inputs,
    describe_violations,
    json_problems,
    may_call,
    off_loop,
    parse_valid_json,
    resolve_variables,
    result_problems,
    violations,
)
from agentworks_functions.store import (
    CALL_CHANNEL,
    EXECUTION_CHANNEL,
    Claim,
    FunctionsStore,
    call_not_found,
    ended_key,
    ended_message,
    submission_conflict,
)

log = structlog.get_logger("agentworks.functions")

# Limits (P6), stated in docs/functions.md.
MAX_DESCRIPTION_BYTES = 4 * 1024
MAX_SCHEMA_BYTES = 64 * 1024
MAX_ALLOWED_CALLERS = 100
MAX_INPUTS_BYTES = 256 * 1024
MAX_SUBMISSION_ID = 200
MAX_PROGRESS_BYTES = 4 * 1024
MAX_MESSAGE_BYTES = 64 * 1024
MAX_EVENT_TEXT_BYTES = 8 * 1024
# A status carries the whole step history: 1,000 steps of at most ~2.4 KiB each.
MAX_STEP_NAME_BYTES = 200
MAX_STEP_STATUS_BYTES = 50
MAX_STEP_DETAIL_BYTES = 2 * 1024
MAX_ITEMS_PER_REPORT = 100
MAX_MESSAGES_PER_CALL = 10_000
MAX_EVENTS_PER_CALL = 10_000
MAX_STEPS_PER_CALL = 1_000
MAX_QUESTION_BYTES = 8 * 1024
MAX_REPLY_BYTES = 64 * 1024
MAX_ASK_ID = 100
MAX_FINAL_MESSAGE_BYTES = 256 * 1024
MAX_ERROR_BYTES = 16 * 1024
MAX_FILE_BYTES = 64 * 1024 * 1024
# Past the file limit, up to this much more of the upload is read and dropped before the
# refusal goes out: a grpc.aio client still writing when the status arrives reports
# INTERNAL "Internal error from Core" instead of it (grpc/grpc#36066).
MAX_UPLOAD_DRAIN_BYTES = 64 * 1024 * 1024
MAX_FILES_PER_CALL = 500
MAX_FILE_NAME_BYTES = 255
MAX_MEDIA_TYPE = 255
MAX_RESULT_BYTES = 1024 * 1024
MESSAGE_LIMIT_DEFAULT, MESSAGE_LIMIT_MAX = 50, 200
EVENT_LIMIT_DEFAULT, EVENT_LIMIT_MAX = 50, 200
READ_LIMIT_DEFAULT, READ_LIMIT_MAX = 64 * 1024, 1024 * 1024
MAX_WAIT_SECONDS = 25
# The pages (after, message_limit, after_event, event_limit) of a Call's `outcome`.
_OUTCOME = (-1, 1, -1, 1)
LEASE_DEFAULT = 30
MAX_CLAIM_TARGETS = 100
# Tool events keep the tool name only: raw arguments and results are never stored (F7).
TOOL_EVENT_KINDS = ("tool_call", "tool_result")

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_FUNCTION_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")
_KIND_RE = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
_UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$")

# Sends completion notices in one request; per notice None (delivered) or why not.
NoticeSender = Callable[[list[Notice]], Awaitable[list[str | None]]]


def check_size(value: str, field: str, limit: int) -> str:
    check_no_nul(value, field)
    size = len(value.encode())
    if size > limit:
        raise InvalidArgument(f"{field} is {size} bytes; the limit is {limit} bytes")
    return value


def function_not_found(target: TargetKey, function: str) -> NotFound:
    """The same answer for a function that does not exist and one the caller may not call
    (F2), saying where to see the ones it may: the CLI, the MCP tool and the RPC."""
    if target.kind == "crew":
        cli, mcp = f"agentworks crews functions {target.name}", f"crew={target.name}"
    else:
        cli = f"agentworks functions list --workflow {target.name}"
        mcp = f"workflow_id={target.name}"
    return NotFound(
        f"function {function!r} not found on {target} (or you may not call it); see the "
        f"functions you may call: `{cli}` (CLI), the `functions` tool with action=list, "
        f"{mcp} (MCP), or ListFunctions (gRPC)"
    )


def check_file_name(name: str, call_id: str) -> str:
    """A path inside the call's output folder; anything that could escape it is refused."""
    prefix = f".calls/{call_id}/"
    if name.startswith(prefix):
        name = name[len(prefix) :]
    if not name:
        raise InvalidArgument("file is required: a path inside the output folder, e.g. result.json")
    if len(name.encode()) > MAX_FILE_NAME_BYTES:
        raise InvalidArgument(f"file name is longer than {MAX_FILE_NAME_BYTES} bytes")
    parts = name.split("/")
    if (
        name.startswith("/")
        or "\\" in name
        or _CONTROL_RE.search(name)
        or any(p in ("", ".", "..") for p in parts)
    ):
        raise InvalidArgument(
            f"file {name!r} is not a path inside the call's output folder: use a relative "
            "path such as report.csv or out/data.json, without '..', '.', empty parts, a "
            "leading '/' or backslashes"
        )
    return name


def text_page(data: bytes, *, more: bool) -> tuple[str | None, bytes]:
    """The page as text (trimmed to a whole UTF-8 character), or None if it is not text."""
    try:
        return data.decode("utf-8"), data
    except UnicodeDecodeError:
        pass
    if more:
        for cut in (1, 2, 3):
            trimmed = data[:-cut]
            if not trimmed:
                break
            try:
                return trimmed.decode("utf-8"), trimmed
            except UnicodeDecodeError:
                continue
    return None, data


def notice_text(call: Call) -> str:
    """The completion notice: a reference to the saved terminal output, no verdict (F13)."""
    return (
        f"Function call {call.id} ({call.target} {call.function}) ended: {call.status}. "
        f"Its saved output (answer, result, error and files in {call.output_folder}) is "
        f"readable with functions status call_id={call.id}."
    )


async def _drain(chunks: AsyncIterator[tuple[str, str, str, bytes]], limit: int) -> None:
    """Read and drop the rest of an upload, at most `limit` bytes of it."""
    dropped = 0
    async for _, _, _, data in chunks:
        dropped += len(data)
        if dropped > limit:
            return


@dataclasses.dataclass
class _ClaimGate:
    """The claims of one target set in this process: they take turns (see _claim_once)."""

    lock: asyncio.Lock = dataclasses.field(default_factory=asyncio.Lock)
    empty_since: float = float("-inf")  # start of the latest attempt that found nothing
    users: int = 0


def check_claim_targets(identity: Identity, targets: Sequence[TargetKey], field: str) -> None:
    """The targets of a claim: some, not too many, and all served by this runtime (R1)."""
    if not targets:
        raise InvalidArgument(f"{field} is empty: name the crews or workflows this runtime serves")
    if len(targets) > MAX_CLAIM_TARGETS:
        raise InvalidArgument(f"at most {MAX_CLAIM_TARGETS} {field} per claim")
    for key in targets:
        if not identity.serves(key.kind, key.name):
            raise PermissionDenied(f"{identity.principal} may not run executions of {key}")


def plain_ending(
    failed: bool, final_message: str, error: str, *, interrupted: bool = False
) -> Ending:
    """A finish with no result to check: completed with its answer, failed, or given up
    by its runtime (interrupted, F12)."""
    if interrupted:
        return Ending(
            INTERRUPTED,
            answer=final_message,
            error=error or "the execution's runtime gave it up before it ended",
        )
    if failed:
        return Ending(
            FAILED,
            answer=final_message,
            error=error or "the execution reported a failure without details",
        )
    return Ending(COMPLETED, answer=final_message)


def same_finish(
    call: Call, *, failed: bool, final_message: str, error: str, correction_round: int
) -> bool:
    """Whether a finish of an ended call repeats the one that ended it (a retry after a
    lost answer): the same final message; a failure with the same error; a success that
    completed the call, or that the result check failed after the correction turn."""
    if final_message != call.answer:
        return False
    if failed:
        return call.status == FAILED and plain_ending(True, final_message, error).error == (
            call.error
        )
    return call.status == COMPLETED or correction_round == 1


class FunctionsService:
    """The function contract (A3, F1-F15) and the execution protocol (R1)."""

    def __init__(
        self,
        store: FunctionsStore,
        listener: Listener,
        *,
        poll_fallback_seconds: float = 5.0,
        min_lease_seconds: int = 5,
        max_lease_seconds: int = 300,
        notice_retry_seconds: float = 5.0,
        claim_timeout_seconds: float = 0.0,
    ) -> None:
        self.store = store
        self.claim_timeout = timedelta(seconds=claim_timeout_seconds) or None
        self.listener = listener
        self.poll_fallback_seconds = poll_fallback_seconds
        self.min_lease_seconds = min_lease_seconds
        self.max_lease_seconds = max_lease_seconds
        self.notice_retry = timedelta(seconds=notice_retry_seconds)
        self.draining = asyncio.Event()
        self._claim_gates: dict[tuple[str, ...], _ClaimGate] = {}

    # ------------------------------------------------------------------ targets

    async def register_target(
        self, identity: Identity, key: TargetKey, owner: str, running_limit: int
    ) -> Target:
        if not identity.is_operator:
            raise PermissionDenied("registering a target needs the operator role")
        check_principal(owner, "owner")
        if not 0 <= running_limit <= MAX_RUNNING_LIMIT:
            raise InvalidArgument(
                f"running_limit must be 0 (the service default) to {MAX_RUNNING_LIMIT}, "
                f"got {running_limit}"
            )
        target = await self.store.put_target(key, owner, running_limit)
        log.info("target.registered", target=str(key), owner=owner, running_limit=running_limit)
        return target

    async def get_target(self, identity: Identity, key: TargetKey) -> Target:
        return await self.store.get_target(key)

    # ------------------------------------------------------------- declarations

    async def _owned_target(self, identity: Identity, key: TargetKey) -> Target:
        target = await self.store.get_target(key)
        if identity.principal != target.owner:
            raise PermissionDenied(
                f"only the owner of {key} ({target.owner}) may declare, update or remove "
                "its functions"
            )
        return target

    async def declare_function(self, identity: Identity, spec: FunctionSpec) -> Function:
        """Create or replace a function; schemas are checked here, not at call time (F1)."""
        await self._owned_target(identity, spec.target)
        if not _FUNCTION_RE.match(spec.name or ""):
            raise InvalidArgument(
                f"function name {spec.name!r} is not valid: 1-64 letters, digits, '_', '.' or "
                "'-', starting with a letter"
            )
        check_size(spec.description, "description", MAX_DESCRIPTION_BYTES)
        if spec.input_schema is None:
            raise InvalidArgument(
                'input_schema is required; a function without inputs declares {"type": '
                '"object", "additionalProperties": false}'
            )
        for field, schema in (
            ("input_schema", spec.input_schema),
            ("output_schema", spec.output_schema),
        ):
            if schema is not None and len(json.dumps(schema).encode()) > MAX_SCHEMA_BYTES:
                raise InvalidArgument(f"{field} is larger than {MAX_SCHEMA_BYTES} bytes as JSON")
        check_schema(spec.input_schema, "input_schema", require_object=True)
        if spec.output_schema is not None:
            check_schema(spec.output_schema, "output_schema", require_object=False)
        if len(spec.allowed_callers) > MAX_ALLOWED_CALLERS:
            raise InvalidArgument(f"allowed_callers has more than {MAX_ALLOWED_CALLERS} entries")
        allowed = check_caller_patterns(spec.allowed_callers)
        workflow = spec.workflow
        if spec.target.kind == "workflow":
            if workflow is None:
                raise InvalidArgument(
                    "a workflow function needs workflow.route (and optionally allowed_groups "
                    "and typed variables)"
                )
            workflow = check_workflow_binding(workflow, spec.input_schema, _NAME_RE)
        elif workflow is not None:
            raise InvalidArgument("workflow is only for functions of workflow targets, not crews")
        function = await self.store.put_function(
            FunctionSpec(
                target=spec.target,
                name=spec.name,
                description=spec.description,
                input_schema=closed_inputs(spec.input_schema),
                output_schema=spec.output_schema,
                allowed_callers=allowed,
                starts_work=spec.starts_work,
                workflow=workflow,
            )
        )
        log.info("function.declared", target=str(spec.target), function=spec.name)
        return function

    async def remove_function(self, identity: Identity, key: TargetKey, name: str) -> None:
        await self._owned_target(identity, key)
        if not _FUNCTION_RE.match(name or "") or not await self.store.delete_function(key, name):
            raise NotFound(f"function {name!r} not found on {key}")
        log.info("function.removed", target=str(key), function=name)

    async def list_functions(self, identity: Identity, key: TargetKey) -> list[Function]:
        """The functions this caller may invoke (F2); the built-in ask is never one (F1)."""
        target = await self.store.get_target(key)
        return [
            f
            for f in await self.store.list_functions(key)
            if may_call(identity.principal, target.owner, f.allowed_callers)
        ]

    # -------------------------------------------------------------------- calls

    async def call(
        self,
        identity: Identity,
        *,
        target: TargetKey,
        function: str,
        inputs: dict[str, Any],
        submission_id: str,
        notify_conversation_id: str,
        source: CallSource | None,
        wait_seconds: int = 0,
        fresh_submission_id: bool = False,
    ) -> Receipt:
        """Check inputs, then start a fresh execution within the running limit (F3-F6).

        With `wait_seconds`, wait that long for the call to end, and return it ended as
        the receipt's `outcome` if it did: call and result in one request.
        `fresh_submission_id`: the caller vouches that `submission_id` was never sent
        before, so no earlier call is looked for and a full target refuses at once.
        """
        wait_seconds = bounded(wait_seconds, "wait_seconds", 0, MAX_WAIT_SECONDS, 0)
        deadline = time.monotonic() + wait_seconds
        call_id = uuid.uuid4()
        # Listening for the end before the call exists: the end cannot be missed, and
        # nothing needs reading before the first wait.
        ends = [ended_key(call_id)] if wait_seconds else []
        view: StatusView | None = None
        with self.listener.subscribe(CALL_CHANNEL, ends) as waiter:
            receipt = await self._call(
                identity,
                call_id=call_id,
                target=target,
                function=function,
                inputs=inputs,
                submission_id=submission_id,
                notify_conversation_id=notify_conversation_id,
                source=source,
                fresh_submission_id=fresh_submission_id,
            )
            if not wait_seconds:
                return receipt
            if receipt.created:
                view = await self._until_ended(waiter, receipt.call_id, deadline, None, _OUTCOME)
        if not receipt.created:  # an earlier call with this retry key: wait for that one
            view = await self.status(
                identity,
                call_id=receipt.call_id,
                message_limit=_OUTCOME[1],
                event_limit=_OUTCOME[3],
                wait_seconds=max(1, round(deadline - time.monotonic())),
                until_ended=True,
            )
        if view is None or view.call.is_open:
            return receipt
        return dataclasses.replace(receipt, status=view.call.status, outcome=view)

    async def _call(
        self,
        identity: Identity,
        *,
        call_id: uuid.UUID,
        target: TargetKey,
        function: str,
        inputs: dict[str, Any],
        submission_id: str,
        notify_conversation_id: str,
        source: CallSource | None,
        fresh_submission_id: bool = False,
    ) -> Receipt:
        if not function:
            raise InvalidArgument("function is required: the name of a declared function")
        if not _FUNCTION_RE.match(function):  # cannot be declared; keep it away from SQL
            raise function_not_found(target, function)
        check_size(submission_id, "submission_id", MAX_SUBMISSION_ID)
        if len(json.dumps(inputs).encode()) > MAX_INPUTS_BYTES:
            raise InvalidArgument(f"inputs are larger than {MAX_INPUTS_BYTES} bytes as JSON")
        check_json_depth(inputs, "inputs")  # the execution carries them back as a Struct
        if notify_conversation_id:
            if identity.kind not in ("agent", "workflow"):
                raise InvalidArgument(
                    "notify_conversation_id is for internal callers (agents and workflows); "
                    "other callers poll status instead"
                )
            if not _UUID_RE.match(notify_conversation_id):
                raise InvalidArgument(
                    f"notify_conversation_id {notify_conversation_id!r} is not a conversation id"
                )
        if source is not None:
            if identity.kind != "workflow":
                raise InvalidArgument("source (run, step, group) is only for workflow callers")
            for field, value in (("run_id", source.run_id), ("step", source.step)):
                if not value or len(value) > 200:
                    raise InvalidArgument(f"source.{field} is required (at most 200 characters)")
            if len(source.group) > 200:
                raise InvalidArgument("source.group is longer than 200 characters")
            for field, value in source.as_json().items():
                check_no_nul(value, f"source.{field}")
        # F14: a workflow's retry ids are scoped to its run, step and group.
        submission_key = None
        if submission_id:
            submission_key = (
                f"{source.run_id}/{source.step}/{source.group}/{submission_id}"
                if source
                else submission_id
            )
        digest = (
            request_hash(
                str(target),
                function,
                inputs,
                notify_conversation_id,
                source.as_json() if source else None,
            )
            if submission_key
            else ""  # no retry key: nothing to compare a retry with
        )
        if submission_key and not fresh_submission_id:
            found = await self.store.find_submission(identity.principal, submission_key)
            if found is not None:
                receipt, earlier_hash = found
                if earlier_hash != digest:
                    raise submission_conflict(submission_id)
                log.info("call.recovered", call_id=receipt.call_id, status=receipt.status)
                return receipt
        owner, declared, full = await self.store.function_for_call(target, function)
        if declared is None or not may_call(identity.principal, owner, declared.allowed_callers):
            raise function_not_found(target, function)
        problems = json_problems(inputs, "inputs") + await off_loop(
            declared.input_schema, violations, declared.input_schema, inputs
        )
        variables = None
        if declared.workflow is not None:
            variables, variable_problems = resolve_variables(declared.workflow.variables, inputs)
            problems += variable_problems
        if problems:
            raise InvalidArgument(
                describe_violations(
                    f"inputs for {target} {function} are invalid",
                    problems,
                    "Fix them and call again; no call was created.",
                )
            )
        with counting_busy(target):  # both refusals below count as busy (metrics)
            # At the limit already: refused at once (F5). A retry must not be refused so,
            # as its call may exist (the lookup above missed a twin still being stored);
            # a fresh key has no earlier call to return.
            if full is not None and (not submission_key or fresh_submission_id):
                raise full
            receipt = await self.store.create_call(
                call_id=call_id,
                function=declared,
                caller=identity.principal,
                inputs=inputs,
                variables=variables,
                source=source,
                submission_key=submission_key,
                request_hash=digest,
                notify_conversation_id=notify_conversation_id or None,
                submission_id=submission_id,
            )
        structlog.contextvars.bind_contextvars(call_id=receipt.call_id)
        log.info(
            "call.accepted" if receipt.created else "call.recovered",
            call_id=receipt.call_id,
            target=str(target),
            function=function,
        )
        return receipt

    async def _check_reader(self, identity: Identity, call_id: str) -> None:
        """A3: only the caller or the target's owner; everyone else gets NOT_FOUND."""
        caller, owner = await self.store.call_access(call_id)
        if identity.principal not in (caller, owner):
            raise call_not_found(call_id)

    async def status(
        self,
        identity: Identity,
        *,
        call_id: str,
        after: int = -1,
        message_limit: int = 0,
        after_event: int = -1,
        event_limit: int = 0,
        wait_seconds: int = 0,
        seen_version: int | None = None,
        until_ended: bool = False,
    ) -> StatusView:
        """The call's record with both pagings; optionally wait for a change (F7, F11).

        `until_ended` waits for the end of the call only, through any other change.
        """
        for field, value in (("after", after), ("after_event", after_event)):
            if value < -1:
                raise InvalidArgument(f"{field} must be -1 (from the start) or a next_{field}")
        message_limit = bounded(
            message_limit, "message_limit", 1, MESSAGE_LIMIT_MAX, MESSAGE_LIMIT_DEFAULT
        )
        event_limit = bounded(event_limit, "event_limit", 1, EVENT_LIMIT_MAX, EVENT_LIMIT_DEFAULT)
        wait_seconds = bounded(wait_seconds, "wait_seconds", 0, MAX_WAIT_SECONDS, 0)
        deadline = time.monotonic() + wait_seconds
        page = (after, message_limit, after_event, event_limit)
        keys = [ended_key(call_id) if until_ended else call_id]
        with self.listener.subscribe(CALL_CHANNEL, keys) as waiter:
            view, owner = await self.store.status(
                call_id,
                after=after,
                message_limit=message_limit,
                after_event=after_event,
                event_limit=event_limit,
            )
            # A3: only the caller or the target's owner; everyone else gets NOT_FOUND.
            if identity.principal not in (view.call.caller, owner):
                raise call_not_found(call_id)
            if until_ended:
                return await self._until_ended(waiter, call_id, deadline, view, page) or view
            baseline = view.call.version if seen_version is None else seen_version
            while (
                wait_seconds
                and view.call.is_open
                and not view.messages
                and not view.events
                and view.call.version <= baseline
            ):
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.draining.is_set():
                    break
                await waiter.wait(min(remaining, self.poll_fallback_seconds))
                view = await self._view(call_id, *page)
        return view

    async def _until_ended(
        self,
        waiter: Waiter,
        call_id: str,
        deadline: float,
        view: StatusView | None,
        page: tuple[int, int, int, int],
    ) -> StatusView | None:
        """Wait (subscribed to the call's end) until it ended or `deadline`; the last view.

        A wake-up means the call ended (or the listener reconnected): the view is read
        once, at the end. Without one, a cheap status check stands in for the NOTIFY.
        """
        while view is None or view.call.is_open:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.draining.is_set():
                break
            woken = await waiter.wait(min(remaining, self.poll_fallback_seconds))
            if not woken and await self.store.call_status(call_id) in OPEN_STATUSES:
                continue
            view = await self._view(call_id, *page)
        return view

    async def _view(
        self, call_id: str, after: int, message_limit: int, after_event: int, event_limit: int
    ) -> StatusView:
        view, _ = await self.store.status(
            call_id,
            after=after,
            message_limit=message_limit,
            after_event=after_event,
            event_limit=event_limit,
        )
        return view

    async def read_file(
        self, identity: Identity, *, call_id: str, file: str, offset: int, limit: int
    ) -> FilePage:
        """A bounded page of one output file, by byte offset (F8)."""
        limit = bounded(limit, "limit", 1, READ_LIMIT_MAX, READ_LIMIT_DEFAULT)
        if offset < 0:
            raise InvalidArgument(f"offset must be 0 or more, got {offset}")
        await self._check_reader(identity, call_id)
        name = check_file_name(file, call_id)
        info = await self.store.file_info(call_id, name)
        if info is None:
            raise NotFound(
                f"file {name!r} not found in call {call_id}: status lists the call's files"
            )
        if offset > info.size:
            raise InvalidArgument(
                f"offset {offset} is past the end of {name} ({info.size} bytes); "
                "start at 0 and follow next_offset"
            )
        data = await self.store.blobs.read(info.blob_id, offset, limit)
        as_text = None
        if info.is_text:
            as_text, data = text_page(data, more=offset + len(data) < info.size)
        end = offset + len(data)
        return FilePage(
            name=name,
            data=data,
            as_text=as_text,
            offset=offset,
            size=info.size,
            next_offset=end if end < info.size else None,
            media_type=info.media_type,
        )

    async def reply(self, identity: Identity, *, call_id: str, text: str) -> StatusView:
        """Answer the pending human-input question; the execution goes on (F11)."""
        if not text.strip():
            raise InvalidArgument("text is empty: the reply to the pending question")
        check_size(text, "text", MAX_REPLY_BYTES)
        await self._check_reader(identity, call_id)
        await self.store.reply(call_id, identity.principal, text)
        log.info("call.replied", call_id=call_id)
        return await self.status(identity, call_id=call_id)

    async def cancel(self, identity: Identity, *, call_id: str) -> StatusView:
        """End an open call as cancelled; the runtime learns it on its next report (F15)."""
        await self._check_reader(identity, call_id)
        await self.store.cancel(call_id, identity.principal, notice_text)
        log.info("call.cancelled", call_id=call_id)
        return await self.status(identity, call_id=call_id)

    # ------------------------------------------------------------------ runtime

    def _lease(self, lease_seconds: int) -> timedelta:
        return timedelta(
            seconds=bounded(
                lease_seconds,
                "lease_seconds",
                self.min_lease_seconds,
                self.max_lease_seconds,
                max(LEASE_DEFAULT, self.min_lease_seconds),
            )
        )

    async def _ended_status(self, identity: Identity, call_id: str) -> str:
        return (await self._execution(identity, call_id)).status

    async def _execution(self, identity: Identity, call_id: str) -> Call:
        try:
            call: Call | None = await self.store.get_call(call_id)
        except NotFound:
            call = None  # the same answer as for someone else's call (A3)
        if call is None or call.runtime != identity.principal:
            raise NotFound(f"execution {call_id!r} not found: claim it with ClaimExecution first")
        return call

    async def claim_execution(
        self,
        identity: Identity,
        *,
        targets: Sequence[TargetKey],
        wait_seconds: int,
        lease_seconds: int,
    ) -> Call | None:
        """Claim the oldest unclaimed call of these targets, waiting if none (R1)."""
        check_claim_targets(identity, targets, "targets")
        wait_seconds = bounded(wait_seconds, "wait_seconds", 0, MAX_WAIT_SECONDS, 0)
        lease = self._lease(lease_seconds)
        deadline = time.monotonic() + wait_seconds
        names = sorted({str(k) for k in targets})
        gate = self._claim_gates.setdefault(tuple(names), _ClaimGate())
        gate.users += 1
        try:
            with self.listener.subscribe(EXECUTION_CHANNEL, names) as waiter:
                since = time.monotonic()  # anything committed before this is worth a look
                while True:
                    call = await self._claim_once(gate, since, identity.principal, targets, lease)
                    remaining = deadline - time.monotonic()
                    if call is not None or remaining <= 0 or self.draining.is_set():
                        break
                    await waiter.wait(min(remaining, self.poll_fallback_seconds))
                    since = time.monotonic()
        finally:
            gate.users -= 1
            if not gate.users:
                self._claim_gates.pop(tuple(names), None)
        if call is not None:
            log.info("execution.claimed", call_id=call.id, target=str(call.target))
        return call

    async def _claim_once(
        self,
        gate: _ClaimGate,
        since: float,
        runtime: str,
        targets: Sequence[TargetKey],
        lease: timedelta,
    ) -> Call | None:
        """One claim attempt, unless this process already knows it would find nothing.

        A NOTIFY wakes every claim of the target waiting in this process, but only one
        can take the new call. The claims of one target set therefore take turns, and
        one that was woken at `since` skips the database when an attempt that started
        after `since` found nothing: that attempt saw everything committed before the
        wake-up, so whatever woke this claim is taken already. Without it, each new call
        costs one empty claim per idle runtime.
        """
        async with gate.lock:
            if gate.empty_since > since:
                return None
            started = time.monotonic()
            call = await self.store.claim_execution(runtime, targets, lease)
            if call is None:
                gate.empty_since = max(gate.empty_since, started)
            return call

    async def heartbeat(
        self, identity: Identity, *, call_id: str, lease_seconds: int
    ) -> tuple[str, datetime]:
        return await self.store.heartbeat(call_id, identity.principal, self._lease(lease_seconds))

    async def report(
        self,
        identity: Identity,
        *,
        call_id: str,
        progress: str | None,
        messages: Sequence[tuple[str, str]],
        events: Sequence[tuple[str, str, str]],
        steps: Sequence[tuple[str, str, str, str]],
        sequence: int,
    ) -> str:
        """Record progress, execution messages, conversation events and workflow steps."""
        if progress is not None:
            check_size(progress, "progress", MAX_PROGRESS_BYTES)
        for what, items in (("messages", messages), ("events", events), ("steps", steps)):
            if len(items) > MAX_ITEMS_PER_REPORT:
                raise InvalidArgument(
                    f"{len(items)} {what} in one report; the limit is {MAX_ITEMS_PER_REPORT}"
                )
        clean_messages = []
        for role, text in messages:
            role = role or "assistant"
            if not _KIND_RE.match(role):
                raise InvalidArgument(f"message role {role!r} is not valid (e.g. assistant)")
            clean_messages.append((role, check_size(text, "message text", MAX_MESSAGE_BYTES)))
        clean_events = []
        for kind, text, tool_name in events:
            if not _KIND_RE.match(kind or ""):
                raise InvalidArgument(
                    f"event kind {kind!r} is not valid: lower-case letters, digits and '_' "
                    "(e.g. assistant, tool_call, tool_result)"
                )
            if kind in TOOL_EVENT_KINDS:
                if not tool_name:
                    raise InvalidArgument(f"a {kind} event needs tool_name")
                # The event view keeps the tool's name only, never arguments or results.
                clean_events.append((kind, "", check_size(tool_name, "tool_name", 200)))
            else:
                clean_events.append(
                    (kind, check_size(text, "event text", MAX_EVENT_TEXT_BYTES), "")
                )
        call = await self._execution(identity, call_id)
        clean_steps = []
        for step, group, status, detail in steps:
            if not step or not status:
                raise InvalidArgument("each workflow step needs step and status")
            if call.workflow is None:
                raise InvalidArgument("steps are for workflow function executions only")
            if call.workflow.allowed_groups and group not in call.workflow.allowed_groups:
                raise InvalidArgument(
                    f"step group {group!r} is not among this function's allowed groups "
                    f"{list(call.workflow.allowed_groups)}"
                )
            for field, value, limit in (
                ("step", step, MAX_STEP_NAME_BYTES),
                ("group", group, MAX_STEP_NAME_BYTES),
                ("status", status, MAX_STEP_STATUS_BYTES),
                ("detail", detail, MAX_STEP_DETAIL_BYTES),
            ):
                check_size(value, f"step {field}", limit)
            clean_steps.append((step, group, status, detail))
        if sequence < 0:
            raise InvalidArgument("sequence must be 0 (no retry check) or increasing from 1")
        return await self.store.report(
            call_id,
            identity.principal,
            progress=progress,
            messages=clean_messages,
            events=clean_events,
            steps=clean_steps,
            sequence=sequence,
            max_messages=MAX_MESSAGES_PER_CALL,
            max_events=MAX_EVENTS_PER_CALL,
            max_steps=MAX_STEPS_PER_CALL,
        )

    async def upload_file(
        self, identity: Identity, chunks: AsyncIterator[tuple[str, str, str, bytes]]
    ) -> FileInfo:
        """Store one output file streamed in chunks of (call_id, name, media_type, data)."""
        first = await anext(chunks, None)
        if first is None:
            raise InvalidArgument("empty upload: the first chunk must name call_id and name")
        call_id, raw_name, media_type, data = first
        name = check_file_name(raw_name, call_id)
        if len(media_type) > MAX_MEDIA_TYPE or _CONTROL_RE.search(media_type):
            raise InvalidArgument(
                f"media_type must be at most {MAX_MEDIA_TYPE} printable characters "
                "(e.g. text/csv), or empty to guess it from the name"
            )
        call = await self._execution(identity, call_id)
        if not call.is_open:
            raise PreconditionFailed(ended_message(call_id, call.status))
        writer = await self.store.blobs.writer()
        try:
            size = 0
            decoder = codecs.getincrementaldecoder("utf-8")()
            is_text = True
            while True:
                size += len(data)
                if size > MAX_FILE_BYTES:
                    await writer.abort()
                    await _drain(chunks, MAX_UPLOAD_DRAIN_BYTES)
                    raise InvalidArgument(
                        f"file {name!r} is larger than {MAX_FILE_BYTES} bytes; nothing was stored"
                    )
                if is_text:
                    try:
                        decoder.decode(data)
                    except UnicodeDecodeError:
                        is_text = False
                    if b"\x00" in data:
                        is_text = False
                await writer.write(data)
                chunk = await anext(chunks, None)
                if chunk is None:
                    break
                more_id, more_name, _, data = chunk
                if (more_id and more_id != call_id) or (more_name and more_name != raw_name):
                    raise InvalidArgument(
                        "every chunk of one upload must name the same call and file"
                    )
            if is_text:
                try:
                    decoder.decode(b"", final=True)
                except UnicodeDecodeError:
                    is_text = False
            blob = await writer.close()
            media_type = (
                media_type
                or mimetypes.guess_type(name)[0]
                or ("text/plain" if is_text else "application/octet-stream")
            )
            info = await self.store.link_file(
                call_id,
                identity.principal,
                name=name,
                blob=blob,
                media_type=media_type,
                is_text=is_text,
                max_files=MAX_FILES_PER_CALL,
            )
        except Exception:
            with contextlib.suppress(Exception):  # the sweeper purges what this leaves
                await writer.abort()
            raise
        log.info("file.stored", call_id=call_id, file=name, size=info.size)
        return info

    async def ask_input(
        self,
        identity: Identity,
        *,
        call_id: str,
        ask_id: str,
        question: str,
        wait_seconds: int,
        withdraw: bool = False,
    ) -> tuple[bool, str, str]:
        """Ask a human-input question and wait for the reply; (answered, reply, status).
        With `withdraw`, stop waiting for question `ask_id` instead (F11)."""
        if withdraw:
            if not ask_id:
                raise InvalidArgument("ask_id is required: the question to withdraw")
            reply, status = await self.store.withdraw_question(call_id, identity.principal, ask_id)
            log.info("execution.question_withdrawn", call_id=call_id, ask_id=ask_id)
            return reply is not None, reply or "", status
        if not question.strip():
            raise InvalidArgument("question is empty")
        check_size(question, "question", MAX_QUESTION_BYTES)
        if not ask_id or len(ask_id) > MAX_ASK_ID:
            raise InvalidArgument(f"ask_id is required (at most {MAX_ASK_ID} characters)")
        check_no_nul(ask_id, "ask_id")
        wait_seconds = bounded(wait_seconds, "wait_seconds", 0, MAX_WAIT_SECONDS, 0)
        deadline = time.monotonic() + wait_seconds
        with self.listener.subscribe(CALL_CHANNEL, [call_id]) as waiter:
            asked, status = await self.store.ask(call_id, identity.principal, ask_id, question)
            if asked.reply is not None or status == CANCELLED:
                return asked.reply is not None, asked.reply or "", status
            log.info("execution.asked", call_id=call_id, ask_id=ask_id)
            while True:
                reply, status = await self.store.question_state(call_id, ask_id)
                if reply is not None:
                    return True, reply, status
                if status == CANCELLED:
                    return False, "", status
                if status not in OPEN_STATUSES:
                    raise PreconditionFailed(ended_message(call_id, status))
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.draining.is_set():
                    return False, "", status
                await waiter.wait(min(remaining, self.poll_fallback_seconds))

    async def _result_file(self, call_id: str) -> tuple[bytes | None, list[str]]:
        info = await self.store.file_info(call_id, RESULT_FILE)
        if info is None:
            return None, []
        if info.size > MAX_RESULT_BYTES:
            return None, [
                f"the result file is {info.size} bytes; the limit is {MAX_RESULT_BYTES} bytes"
            ]
        return await self.store.blobs.read(info.blob_id, 0, info.size), []

    async def finish(
        self,
        identity: Identity,
        *,
        call_id: str,
        failed: bool,
        final_message: str,
        error: str,
        correction_round: int,
        claim_next: Sequence[TargetKey] | None = None,
        lease_seconds: int = 0,
        interrupted: bool = False,
    ) -> FinishOutcome:
        """The execution's terminal outcome, with the F10 result rules.

        With `claim_next`, a finish that ended the call also claims this runtime's next
        execution of those targets, as ClaimExecution would without waiting (R1): one
        request per execution instead of two while work is queued.
        """
        claim: Claim | None = None
        if claim_next is not None:
            check_claim_targets(identity, claim_next, "claim_next.targets")
            lease = self._lease(lease_seconds)
            # None while this replica shuts down: the runtime claims from another.
            claim = None if self.draining.is_set() else Claim(claim_next, lease)
        # The finish statement itself claims for one target; for several, a claim follows.
        one_target = claim if claim is not None and len(claim.targets) == 1 else None
        outcome, tried = await self._finish(
            identity,
            call_id=call_id,
            failed=failed,
            interrupted=interrupted,
            final_message=final_message,
            error=error,
            correction_round=correction_round,
            claim=one_target,
        )
        if claim is not None and not tried and outcome.status not in OPEN_STATUSES:
            # Not tried by the finish statement (several targets, or a retried finish).
            call = await self.store.claim_execution(identity.principal, claim.targets, claim.lease)
            outcome = dataclasses.replace(outcome, next=call)
        if outcome.next is not None:
            log.info("execution.claimed", call_id=outcome.next.id, target=str(outcome.next.target))
        return outcome

    async def _finish(
        self,
        identity: Identity,
        *,
        call_id: str,
        failed: bool,
        final_message: str,
        error: str,
        correction_round: int,
        claim: Claim | None,
        interrupted: bool = False,
    ) -> tuple[FinishOutcome, bool]:
        """The finish; True when its statement already tried `claim` (one target)."""
        check_size(final_message, "final_message", MAX_FINAL_MESSAGE_BYTES)
        check_size(error, "error", MAX_ERROR_BYTES)
        if correction_round not in (0, 1):
            raise InvalidArgument("correction_round must be 0, or 1 after the correction turn")
        if failed and interrupted:
            raise InvalidArgument(
                "failed and interrupted are two endings: give failed when the execution "
                "failed, interrupted when the runtime gives it up unfinished"
            )
        if correction_round == 0:
            # The common case in one statement: an open call of this runtime with no
            # output schema and no completion notice ends as reported. Anything else
            # (a result to check, a notice to write, a retried or late finish) takes
            # the full path below.
            status, next_call = await self.store.finish(
                call_id,
                identity.principal,
                plain_ending(failed, final_message, error, interrupted=interrupted),
                claim=claim,
            )
            if status is not None:
                log.info("execution.finished", call_id=call_id, status=status)
                return FinishOutcome(status, next=next_call), claim is not None
        call = await self._execution(identity, call_id)
        if not call.is_open:
            if interrupted and call.status == INTERRUPTED:
                return FinishOutcome(call.status), False  # given up already, or lost
            if call.status == CANCELLED or (
                call.status in (COMPLETED, FAILED)
                and same_finish(
                    call,
                    failed=failed,
                    final_message=final_message,
                    error=error,
                    correction_round=correction_round,
                )
            ):
                return FinishOutcome(call.status), False  # cancelled, or a retried finish
            if call.status in (COMPLETED, FAILED):
                raise PreconditionFailed(
                    f"call {call_id} has already ended ({call.status}) by another finish; "
                    "this one (a different final message, failure or error) was not applied"
                )
            raise PreconditionFailed(ended_message(call_id, call.status))
        if correction_round < call.correction_turns:
            # A retry of the first finish: the correction turn is already granted.
            return FinishOutcome(call.status, True, call.correction_prompt or ""), False
        if failed or interrupted or call.output_schema is None:
            ending = plain_ending(failed, final_message, error, interrupted=interrupted)
        else:
            raw, problems = await self._result_file(call_id)
            value = None
            if not problems:
                value, problems = await off_loop(
                    call.output_schema, result_problems, call.output_schema, raw
                )
            if not problems:
                ending = Ending(COMPLETED, answer=final_message, has_result=True, result=value)
            elif call.correction_turns == 0:
                prompt = describe_violations(
                    f"The result in FUNCTION_RESULT_FILE ({call.output_folder}{RESULT_FILE}) "
                    "does not match the function's output schema",
                    problems,
                    "Write JSON that matches the output schema to FUNCTION_RESULT_FILE, then "
                    "finish again. This is the only correction turn.",
                )
                granted = await self.store.request_correction(
                    call_id, identity.principal, prompt, prompt
                )
                if granted:
                    log.info("execution.correction_requested", call_id=call_id)
                    return FinishOutcome(RUNNING, True, prompt), False
                return FinishOutcome((await self.store.get_call(call_id)).status), False
            else:
                ok, value = await off_loop(
                    call.output_schema, parse_valid_json, call.output_schema, final_message
                )
                if ok:
                    ending = Ending(COMPLETED, answer=final_message, has_result=True, result=value)
                else:
                    ending = Ending(
                        FAILED,
                        answer=final_message,
                        error=describe_violations(
                            "the result still does not match the output schema after the "
                            "correction turn, and the final message is not JSON valid for it",
                            problems,
                            "The final text is kept as the answer.",
                        ),
                    )
        notice = None
        if call.notify_conversation_id:
            notice = notice_text(dataclasses.replace(call, status=ending.status))
        status, next_call = await self.store.finish(
            call_id,
            identity.principal,
            ending,
            correction_turns=call.correction_turns,
            notice=notice,
            claim=claim,
        )
        if status is None:  # it ended meanwhile (cancelled, interrupted)
            status = await self._ended_status(identity, call_id)
        log.info("execution.finished", call_id=call_id, status=status)
        return FinishOutcome(status, next=next_call), claim is not None

    # --------------------------------------------------------------- background

    async def interrupt_expired(self) -> int:
        """End lost executions, and calls no runtime claimed in time, `interrupted` (F12)."""
        count = await self.store.interrupt_expired(notice_text)
        if count:
            log.warning("executions.interrupted", count=count, reason="lease expired")
        if self.claim_timeout is not None:
            unclaimed = await self.store.interrupt_unclaimed(notice_text, self.claim_timeout)
            if unclaimed:
                log.warning(
                    "calls.interrupted",
                    count=unclaimed,
                    reason=f"not claimed within {self.claim_timeout.total_seconds():g} s",
                )
            count += unclaimed
        return count

    async def deliver_notices(self, send: NoticeSender) -> int:
        return await self.store.deliver_notices(send, retry_after=self.notice_retry)
