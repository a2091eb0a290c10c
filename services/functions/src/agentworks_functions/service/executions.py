"""Runtimes' side: claims, heartbeats, reports, uploads, questions (R1, F7, F8, F11)."""

from __future__ import annotations

import codecs
import contextlib
import mimetypes
import time
from collections.abc import AsyncIterator, Sequence
from datetime import datetime, timedelta

from agentworks.core.checks import check_no_nul
from agentworks.core.errors import InvalidArgument, Reason, rule_meta
from agentworks.core.identity import Identity
from agentworks.core.limits import (
    MAX_ASK_ID,
    MAX_EVENT_TEXT_BYTES,
    MAX_EVENTS_PER_CALL,
    MAX_FILE_BYTES,
    MAX_FILES_PER_CALL,
    MAX_MEDIA_TYPE,
    MAX_MESSAGES_PER_CALL,
    MAX_STEP_DETAIL_BYTES,
    MAX_STEP_NAME_BYTES,
    MAX_STEP_STATUS_BYTES,
    MAX_STEPS_PER_CALL,
)
from agentworks_functions.models import (
    CANCELLED,
    OPEN_STATUSES,
    Call,
    FileInfo,
    TargetKey,
)
from agentworks_functions.service.base import FunctionsServiceBase
from agentworks_functions.service.rules import (
    _CONTROL_RE,
    _KIND_RE,
    MAX_MESSAGE_BYTES,
    MAX_UPLOAD_DRAIN_BYTES,
    TOOL_EVENT_KINDS,
    _ClaimGate,
    _drain,
    check_claim_targets,
    check_file_name,
    check_size,
    log,
)
from agentworks_functions.store import (
    CALL_CHANNEL,
    EXECUTION_CHANNEL,
    call_ended,
)


