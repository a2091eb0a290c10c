"""The functions service in-process, and clients per principal.

`start_functions` (one more replica) comes from the root plugin `tests.fixtures.services`.
"""

from __future__ import annotations

import pytest

from agentworks.client import FunctionsClient


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
