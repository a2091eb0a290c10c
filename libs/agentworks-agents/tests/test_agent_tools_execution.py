"""An execution handler that drives the agent tools, against a real functions service and
a real ExecutionWorker (L1; through it F7, F9, F11)."""

# The fixtures imported by name below are the tests' parameters.
# ruff: noqa: F811

from __future__ import annotations

import asyncio
from typing import Any

from agentworks.agents.agent_tools import ToolError, execution_toolbox
from agentworks.client import FunctionsClient
from agentworks.client.functions import state_name
from agentworks.core import errors
from agentworks.runtime import ExecutionContext
from tests.fixtures.agent_tools import (  # noqa: F401 - fixtures, used by name
    WAIT,
    checked,
    functions,
    tools_crew,
)


async def test_an_execution_handler_reports_asks_and_is_refused_through_the_toolbox_l1(
    functions, tools_crew, identity
):
    """L1 (F7, F9, F11): the execution's handler reports progress, posts a message,
    records an event and asks a human through its toolbox; the caller sees each in the
    call's status and answers the question; an unanswered question times out into
    answered=false; a bad event kind and a step outside a workflow are ToolErrors that
    store nothing; the function tools say whether this SDK offers them."""
    seen: dict[str, Any] = {}

    async def work(ctx: ExecutionContext) -> str:
        box = checked(execution_toolbox(ctx))
        assert await box.call("report_progress", {"text": "half way"}) == {"ok": True}
        await box.call("post_message", {"text": "thinking"})
        await box.call("record_event", {"kind": "note", "text": "chose plan B"})
        for name, arguments in (
            ("record_event", {"kind": "Bad Kind", "text": "x"}),
            ("record_step", {"step": "fetch", "status": "started"}),
            ("post_message", {"text": "x", "role": "The Boss"}),
        ):
            try:
                await box.call(name, arguments)
            except ToolError as exc:
                seen[name] = exc
        answer = await box.call("ask_human", {"question": "go ahead?", "timeout_seconds": WAIT})
        seen["answer"] = answer
        seen["unanswered"] = await box.call(
            "ask_human", {"question": "anything else?", "timeout_seconds": 1}
        )
        try:
            seen["functions"] = await box.call("list_functions", {"target": "crew:tools"})
        except ToolError as exc:
            seen["functions"] = exc
        return f"went ahead: {answer['reply']}"

    tools = await tools_crew({"work": work})
    async with FunctionsClient(functions.address, identity=identity("user:alice")) as alice:
        receipt = await alice.call(tools, "work", {"text": "x"})
        asking = await alice.wait(receipt.call_id, until=["waiting_for_input"], timeout=WAIT)
        assert asking.question == "go ahead?"
        assert asking.progress == "half way"
        await alice.reply(receipt.call_id, "yes")
        ended = await alice.wait(receipt.call_id, timeout=WAIT)
        full = await asyncio.wait_for(alice.get_status(receipt.call_id), WAIT)

    assert state_name(ended.status) == "completed", ended.error
    assert ended.answer == "went ahead: yes"
    assert seen["answer"] == {"answered": True, "reply": "yes"}
    assert seen["unanswered"]["answered"] is False
    assert "withdrawn" in seen["unanswered"]["note"]
    assert [m.text for m in full.messages] == ["thinking"]
    assert [(e.kind, e.text) for e in full.events] == [("note", "chose plan B")]
    assert not full.HasField("run") or not full.run.steps
    assert "kind must be one of 'note'" in seen["record_event"].message
    assert "got 'Bad Kind'" in seen["record_event"].message
    assert seen["record_step"].code == "INVALID_ARGUMENT"
    assert "workflow" in seen["record_step"].message
    assert "role must be one of 'assistant'" in seen["post_message"].message
    # The list is what agent:tools/bot may call (F2): `work` names crew demo's agents
    # and alice as its callers, not it (the function tools' own test is L8's).
    assert seen["functions"] == {"functions": []}


async def test_ask_human_offers_choices_and_the_reply_is_one_of_them_F11_L1_L10(
    functions, tools_crew, identity
):
    """F11 L1 L10: ask_human with choices (as a strict model sends it, timeout null) shows
    them in the call's pending question; a reply outside them is refused and the
    question stays; the chosen one comes back as the tool's reply."""
    seen: dict[str, Any] = {}

    async def work(ctx: ExecutionContext) -> str:
        box = checked(execution_toolbox(ctx))
        seen["answer"] = await box.call(
            "ask_human",
            {"question": "Which format?", "timeout_seconds": None, "choices": ["csv", "json"]},
        )
        return seen["answer"]["reply"]

    tools = await tools_crew({"work": work})
    async with FunctionsClient(functions.address, identity=identity("user:alice")) as alice:
        receipt = await alice.call(tools, "work", {"text": "x"})
        asking = await alice.wait(receipt.call_id, until=["waiting_for_input"], timeout=WAIT)
        assert list(asking.pending_question.choices) == ["csv", "json"]
        try:
            await alice.reply(receipt.call_id, "xml")
        except errors.InvalidArgument as exc:
            assert exc.reason == errors.Reason.NOT_A_CHOICE
        else:
            raise AssertionError("a reply outside the choices was taken")
        await alice.reply(receipt.call_id, "json")
        ended = await alice.wait(receipt.call_id, timeout=WAIT)
    assert (state_name(ended.status), ended.answer) == ("completed", "json")
    assert seen["answer"] == {"answered": True, "reply": "json"}
