"""The MCP path: messages send and read through the gateway vs the same through gRPC.

The gateway runs as its own process (`python -m agentworks_gateway`); the client is the
official `mcp` SDK over Streamable HTTP with a bearer token, as an MCP host would use it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from agentworks.client import MessagingClient
from agentworks.core.identity import Minter
from agentworks_gateway.tokens import ensure_token, new_token
from bench.harness import Processes, Report, Row, free_port, percentile

TARGET = "crew:gw"
USER = "user:mcp-bench"
REPLIES = 5


def start_gateway(procs: Processes, messaging: str, **settings: str) -> str:
    """The gateway process on a free port (with `settings` on top); its base URL once
    /healthz answers."""
    port = free_port()
    env = {
        **os.environ,
        "GATEWAY_LISTEN": f"127.0.0.1:{port}",
        "GATEWAY_DATABASE_URL": procs.database_url,
        "GATEWAY_MESSAGING_ADDRESS": messaging,
        **procs.keys.env("gateway"),
        "LOG_LEVEL": "warning",
        **settings,
    }
    child = subprocess.Popen(
        [sys.executable, "-m", "agentworks_gateway"], env=env, stdout=subprocess.DEVNULL
    )
    procs.children.append(child)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx2.get(f"{url}/healthz", timeout=1).status_code == 200:
                return url
        except httpx2.HTTPError:
            pass
        if time.monotonic() > deadline or child.poll() is not None:
            raise TimeoutError("the gateway did not answer /healthz")
        time.sleep(0.1)


async def timed(op: Callable[[], Awaitable[object]], count: int) -> list[float]:
    out = []
    for _ in range(count):
        started = time.perf_counter()
        await op()
        out.append((time.perf_counter() - started) * 1000)
    return out


@contextlib.asynccontextmanager
async def mcp_session(url: str, token: str) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30, read=60)
    )
    async with http, Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
        yield client


async def mcp_vs_grpc(procs: Processes, report: Report, count: int) -> None:
    """Sequential send and read latencies, MCP through the gateway vs gRPC directly."""
    messaging = procs.start("agentworks_messaging", "MESSAGING")
    async with MessagingClient(
        messaging, identity=Minter("user:ops", procs.key, roles={"operator"})
    ) as ops:
        await ops.register_target(TARGET, owner="user:ops")
    token = new_token()
    await asyncio.to_thread(ensure_token, procs.database_url, token, USER, set(), "bench")
    url = await asyncio.to_thread(start_gateway, procs, messaging)

    async with (
        MessagingClient(messaging, identity=Minter(USER, procs.key)) as grpc_client,
        MessagingClient(messaging, identity=Minter("agent:gw/bot", procs.key)) as agent,
    ):
        mcp_context = mcp_session(url, token)
        mcp = await mcp_context.__aenter__()
        try:
            sent = await mcp.call_tool(
                "messages", {"action": "send", "crew": "gw", "message": "open"}
            )
            if sent.is_error:
                raise RuntimeError(f"MCP send failed: {sent.content}")
            inbox = sent.structured_content["inbox_id"]
            for n in range(REPLIES):
                await agent.send_message(inbox, f"update {n}: still working on it")

            async def mcp_send() -> None:
                result = await mcp.call_tool(
                    "messages", {"action": "send", "crew": "gw", "message": "hello"}
                )
                if result.is_error:
                    raise RuntimeError(result.content)

            async def mcp_read() -> None:
                result = await mcp.call_tool("messages", {"action": "read", "inbox_id": inbox})
                if len(result.structured_content["messages"]) != REPLIES:
                    raise RuntimeError(f"unexpected page: {result.structured_content}")

            async def grpc_send() -> None:
                await grpc_client.send("hello", target=TARGET)

            async def grpc_read() -> None:
                page = await grpc_client.read(inbox)
                if len(page.messages) != REPLIES:
                    raise RuntimeError("unexpected page")

            results: dict[str, list[float]] = {}
            for name, op in (
                ("mcp send", mcp_send),
                ("grpc send", grpc_send),
                ("mcp read", mcp_read),
                ("grpc read", grpc_read),
            ):
                await timed(op, 20)  # warm up
                results[name] = []
            # Alternate in rounds so that load from elsewhere hits both paths alike.
            for _ in range(4):
                for name, op in (
                    ("mcp send", mcp_send),
                    ("grpc send", grpc_send),
                    ("mcp read", mcp_read),
                    ("grpc read", grpc_read),
                ):
                    results[name] += await timed(op, max(1, count // 4))
        finally:
            await mcp_context.__aexit__(None, None, None)

    scenario = "MCP over Streamable HTTP via the gateway"
    for action, label in (
        ("send", "messages send (new conversation)"),
        ("read", "messages read (page of 5)"),
    ):
        for pct in (50, 99):
            report.add(
                Row(
                    scenario,
                    f"{label}, p{pct}",
                    percentile(results[f"mcp {action}"], pct),
                    "ms",
                    "the same through gRPC",
                    percentile(results[f"grpc {action}"], pct),
                    *mcp_target(pct, results[f"mcp {action}"], results[f"grpc {action}"]),
                )
            )
    report.notes.append(
        "MCP path: the official `mcp` client (Streamable HTTP, one session, bearer token) "
        "calls the `messages` tool on a gateway process, which looks the token up, signs "
        "an identity and calls messaging over gRPC; the baseline is the typed gRPC client "
        "calling messaging directly as the same principal. One call at a time, alternating "
        "rounds."
    )


def mcp_target(pct: int, mcp: list[float], grpc: list[float]) -> tuple[str, bool | None]:
    """Issue 40: MCP's p50 at most twice the same operation's over gRPC."""
    if pct != 50:
        return "", None
    return "≤ 2 x gRPC", percentile(mcp, 50) <= 2 * percentile(grpc, 50)
