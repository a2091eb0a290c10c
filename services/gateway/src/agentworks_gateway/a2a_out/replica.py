"""This replica's A2A outbound (X4): the use cases and the follower of open tasks. Kept out
of the package's `__init__` so that importing `a2a_out.settings` (the gateway's config
does) loads nothing else."""

from __future__ import annotations

from typing import Any

from agentworks.server.db import Database
from agentworks_gateway.a2a_out.follow import Follower
from agentworks_gateway.a2a_out.service import Conversations
from agentworks_gateway.a2a_out.settings import A2AOutConfig
from agentworks_gateway.a2a_out.store import A2AOutStore
from agentworks_gateway.webhooks_out.policy import AddressPolicy


class A2AOut:
    """This replica's A2A outbound: the use cases and the follower of open tasks."""

    def __init__(self, gateway: Any, database: Database, config: A2AOutConfig) -> None:
        policy = AddressPolicy(gateway.config.webhooks_out.allow)
        self.conversations = Conversations(gateway, A2AOutStore(database), config, policy)
        self.follower = Follower(self.conversations)

    def start(self) -> None:
        self.follower.start()

    async def stop(self) -> None:
        await self.follower.stop()
