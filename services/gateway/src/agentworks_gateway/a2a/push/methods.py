"""A2A's push-notification config methods on function tasks (X2, N2, A3), as a part
of the A2A request handler: `CreateTaskPushNotificationConfig`, `Get...`, `List...`,
`Delete...` and `SendMessage`'s `configuration.taskPushNotificationConfig`.

Only the call's caller may set, read or delete its task's configs (A3): whoever else
may see the task (its target's owner, the operator) is refused PERMISSION_DENIED, and
anyone else gets TaskNotFound as for an id that does not exist. A conversation's task
has no push (its replies can go to a webhooks-out endpoint on its inbox):
PushNotificationNotSupported, as for every method when push is off.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.types.a2a_pb2 import (
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    SendMessageRequest,
    TaskPushNotificationConfig,
)
from a2a.utils.errors import PushNotificationNotSupportedError, TaskNotFoundError

from agentworks.core import errors
from agentworks.core.identity import Identity
from agentworks.functions.v1 import functions_pb2 as f
from agentworks_gateway.a2a.errors import a2a_error
from agentworks_gateway.a2a.push import A2APush, push_of
from agentworks_gateway.a2a.push.configs import Checked
from agentworks_gateway.a2a.push.wire import to_proto

CONVERSATION_PUSH = (
    "push notifications are served for function tasks only; a conversation's replies "
    "can go to a webhook endpoint on its inbox (the endpoints tool, events inbox:<id>)"
)


def _not_found(task_id: str, what: str = "task") -> TaskNotFoundError:
    return TaskNotFoundError(f"no {what} {task_id} here", {"code": "NOT_FOUND"})


class PushMethods:
    """The push-notification methods of `TargetHandler` (which gives `_call`, `_who`
    and `_conversations`)."""

    gateway: Any

    def _who(self, context: ServerCallContext) -> tuple[Identity, str]:
        raise NotImplementedError

    async def _call(self, context: ServerCallContext, task_id: str) -> f.CallStatus | None:
        raise NotImplementedError

    def _conversations(self, context: ServerCallContext) -> Any:
        raise NotImplementedError

    def _push(self) -> A2APush:
        push = push_of(self.gateway)
        if push is None:
            raise PushNotificationNotSupportedError(
                "push notifications are off on this gateway (GATEWAY_A2A_PUSH)"
            )
        return push

    async def _own_call(self, context: ServerCallContext, task_id: str) -> Identity:
        """The caller, when it is the caller of the call `task_id` of this target."""
        identity = self._who(context)[0]
        status = await self._call(context, task_id)
        if status is None:
            if task_id and await self._conversations(context).find(task_id) is not None:
                raise PushNotificationNotSupportedError(CONVERSATION_PUSH)
            raise _not_found(task_id)
        if status.caller != identity.principal:
            raise a2a_error(
                errors.PermissionDenied(
                    f"only the caller of task {task_id} ({status.caller}) may set, read or "
                    "delete its push notification configs",
                    reason=errors.Reason.NOT_OWNER,
                    metadata={"kind": "call", "id": task_id},
                )
            )
        return identity

    async def push_checked(self, params: SendMessageRequest) -> Checked | None:
        """SendMessage's push config, checked before anything is sent (None: none)."""
        if not params.configuration.HasField("task_push_notification_config"):
            return None
        config = params.configuration.task_push_notification_config
        try:
            return await self._push().configs.check(config, config.task_id or "")
        except errors.AgentWorksError as exc:
            raise a2a_error(exc) from exc

    async def push_set(
        self, context: ServerCallContext, call_id: str, checked: Checked | None
    ) -> None:
        """Store SendMessage's checked push config on the call it made or answered."""
        if checked is None:
            return
        if not checked.config_id:  # A2A's default id is the task's
            checked = dataclasses.replace(checked, config_id=call_id)
        await self._push().configs.set(self._who(context)[0], call_id, checked)

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        push = self._push()
        identity = await self._own_call(context, params.task_id)
        try:
            checked = await push.configs.check(params, params.task_id)
            return to_proto(await push.configs.set(identity, params.task_id, checked))
        except errors.AgentWorksError as exc:
            raise a2a_error(exc) from exc

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        push = self._push()
        identity = await self._own_call(context, params.task_id)
        config = await push.configs.get(identity, params.task_id, params.id)
        if config is None:
            raise _not_found(params.id or params.task_id, "push notification config")
        return to_proto(config)

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        push = self._push()
        identity = await self._own_call(context, params.task_id)
        configs = await push.configs.list(identity, params.task_id)
        return ListTaskPushNotificationConfigsResponse(configs=[to_proto(c) for c in configs])

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        push = self._push()
        identity = await self._own_call(context, params.task_id)
        if not await push.configs.delete(identity, params.task_id, params.id):
            raise _not_found(params.id or params.task_id, "push notification config")
