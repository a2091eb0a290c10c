"""A call's question as an elicitation to the MCP client that waits on the call (M2).

A client reading a call's status (`functions` action=status, `get_crew_function_call`)
while the call waits for an answer (F11) is asked the question in its own terms: on
2026-07-28 connections an `InputRequiredResult` whose answer, on the retry, is posted
as the reply; on older connections with a back-channel (stdio, a session) an
`elicitation/create` request. The form asks for free text, or for one of the question's
choices (a string enum) when it offers some. Declining or cancelling leaves the question open: the
status comes back as it is, and the question can be answered later (action=reply,
`tasks/update`, the console). Clients without elicitation see today's results.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.server.context import CallNext, HandlerResult
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from agentworks.functions.v1 import functions_pb2 as f
from agentworks_gateway.mcp_tasks import access, wire
from agentworks_gateway.mcp_tasks.access import Access, Ctx, as_protocol_errors


def answer_from(response: Any) -> str | None:
    """The answer in an elicitation response: the form's text when accepted, else None
    (declined, cancelled or not given: the question stays open)."""
    if isinstance(response, types.ElicitResult):
        response = response.model_dump(by_alias=True)
    if not isinstance(response, dict) or response.get("action") != "accept":
        return None
    answer = (response.get("content") or {}).get(wire.ANSWER_FIELD)
    return answer if isinstance(answer, str) and answer.strip() else None


def _reads_status(params: types.CallToolRequestParams) -> bool:
    args = params.arguments or {}
    if params.name == "functions":
        return args.get("action") == "status"
    return params.name == "get_crew_function_call" and "file" not in args


def _elicits(ctx: Ctx) -> bool:
    capabilities = ctx.session.client_capabilities
    return bool(capabilities and capabilities.elicitation)


def _pending_question(result: HandlerResult) -> f.Question | None:
    if not isinstance(result, types.CallToolResult) or result.is_error:
        return None
    content = result.structured_content or {}
    if content.get("status") != "waiting_for_input":
        return None
    return wire.question_of(content)


async def elicit_pending(
    calls: Access, params: types.CallToolRequestParams, ctx: Ctx, call_next: CallNext
) -> HandlerResult:
    """Run the tool; when it shows a pending question, ask it as an elicitation."""
    if not _reads_status(params) or not _elicits(ctx):
        return await call_next(ctx)
    call_id = str((params.arguments or {}).get("call_id", ""))
    modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
    answered: set[str] = set()
    for key, response in (params.input_responses or {}).items():
        answered.add(key)
        answer = answer_from(response)
        if answer is not None:
            client = calls.functions(ctx)
            with as_protocol_errors("the answer could not be posted"):
                status = await access.status(client, call_id)
                if (
                    status.HasField("pending_question")
                    and wire.question_key(status.pending_question) == key
                ):
                    await client.reply(call_id, answer)
    result = await call_next(ctx)
    question = _pending_question(result)
    if question is None or wire.question_key(question) in answered:
        return result  # no question, or the client declined this one: as it is
    if modern:
        return types.InputRequiredResult(
            input_requests={wire.question_key(question): wire.elicit_request(question)}
        )
    if not ctx.session.can_send_request:
        return result  # stateless HTTP before 2026-07-28: no way to ask
    form = wire.question_form(question)
    response = await ctx.session.elicit_form(
        form["message"], form["requestedSchema"], related_request_id=ctx.request_id
    )
    answer = answer_from(response)
    if answer is None:
        return result
    with as_protocol_errors("the answer could not be posted"):
        await calls.functions(ctx).reply(call_id, answer)
    return await call_next(ctx)
