"""`agentworks mcp stdio` against `/mcp`: the official stdio client and the official HTTP
client see the same server (G1, G2)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from tests.fixtures.mcp_results import text_of

AGENTWORKS_BIN = str(Path(sys.executable).with_name("agentworks"))


def stdio_proxy(url: str, token: str, cwd: Path) -> Client:
    """The official stdio client, running `agentworks mcp stdio` for `url` with `token`."""
    return Client(
        StdioServerParameters(
            command=AGENTWORKS_BIN,
            args=["mcp", "stdio"],
            env={"AGENTWORKS_URL": url, "AGENTWORKS_TOKEN": token},
            cwd=str(cwd),
        )
    )


async def test_the_stdio_proxy_gives_the_instructions_tools_and_results_of_mcp_G1_G2(
    gateway, alice_token, demo, bot, mcp_session, tmp_path
):
    """G1 G2: over stdio a client gets the gateway's own instructions, the same tools and
    schemas, and results and refusals shaped exactly as over `/mcp`."""
    async with (
        mcp_session(gateway.mcp_url, alice_token) as http,
        stdio_proxy(gateway.url, alice_token, tmp_path) as stdio,
    ):
        assert http.instructions and "messages" in http.instructions
        assert stdio.instructions == http.instructions
        over_http, over_stdio = (await http.list_tools()).tools, (await stdio.list_tools()).tools
        assert [(t.name, t.description, t.input_schema) for t in over_stdio] == [
            (t.name, t.description, t.input_schema) for t in over_http
        ]

        sent = await http.call_tool("ask_crew", {"crew": "demo", "message": "both ways"})
        inbox = sent.structured_content["inbox_id"]
        turn = await bot.claim_turn([demo], wait_seconds=10)
        await bot.send_message(turn.reply_inbox_id, "seen")
        await bot.complete_turn(turn.turn_id)
        answers = []
        for args in (
            {"action": "read", "inbox_id": inbox},  # a result
            {"action": "read", "inbox_id": "in_nope"},  # a refusal
        ):
            a, b = await http.call_tool("messages", args), await stdio.call_tool("messages", args)
            assert (b.is_error, b.content, b.structured_content) == (
                a.is_error,
                a.content,
                a.structured_content,
            )
            answers.append(a)
        page, missing = answers
        assert not page.is_error
        assert [m["text"] for m in page.structured_content["messages"]] == ["seen"]
        assert missing.is_error and text_of(missing) == "inbox 'in_nope' not found"

        for client in (http, stdio):
            with pytest.raises(MCPError, match="unknown tool 'tokens': the tools are messages"):
                await client.call_tool("tokens", {"action": "list"})


async def test_the_stdio_proxy_starts_without_its_gateway_and_its_tools_say_why_G1(tmp_path):
    """G1: with no gateway at its URL the proxy still starts (no instructions to give);
    listing tools is an MCP error and a call a tool error, both saying how to reach it."""
    async with stdio_proxy("http://127.0.0.1:1", "aw_" + "x" * 43, tmp_path) as stdio:
        assert stdio.instructions is None
        with pytest.raises(
            MCPError, match=re.escape("cannot reach the gateway at http://127.0.0.1:1")
        ):
            await stdio.list_tools()
        refused = await stdio.call_tool("messages", {"action": "read", "inbox_id": "x"})
        assert refused.is_error
        assert refused.structured_content["error"]["code"] == "UNAVAILABLE"
        assert "cannot reach the gateway" in text_of(refused)
