"""The A2A request handler of one target (X2, X3): a custom a2a-sdk `RequestHandler`
whose tasks are the functions service's calls and the caller's conversations; there is
no task store of its own.

Which skill a message is for: the `skill` key of the message's metadata (or else of the
request's) names a function; without one, or naming `agentworks:conversation`, the
message is a conversation message. A message with a `taskId` continues that task: it
answers a call's open question (F11, `Reply`) or continues a conversation.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types.a2a_pb2 import (
    AgentCard,
    CancelTaskRequest,
    GetExtendedAgentCardRequest,
    GetTaskRequest,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
)
from a2a.utils.errors import (
    ExtendedAgentCardNotConfiguredError,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotFoundError,
)
from google.protobuf.json_format import MessageToDict

from agentworks.client import target_str
from agentworks.core import errors
from agentworks.core.identity import Identity
from agentworks.functions.v1 import functions_pb2 as f
from agentworks_gateway.a2a.card import CONVERSATION_SKILL, SKILL_KEY
from agentworks_gateway.a2a.conversation import Conversations, KnownInboxes, conversation_task
from agentworks_gateway.a2a.errors import a2a_error, not_cancelable
from agentworks_gateway.a2a.listing import list_call_tasks
from agentworks_gateway.a2a.push.methods import CONVERSATION_PUSH, PushMethods
from agentworks_gateway.a2a.tasks import artifact_events, call_task, small_files, status_event
from agentworks_gateway.a2a.watch import call_changes
from agentworks_gateway.call_tasks import TERMINAL, Phase, task_view
from agentworks_gateway.service import Gateway

# How long a blocking SendMessage waits for the call to end or ask (A2A's default is to
# wait; past this the task comes back as it stands, to be followed with GetTask or
# SubscribeToTask).
BLOCKING_SECONDS = 25.0
# Where a SendMessage stream stops: the task ended, or it waits for the caller.
_PAUSED = TERMINAL | {Phase.INPUT_REQUIRED}


def _skill(params: SendMessageRequest) -> str:
    for meta in (params.message.metadata, params.metadata):
        if SKILL_KEY in meta.fields:
            value = meta.fields[SKILL_KEY]
            if value.WhichOneof("kind") != "string_value" or not value.string_value:
                raise InvalidParamsError(
                    f"metadata.{SKILL_KEY} must name a skill of this agent (a string)",
                    {"field": f"metadata.{SKILL_KEY}"},
                )
            return value.string_value
    return ""


def _inputs(message: Message) -> dict[str, Any]:
    """A function call's inputs: the message's one data part, a JSON object."""
    data = [p for p in message.parts if p.WhichOneof("content") == "data"]
    if len(data) > 1:
        raise InvalidParamsError(
            f"a function call takes its inputs in one data part; this message has {len(data)}",
            {"field": "message.parts"},
        )
    if not data:
        return {}
    value = MessageToDict(data[0])["data"]
    if not isinstance(value, dict):
        raise InvalidParamsError(
            "a function call's data part must hold a JSON object of the inputs",
            {"field": "message.parts.data"},
        )
    return value


def _text(message: Message) -> str:
    return "\n".join(p.text for p in message.parts if p.WhichOneof("content") == "text")


class TargetHandler(PushMethods, RequestHandler):
    """Every target's A2A requests; which target and caller come from the call context
    (`state["target"]`, `state["identity"]`, set by the route after authentication).
    The push-notification config methods are `PushMethods`'."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.inboxes = KnownInboxes()

    # ------------------------------------------------------------------ context

    def _who(self, context: ServerCallContext) -> tuple[Identity, str]:
        return context.state["identity"], context.state["target"]

    def _functions(self, context: ServerCallContext) -> Any:
        return self.gateway.functions(self._who(context)[0])

    def _conversations(self, context: ServerCallContext) -> Conversations:
        identity, target = self._who(context)
        client = self.gateway.messaging(identity)
        return Conversations(self.gateway, client, target, self.inboxes, identity.principal)

    async def _call(self, context: ServerCallContext, task_id: str) -> f.CallStatus | None:
        """The call `task_id` of this target the caller may see, or None (A3)."""
        client = self._functions(context)
        try:
            status = await client.get_status(task_id, message_limit=1, event_limit=1)
        except (errors.NotFound, errors.InvalidArgument):
            return None
        if target_str(status.target) != context.state["target"]:
            return None
        return status

    async def _task(self, context: ServerCallContext, status: f.CallStatus) -> Task:
        return call_task(status, await self._files(context, status))

    async def _files(self, context: ServerCallContext, status: f.CallStatus) -> dict[str, bytes]:
        client = self._functions(context)
        names = small_files(status)
        contents = await asyncio.gather(
            *(client.read_file_bytes(status.call_id, name) for name in names)
        )
        return dict(zip(names, contents, strict=True))

    # ------------------------------------------------------------------ tasks

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        status = await self._call(context, params.id)
        if status is not None:
            return await self._task(context, status)
        conversations = self._conversations(context)
        conversation_id = await conversations.find(params.id)
        if conversation_id is None:
            return None
        history = params.history_length if params.HasField("history_length") else None
        task, _ = await conversations.task(params.id, conversation_id, history)
        return task

    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        if params.context_id:
            task = await self.on_get_task(GetTaskRequest(id=params.context_id), context)
            return ListTasksResponse(tasks=[task] if task else [], page_size=params.page_size)
        try:
            return await list_call_tasks(
                self._functions(context), context.state["target"], params, self._task_of(context)
            )
        except errors.AgentWorksError as exc:
            raise a2a_error(exc) from exc

    def _task_of(self, context: ServerCallContext) -> Any:
        async def task(call_id: str) -> Task | None:
            status = await self._call(context, call_id)
            return await self._task(context, status) if status is not None else None

        return task

    async def on_cancel_task(
        self, params: CancelTaskRequest, context: ServerCallContext
    ) -> Task | None:
        status = await self._call(context, params.id)
        if status is None:
            if await self._conversations(context).find(params.id) is not None:
                raise not_cancelable(
                    "a conversation has no end to cancel (C5): stop sending, or leave it"
                )
            return None
        if task_view(status).terminal:
            raise not_cancelable(f"task {params.id} has already ended ({task_view(status).phase})")
        try:
            status = await self._functions(context).cancel(params.id)
        except errors.PreconditionFailed as exc:
            raise not_cancelable(exc.message) from exc
        except errors.AgentWorksError as exc:
            raise a2a_error(exc, about_task=True) from exc
        return await self._task(context, status)

    # ------------------------------------------------------------------ messages

    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        first: Task | None = None
        try:
            async for event in self._send(params, context, streaming=False):
                if isinstance(event, Task):
                    first = event
        except errors.AgentWorksError as exc:
            raise a2a_error(exc, about_task=bool(params.message.task_id)) from exc
        assert first is not None
        return first

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        try:
            async for event in self._send(params, context, streaming=True):
                yield event
        except errors.AgentWorksError as exc:
            raise a2a_error(exc, about_task=bool(params.message.task_id)) from exc

    async def _send(
        self, params: SendMessageRequest, context: ServerCallContext, *, streaming: bool
    ) -> AsyncGenerator[Event]:
        """The events of a SendMessage; the non-streaming answer is the last Task."""
        message = params.message
        skill = _skill(params)
        status: f.CallStatus | None = None
        push = params.configuration.HasField("task_push_notification_config")
        if message.task_id:
            status = await self._call(context, message.task_id)
            if status is None:
                conversations = self._conversations(context)
                if await conversations.find(message.task_id) is None:
                    raise TaskNotFoundError(
                        f"no task {message.task_id} here", {"code": "NOT_FOUND"}
                    )
                if push:
                    raise PushNotificationNotSupportedError(CONVERSATION_PUSH)
                async for event in self._converse(params, context, message.task_id, streaming):
                    yield event
                return
            checked = None
            if push:
                await self._own_call(context, message.task_id)
                checked = await self.push_checked(params)
            # The answer to the call's open question (F11); the service refuses when
            # there is none.
            status = await self._functions(context).reply(message.task_id, _text(message))
            await self.push_set(context, status.call_id, checked)
        elif skill and skill != CONVERSATION_SKILL:
            checked = await self.push_checked(params)  # before the call: nothing if refused
            client = self._functions(context)
            receipt = await client.call(
                context.state["target"],
                skill,
                _inputs(message),
                submission_id=message.message_id,
            )
            await self.push_set(context, receipt.call_id, checked)
            status = await client.get_status(receipt.call_id, message_limit=1, event_limit=1)
        else:
            if push:
                raise PushNotificationNotSupportedError(CONVERSATION_PUSH)
            async for event in self._converse(params, context, message.context_id, streaming):
                yield event
            return
        async for event in self._follow(params, context, status, streaming):
            yield event

    async def _follow(
        self,
        params: SendMessageRequest,
        context: ServerCallContext,
        status: f.CallStatus,
        streaming: bool,
    ) -> AsyncGenerator[Event]:
        """A call from `status` on: as a stream, the task and each change until it ends
        or asks; otherwise (unless told to return at once) the task once it ends or asks,
        or as it stands after BLOCKING_SECONDS."""
        if not streaming:
            if not params.configuration.return_immediately:
                status = await self._settle(context, status)
            yield await self._task(context, status)
            return
        yield await self._task(context, status)
        async for event in self._changes(context, status):
            yield event

    async def _changes(
        self, context: ServerCallContext, status: f.CallStatus
    ) -> AsyncGenerator[Event]:
        """Status updates after `status` until the call ends or asks; an ended call's
        artifacts before its last status."""
        seen = (task_view(status).phase, task_view(status).message)
        if seen[0] in _PAUSED:
            return
        client = self._functions(context)
        changes = call_changes(self.gateway, client, status.call_id, seen_version=status.version)
        async for change in changes:
            view = task_view(change)
            if (view.phase, view.message) == seen:
                continue
            seen = (view.phase, view.message)
            if view.phase is Phase.COMPLETED:
                for artifact in artifact_events(change, await self._files(context, change)):
                    yield artifact
            yield status_event(change)
            if view.phase in _PAUSED:
                return

    async def _settle(self, context: ServerCallContext, status: f.CallStatus) -> f.CallStatus:
        if task_view(status).phase in _PAUSED:
            return status
        client = self._functions(context)
        try:
            # The wait leaves the request pool for the wait pool, as a long-poll does.
            with self.gateway.admission.wait():
                async with asyncio.timeout(BLOCKING_SECONDS):
                    async for change in call_changes(
                        self.gateway, client, status.call_id, seen_version=status.version
                    ):
                        status = change
                        if task_view(change).phase in _PAUSED:
                            break
        except TimeoutError:
            pass
        return status

    async def _converse(
        self,
        params: SendMessageRequest,
        context: ServerCallContext,
        inbox_id: str,
        streaming: bool,
    ) -> AsyncGenerator[Event]:
        conversations = self._conversations(context)
        if inbox_id and await conversations.find(inbox_id) is None:
            raise TaskNotFoundError(
                f"no conversation {inbox_id} of {context.state['target']} is yours: leave "
                "contextId out to start one",
                {"code": "NOT_FOUND"},
            )
        receipt = await conversations.send(params.message, inbox_id)
        task = conversation_task(
            receipt.inbox_id, receipt.conversation_id, context.state["target"], [], receipt
        )
        if not streaming:
            yield task
            return
        # The replies after the caller's message: its receipt's cursor is its place in
        # the conversation (no read of the inbox so far, however long it is).
        async for event in conversations.stream(task, receipt.inbox_id, receipt.cursor):
            yield event

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        try:
            status = await self._call(context, params.id)
            if status is not None:
                yield await self._task(context, status)
                async for event in self._changes(context, status):
                    yield event
                return
            conversations = self._conversations(context)
            conversation_id = await conversations.find(params.id)
            if conversation_id is None:
                raise TaskNotFoundError(f"no task {params.id} here", {"code": "NOT_FOUND"})
            task, after = await conversations.task(params.id, conversation_id, None)
            async for event in conversations.stream(task, params.id, after):
                yield event
        except errors.AgentWorksError as exc:
            raise a2a_error(exc, about_task=True) from exc

    # ------------------------------------------------------------------ not served

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        raise ExtendedAgentCardNotConfiguredError()
