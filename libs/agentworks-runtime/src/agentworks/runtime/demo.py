"""The demo crew used by `make run`: it serves `crew:demo` and replies explicitly (R2, C6).

Each message delivery gets `demo heard: <text>`; every other delivery (wake-up, schedule
prompt, webhook event, function completion notice) gets a short acknowledgement. The
handler returns nothing: replies go only through `send_message`.
"""

from __future__ import annotations

from agentworks.messaging.v1 import messaging_pb2 as m
from agentworks.runtime.turns import TurnContext, delivery_kind

PRINCIPAL = "agent:demo/demo-bot"
TARGETS = ("crew:demo",)
PREVIEW_CHARS = 200


def _preview(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


def reply_for(delivery: m.Delivery) -> str:
    """The demo's reply to one delivery."""
    kind = delivery_kind(delivery)
    if delivery.kind == m.DELIVERY_KIND_MESSAGE:
        return f"demo heard: {delivery.message.text}"
    if delivery.kind == m.DELIVERY_KIND_WEBHOOK:
        return f"demo got a webhook event ({len(delivery.payload)} bytes)"
    note = f": {_preview(delivery.text)}" if delivery.text else ""
    return f"demo got a {kind.replace('_', ' ')}{note}"


async def handle_turn(ctx: TurnContext) -> None:
    """Reply to every delivery of the turn, in order, at the trusted reply address."""
    for delivery in ctx.deliveries:
        await ctx.send_message(reply_for(delivery))
