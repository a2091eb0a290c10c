"""A task outlives the gateway replica its client was polling (M1, M5, done-when of
issue 42): two gateway processes over the same services, the official MCP Python SDK
client with a 5 s per-request timeout, and a kill -9 of the replica it polls.

The function runs AGENTWORKS_TEST_TASK_SECONDS, 8 s unless set (past the 5 s request
timeout), and asks its question halfway. The issue says 90 s: the suite keeps it short,
since what is tested (each request stays under 5 s, the task survives the replica) does
not depend on the length;
`AGENTWORKS_TEST_TASK_SECONDS=90` runs the issue's literal case (docs/mcp.md says how).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from agentworks.client import FunctionsClient
from tests.fixtures.gateway import gateway_env
from tests.fixtures.mcp_tasks_client import TasksClient, resource_text

RUN_SECONDS = float(os.environ.get("AGENTWORKS_TEST_TASK_SECONDS", "8"))
REQUEST_TIMEOUT = 5.0


class Failover(httpx2.AsyncBaseTransport):
    """A client-side load balancer: each request goes to the first replica that is up;
    a replica whose connection fails (refused, or dropped without an answer) is marked
    down and the request sent to the next one."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = list(ports)
        self.inner = httpx2.AsyncHTTPTransport()
        self.served: list[int] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        while True:
            port = self.ports[0]
            request.url = request.url.copy_with(port=port)
            request.headers["host"] = f"{request.url.host}:{port}"
            try:
                response = await self.inner.handle_async_request(request)
            except (httpx2.ConnectError, httpx2.ReadError, httpx2.RemoteProtocolError):
                if len(self.ports) == 1:
                    raise
                self.ports.pop(0)
                continue
            self.served.append(port)
            return response

    async def aclose(self) -> None:
        await self.inner.aclose()


class TcpFailover:
    """The same balancer at the TCP level, for a client that takes a URL (the stdio
    proxy): each new connection goes to the first replica that accepts it."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = list(ports)
        self.served: list[int] = []
        self.port = 0

    async def __aenter__(self) -> TcpFailover:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.ports[0])
                break
            except OSError:
                if len(self.ports) == 1:
                    writer.close()
                    return
                self.ports.pop(0)
        self.served.append(self.ports[0])

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            try:
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            except OSError:
                pass
            finally:
                sink.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))


@pytest.fixture
async def replicas(database_url, signing_keys, messaging, functions) -> AsyncIterator[list]:
    """Two gateway processes (`python -m agentworks_gateway`): (process, port) each."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("AGENTWORKS_", "GATEWAY_"))},
        **gateway_env(database_url, signing_keys, messaging.address, functions.address),
    }
    started: list[tuple[asyncio.subprocess.Process, int]] = []
    for _ in range(2):
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agentworks_gateway", env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        assert process.stdout is not None
        async with asyncio.timeout(30):
            line = (await process.stdout.readline()).decode()
        assert line.startswith("gateway listening on 127.0.0.1:"), line
        started.append((process, int(line.split()[3].rsplit(":", 1)[1])))
    yield started
    for process, _ in started:
        if process.returncode is None:
            process.kill()
        await process.wait()


@pytest.mark.parametrize("transport_kind", ["http", "stdio"])
async def test_a_task_survives_a_kill_9_of_the_replica_it_polls_M1_M2_M3_M5(
    replicas, make_token, demo, functions, identity, runtime, transport_kind, tmp_path
):
    """M1 M2 M3 M5: an 8 s function (AGENTWORKS_TEST_TASK_SECONDS) asks a question
    halfway; the client answers it with tasks/update; the replica it polls is killed
    (-9) after the answer; the client still gets the validated result from the other
    replica and reads the file as a resource, no request taking more than 5 s. Over
    Streamable HTTP, and over stdio through `agentworks mcp stdio` (its gateway URL
    behind a TCP balancer)."""
    async with FunctionsClient(functions.address, identity=identity("user:owner")) as owner:
        await owner.declare_function(
            demo, "slow", input_schema={"type": "object"}, allowed_callers=["user:*"],
            output_schema={"type": "object", "properties": {"answer": {"type": "string"}},
                           "required": ["answer"]},
        )  # fmt: skip
    token = await make_token("user:alice")
    (first, first_port), (_, second_port) = replicas
    killed = asyncio.Event()

    async def run() -> None:
        # The lease outlives the run (the test sends no heartbeats; a runtime would).
        lease = int(RUN_SECONDS) + 30
        execution = await runtime.claim_execution([demo], wait_seconds=20, lease_seconds=lease)
        assert execution is not None
        call_id, started = execution.call_id, time.monotonic()
        for step in range(int(RUN_SECONDS / 2)):
            await runtime.report(call_id, progress=f"step {step}", sequence=step + 1)
            await asyncio.sleep(1)
        asked = await runtime.ask_input(call_id, "q", "Which colour?", wait_seconds=25)
        first.send_signal(signal.SIGKILL)  # the replica the client polls
        await first.wait()
        killed.set()
        # The second half of the run: the function's own time, not a wait for a state.
        await asyncio.sleep(max(0.0, RUN_SECONDS - (time.monotonic() - started)))
        await runtime.upload_file(call_id, "colour.txt", asked.reply.encode())
        await runtime.upload_file(
            call_id, "result.json", json.dumps({"answer": asked.reply}).encode()
        )
        await runtime.finish_execution(call_id, final_message="painted")

    async def answer(key: str, request: dict) -> dict:
        return {"action": "accept", "content": {"answer": "blue"}}

    tasks = TasksClient(answer)
    runner = asyncio.create_task(run())
    async with contextlib.AsyncExitStack() as stack:
        if transport_kind == "http":
            failover = Failover([first_port, second_port])
            balancer: Failover | TcpFailover = failover
            http = httpx2.AsyncClient(
                headers={"Authorization": f"Bearer {token}"},
                timeout=httpx2.Timeout(REQUEST_TIMEOUT),
                transport=failover,
            )
            await stack.enter_async_context(http)
            url = f"http://127.0.0.1:{first_port}/mcp"
            server: Any = streamable_http_client(url, http_client=http)
        else:
            balancer = await stack.enter_async_context(TcpFailover([first_port, second_port]))
            server = StdioServerParameters(
                command=str(Path(sys.executable).with_name("agentworks")),
                args=["mcp", "stdio"],
                env={
                    "AGENTWORKS_URL": f"http://127.0.0.1:{balancer.port}",
                    "AGENTWORKS_TOKEN": token,
                },
                cwd=str(tmp_path),
            )
        mcp = await stack.enter_async_context(
            Client(server, read_timeout_seconds=REQUEST_TIMEOUT, extensions=[tasks])
        )
        result = await mcp.call_tool(
            "functions", {"action": "call", "crew": "demo", "function": "slow", "inputs": {}}
        )
        await asyncio.wait_for(runner, 30)
        assert killed.is_set() and first.returncode == -signal.SIGKILL
        assert not result.is_error, result.content
        assert result.structured_content["result"] == {"answer": "blue"}
        statuses = [t["status"] for t in tasks.seen]
        assert "input_required" in statuses and statuses[-1] == "completed"
        # Polled on the first replica, then (after the kill) on the second only.
        assert first_port in balancer.served and balancer.served[-1] == second_port
        link = next(
            b for b in result.content if b.type == "resource_link" and b.name == "colour.txt"
        )
        read = await mcp.read_resource(str(link.uri))
        assert resource_text(read)[0] == "blue"
