"""Fixtures shared by every test in the repository: services started in-process.

Database fixtures (`database_url`, `internal_key`, `identity`) come from the
`agentworks.core.testing` plugin. Each service fixture starts that service on an
ephemeral port against the test's own database and stops it afterwards.
"""

from __future__ import annotations

import pytest


def service_env(database_url: str, internal_key: str, prefix: str, **extra: str) -> dict[str, str]:
    """The environment a service would get, for `Config.from_env(environ=...)`."""
    env = {
        f"{prefix}_DATABASE_URL": database_url,
        f"{prefix}_LISTEN": "127.0.0.1:0",
        "AGENTWORKS_INTERNAL_KEY": internal_key,
        "LOG_JSON": "false",
    }
    env.update(extra)
    return env


@pytest.fixture
async def messaging(database_url: str, internal_key: str):
    """The messaging service, running in-process; `.address` is its host:port."""
    from agentworks_messaging.config import Config
    from agentworks_messaging.server import start

    running = await start(
        Config.from_env(
            service_env(database_url, internal_key, "MESSAGING", MESSAGING_SWEEP_SECONDS="0.2")
        )
    )
    yield running
    await running.stop(0)
