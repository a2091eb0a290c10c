"""A2A push-notification configs (X2, N2) on function tasks, delivered by webhooks out.

- `wire`: a config as A2A reads it back, and the body of a push (A2A's StreamResponse);
- `configs`: the use cases (check, set, get, list, delete) for the task's caller;
- `store`: configs with their webhooks-out endpoint (kind `a2a_push`), by named query;
- `follow`: one leased follower per config, storing a delivery per new task state;
- `A2APush`: all of it in one gateway process, started and stopped with the gateway.

docs/a2a.md (Push notifications) is the contract.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import structlog

from agentworks.server.db import Database
from agentworks_gateway.a2a.push.configs import PushConfigs
from agentworks_gateway.a2a.push.follow import PushFollowers
from agentworks_gateway.a2a.push.store import PushStore
from agentworks_gateway.webhooks_out.worker import WebhooksOut

log = structlog.get_logger("agentworks.gateway.a2a_push")


class A2APush:
    """This replica's A2A push: `configs` for the A2A handler, and the followers that
    turn task states into webhooks out's deliveries."""

    def __init__(self, gateway: Any, database: Database, webhooks_out: WebhooksOut) -> None:
        store = PushStore(database)
        self.followers = PushFollowers(
            store,
            gateway,
            webhooks_out.endpoints.config,
            webhooks_out.replica,
            webhooks_out.dispatcher.wake,
        )
        self.configs = PushConfigs(store, webhooks_out.endpoints.policy, self.followers.wake)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start following, in this event loop."""
        self._task = asyncio.create_task(self.followers.run(), name="a2a-push-followers")

    async def stop(self) -> None:
        """Stop; give the configs up so another replica follows them at once."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        await self.followers.release_all()


def push_of(gateway: Any) -> A2APush | None:
    """The gateway's A2A push, or None when it is off (`GATEWAY_A2A_PUSH=false`, or a
    gateway built without webhooks out)."""
    push = getattr(gateway, "a2a_push", None)
    return push if isinstance(push, A2APush) else None


__all__ = ["A2APush", "push_of"]
