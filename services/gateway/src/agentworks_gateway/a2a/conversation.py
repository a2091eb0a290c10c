"""The conversation skill (X3): a message without a function skill is a send (C2, C3).

The conversation is an A2A context and a task whose id is the caller's inbox of it
(`contextId` = `taskId` = `inbox_id`, server-created on the first message, bound to the
caller). That task is `TASK_STATE_WORKING` for as long as it exists and never completes
(C5: a conversation has no result); it has no status message, since nothing the
platform could put there is an answer. The agents' explicit replies (C6) are its
history on GetTask and, on SendStreamingMessage and SubscribeToTask, status updates
carrying the reply as the update's agent message. docs/a2a.md is the contract.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import AsyncIterator

from a2a.types.a2a_pb2 import (
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Struct

from agentworks.client import MessagingClient, target_str
from agentworks.common.v1 import common_pb2
from agentworks.core import errors
from agentworks.core.jsontext import dumps, loads
from agentworks.messaging.v1 import messaging_pb2 as m
from agentworks_gateway.a2a.watch import inbox_messages, inbox_so_far
from agentworks_gateway.service import Gateway

# Agent messages a conversation task shows as its history when not told how many.
DEFAULT_HISTORY = 20
# The callers' own inboxes a replica remembers (`KnownInboxes`).
KNOWN_INBOXES_MAX = 4096


def our_parts(message: Message) -> tuple[str, list[common_pb2.Part]]:
    """An A2A message's text (its text parts, joined) and its parts as messaging's."""
    texts, parts = [], []
    for part in message.parts:
        kind = part.WhichOneof("content")
        if kind == "text":
            texts.append(part.text)
            parts.append(common_pb2.Part(text=part.text))
        elif kind == "data":
            value = MessageToDict(part)["data"]
            if not isinstance(value, dict):
                raise errors.InvalidArgument(
                    "a data part of a conversation message must hold a JSON object",
                    reason=errors.Reason.INVALID_VALUE,
                    metadata={"field": "message.parts.data"},
                )
            parts.append(common_pb2.Part(data_json=dumps(value)))
        else:
            raise errors.InvalidArgument(
                f"a conversation message takes text and data parts, not {kind} parts",
                reason=errors.Reason.INVALID_VALUE,
                metadata={"field": "message.parts"},
            )
    return "\n".join(texts), (parts if len(parts) > 1 or not texts else [])


def agent_message(message: m.Message, inbox_id: str) -> Message:
    """An agent's reply (C6) as an A2A agent message of the conversation."""
    out = Message(
        message_id=message.message_id,
        context_id=inbox_id,
        task_id=inbox_id,
        role=Role.ROLE_AGENT,
    )
    for part in message.parts:
        if part.WhichOneof("content") == "data_json":
            holder = Struct()
            holder.update({"v": loads(part.data_json, "parts.data")})
            out.parts.append(Part(data=holder.fields["v"], media_type="application/json"))
        else:
            out.parts.append(Part(text=part.text))
    if not message.parts:
        out.parts.append(Part(text=message.text))
    out.metadata.update(
        {
            "agentworks": {
                "sender": message.sender,
                "conversation_id": message.conversation_id,
                "created_at": message.created_at.ToJsonString(),
            }
        }
    )
    return out


def conversation_task(
    inbox_id: str,
    conversation_id: str,
    target: str,
    history: list[m.Message],
    receipt: m.SendReceipt | None = None,
) -> Task:
    task = Task(
        id=inbox_id,
        context_id=inbox_id,
        status=TaskStatus(state=TaskState.TASK_STATE_WORKING),
        history=[agent_message(msg, inbox_id) for msg in history],
    )
    meta: dict[str, object] = {
        "kind": "conversation",
        "target": target,
        "conversation_id": conversation_id,
        "inbox_id": inbox_id,
    }
    if receipt is not None:
        # A delivery receipt (C2): the message is in the conversation; not an answer.
        meta["receipt"] = {
            "accepted": receipt.accepted,
            "message_id": receipt.message_id,
            "conversation_id": receipt.conversation_id,
            "inbox_id": receipt.inbox_id,
        }
    task.metadata.update({"agentworks": meta})
    return task


