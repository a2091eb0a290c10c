"""Functions service replies as the JSON the function tools return (F1, F4, F6-F8)."""

from __future__ import annotations

from typing import Any

from agentworks.client import target_str
from agentworks.client.functions import (
    START_RECEIPT_NOTE,
    call_result,
    is_start_receipt,
    state_name,
)
from agentworks.core.jsontext import loads
from agentworks.functions.v1 import functions_pb2 as f
from agentworks_gateway.tools.toolkit import timestamp


def function_dict(fn: f.Function) -> dict[str, Any]:
    """A declared function as JSON (F1)."""
    out: dict[str, Any] = {
        "target": target_str(fn.target),
        "name": fn.name,
        "description": fn.description,
        "input_schema": loads(fn.input_schema_json, "input_schema", {}),
        "output_schema": loads(fn.output_schema_json, "output_schema", None),
        "allowed_callers": list(fn.allowed_callers),
        "starts_work": fn.starts_work,
        "created_at": timestamp(fn.created_at),
        "updated_at": timestamp(fn.updated_at),
    }
    if fn.HasField("workflow"):
        out["workflow"] = {
            "route": fn.workflow.route,
            "allowed_groups": list(fn.workflow.allowed_groups),
            "variables": [_variable_dict(v) for v in fn.workflow.variables],
        }
    return out


def _variable_dict(variable: f.WorkflowVariable) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": variable.name,
        "type": variable.type,
        "required": variable.required,
    }
    if variable.default_json:
        out["default"] = loads(variable.default_json, "default")
    return out


def receipt_dict(receipt: f.CallReceipt, target: str, function: str) -> dict[str, Any]:
    """A call receipt (F4, F6): the call_id to keep, and whether the call is new."""
    return {
        "call_id": receipt.call_id,
        "status": state_name(receipt.status),
        "output_folder": receipt.output_folder,
        "created": receipt.created,
        "target": target,
        "function": function,
    }


def status_dict(status: f.CallStatus) -> dict[str, Any]:
    """A call's status view (F7): status, progress, paged messages and events, outcome, files."""
    out: dict[str, Any] = {
        "call_id": status.call_id,
        "target": target_str(status.target),
        "function": status.function,
        "status": state_name(status.status),
        "progress": status.progress,
        "question": status.question or None,
        # The pending question with its ask id, choices and time (F11, M2), else None.
        "pending_question": (
            question_dict(status.pending_question) if status.HasField("pending_question") else None
        ),
        # The last questions with their times, oldest first (V7).
        "questions": [question_dict(q) for q in status.questions],
        "messages": [
            {
                "index": m.index,
                "role": m.role,
                "text": m.text,
                "created_at": timestamp(m.created_at),
            }
            for m in status.messages
        ],
        "next_after": status.next_after,
        "events": [
            {
                "index": e.index,
                "kind": e.kind,
                "text": e.text,
                **({"tool_name": e.tool_name} if e.tool_name else {}),
                "created_at": timestamp(e.created_at),
            }
            for e in status.events
        ],
        "next_after_event": status.next_after_event,
        "answer": status.answer or None,
        "has_result": bool(status.result_json),
        "result": call_result(status),
        "error": status.error or None,
        "files": [
            {
                "name": file.name,
                "size": file.size,
                "media_type": file.media_type,
                "sha256": file.sha256,
                "text": file.text,
                "created_at": timestamp(file.created_at),
            }
            for file in status.files
        ],
        "caller": status.caller,
        "output_folder": status.output_folder,
        "started": status.started,
        "correction_turn": status.correction_turn,
        "created_at": timestamp(status.created_at),
        "claimed_at": timestamp(status.claimed_at),
        "updated_at": timestamp(status.updated_at),
        "ended_at": timestamp(status.ended_at),
        "version": status.version,
        # L7: a function declared to start work completes with a start receipt.
        "starts_work": status.starts_work,
        "start_receipt": is_start_receipt(status),
    }
    if out["start_receipt"]:
        out["note"] = START_RECEIPT_NOTE
    if status.HasField("run") and status.run.run_id:
        out["run"] = {
            "run_id": status.run.run_id,
            "route": status.run.route,
            "steps": [
                {
                    "index": s.index,
                    "step": s.step,
                    "group": s.group,
                    "status": s.status,
                    "detail": s.detail,
                    "created_at": timestamp(s.created_at),
                }
                for s in status.run.steps
            ],
        }
    if status.HasField("source") and status.source.run_id:
        out["source"] = {
            "run_id": status.source.run_id,
            "step": status.source.step,
            "group": status.source.group,
        }
    return out


def question_dict(question: f.Question) -> dict[str, Any]:
    """One of a call's questions (F11, V7): its ask id, text, choices (empty: any text)
    and times; the reply's text is not in a status."""
    return {
        "ask_id": question.ask_id,
        "text": question.text,
        "choices": list(question.choices),
        "asked_at": timestamp(question.asked_at),
        "answered_at": timestamp(question.answered_at),
        "withdrawn_at": timestamp(question.withdrawn_at),
    }


def page_dict(page: f.FilePage, call_id: str) -> dict[str, Any]:
    """One page of an output file (F8): `content` (text) or `content_base64`, `next_offset`."""
    out: dict[str, Any] = {
        "call_id": call_id,
        "file": page.file,
        "offset": page.offset,
        "size": page.size,
        "media_type": page.media_type,
    }
    if page.WhichOneof("data") == "content_base64":
        out["content_base64"] = page.content_base64
    else:
        out["content"] = page.content
    out["next_offset"] = page.next_offset if page.HasField("next_offset") else None
    return out
