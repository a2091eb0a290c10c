"""The turn tools for external A2A agents on the operator's allow-list (X4)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from agentworks.agents.agent_tools.schemas import nullable, obj, text
from agentworks.agents.agent_tools.toolbox import AgentTool, ToolError, ToolHandler, unavailable
from agentworks.core import limits

if TYPE_CHECKING:
    from agentworks.runtime.turn_context import TurnContext

AGENT = text("The external agent's name on the operator's allow-list.", 200)
A2A_RECEIPT = {
    "type": "object",
    "properties": {
        "agent": {"type": "string"},
        "context_id": {"type": "string"},
        "task_id": {"type": "string"},
        "state": {"type": "string"},
    },
    "required": ["agent", "context_id", "task_id", "state"],
}

A2A_SEND = AgentTool(
    name="a2a_send",
    title="Message an external A2A agent",
    description=(
        "Send a message to an external A2A agent the operator allowed (by its name), "
        "starting a conversation, or continuing one with context_id from an earlier "
        "receipt or conversation_reply. Its replies come back as later conversation_reply "
        "turns of this conversation; nothing waits for them. Refused when this crew has "
        "agent messaging off. Returns a receipt, not a reply."
    ),
    input_schema=obj(
        {
            "agent": AGENT,
            "text": text("The message text.", limits.MAX_TEXT_BYTES),
            "context_id": nullable(text("The conversation to continue (context_id).", 200)),
        },
        ("agent", "text", "context_id"),
    ),
    output_schema=A2A_RECEIPT,
    read_only=False,
    destructive=False,
    idempotent=False,
)

A2A_CALL = AgentTool(
    name="a2a_call",
    title="Call an external A2A agent's skill",
    description=(
        "Call a skill of an external A2A agent the operator allowed, with its inputs as "
        "a JSON object. The end comes back as a later function_completed turn whose "
        "attributes hold the status and the result. Returns a receipt with the task_id."
    ),
    input_schema=obj(
        {
            "agent": AGENT,
            "skill": text("The skill's id on the agent's card.", 200),
            "inputs": text("The skill's inputs, a JSON object as JSON text.", 1_000_000),
        },
        ("agent", "skill", "inputs"),
    ),
    output_schema=A2A_RECEIPT,
    read_only=False,
    destructive=False,
    idempotent=False,
    json_text=("inputs",),
)


def a2a_tools(ctx: TurnContext) -> list[tuple[AgentTool, ToolHandler]]:
    """a2a_send and a2a_call, acting through the turn's context (its capability)."""

    def method() -> Any:
        found = getattr(ctx, "a2a", None)
        if found is None:
            raise unavailable("a2a_send", "TurnContext.a2a")
        return found

    async def a2a_send(args: dict[str, Any]) -> dict[str, Any]:
        body = {"agent": args["agent"], "text": args["text"]}
        body["context_id"] = args.get("context_id") or ""
        return dict(await method()("send", body))

    async def a2a_call(args: dict[str, Any]) -> dict[str, Any]:
        try:
            inputs = json.loads(args["inputs"])
        except ValueError as exc:
            raise ToolError(f"inputs is not JSON text ({exc})") from None
        if not isinstance(inputs, dict):
            raise ToolError("inputs must be a JSON object")
        body = {"agent": args["agent"], "skill": args["skill"], "inputs": inputs}
        return dict(await method()("call", body))

    return [(A2A_SEND, a2a_send), (A2A_CALL, a2a_call)]