def reply_event(message: m.Message, inbox_id: str) -> TaskStatusUpdateEvent:
    return TaskStatusUpdateEvent(
        task_id=inbox_id,
        context_id=inbox_id,
        status=TaskStatus(
            state=TaskState.TASK_STATE_WORKING, message=agent_message(message, inbox_id)
        ),
    )


class KnownInboxes:
    """The inboxes callers were found to own: (principal, inbox id) -> (target,
    conversation id), the least recently used leaving first past KNOWN_INBOXES_MAX.

    What it holds never changes: an inbox belongs to one conversation with one target and
    is bound for good to the principal who started it (C3), and conversations are never
    deleted. So a caller's next message into the same context skips the look-up that
    checked it (one GetTranscript per message); only a caller's own inbox is kept (a
    target's owner or an operator, who may see the transcript too, is looked up again
    every time, as their rights can change)."""

    def __init__(self, max_entries: int = KNOWN_INBOXES_MAX) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[tuple[str, str], tuple[str, str]] = OrderedDict()

    def get(self, principal: str, inbox_id: str) -> tuple[str, str] | None:
        found = self._entries.get((principal, inbox_id))
        if found is not None:
            self._entries.move_to_end((principal, inbox_id))
        return found

    def put(self, principal: str, inbox_id: str, target: str, conversation_id: str) -> None:
        self._entries[(principal, inbox_id)] = (target, conversation_id)
        self._entries.move_to_end((principal, inbox_id))
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)


class Conversations:
    """The conversation skill of one target, for one caller."""

    def __init__(
        self,
        gateway: Gateway,
        client: MessagingClient,
        target: str,
        known: KnownInboxes | None = None,
        principal: str = "",
    ) -> None:
        self.gateway = gateway
        self.client = client
        self.target = target
        # The caller (the client's principal), whose own inboxes `known` remembers.
        self.known = known if known is not None and principal else KnownInboxes(0)
        self.principal = principal

    async def find(self, inbox_id: str) -> str | None:
        """The conversation id of the caller's inbox of this target's conversation, or
        None when it is not one (unknown, someone else's, another target's: A3)."""
        principal = self.principal
        known = self.known.get(principal, inbox_id)
        if known is None:
            try:
                page = await self.client.get_transcript(inbox_id=inbox_id, limit=1)
            except (errors.NotFound, errors.PermissionDenied, errors.InvalidArgument):
                return None
            if page.inbox_id != inbox_id:
                return None
            known = target_str(page.target), page.conversation_id
            first = page.entries[0].message if page.entries else None
            if first is not None and first.sender == principal:
                self.known.put(principal, inbox_id, *known)  # the caller's own inbox (C3)
        target, conversation_id = known
        return conversation_id if target == self.target else None

    async def send(self, message: Message, inbox_id: str) -> m.SendReceipt:
        """Send the caller's message: into the inbox's conversation, or a new one."""
        text, parts = our_parts(message)
        return await self.client.send(
            text,
            target=None if inbox_id else self.target,
            inbox_id=inbox_id or None,
            submission_id=message.message_id,
            parts=parts,
        )

    async def task(
        self, inbox_id: str, conversation_id: str, history_length: int | None
    ) -> tuple[Task, str]:
        """The conversation as a task with its newest history, and the inbox's end (the
        cursor a stream of later replies starts from): one Read."""
        limit = DEFAULT_HISTORY if history_length is None else history_length
        history, end = await inbox_so_far(self.client, inbox_id, limit=limit)
        return conversation_task(inbox_id, conversation_id, self.target, history), end

    async def stream(
        self, task: Task, inbox_id: str, after: str
    ) -> AsyncIterator[Task | TaskStatusUpdateEvent]:
        """The task, then each agent reply after the cursor as it comes."""
        yield task
        async for message, _ in inbox_messages(self.gateway, self.client, inbox_id, after=after):
            yield reply_event(message, inbox_id)
