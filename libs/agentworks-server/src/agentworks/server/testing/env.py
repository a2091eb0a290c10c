"""The environment a service gets in tests: its signing key, the trusted keys, a database."""

from __future__ import annotations

from agentworks.core.keys import KeyDirectory
from agentworks.core.trust import GATEWAY, SERVICE_PREFIX

# The scheduler's webhook key in tests (SCHEDULER_WEBHOOK_KEY).
TEST_WEBHOOK_KEY = "test-webhook-key-0123456789abcdefghijklmnopqrstuv"


def signer_of(prefix: str) -> str:
    """The signer a service of this env prefix signs as: `gateway`, or `service:<name>`."""
    return GATEWAY if prefix == "GATEWAY" else f"{SERVICE_PREFIX}{prefix.lower()}"


def signer_for(principal: str) -> str:
    """Who signs `principal`'s identities: the service itself for `service:<name>`, the
    gateway for users, agents and workflows (and the operator role)."""
    return principal if principal.startswith(SERVICE_PREFIX) else GATEWAY


def service_env(database_url: str, keys: KeyDirectory, prefix: str, **extra: str) -> dict[str, str]:
    """The environment a service would get, for `Config.from_env(environ=...)`: its own
    signing key only, and the trusted keys."""
    env = {
        f"{prefix}_DATABASE_URL": database_url,
        f"{prefix}_LISTEN": "127.0.0.1:0",
        f"{prefix}_POOL_SIZE": "4",
        **keys.env(signer_of(prefix)),
        "LOG_JSON": "false",
    }
    if prefix == "SCHEDULER":
        env["SCHEDULER_WEBHOOK_KEY"] = TEST_WEBHOOK_KEY
    env.update(extra)
    return env
