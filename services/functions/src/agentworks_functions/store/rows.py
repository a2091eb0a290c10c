"""Row -> domain conversions, channels and shared refusals of the functions store."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from agentworks.core.errors import Busy, NotFound, PreconditionFailed, Reason
from agentworks_functions.models import (
    INTERRUPTED,
    Call,
    CallSource,
    ExecutionEvent,
    ExecutionMessage,
    FileInfo,
    Function,
    QuestionRecord,
    StatusView,
    Target,
    TargetKey,
    WorkflowBinding,
    WorkflowStep,
)

EXECUTION_CHANNEL = "functions_executions"  # payload: "crew:<name>" — a call to claim

# payload: call_id — the call changed; when it ended, "<call_id> ended" is sent as well.
CALL_CHANNEL = "functions_calls"

NOTICE_CHANNEL = "functions_notices"  # payload: "due" — a completion notice to deliver

# Bytes of message or event text one status page carries at most (always >= 1 item).
PAGE_TEXT_BUDGET = 1024 * 1024


@dataclasses.dataclass(frozen=True)
class Claim:
    """A claim of the runtime's next execution, made with its finish (R1)."""

    targets: Sequence[TargetKey]
    lease: timedelta


def ended_key(call_id: object) -> str:
    """The CALL_CHANNEL payload that says a call ended: what a wait for the end hears."""
    return f"{call_id} ended"