class Executions(FunctionsServiceBase):
    async def claim_execution(
        self,
        identity: Identity,
        *,
        targets: Sequence[TargetKey],
        wait_seconds: int,
        lease_seconds: int,
    ) -> Call | None:
        """Claim the oldest unclaimed call of these targets, waiting if none (R1)."""
        check_claim_targets(identity, targets)
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
        await self._check_capability(identity, call_id)
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
        await self._check_capability(identity, call_id)
        # The progress's size and the items' counts are the proto's rules (ReportRequest);
        # the items' own fields are checked here: the validator does not walk them
        # (IGNORE_ALWAYS), so a report costs the same to validate for 1 item or 300.
        if progress is not None:
            check_no_nul(progress, "progress")
        clean_messages = []
        for role, text in messages:
            role = role or "assistant"
            if not _KIND_RE.match(role):
                raise InvalidArgument(
                    f"message role {role!r} is not valid (e.g. assistant)",
                    reason=Reason.FIELD_RULE,
                    metadata=rule_meta("messages.role", "enum"),
                )
            clean_messages.append((role, check_size(text, "message text", MAX_MESSAGE_BYTES)))
        clean_events = []
        for kind, text, tool_name in events:
            if not _KIND_RE.match(kind or ""):
                raise InvalidArgument(
                    f"event kind {kind!r} is not valid: lower-case letters, digits and '_' "
                    "(e.g. assistant, tool_call, tool_result)",
                    reason=Reason.FIELD_RULE,
                    metadata=rule_meta("events.kind", "pattern"),
                )
            if kind in TOOL_EVENT_KINDS:
                if not tool_name:
                    raise InvalidArgument(
                        f"a {kind} event needs tool_name",
                        reason=Reason.FIELD_RULE,
                        metadata=rule_meta("events.tool_name", "required"),
                    )
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
                raise InvalidArgument(
                    "each workflow step needs step and status",
                    reason=Reason.FIELD_RULE,
                    metadata=rule_meta("steps", "required"),
                )
            if call.workflow is None:
                raise InvalidArgument(
                    "steps are for workflow function executions only",
                    reason=Reason.INVALID_VALUE,
                    metadata=rule_meta("steps"),
                )
            if call.workflow.allowed_groups and group not in call.workflow.allowed_groups:
                raise InvalidArgument(
                    f"step group {group!r} is not among this function's allowed groups "
                    f"{list(call.workflow.allowed_groups)}",
                    reason=Reason.INVALID_VALUE,
                    metadata=rule_meta("steps.group"),
                )
            for field, value, limit in (
                ("step", step, MAX_STEP_NAME_BYTES),
                ("group", group, MAX_STEP_NAME_BYTES),
                ("status", status, MAX_STEP_STATUS_BYTES),
                ("detail", detail, MAX_STEP_DETAIL_BYTES),
            ):
                check_size(value, f"step {field}", limit)
            clean_steps.append((step, group, status, detail))
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
            raise InvalidArgument(
                "empty upload: the first chunk must name call_id and name",
                reason=Reason.FIELD_RULE,
                metadata=rule_meta("chunks", "required"),
            )
        call_id, raw_name, media_type, data = first
        name = check_file_name(raw_name, call_id)
        await self._check_capability(identity, call_id)
        if len(media_type) > MAX_MEDIA_TYPE or _CONTROL_RE.search(media_type):
            raise InvalidArgument(
                f"media_type must be at most {MAX_MEDIA_TYPE} printable characters "
                "(e.g. text/csv), or empty to guess it from the name",
                reason=Reason.FIELD_RULE,
                metadata=rule_meta("media_type", "pattern", MAX_MEDIA_TYPE),
            )
        call = await self._execution(identity, call_id)
        if not call.is_open:
            raise call_ended(call_id, call.status)
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
                        f"file {name!r} is larger than {MAX_FILE_BYTES} bytes; nothing was stored",
                        reason=Reason.FIELD_RULE,
                        metadata=rule_meta("data", "bytes.max_len", MAX_FILE_BYTES),
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
                        "every chunk of one upload must name the same call and file",
                        reason=Reason.INVALID_VALUE,
                        metadata=rule_meta("chunks"),
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
                target_quota=self.target_file_quota_bytes,
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
        choices: Sequence[str] = (),
    ) -> tuple[bool, str, str]:
        """Ask a human-input question and wait for the reply; (answered, reply, status).
        With `choices`, the reply must be one of them. With `withdraw`, stop waiting for
        question `ask_id` instead (F11)."""
        await self._check_capability(identity, call_id)
        if withdraw:
            if not ask_id:
                raise InvalidArgument(
                    "ask_id is required: the question to withdraw",
                    reason=Reason.FIELD_RULE,
                    metadata=rule_meta("ask_id", "required"),
                )
            reply, status = await self.store.withdraw_question(call_id, identity.principal, ask_id)
            log.info("execution.question_withdrawn", call_id=call_id, ask_id=ask_id)
            return reply is not None, reply or "", status
        if not question.strip():
            raise InvalidArgument(
                "question is empty",
                reason=Reason.FIELD_RULE,
                metadata=rule_meta("question", "required"),
            )
        check_no_nul(question, "question")  # its size is the proto's rule
        for choice in choices:  # their count, sizes and uniqueness are the proto's rules
            check_no_nul(choice, "choices")
        if not ask_id or len(ask_id) > MAX_ASK_ID:
            raise InvalidArgument(
                f"ask_id is required (at most {MAX_ASK_ID} characters)",
                reason=Reason.FIELD_RULE,
                metadata=rule_meta("ask_id", "string.max_len", MAX_ASK_ID),
            )
        check_no_nul(ask_id, "ask_id")
        deadline = time.monotonic() + wait_seconds
        with self.listener.subscribe(CALL_CHANNEL, [call_id]) as waiter:
            asked, status = await self.store.ask(
                call_id, identity.principal, ask_id, question, choices
            )
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
                    raise call_ended(call_id, status)
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.draining.is_set():
                    return False, "", status
                await waiter.wait(min(remaining, self.poll_fallback_seconds))
