"""Gateway fixtures: gateways started in-process on ephemeral ports, tokens, clients.

The root conftest provides `messaging` (the messaging service, in-process) and the
core plugin provides `database_url`, `internal_key` and `identity`. Every gateway here
talks to an in-process functions service (`functions`); a test module that overrides
`scheduler_address` with the `scheduler` fixture's address gets an in-process scheduler.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from agentworks.core.clients import FunctionsClient, MessagingClient, SchedulerClient
from agentworks.core.testing import service_env
from agentworks_gateway.config import Config
from agentworks_gateway.server import RunningGateway, start
from agentworks_gateway.tokens import ensure_token, new_token

AGENTWORKS_BIN = str(Path(sys.executable).with_name("agentworks"))


# Nothing listens here: a gateway without a scheduler answers UNAVAILABLE at once.
NOWHERE = "127.0.0.1:1"


def gateway_env(
    database_url: str,
    internal_key: str,
    messaging_address: str,
    functions_address: str = NOWHERE,
    scheduler_address: str = NOWHERE,
) -> dict[str, str]:
    """The environment a gateway process would get."""
    return {
        "GATEWAY_DATABASE_URL": database_url,
        "GATEWAY_LISTEN": "127.0.0.1:0",
        "GATEWAY_MESSAGING_ADDRESS": messaging_address,
        "GATEWAY_FUNCTIONS_ADDRESS": functions_address,
        "GATEWAY_SCHEDULER_ADDRESS": scheduler_address,
        "AGENTWORKS_INTERNAL_KEY": internal_key,
        "LOG_JSON": "false",
    }


@pytest.fixture
async def functions(database_url, internal_key, messaging):
    """The functions service in-process (completion notices go to `messaging`)."""
    from agentworks_functions.config import Config as FunctionsConfig
    from agentworks_functions.server import start as start_functions

    env = service_env(
        database_url,
        internal_key,
        "FUNCTIONS",
        FUNCTIONS_MESSAGING_ADDRESS=messaging.address,
        FUNCTIONS_SWEEP_SECONDS="0.2",
        FUNCTIONS_MIN_LEASE_SECONDS="1",
        FUNCTIONS_POLL_FALLBACK_SECONDS="2",
    )
    running = await start_functions(FunctionsConfig.from_env(env))
    yield running
    await running.stop(0)


@pytest.fixture
async def scheduler(database_url, internal_key, messaging):
    """The scheduler in-process, ticking every 0.2 s (gateways use it where a module
    overrides `scheduler_address`)."""
    from agentworks_scheduler.config import Config as SchedulerConfig
    from agentworks_scheduler.server import start as start_scheduler

    env = service_env(
        database_url,
        internal_key,
        "SCHEDULER",
        SCHEDULER_MESSAGING_ADDRESS=messaging.address,
        SCHEDULER_TICK_SECONDS="0.2",
        SCHEDULER_MIN_INTERVAL_SECONDS="60",
    )
    running = await start_scheduler(SchedulerConfig.from_env(env))
    yield running
    await running.stop(0)


@pytest.fixture
def scheduler_address() -> str:
    """Where gateways find the scheduler: nowhere, unless a test module overrides this
    fixture with `scheduler.address` (see test_webhooks.py)."""
    return NOWHERE


@pytest.fixture
async def start_gateway(database_url, internal_key, messaging, functions, scheduler_address):
    """`await start_gateway()` -> one more gateway replica on the test's database."""
    started: list[RunningGateway] = []

    async def make() -> RunningGateway:
        env = gateway_env(
            database_url, internal_key, messaging.address, functions.address, scheduler_address
        )
        running = await start(Config.from_env(env))
        started.append(running)
        return running

    yield make
    for running in started:
        await running.stop(0)


@pytest.fixture
async def gateway(start_gateway) -> RunningGateway:
    """A gateway running in-process; `.url` is its base URL, `.mcp_url` its MCP endpoint."""
    return await start_gateway()


@pytest.fixture
async def gateways(start_gateway) -> list[RunningGateway]:
    """Two gateway replicas sharing one database and one messaging service."""
    return [await start_gateway(), await start_gateway()]


@pytest.fixture
def make_token(database_url) -> Callable:
    """`await make_token("user:alice", operator=True)` -> a plaintext token stored hashed."""

    async def make(principal: str, *, operator: bool = False, label: str = "test") -> str:
        token = new_token()
        roles = {"operator"} if operator else set()
        await asyncio.to_thread(ensure_token, database_url, token, principal, roles, label)
        return token

    return make


@pytest.fixture
async def operator_token(make_token) -> str:
    return await make_token("user:ops", operator=True, label="operator")


