"""The demo crew used by `make run`: it serves `crew:demo` and replies explicitly (R2, C6).

- A message gets `demo heard: <text>`.
- A message asking to be reminded ("remind me ...", optionally "in 30 seconds" /
  "in 2 minutes") gets a reply saying when the demo will check back, and the demo asks
  the scheduler for a durable wake-up of this conversation (S1). When the wake-up is
  delivered (S2, a later turn), the demo sends the follow-up `demo checking back: ...`.
- Every other delivery (schedule prompt, webhook event, function completion notice)
  gets a short acknowledgement.

The handler returns nothing: replies go only through `send_message` (C6).
"""

from __future__ import annotations

import re

from agentworks.core import errors
from agentworks.messaging.v1 import messaging_pb2 as m
from agentworks.runtime.turns import TurnContext, delivery_kind

PRINCIPAL = "agent:demo/demo-bot"
TARGETS = ("crew:demo",)
PREVIEW_CHARS = 200
# "remind me" without a delay: check back after this long.
DEFAULT_REMINDER_SECONDS = 30
MAX_REMINDER_SECONDS = 24 * 3600
REMINDER_NOTE_PREFIX = "reminder: "

_REMIND = re.compile(r"\bremind me\b", re.IGNORECASE)
_DELAY = re.compile(
    r"\bin\s+(\d{1,6})\s*(s|secs?|seconds?|m|mins?|minutes?|h|hours?)\b", re.IGNORECASE
)
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600}


def _preview(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


def reminder_delay(text: str) -> int | None:
    """Seconds until the reminder a message asks for, or None if it asks for none.

    `remind me in 10 seconds to stretch` -> 10; `remind me later` -> the default.
    """
    if not _REMIND.search(text):
        return None
    match = _DELAY.search(text)
    if match is None:
        return DEFAULT_REMINDER_SECONDS
    seconds = int(match.group(1)) * _UNIT_SECONDS[match.group(2)[0].lower()]
    return max(1, min(seconds, MAX_REMINDER_SECONDS))


def reply_for(delivery: m.Delivery) -> str:
    """The demo's reply to one delivery (reminder requests are handled in handle_turn)."""
    kind = delivery_kind(delivery)
    if delivery.kind == m.DELIVERY_KIND_MESSAGE:
        return f"demo heard: {delivery.message.text}"
    if delivery.kind == m.DELIVERY_KIND_WAKE_UP:
        # The timer prompts another turn; it does not resend the question (S2).
        note = delivery.text.removeprefix(REMINDER_NOTE_PREFIX)
        return f"demo checking back: {_preview(note)}" if note else "demo checking back"
    if delivery.kind == m.DELIVERY_KIND_WEBHOOK:
        return f"demo got a webhook event ({len(delivery.payload)} bytes)"
    note = f": {_preview(delivery.text)}" if delivery.text else ""
    return f"demo got a {kind.replace('_', ' ')}{note}"


async def _remind(ctx: TurnContext, text: str, seconds: int) -> None:
    try:
        await ctx.wake_me(after_seconds=seconds, note=REMINDER_NOTE_PREFIX + _preview(text))
    except errors.AgentWorksError as exc:
        ctx.log.warning("reminder.refused", code=exc.code.name, error=exc.message)
        await ctx.send_message(f"demo heard: {text} (but cannot set a reminder: {exc.message})")
        return
    await ctx.send_message(f"demo heard: {text}. I will check back in {seconds} s.")


async def handle_turn(ctx: TurnContext) -> None:
    """Reply to every delivery of the turn, in order, at the trusted reply address."""
    for delivery in ctx.deliveries:
        if delivery.kind == m.DELIVERY_KIND_MESSAGE:
            seconds = reminder_delay(delivery.message.text)
            if seconds is not None:
                await _remind(ctx, delivery.message.text, seconds)
                continue
        await ctx.send_message(reply_for(delivery))
