"""`agentworks mcp stdio` as a subprocess, driven by the official stdio client (G1)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mcp import Client, StdioServerParameters

from tests.fixtures.mcp_results import text_of

AGENTWORKS_BIN = str(Path(sys.executable).with_name("agentworks"))


async def test_stdio_server_proxies_tool_calls_to_the_gateway_with_the_token_G1_G2_P6(
    gateway, alice_token, demo, bot
):
    """G1 G2: same tools and schemas as HTTP; calls and errors pass through the token's API."""
    params = StdioServerParameters(
        command=AGENTWORKS_BIN,
        args=["mcp", "stdio"],
        env={"AGENTWORKS_URL": gateway.url, "AGENTWORKS_TOKEN": alice_token},
        cwd=os.getcwd(),
    )
    async with Client(params) as mcp:
        listed = await mcp.list_tools()
        assert [t.name for t in listed.tools] == [
            "messages",
            "ask_crew",
            "chat",
            "functions",
            "get_crew_function_call",
            "list",
            "transcript",
        ]

        sent = await mcp.call_tool("ask_crew", {"crew": "demo", "message": "via stdio"})
        assert not sent.is_error, sent.content
        receipt = sent.structured_content
        turn = await bot.claim_turn([demo], wait_seconds=10)
        assert turn is not None and turn.reply_inbox_id == receipt["inbox_id"]
        await bot.send_message(turn.reply_inbox_id, "got it")
        await bot.complete_turn(turn.turn_id)

        page = await mcp.call_tool(
            "messages", {"action": "read", "inbox_id": receipt["inbox_id"], "wait_seconds": 5}
        )
        assert [m["text"] for m in page.structured_content["messages"]] == ["got it"]

        missing = await mcp.call_tool("messages", {"action": "read", "inbox_id": "in_nope"})
        assert missing.is_error
        assert text_of(missing) == "inbox 'in_nope' not found"
        # P6: the proxy passes the gateway's error object on, reason and metadata too.
        assert missing.structured_content["error"]["reason"] == "NOT_FOUND"
        nowhere = await mcp.call_tool("messages", {"action": "send", "message": "hi"})
        error = nowhere.structured_content["error"]
        assert (error["reason"], error["metadata"]["field"]) == ("FIELD_RULE", "destination")
