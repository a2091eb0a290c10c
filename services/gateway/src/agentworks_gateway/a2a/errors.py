"""AgentWorks refusals as A2A errors.

A refusal keeps its words, and its code, reason and metadata travel in the JSON-RPC
error's `google.rpc.ErrorInfo` (`data[0].metadata`: `code`, `reason`, the refusal's own
metadata, `retry_after_seconds`), which a2a-sdk's client hands back as the error's
`data`. A2A has an error for a task not found and for invalid params; every other
refusal (busy, a rate, a precondition, permission) has none, so it is sent with
JSON-RPC's implementation-defined server error code `SERVER_ERROR` (-32000, outside
A2A's own -32001..-32099) and the ErrorInfo's reason is ours, in our domain: a client
retries a busy target later instead of reading "internal error".
"""

from __future__ import annotations

import json
from typing import Any

from a2a.utils.errors import (
    A2AError,
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
)

from agentworks.core import errors

SERVER_ERROR = -32000
ERROR_DOMAIN = "agentworks"
# ErrorInfo reason a2a-sdk gives an error type it does not know.
_UNKNOWN = "UNKNOWN_ERROR"


class Refused(A2AError):
    """An AgentWorks refusal A2A has no error for; sent as `SERVER_ERROR`."""


def error_data(exc: errors.AgentWorksError) -> dict[str, str]:
    data = {"code": exc.code.name, "reason": str(exc.reason or ""), **exc.metadata}
    if exc.retry_after is not None:
        data["retry_after_seconds"] = str(exc.retry_after)
    return data


def a2a_error(exc: errors.AgentWorksError, *, about_task: bool = False) -> A2AError:
    """The A2A error for an AgentWorks refusal; `about_task`: a NotFound is A2A's
    TaskNotFound (a call the caller may not see is not found either, A3)."""
    data = error_data(exc)
    if isinstance(exc, errors.NotFound) and about_task:
        return TaskNotFoundError(exc.message, data)
    if isinstance(exc, errors.InvalidArgument):
        return InvalidParamsError(exc.message, data)
    return Refused(exc.message, data)


def not_cancelable(message: str) -> A2AError:
    return TaskNotCancelableError(message, {"code": "FAILED_PRECONDITION"})


def rewrite(response: dict[str, Any]) -> dict[str, Any]:
    """A JSON-RPC error response of a `Refused` with its own code and reason."""
    error = response.get("error")
    if not isinstance(error, dict):
        return response
    details = error.get("data")
    if not isinstance(details, list) or not details or not isinstance(details[0], dict):
        return response
    info = details[0]
    metadata = info.get("metadata") or {}
    if info.get("reason") == _UNKNOWN and "code" in metadata:
        error["code"] = SERVER_ERROR
        info["reason"] = metadata.get("reason") or metadata["code"]
        info["domain"] = ERROR_DOMAIN
    return response


def stream_refusal(request_id: Any, exc: errors.AgentWorksError) -> bytes:
    """The last event of a streaming method whose token ended (A1): the request's JSON-RPC
    error, as `rewrite` shapes a refusal (SERVER_ERROR, our reason in the ErrorInfo)."""
    info = {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": str(exc.reason or exc.code.name),
        "domain": ERROR_DOMAIN,
        "metadata": error_data(exc),
    }
    answer = {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": SERVER_ERROR, "message": exc.message, "data": [info]},
    }
    return f"data: {json.dumps(answer, separators=(',', ':'))}\r\n\r\n".encode()
