"""A2A outbound's use cases (X4): a turn converses with and calls an allowed external
agent, and what comes back is queued as turns of the turn's conversation.

Who may (the trust table, T1-T3): the caller is an agent process's runtime acting with
one turn's capability, signed by messaging; the gateway verifies it with the public keys
and asks messaging with it (a read of that turn's conversation), so a capability whose
lease has ended is refused by messaging, where the lease lives. The allow-list entry's
`targets` scope which crews may reach an agent; the turn's target's switch (C8) off
refuses the conversation, since the replies would be programmatic conversational
messages to it. The operator's credential never leaves the gateway.

What comes back: the gateway, as `service:gateway`, puts each reply into the turn's
conversation by messaging's EnqueueDelivery (`conversation_reply`, which messaging takes
from the gateway only, under C8) and a skill call's end as `function_completed`. Tasks
still open are stored (`a2a_out_tasks`) and followed by whichever replica holds their
lease, so a restart re-attaches to them.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import structlog
from a2a.types.a2a_pb2 import Message, Part, Role, Task
from google.protobuf.struct_pb2 import Struct

from agentworks.client import MessagingClient, target_str
from agentworks.core import errors
from agentworks.core.capability import TURN
from agentworks.core.capability_identity import CapabilityIdentity
from agentworks.core.identity import Identity, verify
from agentworks.messaging.v1 import messaging_pb2 as m
from agentworks_gateway.a2a_out import peer
from agentworks_gateway.a2a_out.settings import A2AOutConfig, AllowedAgent
from agentworks_gateway.a2a_out.store import A2AOutStore, FollowedTask
from agentworks_gateway.webhooks_out.policy import AddressPolicy

log = structlog.get_logger("agentworks.gateway.a2a_out")

SELF = Identity(principal="service:gateway")
CONVERSATION = "conversation"
SKILL = "skill"
MAX_TEXT_CHARS = 16_000


@dataclass(frozen=True)
class TurnScope:
    """The turn a capability is for: what it may reach and where replies go."""

    turn_id: str
    conversation_id: str
    target: str
    principal: str


def _message_id(scope: TurnScope, submission_id: str) -> str:
    """The A2A message id: one per turn and retry key, so a retried request is the same
    message to the agent; a fresh one without a key."""
    if not submission_id:
        return str(uuid.uuid4())
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"agentworks:{scope.turn_id}:{submission_id}"))


class Conversations:
    """The use cases behind `POST /api/v1/a2a/{send,call}`, and the deliveries back."""

    def __init__(
        self, gateway: Any, store: A2AOutStore, config: A2AOutConfig, policy: AddressPolicy
    ) -> None:
        self.gateway = gateway
        self.store = store
        self.config = config
        self.policy = policy

    # ------------------------------------------------------------------ who may

    async def authorize(self, token: str) -> TurnScope:
        """The turn a capability is for; refused unless it is a live turn capability."""
        trusted = self.gateway.config.service.trusted_keys
        if trusted is None:
            raise errors.Unavailable("the gateway has no trusted keys to verify capabilities")
        identity = verify(token, trusted)
        capability = identity.capability
        if capability is None or capability.kind != TURN:
            raise errors.PermissionDenied(
                "external A2A agents are reached from a turn, with that turn's capability "
                "(an API token, a runtime's identity or an execution's capability cannot)",
                reason=errors.Reason.OUT_OF_SCOPE,
                metadata={"capability": capability.kind if capability else "none"},
            )
        # Messaging holds the lease: a read with the capability is refused once it ended.
        channel = self.gateway.messaging(SELF).channel
        as_turn = MessagingClient(channel=channel, identity=CapabilityIdentity(token))
        page = await as_turn.get_transcript(capability.conversation_id, limit=1)
        return TurnScope(
            capability.id, capability.conversation_id, target_str(page.target), identity.principal
        )

    def allowed(self, scope: TurnScope, name: str) -> AllowedAgent:
        """The allow-list's entry `name`, if this turn's target may reach it."""
        agent = self.config.agents.get(name)
        if agent is None:
            known = ", ".join(sorted(self.config.agents)) or "none"
            raise errors.NotFound(
                f"{name[:200]!r} is not an external agent on the operator's allow-list "
                f"(the allowed agents: {known}); only those can be reached, by name",
                reason=errors.Reason.NOT_FOUND,
                metadata=errors.kind_meta("a2a_agent", name[:200]),
            )
        if not agent.allows(scope.target):
            raise errors.PermissionDenied(
                f"the operator allows the external agent {name!r} to "
                f"{', '.join(agent.targets)} only, not {scope.target}",
                reason=errors.Reason.OUT_OF_SCOPE,
                metadata={"agent": name, "target": scope.target},
            )
        return agent

    async def check_switch(self, scope: TurnScope) -> None:
        """C8: a target with agent messaging off takes no external agent's replies."""
        target = await self.gateway.messaging(SELF).get_target(scope.target)
        caps = target.capabilities
        if caps.HasField("free_text_ask") and not caps.free_text_ask:
            raise errors.PreconditionFailed(
                f"{scope.target} has agent messaging turned off (capabilities.free_text_ask "
                "= false): an external agent's replies would be refused, so no "
                "conversation is started; call one of its skills with a2a_call instead",
                reason=errors.Reason.MESSAGING_DISABLED,
                metadata={"target": scope.target},
            )

    # ------------------------------------------------------------------ use cases

    async def send(
        self, scope: TurnScope, name: str, text: str, context_id: str = "", submission_id: str = ""
    ) -> dict[str, Any]:
        """a2a_send: a message to the agent, in a new context or `context_id`'s."""
        agent = self.allowed(scope, name)
        await self.check_switch(scope)
        message = Message(role=Role.ROLE_USER, message_id=_message_id(scope, submission_id))
        message.parts.append(Part(text=text))
        if context_id:
            message.context_id = context_id
        return await self._start(scope, agent, CONVERSATION, "", message)

    async def call(
        self,
        scope: TurnScope,
        name: str,
        skill: str,
        inputs: Mapping[str, Any],
        submission_id: str = "",
    ) -> dict[str, Any]:
        """a2a_call: a data message naming the skill (metadata `skill`) with its inputs."""
        agent = self.allowed(scope, name)
        data = Struct()
        data.update(dict(inputs))
        message = Message(role=Role.ROLE_USER, message_id=_message_id(scope, submission_id))
        message.parts.add().data.struct_value.CopyFrom(data)
        message.metadata.update({"skill": skill})
        return await self._start(scope, agent, SKILL, skill, message)

    async def _start(
        self, scope: TurnScope, agent: AllowedAgent, kind: str, skill: str, message: Message
    ) -> dict[str, Any]:
        async with peer.connect(agent, self.policy, self.config.timeout_seconds) as remote:
            answer = await remote.send(message)
        log.info("a2a_out.sent", agent=agent.name, kind=kind, conversation_id=scope.conversation_id)
        if isinstance(answer, Message):  # a direct reply: no task to follow
            reply = FollowedTask(
                agent.name, answer.message_id, kind, scope.conversation_id, scope.target, skill
            )
            reply.context_id = answer.context_id
            await self.deliver_reply(reply, answer)
            return {"agent": agent.name, "context_id": answer.context_id, "task_id": "",
                    "state": "replied"}  # fmt: skip
        task = FollowedTask(
            agent.name,
            answer.id,
            kind,
            scope.conversation_id,
            scope.target,
            skill,
            context_id=answer.context_id,
        )
        await self.store.insert(task)
        # What the first answer already holds is delivered by the follower, like later news.
        return {
            "agent": agent.name,
            "context_id": answer.context_id,
            "task_id": answer.id,
            "state": peer.state_name(answer.status.state),
        }

    # ------------------------------------------------------------------ deliveries back

    async def deliver_reply(self, task: FollowedTask, message: Message) -> None:
        """One agent message into the turn's conversation, as a conversation_reply."""
        await self.gateway.messaging(SELF).enqueue_delivery(
            task.conversation_id,
            kind=m.DELIVERY_KIND_CONVERSATION_REPLY,
            idempotency_key=f"a2a:{task.agent}:{task.task_id}:{message.message_id}"[:200],
            text=peer.message_text(message)[:MAX_TEXT_CHARS],
            attributes={
                "a2a_agent": task.agent,
                "context_id": message.context_id or task.context_id,
                "task_id": "" if task.task_id == message.message_id else task.task_id,
                "sender": f"a2a:{task.agent}",
            },
        )

    async def deliver_end(self, task: FollowedTask, ended: Task) -> None:
        """A skill call's end into the turn's conversation, as function_completed."""
        result = json.dumps(peer.task_result(ended), ensure_ascii=False)
        status = ended.status.message
        await self.gateway.messaging(SELF).enqueue_delivery(
            task.conversation_id,
            kind=m.DELIVERY_KIND_FUNCTION_COMPLETED,
            idempotency_key=f"a2a:{task.agent}:{task.task_id}:end"[:200],
            text=(peer.message_text(status) if status.parts else "")[:MAX_TEXT_CHARS],
            attributes={
                "call_id": f"a2a:{task.agent}:{task.task_id}",
                "status": peer.state_name(ended.status.state),
                "a2a_agent": task.agent,
                "skill": task.skill,
                "task_id": task.task_id,
                "context_id": task.context_id,
                "result": result[:MAX_TEXT_CHARS],
            },
        )