@pytest.fixture
async def alice_token(make_token) -> str:
    return await make_token("user:alice", label="alice")


@pytest.fixture
async def api(gateway) -> AsyncIterator[Callable]:
    """`api(token)` -> an httpx client on the gateway with that bearer token."""
    made: list[httpx.AsyncClient] = []

    def make(token: str | None, *, base_url: str | None = None) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        client = httpx.AsyncClient(base_url=base_url or gateway.url, headers=headers, timeout=60)
        made.append(client)
        return client

    yield make
    for client in made:
        await client.aclose()


@pytest.fixture
async def demo(gateway, api, operator_token) -> str:
    """crew:demo registered through the gateway's `targets` tool, owned by user:owner."""
    response = await api(operator_token).post(
        "/api/v1/tools/targets",
        json={"action": "register", "target": "crew:demo", "owner": "user:owner"},
    )
    assert response.status_code == 200, response.text
    return "crew:demo"


@pytest.fixture
async def bot(messaging, identity) -> AsyncIterator[MessagingClient]:
    """The demo crew's agent `agent:demo/bot`, talking to messaging directly (a runtime)."""
    async with MessagingClient(messaging.address, identity=identity("agent:demo/bot")) as client:
        yield client


@pytest.fixture
async def runtime(functions, identity) -> AsyncIterator[FunctionsClient]:
    """crew:demo's execution runtime (`agent:demo/bot`), on the functions service."""
    async with FunctionsClient(functions.address, identity=identity("agent:demo/bot")) as client:
        yield client


ECHO_SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string"}, "count": {"type": "integer"}},
    "required": ["text"],
    "additionalProperties": False,
}


@pytest.fixture
async def echo(functions, identity, demo) -> str:
    """crew:demo's function `echo`, declared by its owner, callable by every user."""
    async with FunctionsClient(functions.address, identity=identity("user:owner")) as owner:
        await owner.declare_function(
            demo,
            "echo",
            description="Echo the text back.",
            input_schema=ECHO_SCHEMA,
            allowed_callers=["user:*"],
        )
    return "echo"


@pytest.fixture
async def agent_scheduler(scheduler, identity) -> AsyncIterator[SchedulerClient]:
    """The scheduler, called as crew:demo's agent `agent:demo/bot`."""
    async with SchedulerClient(scheduler.address, identity=identity("agent:demo/bot")) as client:
        yield client


@pytest.fixture
async def conversation(api, alice_token, demo, bot) -> str:
    """A conversation alice opened with crew:demo through the gateway, first turn handled."""
    sent = await api(alice_token).post(
        "/api/v1/tools/messages", json={"action": "send", "crew": "demo", "message": "hello"}
    )
    assert sent.status_code == 200, sent.text
    turn = await bot.claim_turn([demo], wait_seconds=10)
    assert turn is not None and turn.conversation_id == sent.json()["conversation_id"]
    await bot.complete_turn(turn.turn_id)
    return turn.conversation_id


class RoundRobin(httpx2.AsyncBaseTransport):
    """An HTTP transport that sends each request to the next replica in turn."""

    def __init__(self, ports: list[int]) -> None:
        self._next = itertools.cycle(ports)
        self._inner = httpx2.AsyncHTTPTransport()
        self.served: collections.Counter[int] = collections.Counter()
        self.order: list[int] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        port = next(self._next)
        request.url = request.url.copy_with(port=port)
        request.headers["host"] = f"{request.url.host}:{port}"
        self.served[port] += 1
        self.order.append(port)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


@pytest.fixture
def round_robin() -> Callable[[list[int]], RoundRobin]:
    return RoundRobin


@pytest.fixture
def cli(tmp_path) -> Callable:
    """`await cli(*args, env=..., cwd=...)` -> (exit code, stdout, stderr) of `agentworks`.

    Runs the real console script as a subprocess without blocking the event loop, so
    the in-process gateway keeps serving it.
    """

    async def run(
        *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, stdin: str = ""
    ) -> tuple[int, str, str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith("AGENTWORKS_")}
        process = await asyncio.create_subprocess_exec(
            AGENTWORKS_BIN,
            *args,
            env={**base, **(env or {})},
            cwd=cwd or tmp_path,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        async with asyncio.timeout(60):
            out, err = await process.communicate(stdin.encode())
        return process.returncode, out.decode(), err.decode()

    return run


@pytest.fixture
def mcp_session() -> Callable:
    """`async with mcp_session(url, token) as mcp:` -> the official MCP client (HTTP)."""

    @contextlib.asynccontextmanager
    async def session(url: str, token: str) -> AsyncIterator[Client]:
        http = httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30, read=60)
        )
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            yield client

    return session
