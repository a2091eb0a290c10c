"""MCP tasks (M1): what a `tasks/get` poll costs, and how soon `notifications/tasks`
follows a change of the call.

The gateway runs as its own process over messaging and functions processes; the client
is the official `mcp` SDK over Streamable HTTP (2026-07-28) declaring the Tasks
extension, as an MCP host would; the notifications are read from a
`subscriptions/listen` stream.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Literal

import httpx
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client import advertise  # declares the extension on each request
from mcp.client.streamable_http import streamable_http_client
from pydantic import BaseModel, ConfigDict, Field

from agentworks.client import FunctionsClient
from agentworks.core.identity import Minter
from agentworks_gateway.tokens import ensure_token, new_token
from bench.gateway import start_gateway
from bench.harness import Processes, Report, Row, percentile

TARGET = "crew:tasks"
USER = "user:tasks-bench"
TASKS = "io.modelcontextprotocol/tasks"
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}},
}


class TaskIdParams(types.RequestParams):
    task_id: str = Field(alias="taskId")


class GetTask(types.Request[TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskIdParams
    name_param = "taskId"


class Loose(BaseModel):
    model_config = ConfigDict(extra="allow")


async def _notifications(url: str, token: str, call_id: str, out: asyncio.Queue) -> None:
    """Put (arrival time, task) for each `notifications/tasks` of the call on `out`."""
    request = {
        "jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen",
        "params": {"notifications": {"taskIds": [call_id]}, "_meta": META},
    }  # fmt: skip
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "subscriptions/listen",
    }
    async with httpx.AsyncClient(timeout=httpx.Timeout(60)) as http:  # noqa: SIM117
        async with http.stream("POST", f"{url}/mcp", json=request, headers=headers) as response:
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    frame = json.loads(line[5:])
                    if frame.get("method") == "notifications/tasks":
                        await out.put((time.perf_counter(), frame["params"]))


async def task_poll_and_notify(procs: Processes, report: Report, count: int) -> None:
    """tasks/get latency on a working call; report -> notifications/tasks latency."""
    messaging = procs.start("agentworks_messaging", "MESSAGING")
    functions = procs.start(
        "agentworks_functions", "FUNCTIONS", FUNCTIONS_MESSAGING_ADDRESS=messaging
    )
    async with FunctionsClient(
        functions, identity=Minter("user:ops", procs.key, roles={"operator"})
    ) as ops:
        await ops.register_target(TARGET, owner="user:owner")
    async with FunctionsClient(functions, identity=Minter("user:owner", procs.key)) as owner:
        await owner.declare_function(
            TARGET, "long", input_schema={"type": "object"}, allowed_callers=["user:*"]
        )
    token = new_token()
    await asyncio.to_thread(ensure_token, procs.database_url, token, USER, set(), "bench")
    url = await asyncio.to_thread(
        start_gateway, procs, messaging, GATEWAY_FUNCTIONS_ADDRESS=functions
    )
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30)
    )
    polls: list[float] = []
    delays: list[float] = []
    async with (
        http,
        Client(
            streamable_http_client(f"{url}/mcp", http_client=http), extensions=[advertise(TASKS)]
        ) as mcp,
        FunctionsClient(functions, identity=Minter("agent:tasks/bot", procs.key)) as runtime,
    ):
        async with FunctionsClient(functions, identity=Minter(USER, procs.key)) as caller:
            call_id = (await caller.call(TARGET, "long", {})).call_id
        execution = await runtime.claim_execution([TARGET], wait_seconds=10)
        assert execution is not None and execution.call_id == call_id
        get = GetTask(params=TaskIdParams(taskId=call_id))
        for _ in range(10):  # warm up
            await mcp.session.send_request(get, Loose)
        for _ in range(count):
            started = time.perf_counter()
            await mcp.session.send_request(get, Loose)
            polls.append((time.perf_counter() - started) * 1000)

        arrived: asyncio.Queue[tuple[float, dict]] = asyncio.Queue()
        listener = asyncio.create_task(_notifications(url, token, call_id, arrived))
        await asyncio.wait_for(arrived.get(), 10)  # the status at once
        for n in range(count // 4):
            started = time.perf_counter()
            await runtime.report(call_id, progress=f"step {n}", sequence=n + 1)
            at, task = await asyncio.wait_for(arrived.get(), 10)
            if task.get("statusMessage") != f"step {n}":
                raise RuntimeError(f"unexpected task: {task}")
            delays.append((at - started) * 1000)
        await runtime.finish_execution(call_id, final_message="done")
        listener.cancel()

    scenario = "MCP tasks via the gateway (M1)"
    for pct in (50, 99):
        report.add(
            Row(scenario, f"tasks/get on a working call, p{pct}", percentile(polls, pct), "ms")
        )
    for pct in (50, 99):
        report.add(
            Row(
                scenario,
                f"progress reported -> notifications/tasks arrives, p{pct}",
                percentile(delays, pct),
                "ms",
            )
        )
    report.notes.append(
        "MCP tasks: `tasks/get` is one GetStatus on the functions service behind the token "
        "lookup, one at a time from the official `mcp` client declaring the Tasks "
        "extension. The notification delay runs from the runtime's progress report (its "
        "gRPC call) to the `notifications/tasks` frame on an open `subscriptions/listen` "
        "stream, which follows the call's push stream (FunctionsClient.watch_call, N1); "
        "the figures were measured when it still long-polled GetStatus with seen_version."
    )
