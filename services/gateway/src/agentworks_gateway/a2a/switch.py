"""The owner's A2A card switch (X1): `capabilities.a2a_card`, on unless explicitly false.

With the switch off the A2A binding knows no agent for the target: its card URL answers
404, the listing leaves it out and JSON-RPC requests to it are refused, each exactly as
for a target that is not registered, so the binding tells no caller that it exists. The
target's other surfaces (gRPC, MCP, CLI, console) do not read the switch.
"""

from __future__ import annotations

from agentworks.client import MessagingClient
from agentworks.core import errors
from agentworks.messaging.v1 import messaging_pb2 as m


def card_served(target: m.Target) -> bool:
    """Whether the target is an A2A agent: its owner did not turn its card off."""
    caps = target.capabilities
    return not caps.HasField("a2a_card") or caps.a2a_card


def no_agent(target: str) -> errors.NotFound:
    """The one refusal for a target with no A2A agent, registered or not."""
    return errors.NotFound(
        f"no A2A agent {target} here: see GET /a2a/agents for the agents you may use",
        metadata=errors.kind_meta("agent", target),
    )


async def served_target(messaging: MessagingClient, target: str) -> m.Target:
    """The target's registration if the A2A binding serves it; else `no_agent`."""
    try:
        known = await messaging.get_target(target)
    except errors.NotFound:
        raise no_agent(target) from None
    if not card_served(known):
        raise no_agent(target)
    return known
