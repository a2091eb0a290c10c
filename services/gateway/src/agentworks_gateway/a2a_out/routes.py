"""`POST /api/v1/a2a/send` and `POST /api/v1/a2a/call` (X4): a turn's runtime asks the
gateway, with the turn's capability as its bearer token, to converse with or call an
external agent on the operator's allow-list. Translation only: `Conversations` decides.

    send: {"agent": "weather", "text": "...", "context_id": "" , "submission_id": ""}
    call: {"agent": "weather", "skill": "forecast", "inputs": {...}, "submission_id": ""}
    ->    {"agent", "context_id", "task_id", "state"}
"""

from __future__ import annotations

from typing import Any

import structlog
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agentworks.core import errors, limits
from agentworks_gateway import metrics
from agentworks_gateway.bodies import bounded_body, parse_arguments
from agentworks_gateway.middleware import error_response, request_context
from agentworks_gateway.service import bearer_token

log = structlog.get_logger("agentworks.gateway.a2a_out")

PREFIX = "/api/v1/a2a/"
MAX_NAME = 200


def _string(args: dict[str, Any], name: str, *, required: bool, limit: int) -> str:
    value = args.get(name, "")
    if value is None:
        value = ""
    if not isinstance(value, str) or (required and not value) or len(value.encode()) > limit:
        why = (
            "is required"
            if required and not value
            else f"must be a string of at most {limit} bytes"
        )
        raise errors.InvalidArgument(
            f"{name} {why}", reason=errors.Reason.FIELD_RULE, metadata=errors.rule_meta(name)
        )
    if "\x00" in value:
        raise errors.InvalidArgument(
            f"{name} has a NUL character", reason=errors.Reason.FIELD_RULE,
            metadata=errors.rule_meta(name),
        )  # fmt: skip
    return value


async def _handle(gateway: Any, request: Request, action: str) -> dict[str, Any]:
    a2a_out = getattr(gateway, "a2a_out", None)
    if a2a_out is None:
        raise errors.Unavailable("A2A outbound is not running in this gateway")
    token = bearer_token(request.headers.get("authorization"), "turn capability")
    scope = await a2a_out.conversations.authorize(token)
    config = gateway.config
    args = parse_arguments(
        await bounded_body(request, config.max_body_bytes, config.body_timeout_seconds)
    )
    if not isinstance(args, dict):
        raise errors.InvalidArgument(
            "the body must be a JSON object", reason=errors.Reason.MALFORMED
        )
    agent = _string(args, "agent", required=True, limit=MAX_NAME)
    submission_id = _string(args, "submission_id", required=False, limit=MAX_NAME)
    if action == "send":
        text = _string(args, "text", required=True, limit=limits.MAX_TEXT_BYTES)
        context_id = _string(args, "context_id", required=False, limit=MAX_NAME)
        result = await a2a_out.conversations.send(scope, agent, text, context_id, submission_id)
    else:
        skill = _string(args, "skill", required=True, limit=MAX_NAME)
        inputs = args.get("inputs") or {}
        if not isinstance(inputs, dict):
            raise errors.InvalidArgument(
                "inputs must be a JSON object", reason=errors.Reason.FIELD_RULE,
                metadata=errors.rule_meta("inputs"),
            )  # fmt: skip
        result = await a2a_out.conversations.call(scope, agent, skill, inputs, submission_id)
    if result["task_id"]:
        a2a_out.follower.wake()
    return result


def a2a_out_routes(gateway: Any) -> list[Route]:
    """The two routes, bound to `gateway` (its `a2a_out` set by `app.start`)."""

    async def endpoint(request: Request) -> Response:
        action = request.path_params["action"]
        with request_context(request.scope):
            if action not in ("send", "call"):
                return error_response(
                    errors.NotFound(
                        f"no A2A action {action[:50]!r}: send or call",
                        reason=errors.Reason.NOT_FOUND,
                        metadata=errors.kind_meta("action", action[:50]),
                    )
                )
            try:
                return JSONResponse(await _handle(gateway, request, action))
            except errors.AgentWorksError as exc:
                metrics.refused("api", exc)
                log.info("a2a_out.refused", action=action, code=exc.code.name, reason=exc.reason)
                return error_response(exc)
            except Exception:
                log.exception("a2a_out.internal_error", action=action)
                return error_response(errors.Internal("internal error: see the gateway's log"))

    return [Route(PREFIX + "{action}", endpoint, methods=["POST"])]
