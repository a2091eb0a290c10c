"""Talking to one allowed external A2A agent with a2a-sdk's own client (X4, X5).

Every URL the gateway asks (the card's, and each interface the card names) passes the
deployment's outbound address policy first (`webhooks_out.policy`, GATEWAY_WEBHOOKS_ALLOW):
an agent card cannot point the gateway at a private or metadata address. The operator's
credential rides in the HTTP client's headers to that agent only; refusals name the
agent, never the credential. Each request is sent to the address its check resolved
(`webhooks_out.pinned`): no second DNS look-up can point it elsewhere.
"""

from __future__ import annotations

import contextlib
import json
import urllib.parse
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Any

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.client import Client
from a2a.helpers.proto_helpers import get_data_parts, get_text_parts
from a2a.types.a2a_pb2 import (
    GetTaskRequest,
    Message,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import A2AError
from google.protobuf.json_format import MessageToDict

from agentworks.core import errors
from agentworks_gateway.a2a_out.settings import AllowedAgent
from agentworks_gateway.webhooks_out.pinned import PinnedTransport
from agentworks_gateway.webhooks_out.policy import AddressPolicy

ENDED = {
    TaskState.TASK_STATE_COMPLETED: "completed",
    TaskState.TASK_STATE_FAILED: "failed",
    TaskState.TASK_STATE_CANCELED: "cancelled",
    TaskState.TASK_STATE_REJECTED: "rejected",
}


def state_name(state: int) -> str:
    """An A2A task state in the contract's words (`working`, `input-required`, ...)."""
    name = TaskState.Name(state).removeprefix("TASK_STATE_").lower()
    return ENDED.get(state, name.replace("_", "-"))  # type: ignore[call-overload]


def message_text(message: Message) -> str:
    """A message's text parts, and its data parts as JSON text, one per line."""
    lines = list(get_text_parts(message.parts))
    lines += [json.dumps(d, ensure_ascii=False) for d in get_data_parts(message.parts)]
    return "\n".join(lines)


def agent_messages(task: Task) -> list[Message]:
    """The agent's messages of a task, oldest first: its history, then its status message."""
    found = [m for m in task.history if m.role == Role.ROLE_AGENT]
    status = task.status.message
    if status.role == Role.ROLE_AGENT and status.message_id not in {m.message_id for m in found}:
        found.append(status)
    return found


def task_result(task: Task) -> dict[str, Any]:
    """A task's artifacts as JSON (what a function_completed notice carries)."""
    return {"artifacts": [MessageToDict(a) for a in task.artifacts]}


def unreachable(agent: str, exc: BaseException) -> errors.Unavailable:
    what = type(exc).__name__
    detail = str(exc).splitlines()[0][:200] if str(exc) else what
    return errors.Unavailable(
        f"the external agent {agent!r} did not answer ({detail}); try again later",
        reason=errors.Reason.UNREACHABLE,
        metadata={"agent": agent},
    )


@dataclass
class Peer:
    """A connected external agent: a2a-sdk's client made from its checked card."""

    agent: AllowedAgent
    client: Client

    async def send(self, message: Message) -> Task | Message:
        """Send one message; the task it made (any state) or the agent's direct reply."""
        request = SendMessageRequest(
            message=message, configuration=SendMessageConfiguration(return_immediately=True)
        )
        try:
            async for event in self.client.send_message(request):
                if event.HasField("task"):
                    return event.task
                if event.HasField("message"):
                    return event.message
        except A2AError as exc:
            raise refused(self.agent.name, exc) from None
        raise errors.Unavailable(
            f"the external agent {self.agent.name!r} answered nothing",
            reason=errors.Reason.UNREACHABLE,
            metadata={"agent": self.agent.name},
        )

    async def task(self, task_id: str) -> Task:
        try:
            return await self.client.get_task(GetTaskRequest(id=task_id))
        except A2AError as exc:
            raise refused(self.agent.name, exc) from None


def refused(agent: str, exc: A2AError) -> errors.AgentWorksError:
    """An external agent's A2A error as ours (its words, the agent named)."""
    text = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
    return errors.PreconditionFailed(
        f"the external agent {agent!r} refused: {text}",
        reason=errors.Reason.INVALID_VALUE,
        metadata={"agent": agent, "a2a_error": type(exc).__name__},
    )


async def _check_urls(policy: AddressPolicy, urls: Iterable[str]) -> None:
    for url in urls:
        await policy.check(url)


@contextlib.asynccontextmanager
async def connect(
    agent: AllowedAgent, policy: AddressPolicy, timeout: float
) -> AsyncIterator[Peer]:
    """The agent's client: its card fetched and every URL checked against the policy."""
    await policy.check(agent.card_url)
    parts = urllib.parse.urlsplit(agent.card_url)
    base = f"{parts.scheme}://{parts.netloc}"
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    http = httpx.AsyncClient(
        headers=agent.headers(),
        timeout=timeout,
        follow_redirects=False,
        transport=PinnedTransport(policy),  # no second DNS look-up after the check
    )
    client: Client | None = None
    try:
        try:
            card = await A2ACardResolver(http, base, path or "/").get_agent_card()
        except (A2AError, httpx.HTTPError, ValueError) as exc:
            raise unreachable(agent.name, exc) from None
        await _check_urls(policy, [i.url for i in card.supported_interfaces])
        client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
        try:
            yield Peer(agent, client)
        except (httpx.HTTPError, TimeoutError) as exc:
            raise unreachable(agent.name, exc) from None
    finally:
        if client is not None:
            await client.close()
        await http.aclose()
