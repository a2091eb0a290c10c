"""Workflow agent steps call functions from `ExecutionContext` (L8, F14), against a real
functions service with ExecutionWorkers on both sides.

A workflow function's execution (the workflow's runtime, `workflow:wf-release`) lists,
calls, gets and replies to crew:tools' functions; each call names its source workflow
and its run, step and group, and a retried step gets the call it made before.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentworks.agents.agent_tools import ToolError, execution_toolbox
from agentworks.client import FunctionsClient
from agentworks.client.functions import state_name
from agentworks.core import errors
from agentworks.runtime import ExecutionContext, ExecutionWorker

WF = "workflow:wf-release"
TOOLS = "crew:tools"
WAIT = 20
TEXT = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
    "additionalProperties": False,
}


@contextlib.asynccontextmanager
async def running(worker: ExecutionWorker) -> AsyncIterator[ExecutionWorker]:
    task = asyncio.create_task(worker.run())
    try:
        yield worker
    finally:
        worker.stop()
        await asyncio.wait_for(task, WAIT)


@pytest.fixture
async def targets(functions, identity):
    """crew:tools with `shout` and `confirm` (callable by workflows), and workflow
    wf-release with its function `release` (group `ship`), callable by users."""
    async with (
        FunctionsClient(functions.address, identity=identity("user:ops", {"operator"})) as ops,
        FunctionsClient(functions.address, identity=identity("user:owner")) as owner,
    ):
        for target in (TOOLS, WF):
            await ops.register_target(target, owner="user:owner")
        for name in ("shout", "confirm"):
            await owner.declare_function(
                TOOLS, name, input_schema=TEXT, allowed_callers=["workflow:*"]
            )
        await owner.declare_function(
            WF,
            "release",
            input_schema=TEXT,
            allowed_callers=["user:*"],
            workflow={"route": "ship/release", "allowed_groups": ["ship"], "variables": []},
        )


async def test_a_workflow_step_lists_calls_gets_and_replies_and_a_retried_step_gets_the_same_call_L8_F14(  # noqa: E501
    functions, targets, identity, tmp_path
):
    """L8/F14/F6/F11: a workflow step lists crew:tools' functions, calls `shout` (source:
    this run, step `announce`, group `ship`); the step fails and is retried (same run,
    step and group): the retry gets the existing call (`created` false), never a second
    one, while the same call from another group is a new call. The step then calls
    `confirm`, answers its question with reply_function_call and polls both with
    get_function_call until they end."""
    seen: dict[str, Any] = {}

    async def shout(ctx: ExecutionContext) -> str:
        return ctx.inputs["text"].upper() + "!"

    async def confirm(ctx: ExecutionContext) -> str:
        return f"{ctx.inputs['text']}: {await ctx.ask('go ahead?')}"

    async def until_ended(ctx: ExecutionContext, call_id: str):
        for _ in range(WAIT):
            status = await ctx.get_function_call(call_id, wait_seconds=1)
            if state_name(status.status) == "waiting_for_input":
                seen["question"] = status.question
                await ctx.reply_function_call(call_id, "yes")
            elif state_name(status.status) not in ("running",):
                return status
        raise AssertionError(f"call {call_id} did not end")

    async def release(ctx: ExecutionContext) -> str:
        seen["listed"] = sorted(fn.name for fn in await ctx.list_functions(TOOLS))
        receipts = []
        for attempt in (1, 2):  # the step fails once and is retried
            await ctx.step("announce", "started", group="ship", detail=f"attempt {attempt}")
            receipts.append(
                await ctx.call_function(
                    TOOLS, "shout", {"text": ctx.inputs["text"]}, step="announce", group="ship"
                )
            )
        seen["receipts"] = receipts
        seen["other_group"] = await ctx.call_function(
            TOOLS, "shout", {"text": ctx.inputs["text"]}, step="announce", group="other"
        )
        with pytest.raises(errors.InvalidArgument, match="step is required"):
            await ctx.call_function(TOOLS, "shout", {"text": "x"})
        shouted = await until_ended(ctx, receipts[0].call_id)
        # The same through the agent tool a model would use (L1): retried, the same call.
        box = execution_toolbox(ctx)
        arguments = {"target": TOOLS, "function": "confirm", "inputs": {"text": "ship"}}
        asked = await box.call("call_function", {**arguments, "step": "confirm"})
        again = await box.call("call_function", {**arguments, "step": "confirm"})
        seen["tool_calls"] = (asked, again)
        with pytest.raises(ToolError, match="step is required") as refused:
            await box.call("call_function", arguments)
        assert refused.value.code == "INVALID_ARGUMENT"
        confirmed = await until_ended(ctx, asked["call_id"])
        seen["shouted"], seen["confirmed"] = shouted, confirmed
        await ctx.step("announce", "completed", group="ship")
        return f"{shouted.answer} / {confirmed.answer}"

    tools = ExecutionWorker(
        functions.address,
        identity("agent:tools/bot"),
        [TOOLS],
        {"shout": shout, "confirm": confirm},
        root=tmp_path / "tools",
        wait_seconds=2,
    )
    workflow = ExecutionWorker(
        functions.address,
        identity(WF),
        [WF],
        {"release": release},
        root=tmp_path / "wf",
        wait_seconds=2,
    )
    async with (
        running(tools),
        running(workflow),
        FunctionsClient(functions.address, identity=identity("user:alice")) as alice,
    ):
        receipt = await alice.call(WF, "release", {"text": "v2 is out"})
        ended = await alice.wait(receipt.call_id, timeout=WAIT * 2)

    assert state_name(ended.status) == "completed", ended.error
    assert ended.answer == "V2 IS OUT! / ship: yes"
    assert seen["listed"] == ["confirm", "shout"]
    first, retried = seen["receipts"]
    assert first.created and not retried.created and retried.call_id == first.call_id
    assert seen["other_group"].created and seen["other_group"].call_id != first.call_id
    assert seen["question"] == "go ahead?"
    asked, again = seen["tool_calls"]
    assert asked["created"] and not again["created"] and again["call_id"] == asked["call_id"]
    shouted = seen["shouted"]
    assert shouted.caller == WF  # the call identifies its source workflow
    assert (shouted.source.run_id, shouted.source.step, shouted.source.group) == (
        ended.run.run_id,
        "announce",
        "ship",
    )
    assert ended.run.run_id
