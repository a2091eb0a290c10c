"""The Tasks extension (`io.modelcontextprotocol/tasks`, M1): a call is the task.

`functions` action=call from a client that declared the extension on its request
answers with a task whose `taskId` is the `call_id` (the call is stored before the
answer, so `tasks/get` finds it at once, on any replica). `tasks/get` reads the call,
`tasks/update` posts the answer to its question as the reply (F11), `tasks/cancel`
cancels it (F15), and `subscriptions/listen` with `taskIds` sends `notifications/tasks`
at each change. No state is kept here: the functions service holds it all.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import CallNext, HandlerResult
from mcp.server.extension import Extension, MethodBinding
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import MISSING_REQUIRED_CLIENT_CAPABILITY
from pydantic import BaseModel, ConfigDict, Field

from agentworks_gateway.mcp_tasks import access, wire
from agentworks_gateway.mcp_tasks.access import Access, Ctx, as_protocol_errors
from agentworks_gateway.mcp_tasks.elicitation import answer_from, elicit_pending


class TaskIdParams(types.RequestParams):
    """`tasks/get` and `tasks/cancel` params."""

    task_id: str = Field(alias="taskId", min_length=1, max_length=200)


class UpdateTaskParams(TaskIdParams):
    """`tasks/update` params: the answers to the task's input requests, by key."""

    input_responses: dict[str, dict[str, Any]] = Field(alias="inputResponses")


def declared(ctx: Ctx, identifier: str = wire.EXTENSION) -> bool:
    """Whether the client declared the extension (on this request, or at its handshake)."""
    capabilities = ctx.session.client_capabilities
    return bool(capabilities and capabilities.extensions and identifier in capabilities.extensions)


def require_declared(ctx: Ctx) -> None:
    """The -32021 error the extension asks for when a client that did not declare it
    uses its methods."""
    if not declared(ctx):
        raise MCPError(
            MISSING_REQUIRED_CLIENT_CAPABILITY,
            "Missing required client capability",
            {"requiredCapabilities": {"extensions": {wire.EXTENSION: {}}}},
        )


def _is_call(params: types.CallToolRequestParams) -> bool:
    return params.name == "functions" and (params.arguments or {}).get("action") == "call"


class _Notification(BaseModel):
    """A server notification of a method the SDK's types do not list."""

    model_config = ConfigDict(extra="forbid")
    method: str
    params: dict[str, Any]


class CallTasks(Extension):
    """Calls as MCP tasks, questions as elicitations (M1, M2)."""

    identifier = wire.EXTENSION

    def __init__(self, calls: Access) -> None:
        self.calls = calls

    def methods(self) -> list[MethodBinding]:
        return [
            MethodBinding("tasks/get", TaskIdParams, self.get),
            MethodBinding("tasks/update", UpdateTaskParams, self.update),
            MethodBinding("tasks/cancel", TaskIdParams, self.cancel),
        ]

    async def intercept_tool_call(
        self, params: types.CallToolRequestParams, ctx: Ctx, call_next: CallNext
    ) -> HandlerResult:
        if _is_call(params) and declared(ctx):
            result = await call_next(ctx)
            if not isinstance(result, types.CallToolResult) or result.is_error:
                return result
            call_id = (result.structured_content or {}).get("call_id")
            if not isinstance(call_id, str):
                return result
            with as_protocol_errors("the call was made but its task could not be read"):
                status = await access.status(self.calls.functions(ctx), call_id)
            return {"resultType": "task", **wire.task_dict(status)}
        return await elicit_pending(self.calls, params, ctx, call_next)

    async def get(self, ctx: Ctx, params: TaskIdParams) -> dict[str, Any]:
        require_declared(ctx)
        with as_protocol_errors("Failed to retrieve task"):
            status = await access.status(self.calls.functions(ctx), params.task_id)
        return wire.task_dict(status)

    async def update(self, ctx: Ctx, params: UpdateTaskParams) -> dict[str, Any]:
        require_declared(ctx)
        client = self.calls.functions(ctx)
        with as_protocol_errors("Failed to update task"):
            status = await access.status(client, params.task_id)
            if not status.HasField("pending_question"):
                return {}  # nothing outstanding: responses to unknown keys are ignored
            response = params.input_responses.get(wire.question_key(status.pending_question))
            answer = answer_from(response)
            if answer is not None:
                await client.reply(params.task_id, answer)
        return {}

    async def cancel(self, ctx: Ctx, params: TaskIdParams) -> dict[str, Any]:
        require_declared(ctx)
        with as_protocol_errors("Failed to cancel task"):
            await self.calls.functions(ctx).cancel(params.task_id)
        return {}

    async def listen(
        self, ctx: Ctx, params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        """`subscriptions/listen`: `notifications/tasks` for the `taskIds` asked for, a
        complete task at each change of its call, until every one has ended."""
        wanted = (params.notifications.model_extra or {}).get("taskIds") or []
        if wanted:
            require_declared(ctx)
        if not isinstance(wanted, list) or not all(isinstance(t, str) for t in wanted):
            raise MCPError(types.INVALID_PARAMS, "notifications.taskIds must be a list of strings")
        client = self.calls.functions(ctx)
        honored: list[str] = []
        for task_id in dict.fromkeys(wanted):
            with as_protocol_errors(f"cannot listen to task {task_id!r}"):
                await access.status(client, task_id)
            honored.append(task_id)
        meta = {"io.modelcontextprotocol/subscriptionId": ctx.request_id}
        ack = {"notifications": {"taskIds": honored}, "_meta": meta}
        await ctx.session.send_notification(
            _Notification(method="notifications/subscriptions/acknowledged", params=ack),  # type: ignore[arg-type]
            related_request_id=ctx.request_id,
        )

        async def follow(task_id: str) -> None:
            async for status in access.changes(client, task_id):
                task = {**wire.task_dict(status), "_meta": meta}
                await ctx.session.send_notification(
                    _Notification(method="notifications/tasks", params=task),  # type: ignore[arg-type]
                    related_request_id=ctx.request_id,
                )

        async with anyio.create_task_group() as group:
            for task_id in honored:
                group.start_soon(follow, task_id)
        return types.SubscriptionsListenResult(_meta=meta)
