"""Gateway fixtures: gateways started in-process on ephemeral ports, tokens, clients.

The root conftest provides `messaging` (the messaging service, in-process) and the
core plugin provides `database_url`, `internal_key` and `identity`.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import httpx2
import pytest

from agentworks.core.clients import MessagingClient
from agentworks_gateway.config import Config
from agentworks_gateway.server import RunningGateway, start
from agentworks_gateway.tokens import ensure_token, new_token

AGENTWORKS_BIN = str(Path(sys.executable).with_name("agentworks"))


def gateway_env(database_url: str, internal_key: str, messaging_address: str) -> dict[str, str]:
    """The environment a gateway process would get."""
    return {
        "GATEWAY_DATABASE_URL": database_url,
        "GATEWAY_LISTEN": "127.0.0.1:0",
        "GATEWAY_MESSAGING_ADDRESS": messaging_address,
        "AGENTWORKS_INTERNAL_KEY": internal_key,
        "LOG_JSON": "false",
    }


@pytest.fixture
async def start_gateway(database_url, internal_key, messaging):
    """`await start_gateway()` -> one more gateway replica on the test's database."""
    started: list[RunningGateway] = []

    async def make() -> RunningGateway:
        running = await start(
            Config.from_env(gateway_env(database_url, internal_key, messaging.address))
        )
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
