"""A2A outbound (X4; docs/a2a.md, Outbound): an agent in a turn converses with and calls
external A2A agents on the operator's allow-list, through the gateway, which holds their
credentials; replies and task ends come back as turns of the turn's conversation.

`settings` (the allow-list file), `service` (who may, the use cases, the deliveries back),
`peer` (a2a-sdk's client, under the outbound address policy), `follow` (open tasks
followed until they end, across restarts), `store` (their table), `routes` (HTTP).
"""

from __future__ import annotations

from typing import Any

from agentworks.server.db import Database
from agentworks_gateway.a2a_out.follow import Follower
from agentworks_gateway.a2a_out.routes import a2a_out_routes
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


__all__ = ["A2AOut", "A2AOutConfig", "a2a_out_routes"]