def _uuid(value: str, what: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except (ValueError, AttributeError, TypeError):
        # Not an id at all: the same answer as an id nobody may see (A3).
        raise (
            call_not_found(value) if what == "call" else NotFound(f"{what} {value!r} not found")
        ) from None


def call_not_found(call_id: str) -> NotFound:
    return NotFound(
        f"call {call_id!r} not found: check the call_id (only the call's caller, the "
        "target's owner and the operator can see a call)"
    )


def _target(row: Any, default_limit: int) -> Target:
    return Target(
        key=TargetKey(row.kind, row.name),
        owner=row.owner,
        running_limit=row.running_limit,
        effective_running_limit=row.running_limit or default_limit,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def _function(row: Any) -> Function:
    return Function(
        target=TargetKey(row.target_kind, row.target_name),
        name=row.name,
        description=row.description,
        input_schema=row.input_schema,
        output_schema=row.output_schema,
        allowed_callers=tuple(row.allowed_callers or ()),
        starts_work=row.starts_work,
        workflow=WorkflowBinding.from_json(row.workflow),
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def _call(row: Any) -> Call:
    source = row.source
    return Call(
        id=str(row.id),
        target=TargetKey(row.target_kind, row.target_name),
        function=row.function,
        caller=row.caller,
        inputs=row.inputs,
        description=row.description,
        output_schema=row.output_schema,
        starts_work=row.starts_work,
        workflow=WorkflowBinding.from_json(row.workflow),
        variables=row.variables,
        run_id=str(row.run_id) if row.run_id else None,
        source=CallSource(**source) if source else None,
        notify_conversation_id=str(row.notify_conversation_id)
        if row.notify_conversation_id
        else None,
        status=row.status,
        progress=row.progress,
        runtime=row.runtime,
        lease_expires_at=row.lease_expires_at,
        correction_turns=row.correction_turns,
        correction_prompt=row.correction_prompt,
        answer=row.answer,
        has_result=row.has_result,
        result=row.result,
        error=row.error,
        version=row.version,
        created_at=row.created_at,
        ended_at=row.ended_at,
        traceparent=getattr(row, "traceparent", ""),
        source_call_id=str(row.source_call_id) if row.source_call_id else None,
        claimed_at=row.claimed_at,
        updated_at=row.updated_at,
    )


def _file(row: Any) -> FileInfo:
    return FileInfo(
        name=row.name,
        size=row.size,
        media_type=row.media_type,
        sha256=row.sha256,
        is_text=row.is_text,
        created_at=row.created_at,
        blob_id=str(row.blob_id),
    )


def _budgeted(rows: Sequence[dict[str, Any]], budget: int) -> list[dict[str, Any]]:
    """The leading rows whose text fits the byte budget (at least one)."""
    out: list[dict[str, Any]] = []
    used = 0
    for row in rows:
        used += len(row["text"].encode())
        if out and used > budget:
            break
        out.append(row)
    return out


def _when(value: str) -> datetime:
    """A timestamp from a JSON page (PostgreSQL writes them in ISO 8601)."""
    return datetime.fromisoformat(value)


def ended_message(call_id: str, status: str) -> str:
    if status == INTERRUPTED:
        return (
            f"call {call_id} was recorded as interrupted (its lease expired, or its runtime "
            "gave it up); it is not restarted — stop working on it"
        )
    return f"call {call_id} has already ended ({status}); nothing more can be recorded"


def call_ended(call_id: str, status: str) -> PreconditionFailed:
    """The refusal of anything more for a call that ended, with its machine-readable
    reason: cancelled (F15), interrupted (the lease was lost, F12) or otherwise ended."""
    reason = {
        "cancelled": Reason.CALL_CANCELLED,
        INTERRUPTED: Reason.LEASE_LOST,
    }.get(status, Reason.CALL_ENDED)
    return PreconditionFailed(ended_message(call_id, status), reason=reason)


def busy(key: TargetKey, running: int, limit: int) -> Busy:
    return Busy(
        f"busy: {key} is running {running} calls and its running limit is {limit}; "
        "the call was not queued or stored — retry later (the same submission_id "
        "is safe), or ask the operator to raise the limit",
        reason=Reason.RUNNING_LIMIT,
    )


def caller_busy(key: TargetKey, mine: int, share: int, limit: int) -> Busy:
    return Busy(
        f"busy: you are running {mine} of {key}'s calls, the most one caller may "
        f"({share} of its running limit {limit}, FUNCTIONS_CALLER_SHARE_PERCENT); the call "
        "was not queued or stored — retry when one of yours ends (the same submission_id "
        "is safe)",
        reason=Reason.CALLER_SHARE,
    )


# What a retry key reused with another request stood for (checks.key_reused, F6).
DIFFERENT_CALL = "a call of a different function or with different inputs"


def status_view(row: Any, after: int, after_event: int) -> StatusView:
    """A status page's row (call_status_page, call_ends_page) as a `StatusView` (F7)."""
    messages = _budgeted(row.page_messages, PAGE_TEXT_BUDGET)
    events = _budgeted(row.page_events, PAGE_TEXT_BUDGET)
    return StatusView(
        call=_call(row),
        messages=[
            ExecutionMessage(r["index"], r["role"], r["text"], _when(r["created_at"]))
            for r in messages
        ],
        next_after=messages[-1]["index"] if messages else after,
        events=[
            ExecutionEvent(r["index"], r["kind"], r["text"], r["tool_name"], _when(r["created_at"]))
            for r in events
        ],
        next_after_event=events[-1]["index"] if events else after_event,
        files=[
            FileInfo(
                name=r["name"],
                size=r["size"],
                media_type=r["media_type"],
                sha256=r["sha256"],
                is_text=r["is_text"],
                created_at=_when(r["created_at"]),
                blob_id=r["blob_id"],
            )
            for r in row.page_files
        ],
        steps=[
            WorkflowStep(
                r["index"],
                r["step"],
                r["group_name"],
                r["status"],
                r["detail"],
                _when(r["created_at"]),
            )
            for r in row.page_steps or ()
        ],
        questions=[
            QuestionRecord(
                ask_id=r["ask_id"],
                text=r["question"],
                choices=tuple(r["choices"] or ()),
                asked_at=_when(r["asked_at"]),
                answered_at=_when(r["answered_at"]) if r["answered_at"] else None,
                withdrawn_at=_when(r["withdrawn_at"]) if r["withdrawn_at"] else None,
            )
            for r in row.page_questions
        ],
    )
