"""What the agent's MCP server says about itself (L11): its instructions and resources.

An MCP host shows a server's `instructions` to its model and lets it read the server's
resources. The endpoint of a turn offers

- `agentworks://turn/input`: the turn and its deliveries as JSON, the same document as
  the file `AGENTWORKS_TURN_FILE` names (`turn_input`);
- `agentworks://turn/transcript`: the conversation's transcript, its first page, as the
  `read_transcript` tool gives it (read with the turn's capability);

and that of an execution `agentworks://execution/input`: the call, its inputs and
output schema (`execution_input`). The instructions say what the item is, where its
input is and how to answer (`turn_instructions`, `execution_instructions`).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from agentworks.agents.agent_tools import Toolbox, views

TURN_INPUT = "agentworks://turn/input"
TURN_TRANSCRIPT = "agentworks://turn/transcript"
EXECUTION_INPUT = "agentworks://execution/input"


@dataclass(frozen=True)
class AgentResource:
    """One resource of the endpoint: `read()` gives its text when it is read."""

    uri: str
    name: str
    title: str
    description: str
    read: Callable[[], Awaitable[str]]
    mime_type: str = "application/json"


def turn_input(ctx: Any) -> dict[str, Any]:
    """The turn and its deliveries as JSON (AGENTWORKS_TURN_FILE and TURN_INPUT)."""
    deliveries = []
    for delivery in ctx.deliveries:
        shown = views.delivery(delivery)
        if delivery.HasField("message"):
            shown["message"] = views.message(delivery.message)
        deliveries.append(shown)
    return {
        "turn_id": ctx.turn_id,
        "conversation_id": ctx.conversation_id,
        "target": ctx.target,
        "reply_inbox_id": ctx.reply_inbox_id,
        "deliveries": deliveries,
    }


def execution_input(ctx: Any) -> dict[str, Any]:
    """The call an execution serves, as JSON (EXECUTION_INPUT): who called which
    function with what, where its result goes, and the correction asked for, if any."""
    shown: dict[str, Any] = {
        "call_id": ctx.call_id,
        "target": ctx.target,
        "function": ctx.function,
        "caller": ctx.caller,
        "inputs": ctx.inputs,
        "output_schema": ctx.output_schema,
        "result_file": str(ctx.result_file),
        "starts_work": ctx.starts_work,
    }
    if ctx.correction_prompt:
        shown["correction_prompt"] = ctx.correction_prompt
    return shown


def _document(make: Callable[[], dict[str, Any]]) -> Callable[[], Awaitable[str]]:
    async def read() -> str:
        return json.dumps(make(), ensure_ascii=False)

    return read


def turn_resources(ctx: Any, toolbox: Toolbox) -> list[AgentResource]:
    """A turn's resources; the transcript is read through `toolbox` (its capability)."""

    async def transcript() -> str:
        return json.dumps(await toolbox.call("read_transcript", {}), ensure_ascii=False)

    return [
        AgentResource(
            TURN_INPUT,
            "turn_input",
            "This turn's input",
            "The turn and what arrived for it: turn_id, conversation_id, target, "
            "reply_inbox_id and its deliveries (a message's with the message).",
            _document(lambda: turn_input(ctx)),
        ),
        AgentResource(
            TURN_TRANSCRIPT,
            "turn_transcript",
            "The conversation so far",
            "The first page of the conversation's transcript, oldest first, as the "
            "read_transcript tool gives it (that tool pages on).",
            transcript,
        ),
    ]


def execution_resources(ctx: Any) -> list[AgentResource]:
    """An execution's resources."""
    return [
        AgentResource(
            EXECUTION_INPUT,
            "execution_input",
            "This call's input",
            "The function call this execution serves: call_id, target, function, caller, "
            "inputs, output_schema (null: none), result_file (where the result JSON goes "
            "when there is a schema), starts_work and, in the correction turn, "
            "correction_prompt.",
            _document(lambda: execution_input(ctx)),
        )
    ]


def turn_instructions(ctx: Any) -> str:
    """The instructions of a turn's endpoint."""
    return (
        f"You are serving one turn of conversation {ctx.conversation_id} for {ctx.target} "
        f"(turn {ctx.turn_id}). What arrived is the resource {TURN_INPUT}; the "
        f"conversation so far is {TURN_TRANSCRIPT} (read_transcript pages on). Nothing you "
        "print reaches anyone: reply with send_message; answer another crew's reply with "
        "continue_conversation and the delivery's inbox_id; call functions with "
        "call_function and read them with get_function_call (their ends come back as "
        "later turns); ask to be woken with request_wake_up. The tools act for this turn "
        "only and stop working when it ends."
    )


def execution_instructions(ctx: Any) -> str:
    """The instructions of an execution's endpoint."""
    result = (
        f"Write the result as JSON to {ctx.result_file} (it must match the output schema "
        f"in {EXECUTION_INPUT}); "
        if ctx.output_schema is not None
        else "Your final answer is what you print last; "
    )
    return (
        f"You are running function {ctx.function} of {ctx.target} for {ctx.caller} "
        f"(call {ctx.call_id}). The call and its inputs are the resource {EXECUTION_INPUT}. "
        + result
        + "report_progress and post_message keep the caller informed; ask_human asks the "
        "caller a question and waits for the answer. The tools act for this call only "
        "and stop working when it ends."
    )
