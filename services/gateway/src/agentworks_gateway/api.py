"""The HTTP tool API's wire format (the client is `agentworks_cli.api`).

`POST /api/v1/tools/<tool>` takes the tool's JSON arguments and answers with its
structured result, or with `{"error": {"code": "<gRPC status name>", "message": ...}}`
and the matching HTTP status; a refusal with a reason adds `"reason"` and `"metadata"`
(the service's ErrorInfo: docs/errors.md), one with a retry delay `"retry_after_seconds"`
and the `Retry-After` header (429 past a principal's share, 503 past the gateway's pools).
`GET /api/v1/tools` answers with what `/mcp` serves:
`{"instructions": "...", "tools": [{"name", "description", "inputSchema"}, ...]}`.
"""

from __future__ import annotations

from typing import Any

from agentworks.core import errors

API_PREFIX = "/api/v1/tools/"

# gRPC status name -> HTTP status (the usual Google API mapping).
HTTP_STATUS = {
    "INVALID_ARGUMENT": 400,
    "FAILED_PRECONDITION": 409,
    "OUT_OF_RANGE": 400,
    "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403,
    "NOT_FOUND": 404,
    "ALREADY_EXISTS": 409,
    "ABORTED": 409,
    "RESOURCE_EXHAUSTED": 429,
    "CANCELLED": 499,
    "UNAVAILABLE": 503,
    "DEADLINE_EXCEEDED": 504,
    "UNIMPLEMENTED": 501,
    "INTERNAL": 500,
    "UNKNOWN": 500,
}


def error_body(
    code: str,
    message: str,
    *,
    reason: str = "",
    metadata: dict[str, str] | None = None,
    retry_after: float | None = None,
) -> dict[str, Any]:
    """The JSON body of a refused request: `{"error": <errors.error_object>}`."""
    return {
        "error": errors.error_object(
            code, message, reason=reason, metadata=metadata, retry_after=retry_after
        )
    }


def refusal_body(exc: errors.AgentWorksError) -> dict[str, Any]:
    """The JSON body of a request refused with `exc`: its code, message, reason and
    metadata (ErrorInfo) and retry delay."""
    return {"error": errors.as_object(exc)}
