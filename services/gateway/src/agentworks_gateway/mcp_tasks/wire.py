"""A call's status as the MCP Tasks extension's wire shapes (M1, M2, M3).

Reads the one call → task mapping (`agentworks_gateway.call_tasks`) and renames it
into MCP's words: a `DetailedTask` for `tasks/get` and `notifications/tasks`, the
elicitation form a pending question becomes, and the tool result of a completed call
with a `resource_link` for each of its files.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import mcp_types as types

from agentworks.core.mcp_results import ok_result
from agentworks.functions.v1 import functions_pb2 as f
from agentworks_gateway.call_tasks import MCP_STATUSES, Phase, task_view
from agentworks_gateway.tools.function_views import status_dict

EXTENSION = "io.modelcontextprotocol/tasks"
# The interval a client is asked to poll `tasks/get` at; a call's changes reach a
# listening client sooner (`subscriptions/listen`).
POLL_INTERVAL_MS = 1000
# The form field the answer to a question comes in.
ANSWER_FIELD = "answer"


def iso(ts: Any) -> str:
    """A protobuf timestamp as ISO 8601 (UTC); now when unset."""
    if not ts.seconds and not ts.nanos:
        return datetime.now(UTC).isoformat()
    return str(ts.ToDatetime(tzinfo=UTC).isoformat())


def question_key(question: f.Question) -> str:
    """The `inputRequests` key of a pending question, from its ask id: the same across
    polls, so a client deduplicates it, and another for the next question even when its
    text is the same."""
    return "question-" + hashlib.sha256(question.ask_id.encode()).hexdigest()[:16]


def question_of(content: dict[str, Any]) -> f.Question | None:
    """The pending question of a status as the tools return it (`pending_question`)."""
    pending = content.get("pending_question")
    if not isinstance(pending, dict) or not pending.get("text"):
        return None
    return f.Question(
        ask_id=str(pending.get("ask_id", "")),
        text=str(pending["text"]),
        choices=[str(c) for c in pending.get("choices") or ()],
    )


def answer_schema(question: f.Question) -> dict[str, Any]:
    """The form field of the answer: one of the question's choices (an enum, M2), or free
    text when it offers none."""
    if question.choices:
        return {
            "type": "string",
            "title": "Answer",
            "description": "Pick one; it is posted as the reply.",
            "enum": list(question.choices),
        }
    return {
        "type": "string",
        "title": "Answer",
        "description": "Your answer to the question; it is posted as the reply.",
    }


def question_form(question: f.Question) -> dict[str, Any]:
    """The `elicitation/create` params a question becomes (M2): its text, and a form of
    one required field, the answer, posted as the call's reply (F11)."""
    return {
        "mode": "form",
        "message": question.text,
        "requestedSchema": {
            "type": "object",
            "properties": {ANSWER_FIELD: answer_schema(question)},
            "required": [ANSWER_FIELD],
        },
    }


def input_requests(question: f.Question) -> dict[str, Any]:
    """The `inputRequests` of a call waiting for an answer."""
    return {
        question_key(question): {"method": "elicitation/create", "params": question_form(question)}
    }


def elicit_request(question: f.Question) -> types.ElicitRequest:
    """The question as a typed elicitation request (for `InputRequiredResult`)."""
    return types.ElicitRequest(params=types.ElicitRequestFormParams.model_validate(
        question_form(question)
    ))  # fmt: skip


def file_uri(call_id: str, name: str) -> str:
    """The resource URI of one of a call's files (M3)."""
    return f"agentworks://calls/{quote(call_id, safe='')}/files/{quote(name, safe='')}"


def file_links(status: f.CallStatus) -> list[types.ResourceLink]:
    """A `resource_link` for each file of a call, instead of its content (M3)."""
    return [
        types.ResourceLink(
            name=file.name,
            uri=file_uri(status.call_id, file.name),
            mime_type=file.media_type or None,
            size=file.size,
            description=f"output file of call {status.call_id} ({file.size} bytes)",
        )
        for file in status.files
    ]


def call_result(status: f.CallStatus) -> types.CallToolResult:
    """What `functions` action=status returns for the call, with its files linked."""
    result = ok_result(status_dict(status))
    result.content.extend(file_links(status))
    return result


def task_dict(status: f.CallStatus) -> dict[str, Any]:
    """The `DetailedTask` a call's status shows (M1): taskId is the call_id."""
    view = task_view(status)
    out: dict[str, Any] = {
        "taskId": view.task_id,
        "status": MCP_STATUSES[view.phase],
        "createdAt": iso(status.created_at),
        "lastUpdatedAt": iso(view.updated_at or status.created_at),
        # A call is kept as long as the functions service keeps calls.
        "ttlMs": None,
        "pollIntervalMs": POLL_INTERVAL_MS,
    }
    if view.message:
        out["statusMessage"] = view.message
    if view.question is not None:  # input required
        out["inputRequests"] = input_requests(view.question)
    elif view.phase is Phase.COMPLETED:
        out["result"] = call_result(status).model_dump(
            by_alias=True, mode="json", exclude_none=True
        )
    elif view.phase is Phase.FAILED:
        out["error"] = {
            "code": types.INTERNAL_ERROR,
            "message": view.message or "the call failed",
            "data": {"interrupted": view.interrupted, "call_id": view.task_id},
        }
    return out
