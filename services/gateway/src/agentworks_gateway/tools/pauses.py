"""The `pauses` tool (S3), operator, HTTP API only: pause or resume timers globally or
for a product, and show the pauses in force."""

from __future__ import annotations

from typing import Any

from agentworks.core.identity import Identity
from agentworks.core.limits import MAX_REASON_CHARS
from agentworks.scheduler.v1 import scheduler_pb2 as s
from agentworks_gateway.tools.toolkit import Args, Tool, action_rule, timestamp

# ------------------------------------------------------------------------ translation


def pause_state_dict(state: s.PauseState) -> dict[str, Any]:
    """The pauses in force (S3): global, and per product."""
    return {
        "global_paused": state.global_paused,
        "paused_products": list(state.paused_products),
        "pauses": [
            {
                "product": entry.product or None,
                "reason": entry.reason,
                "paused_by": entry.paused_by,
                "paused_at": timestamp(entry.paused_at),
            }
            for entry in state.pauses
        ],
    }


# ------------------------------------------------------------------------- handlers


def _not_paused_note(product: str, state: s.PauseState) -> str:
    """What a resume that lifted nothing says: the scope was not paused, and what is."""
    scope = f"{product} was not paused" if product else "there was no global pause"
    in_force = [entry.product or "(global)" for entry in state.pauses]
    if not in_force:
        return f"{scope}; no pauses are in force: timers fire"
    return (
        f"{scope}; pauses in force: {', '.join(in_force)} — resume names a scope exactly "
        "as it was paused"
    )


async def pauses(gateway: Any, identity: Identity, args: Args) -> dict[str, Any]:
    """`pauses`: pause or resume timers globally or for a product; status (S3).

    resume adds `resumed` (whether a pause was lifted) and, when none was, a `note`
    saying so and naming the pauses in force.
    """
    client = gateway.scheduler(identity)
    action = args["action"]
    if action == "pause":
        state = await client.pause(args.get("product", ""), reason=args.get("reason", ""))
    elif action == "resume":
        product = args.get("product", "")
        state = await client.resume(product)
        note = None if state.resumed else _not_paused_note(product, state)
        return {**pause_state_dict(state), "resumed": state.resumed, "note": note}
    else:
        state = await client.pause_state()
    return pause_state_dict(state)


# -------------------------------------------------------------------------- schemas

PAUSES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {
            "type": "string",
            "enum": ["pause", "resume", "status"],
            "description": "pause (operator): hold timers, globally or for a product. resume "
            "(operator): lift that pause; held timers fire on the next tick. status: the "
            "pauses in force.",
        },
        "product": {
            "type": "string",
            "minLength": 1,
            "description": "pause, resume: crew:<name>, workflow:<id>, crew:* or workflow:*; "
            "omit for the global pause.",
        },
        "reason": {
            "type": "string",
            "maxLength": MAX_REASON_CHARS,
            "description": "pause: why, shown in status.",
        },
    },
    "required": ["action"],
    "additionalProperties": False,
}

PAUSES_ACTIONS = (
    action_rule("pause", ("product", "reason")),
    action_rule("resume", ("product",)),
    action_rule("status", ()),
)

PAUSE_TOOL = Tool(
    "pauses",
    "Pause or resume timers globally or for a product, or show the pauses (operator "
    "tool, HTTP API only).",
    PAUSES_SCHEMA,
    pauses,
    mcp=False,
    actions=PAUSES_ACTIONS,
)
