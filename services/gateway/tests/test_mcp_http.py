"""The official MCP client against the gateway's Streamable HTTP endpoint (G1, G2)."""

from __future__ import annotations

import asyncio
import contextlib
import time

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError


@contextlib.asynccontextmanager
async def mcp_client(url: str, token: str, *, transport=None, mode: str = "auto"):
    """The SDK's own client, with the bearer token on every request."""
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"},
        timeout=httpx2.Timeout(30, read=60),
        transport=transport,
    )
    async with http, Client(streamable_http_client(url, http_client=http), mode=mode) as client:
        yield client


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_official_client_round_trip_across_two_replicas_G1_G2_C2_C6_C7(
    gateways, round_robin, alice_token, demo, bot, mode
):
    """G1 G2 C2 C6 C7: list tools, send, an agent replies, a long-poll read sees the reply.

    Every HTTP request goes to the other replica than the one before (stateless /mcp),
    in both protocol eras the SDK speaks ("auto" negotiates the newest, "legacy" uses
    the initialize handshake).
    """
    ports = [g.port for g in gateways]
    transport = round_robin(ports)
    async with mcp_client(gateways[0].mcp_url, alice_token, transport=transport, mode=mode) as mcp:
        listed = await mcp.list_tools()
        by_name = {t.name: t for t in listed.tools}
        # Operator and owner tools (targets, tokens, declarations, scheduler) stay off MCP.
        assert set(by_name) == {
            "messages",
            "ask_crew",
            "chat",
            "functions",
            "get_crew_function_call",
            "list",
            "transcript",
        }
        schema = by_name["messages"].input_schema
        assert schema["properties"]["action"]["enum"] == ["send", "read"]
        assert schema["properties"]["wait_seconds"]["maximum"] == 25

        sent = await mcp.call_tool("messages", {"action": "send", "crew": "demo", "message": "hi"})
        assert not sent.is_error, sent.content
        receipt = sent.structured_content
        assert set(receipt) == {"accepted", "message_id", "conversation_id", "inbox_id"}
        assert receipt["accepted"] is True

        # A long-poll read is in flight while the agent takes its turn and replies.
        read = asyncio.create_task(
            mcp.call_tool(
                "messages",
                {"action": "read", "inbox_id": receipt["inbox_id"], "wait_seconds": 25},
            )
        )
        turn = await bot.claim_turn([demo], wait_seconds=10)
        assert turn is not None and turn.reply_inbox_id == receipt["inbox_id"]
        await bot.send_message(turn.reply_inbox_id, "hello from bot")
        await bot.complete_turn(turn.turn_id)
        async with asyncio.timeout(20):
            page = (await read).structured_content
        assert [m["text"] for m in page["messages"]] == ["hello from bot"]
        assert page["messages"][0]["sender"] == "agent:demo/bot"

        # Non-destructive: the same cursor (none) gives the same page again.
        again = await mcp.call_tool("messages", {"action": "read", "inbox_id": receipt["inbox_id"]})
        assert again.structured_content == page

        # Continue the conversation with its inbox, via the ask_crew alias (C9).
        follow_up = await mcp.call_tool(
            "ask_crew", {"inbox_id": receipt["inbox_id"], "message": "thanks"}
        )
        assert follow_up.structured_content["conversation_id"] == receipt["conversation_id"]

    assert all(transport.served[p] >= 2 for p in ports), transport.served
    assert all(a != b for a, b in zip(transport.order, transport.order[1:], strict=False))


async def test_get_on_mcp_is_405_there_is_no_event_stream_G1(gateway, alice_token):
    """G1: stateless Streamable HTTP offers no server-to-client stream; GET /mcp says so
    with 405 instead of holding an event stream open that nothing can ever use."""
    async with httpx2.AsyncClient(timeout=10) as http:
        response = await http.get(
            gateway.mcp_url,
            headers={"Authorization": f"Bearer {alice_token}", "Accept": "text/event-stream"},
        )
    assert response.status_code == 405 and response.headers["allow"] == "POST"
    assert "no event stream" in response.json()["error"]["message"]


async def test_an_empty_long_poll_returns_at_its_deadline_C7(gateway, alice_token, demo):
    """C7: with nothing new, a read with wait_seconds returns an empty page at the deadline."""
    async with mcp_client(gateway.mcp_url, alice_token) as mcp:
        sent = await mcp.call_tool("ask_crew", {"crew": "demo", "message": "anyone?"})
        inbox = sent.structured_content["inbox_id"]
        started = time.monotonic()
        page = await mcp.call_tool(
            "messages", {"action": "read", "inbox_id": inbox, "wait_seconds": 1}
        )
        assert time.monotonic() - started >= 0.9
        assert page.structured_content["messages"] == []
        assert not page.is_error


async def test_service_errors_become_tool_errors_with_the_services_text_G2_C7(
    gateway, alice_token, demo
):
    """G2: an unknown inbox is isError with messaging's own text; bad args list each fault."""
    async with mcp_client(gateway.mcp_url, alice_token) as mcp:
        missing = await mcp.call_tool("messages", {"action": "read", "inbox_id": "in_nope"})
        assert missing.is_error
        assert missing.content[0].text == "inbox 'in_nope' not found"
        assert missing.structured_content == {
            "error": {
                "code": "NOT_FOUND",
                "message": "inbox 'in_nope' not found",
                "reason": "NOT_FOUND",
                "metadata": {},
            }
        }

        invalid = await mcp.call_tool(
            "messages", {"action": "read", "inbox_id": "x", "limit": 0, "bogus": 1}
        )
        assert invalid.is_error
        assert invalid.content[0].text == (
            "invalid arguments for messages: Additional properties are not allowed ('bogus' "
            "was unexpected); limit: 0 is less than the minimum of 1"
        )

        refused = await mcp.call_tool("chat", {"workflow": "nope", "message": "hi"})
        assert refused.is_error and refused.structured_content["error"]["code"] == "NOT_FOUND"

        with pytest.raises(MCPError, match="unknown tool 'tokens'"):
            await mcp.call_tool("tokens", {"action": "list"})


async def test_every_tool_has_a_title_hints_and_an_output_schema_its_results_meet_G2(
    gateway, alice_token, demo
):
    """G2 (issue 26): each MCP tool lists a title, hints (read-only, destructive,
    idempotent, open world) and an output schema; a result and a refusal are objects
    that meet it, as the official client checks."""
    async with mcp_client(gateway.mcp_url, alice_token) as mcp:
        listed = {t.name: t for t in (await mcp.list_tools()).tools}
        for name, tool in listed.items():
            assert tool.title and tool.annotations is not None, name
            hints = tool.annotations
            assert None not in (
                hints.read_only_hint,
                hints.destructive_hint,
                hints.idempotent_hint,
                hints.open_world_hint,
            ), name
            assert tool.output_schema is not None and tool.output_schema["type"] == "object"
        assert listed["get_crew_function_call"].annotations.read_only_hint is True
        assert listed["functions"].annotations.destructive_hint is True
        assert listed["messages"].annotations.read_only_hint is False
        sent = await mcp.call_tool("messages", {"action": "send", "crew": "demo", "message": "hi"})
        assert not sent.is_error and isinstance(sent.structured_content, dict)
        refused = await mcp.call_tool(
            "messages", {"action": "send", "crew": "nope", "message": "x"}
        )
        assert refused.is_error and set(refused.structured_content) == {"error"}
