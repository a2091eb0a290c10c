"""MCP progress from the agent tools that wait (N3, L2): `ask_human` and `call_function`
with `wait_seconds`, served by the agent's endpoint and reached through the stdio bridge
by the official MCP client, as an agent program reaches them.

The client is a host whose tool timeout is 5 s, reset by each progress notification
(`tests.fixtures.mcp_progress`); a human answers after 11 s, a called function ends
after 7 s.
"""

# The fixtures imported by name below are the tests' parameters.
# ruff: noqa: F811

from __future__ import annotations

import asyncio
import json
import os
import pathlib
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from agentworks.agents.agent_mcp.handout import serve_agent
from agentworks.agents.agent_tools import execution_toolbox
from agentworks.client import FunctionsClient
from agentworks.client.functions import state_name
from agentworks.runtime import ExecutionContext
from tests.fixtures.agent_tools import (  # noqa: F401 - fixtures, used by name
    TEXT_SCHEMA,
    WAIT,
    functions,
    tools_crew,
)
from tests.fixtures.mcp_progress import Outcome, assert_steady, call_plain, call_resetting

# How long the human takes to answer: more than two 5 s timeouts. The issue's "a 60 s
# ask_human" as it is: AGENTWORKS_TEST_HUMAN_SECONDS=60 (kept at 11 s in the suite: the
# spacing of the notifications, asserted, is what makes any length work).
HUMAN_SECONDS = int(os.environ.get("AGENTWORKS_TEST_HUMAN_SECONDS", "11"))
SLOW_SECONDS = 7  # how long the called function runs
ASK_SECONDS = 3 * HUMAN_SECONDS  # ask_human's timeout_seconds: the person is in time

pytestmark = pytest.mark.timeout(60 + 2 * HUMAN_SECONDS)


def server_entry(config: pathlib.Path) -> dict[str, Any]:
    """The `agentworks` server of an `mcpServers` file, as an MCP host reads it."""
    return json.loads(config.read_text())["mcpServers"]["agentworks"]


async def test_ask_human_and_a_waiting_call_send_progress_through_the_bridge_N3_L2_F11(
    functions, tools_crew, identity, tmp_path
):
    """N3 L2 F11 F4: over the stdio bridge, a call_function waiting for a 7 s function
    (legacy protocol era) and an ask_human a person answers after HUMAN_SECONDS (2026-07-28 era)
    each send progress every 2 s (total: the wait asked; "waiting for the call to end",
    "waiting for a human's answer"), so a host's 5 s tool timeout reset by progress lasts
    both; the same waiting call without a progressToken gets none, and the timeout cuts it.
    """
    seen: dict[str, Any] = {}

    async def slow(ctx: ExecutionContext) -> str:
        await asyncio.sleep(SLOW_SECONDS)  # the function's own work
        return f"slow {ctx.inputs['text']}"

    async def work(ctx: ExecutionContext) -> str:
        folder = tmp_path / "agent"
        folder.mkdir(exist_ok=True)
        async with serve_agent(execution_toolbox(ctx), folder, sandboxed=False) as env:
            entry = server_entry(pathlib.Path(env["AGENTWORKS_MCP_CONFIG"]))
            params = StdioServerParameters(
                command=entry["command"], args=entry["args"], env=entry["env"]
            )
            call = {
                "target": "crew:tools",
                "function": "slow",
                "inputs": '{"text": "x"}',
                "wait_seconds": 25,
            }
            async with Client(params, mode="legacy") as client:
                seen["called"], seen["cut"] = await asyncio.gather(
                    call_resetting(client, "call_function", call),
                    call_plain(client, "call_function", call),
                    return_exceptions=True,
                )
            async with Client(params) as client:
                asked = {"question": "ship it?", "timeout_seconds": ASK_SECONDS}
                seen["asked"] = await call_resetting(client, "ask_human", asked)
        return "asked"

    tools = await tools_crew({"work": work, "slow": slow})
    async with FunctionsClient(functions.address, identity=identity("user:owner")) as owner:
        # `slow` is called by crew:tools' own agent, from within `work`.
        await owner.declare_function(
            tools, "slow", input_schema=TEXT_SCHEMA, allowed_callers=["agent:tools/*"]
        )
    async with FunctionsClient(functions.address, identity=identity("user:alice")) as alice:
        receipt = await alice.call(tools, "work", {"text": "x"})
        asking = await alice.wait(receipt.call_id, until=["waiting_for_input"], timeout=WAIT * 2)
        assert asking.question == "ship it?"
        await asyncio.sleep(HUMAN_SECONDS)  # the person reads, thinks, answers
        await alice.reply(receipt.call_id, "yes")
        ended = await alice.wait(receipt.call_id, timeout=WAIT)
    assert state_name(ended.status) == "completed", ended.error

    called: Outcome = seen["called"]
    assert not isinstance(called, BaseException), called
    assert not called.result.is_error, called.result
    assert called.result.structured_content["outcome"]["status"] == "completed"
    assert called.seconds >= SLOW_SECONDS - 0.5 and len(called.notes) >= 3, called
    assert_steady(called, "waiting for the call to end", total=25)
    assert isinstance(seen["cut"], TimeoutError), seen["cut"]

    asked: Outcome = seen["asked"]
    assert asked.result.structured_content == {"answered": True, "reply": "yes"}, asked.result
    assert asked.seconds >= HUMAN_SECONDS and len(asked.notes) >= HUMAN_SECONDS // 2 - 1, asked
    assert_steady(asked, "waiting for a human's answer", total=ASK_SECONDS)
