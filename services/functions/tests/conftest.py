"""The functions service in-process (one or more replicas), and clients per principal."""

from __future__ import annotations

import pytest

from agentworks.client import FunctionsClient

# Fast sweeps and short leases so lease-expiry tests finish in about a second.
FAST = {
    "FUNCTIONS_SWEEP_SECONDS": "0.2",
    "FUNCTIONS_MIN_LEASE_SECONDS": "1",
    "FUNCTIONS_NOTICE_RETRY_SECONDS": "0.2",
    "FUNCTIONS_POLL_FALLBACK_SECONDS": "2",
    # No messaging service unless a test starts one (completion notices then wait).
    "FUNCTIONS_MESSAGING_ADDRESS": "127.0.0.1:1",
}


def functions_env(database_url: str, internal_key: str, **extra: str) -> dict[str, str]:
    """The environment a functions replica would get, for `Config.from_env(environ=...)`."""
    env = {
        "FUNCTIONS_DATABASE_URL": database_url,
        "FUNCTIONS_LISTEN": "127.0.0.1:0",
        "AGENTWORKS_INTERNAL_KEY": internal_key,
        "LOG_JSON": "false",
        **FAST,
    }
    env.update(extra)
    return env


@pytest.fixture
async def start_functions(database_url: str, internal_key: str):
    """`await start_functions(FUNCTIONS_X="y")` -> another replica on the same database."""
    from agentworks_functions.app import start
    from agentworks_functions.config import Config

    running = []

    async def make(**extra: str):
        replica = await start(Config.from_env(functions_env(database_url, internal_key, **extra)))
        running.append(replica)
        return replica

    yield make
    for replica in running:
        await replica.stop(0)


@pytest.fixture
async def functions(start_functions):
    """The functions service, running in-process; `.address` is its host:port."""
    return await start_functions()


@pytest.fixture
async def clients(functions, identity):
    """`await clients("user:alice", roles={"operator"}, address=...)` -> a FunctionsClient."""
    made: list[FunctionsClient] = []

    async def make(
        principal: str, roles: frozenset[str] | set[str] = frozenset(), address: str = ""
    ) -> FunctionsClient:
        client = FunctionsClient(address or functions.address, identity=identity(principal, roles))
        made.append(client)
        return client

    yield make
    for client in made:
        await client.close()


@pytest.fixture
async def operator(clients):
    return await clients("user:ops", {"operator"})


@pytest.fixture
async def owner(clients):
    return await clients("user:owner")


@pytest.fixture
async def demo(operator):
    """crew:demo registered, owned by user:owner, with the default running limit."""
    await operator.register_target("crew:demo", owner="user:owner")
    return "crew:demo"


@pytest.fixture
async def runtime(clients):
    """The runtime of crew:demo (agent:demo/bot)."""
    return await clients("agent:demo/bot")


ECHO_SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string"}, "count": {"type": "integer"}},
    "required": ["text"],
    "additionalProperties": False,
}

SUMMARY_SCHEMA = {
    "type": "object",
    "properties": {"summary": {"type": "string"}, "words": {"type": "integer"}},
    "required": ["summary", "words"],
    "additionalProperties": False,
}


@pytest.fixture
async def echo(owner, demo):
    """crew:demo's `echo` function, callable by every user and agent of crew alpha."""
    await owner.declare_function(
        demo,
        "echo",
        description="Echo the text back.",
        input_schema=ECHO_SCHEMA,
        allowed_callers=["user:*", "agent:alpha/*"],
    )
    return "echo"


@pytest.fixture
async def summarize(owner, demo):
    """crew:demo's `summarize` function, with an output schema."""
    await owner.declare_function(
        demo,
        "summarize",
        input_schema=ECHO_SCHEMA,
        output_schema=SUMMARY_SCHEMA,
        allowed_callers=["user:*"],
    )
    return "summarize"


@pytest.fixture
def echo_schema():
    return ECHO_SCHEMA


@pytest.fixture
def summary_schema():
    return SUMMARY_SCHEMA
