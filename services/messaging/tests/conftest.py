"""Clients for the in-process messaging service, one per principal."""

from __future__ import annotations

import pytest

from agentworks.client import MessagingClient


@pytest.fixture
async def clients(messaging, identity):
    """`await clients("user:alice", roles={"operator"})` -> a MessagingClient."""
    made: list[MessagingClient] = []

    async def make(principal: str, roles: frozenset[str] | set[str] = frozenset()):
        client = MessagingClient(messaging.address, identity=identity(principal, roles))
        made.append(client)
        return client

    yield make
    for client in made:
        await client.close()


@pytest.fixture
async def operator(clients):
    return await clients("user:ops", {"operator"})


@pytest.fixture
async def demo(operator):
    """crew:demo registered, owned by user:owner."""
    await operator.register_target("crew:demo", owner="user:owner")
    return "crew:demo"
