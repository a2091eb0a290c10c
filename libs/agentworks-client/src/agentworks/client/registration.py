"""Registering a target (C1, F5) with every service that keeps a copy of it, in one place.

Messaging and functions each keep their own registration of a crew or workflow: messaging
the owner and capabilities (free_text_ask, a2a_card), functions the owner and running
limit. Register writes to messaging first, then to functions; registering again replaces
both, so a retry after a partial failure is safe. The gateway's `targets register` and
`agentworks up` both use this.
"""

from __future__ import annotations

from agentworks.client.functions import FunctionsClient
from agentworks.client.messaging import MessagingClient
from agentworks.core import errors
from agentworks.functions.v1 import functions_pb2 as f
from agentworks.messaging.v1 import messaging_pb2 as m

__all__ = ["register_target"]


async def register_target(
    messaging: MessagingClient,
    functions: FunctionsClient | None,
    target: str,
    *,
    owner: str,
    free_text_ask: bool | None = None,
    a2a_card: bool | None = None,
    running_limit: int = 0,
) -> tuple[m.Target, f.Target | None]:
    """Register `target` for messaging, then (unless `functions` is None) with functions.

    Returns (the messaging registration, the functions registration or None). A refusal by
    messaging is raised as it is; a refusal by functions is raised as the same error class
    saying that the target is registered for messaging but not with the functions service.
    """
    registered = await messaging.register_target(
        target, owner=owner, free_text_ask=free_text_ask, a2a_card=a2a_card
    )
    if functions is None:
        return registered, None
    try:
        limits = await functions.register_target(target, owner=owner, running_limit=running_limit)
    except errors.AgentWorksError as exc:
        # Messaging has it already; registering again replaces both, so a retry is safe.
        raise type(exc)(
            f"{target} is registered for messaging but not with the functions service: "
            f"{exc.message}; run the same `targets register` again once that is fixed"
        ) from None
    return registered, limits
