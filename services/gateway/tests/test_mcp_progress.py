"""MCP progress from the gateway's tools that wait (N3), with the official MCP client.

A host whose tool timeout is 5 s, reset by each progress notification
(`tests.fixtures.mcp_progress`), outlives a read and a call that wait longer; without a
`progressToken` nothing is sent and the answer is the one JSON body it always was.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from pathlib import Path

import anyio
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from tests.fixtures.mcp_progress import assert_steady, call_plain, call_resetting

AGENTWORKS_BIN = str(Path(sys.executable).with_name("agentworks"))


@contextlib.asynccontextmanager
async def mcp_client(url: str, token: str, mode: str):
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30, read=60)
    )
    try:
        async with (
            http,
            Client(streamable_http_client(url, http_client=http), mode=mode) as client,
        ):
            yield client
    except* anyio.ClosedResourceError:
        # The mcp client SDK's teardown race: the answer to a call the client already
        # timed out (the 5 s cut below) may arrive while the client closes, and its POST
        # task then writes into the closed stream. Nothing of the test's is lost.
        pass


async def _read_with_and_without_progress(url: str, token: str, mode: str) -> None:
    async with mcp_client(url, token, mode) as mcp:
        sent = await mcp.call_tool("ask_crew", {"crew": "demo", "message": "anyone?"})
        read = {"action": "read", "inbox_id": sent.structured_content["inbox_id"]}
        waited = call_resetting(mcp, "messages", {**read, "wait_seconds": 9})
        silent = call_plain(mcp, "messages", {**read, "wait_seconds": 9})
        outcome, cut = await asyncio.gather(waited, silent, return_exceptions=True)
    # The 5 s timeout, reset by each notification, outlived the 9 s wait.
    assert not isinstance(outcome, BaseException), outcome
    assert not outcome.result.is_error and outcome.result.structured_content["messages"] == []
    assert outcome.seconds >= 8.9 and len(outcome.notes) >= 4, outcome
    assert_steady(outcome, "waiting for a message in the inbox", total=9)
    # The same wait without a progressToken: silent, so the 5 s timeout cut it.
    assert isinstance(cut, TimeoutError), cut


async def test_a_read_that_waits_sends_progress_every_2_s_and_outlives_a_5_s_timeout_N3_C7(
    gateway, alice_token, demo
):
    """N3 C7: messages read with wait_seconds 9 sends a progress notification every 2 s
    (total 9, "waiting for a message in the inbox (N s)") to a client that asked, in both
    protocol eras, so a host's 5 s tool timeout reset by progress lasts; the same read
    without a progressToken gets no notification and a 5 s timeout cuts it."""
    await asyncio.gather(
        *(
            _read_with_and_without_progress(gateway.mcp_url, alice_token, mode)
            for mode in ("auto", "legacy")
        )
    )


async def test_a_waiting_call_sends_progress_until_it_ends_N3_F4(
    gateway, alice_token, demo, echo, runtime, mcp_session
):
    """N3 F4: functions call with wait_seconds sends progress ("waiting for the call to
    end") until the execution finishes 7 s later, then the outcome, through a 5 s timeout
    reset by progress."""
    async with mcp_session(gateway.mcp_url, alice_token) as mcp:
        call = {
            "action": "call",
            "crew": "demo",
            "function": "echo",
            "inputs": {"text": "slow"},
            "wait_seconds": 25,
        }
        waiting = asyncio.create_task(call_resetting(mcp, "functions", call))
        execution = await runtime.claim_execution([demo], wait_seconds=10)
        assert execution is not None
        await asyncio.sleep(7)  # the execution's own work: the time the caller waits
        await runtime.finish_execution(execution.call_id, final_message="done slowly")
        outcome = await waiting
    assert not outcome.result.is_error, outcome.result
    receipt = outcome.result.structured_content
    assert receipt["call_id"] == execution.call_id
    assert receipt["outcome"]["status"] == "completed"
    assert outcome.seconds >= 7 and len(outcome.notes) >= 3, outcome
    assert_steady(outcome, "waiting for the call to end", total=25)


async def test_progress_only_when_asked_the_answer_is_json_otherwise_N3_G1(
    gateway, alice_token, demo
):
    """N3 G1: over HTTP, a tools/call without a progressToken (or with a malformed one)
    is answered with one JSON body as before; with one, as an event stream: progress
    notifications with that token (total the wait), then the result."""
    headers = {
        "Authorization": f"Bearer {alice_token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": LATEST_HANDSHAKE_VERSION,
    }
    async with httpx2.AsyncClient(timeout=30) as http:

        async def call(request_id: int, arguments: dict, meta: dict | None) -> httpx2.Response:
            params: dict = {"name": "messages" if "action" in arguments else "ask_crew"}
            params["arguments"] = arguments
            if meta is not None:
                params["_meta"] = meta
            body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
            return await http.post(gateway.mcp_url, headers=headers, json=body)

        sent = await call(1, {"crew": "demo", "message": "hello?"}, None)
        assert sent.headers["content-type"].startswith("application/json"), sent.text
        inbox = sent.json()["result"]["structuredContent"]["inbox_id"]
        read = {"action": "read", "inbox_id": inbox, "wait_seconds": 3}

        # No token, or one that is neither a string nor a number: nothing is asked.
        for meta in (None, {}, {"progressToken": True}):
            plain = await call(2, {**read, "wait_seconds": 0}, meta)
            assert plain.headers["content-type"].startswith("application/json"), plain.text
            assert plain.json()["result"]["structuredContent"]["messages"] == []
        plain = await call(2, read, None)
        assert plain.headers["content-type"].startswith("application/json"), plain.text
        assert plain.json()["result"]["structuredContent"]["messages"] == []

        streamed = await call(3, read, {"progressToken": "tok-3"})
        assert streamed.headers["content-type"].startswith("text/event-stream"), streamed.text
        events = [
            json.loads(line.removeprefix("data:"))
            for line in streamed.text.splitlines()
            if line.startswith("data:") and line[5:].strip()
        ]
    *notes, answer = events
    assert notes, events
    assert all(n["method"] == "notifications/progress" for n in notes), notes
    assert {n["params"]["progressToken"] for n in notes} == {"tok-3"}
    assert all(n["params"]["total"] == 3 for n in notes)
    assert answer["id"] == 3 and answer["result"]["structuredContent"]["messages"] == []


async def test_the_stdio_proxy_sends_progress_while_the_gateway_answers_N3_G1(
    gateway, alice_token, demo
):
    """N3 G1: `agentworks mcp stdio` forwards a waiting read to the HTTP API (which sends
    no progress) and sends progress itself every 2 s meanwhile, to a client that asked,
    so a 5 s timeout reset by progress lasts the 8 s wait; without a token, none."""
    params = StdioServerParameters(
        command=AGENTWORKS_BIN,
        args=["mcp", "stdio"],
        env={"AGENTWORKS_URL": gateway.url, "AGENTWORKS_TOKEN": alice_token},
        cwd=os.getcwd(),
    )
    async with Client(params) as mcp:
        sent = await mcp.call_tool("ask_crew", {"crew": "demo", "message": "via stdio"})
        read = {"action": "read", "inbox_id": sent.structured_content["inbox_id"]}
        outcome, cut = await asyncio.gather(
            call_resetting(mcp, "messages", {**read, "wait_seconds": 8}),
            call_plain(mcp, "messages", {**read, "wait_seconds": 8}),
            return_exceptions=True,
        )
    assert not isinstance(outcome, BaseException), outcome
    assert outcome.result.structured_content["messages"] == [], outcome.result
    assert outcome.seconds >= 7.9 and len(outcome.notes) >= 3, outcome
    assert_steady(outcome, "waiting for the gateway's answer", total=8)
    assert isinstance(cut, TimeoutError), cut
