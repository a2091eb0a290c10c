"""Fixtures shared by every test in the repository: services started in-process.

Database fixtures (`database_url`, `internal_key`, `identity`) come from the
`agentworks.server.testing` plugin. Each service fixture starts that service on an
ephemeral port against the test's own database and stops it afterwards.
"""

from __future__ import annotations

import pytest

from agentworks.server.testing import service_env

# The gateway stack (gateway, tokens, CLI, MCP sessions), for the gateway and CLI tests.
pytest_plugins = ["tests.fixtures.gateway"]


@pytest.fixture
async def start_messaging(database_url: str, internal_key: str):
    """`await start_messaging()` starts one more messaging replica on the test database."""
    from agentworks_messaging.app import start
    from agentworks_messaging.config import Config

    started = []

    async def make(**extra: str):
        env = service_env(database_url, internal_key, "MESSAGING", MESSAGING_SWEEP_SECONDS="0.2")
        env.update(extra)
        running = await start(Config.from_env(env))
        started.append(running)
        return running

    yield make
    for running in started:
        await running.stop(0)


@pytest.fixture
async def messaging(start_messaging):
    """The messaging service, running in-process; `.address` is its host:port."""
    return await start_messaging()
