"""docs/mcp.md's host configurations are right for the current commands and ports (G1):
the Claude Desktop `claude_desktop_config.json` block is started as written (its
command, args and env; only the placeholders are filled in: the clone's path, a token,
the test gateway's port) with the official MCP stdio client, which lists the tools and
calls one; every other `mcpServers` block is valid JSON naming the gateway's `/mcp`; the
Inspector section says what it needs (Node 22) and where to connect.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from mcp import Client, StdioServerParameters

from tests.fixtures.mcp_results import text_of

REPO = Path(__file__).resolve().parents[3]
DOC = REPO / "docs" / "mcp.md"
AGENTWORKS_BIN = str(Path(sys.executable).with_name("agentworks"))
DOC_URL = "http://127.0.0.1:8080"
DOC_BIN = "/path/to/agentworks/.venv/bin/agentworks"


def section(title: str) -> str:
    text = DOC.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else None]


def json_blocks(text: str) -> list[dict]:
    return [json.loads(b) for b in re.findall(r"^```json\n(.*?)^```$", text, re.M | re.S)]


async def test_the_documented_claude_desktop_config_starts_the_stdio_proxy_and_lists_tools_G1(
    gateway, alice_token, tmp_path
):
    """G1: the stdio block of "Claude Desktop", run as a host runs it (in a folder with no
    cli.json), connects to the gateway with the env it names and lists the MCP tools."""
    desktop = section("Claude Desktop")
    assert "claude_desktop_config.json" in desktop
    stdio, bridged = json_blocks(desktop)
    server = stdio["mcpServers"]["agentworks"]
    assert server["command"] == DOC_BIN and server["args"] == ["mcp", "stdio"]
    assert server["env"] == {"AGENTWORKS_URL": DOC_URL, "AGENTWORKS_TOKEN": "aw_..."}
    env = {
        "AGENTWORKS_URL": server["env"]["AGENTWORKS_URL"].replace(DOC_URL, gateway.url),
        "AGENTWORKS_TOKEN": alice_token,
    }
    assert gateway.url != DOC_URL
    params = StdioServerParameters(
        command=server["command"].replace(DOC_BIN, AGENTWORKS_BIN),
        args=server["args"],
        env=env,
        cwd=str(tmp_path),
    )
    async with Client(params) as mcp:
        names = [t.name for t in (await mcp.list_tools()).tools]
        assert {"messages", "ask_crew", "chat", "functions", "get_crew_function_call"} <= set(names)
        refused = await mcp.call_tool("messages", {"action": "read", "inbox_id": "in_nope"})
        assert refused.is_error and text_of(refused) == "inbox 'in_nope' not found"
    bridge = bridged["mcpServers"]["agentworks"]
    assert bridge["command"] == "npx" and "mcp-remote" in bridge["args"]
    assert f"{DOC_URL}/mcp" in bridge["args"]
    assert bridge["env"]["AGENTWORKS_AUTH"].startswith("Bearer aw_")


def test_the_documented_inspector_and_http_configs_name_the_gateway_endpoint_G1():
    """G1: every `mcpServers` block in docs/mcp.md parses and points at `/mcp` or the
    stdio proxy; the Inspector section names Node 22, its package and the endpoint."""
    blocks = json_blocks(DOC.read_text())
    assert len(blocks) >= 3
    for block in blocks:
        (server,) = block["mcpServers"].values()
        where = server.get("url") or " ".join([server["command"], *server["args"]])
        assert f"{DOC_URL}/mcp" in where or where.endswith("agentworks mcp stdio"), server
    inspector = section("The MCP Inspector")
    assert "Node.js 22 or later" in inspector
    assert "npx @modelcontextprotocol/inspector" in inspector
    assert "`Streamable HTTP`" in inspector and f"`{DOC_URL}/mcp`" in inspector
    assert "Bearer aw_" in inspector
