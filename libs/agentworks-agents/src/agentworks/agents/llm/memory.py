"""A conversation's memory, built from its transcript (L4).

The runtime keeps nothing between turns: each turn reads the conversation's transcript
(GetTranscript, C12) and renders it as chat messages, so a restarted runtime, or another
replica, carries on where the last one stopped. Messages into the crew or workflow (and
another target's replies delivered here, L5) become `user` messages naming their sender,
the agent's own sent messages `assistant` messages, and wake-ups, schedule prompts,
webhook events, completion notices and another target's replies `user` messages saying
what they are, each with its text and the message it carries (L9). The
deliveries of the turn being served come last, from the turn itself, so the model sees
what is new.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Sequence
from typing import Any

from agentworks import proto_limits as rules
from agentworks.client.messaging import attributes_json
from agentworks.messaging.v1 import messaging_pb2 as m
from agentworks.runtime.turn_context import TurnContext, delivery_kind

# GetTranscript's largest page.
PAGE = rules.MESSAGING_GET_TRANSCRIPT_REQUEST_LIMIT_LTE
# The turn tool that answers another target's reply (L9).
CONTINUE_TOOL = "continue_conversation"
# A webhook payload shown to the model is cut here.
PAYLOAD_CHARS = 4000

Chat = list[dict[str, Any]]


def render_message(message: m.Message) -> dict[str, Any]:
    """One message of the conversation as a chat message: the agent's own as `assistant`."""
    if message.direction == "to_inbox":
        return {"role": "assistant", "content": message.text}
    return _incoming(message)


def _incoming(message: m.Message) -> dict[str, Any]:
    return {"role": "user", "content": f"[message from {message.sender}]\n{message.text}"}


def render_delivery(delivery: m.Delivery) -> dict[str, Any]:
    """One delivery as a `user` chat message saying what it is, with its text and the
    message it carries (L9). A delivered message is always someone else's, even one sent
    to an inbox (another target's reply, L5)."""
    if delivery.kind == m.DELIVERY_KIND_MESSAGE:
        return _incoming(delivery.message)
    kind = delivery_kind(delivery)
    lines = [f"[{kind}]"]
    if delivery.text:
        lines.append(delivery.text)
    if delivery.HasField("message") and delivery.message.text:
        lines.append(_incoming(delivery.message)["content"])
    attributes = attributes_json(delivery)
    if kind == "conversation_reply" and CONTINUE_TOOL not in delivery.text:
        inbox = attributes.get("inbox_id", "")
        lines.append(f"(answer them with the {CONTINUE_TOOL} tool, inbox_id {inbox})")
    if attributes:
        lines.append("attributes: " + json.dumps(attributes, sort_keys=True))
    if delivery.payload:
        body = delivery.payload.decode("utf-8", errors="replace")
        if len(body) > PAYLOAD_CHARS:
            body = body[:PAYLOAD_CHARS] + f"… ({len(delivery.payload)} bytes in all)"
        lines.append("payload: " + body)
    return {"role": "user", "content": "\n".join(lines)}


def render_transcript(entries: Sequence[m.TranscriptEntry], *, exclude_turn: str = "") -> Chat:
    """Transcript entries as chat messages, oldest first.

    A message stored in this conversation is shown once, as itself (not again as its
    delivery); a delivered message stored elsewhere (another target's reply) as its
    delivery. The deliveries of `exclude_turn`, and their messages, are left out, for
    the caller to add as what is new."""
    stored = set()
    current = set()
    for entry in entries:
        if entry.WhichOneof("entry") == "message":
            stored.add(entry.message.message_id)
        elif exclude_turn and entry.delivery.turn_id == exclude_turn:
            current.add(entry.delivery.message.message_id)
    chat: Chat = []
    for entry in entries:
        if entry.WhichOneof("entry") == "message":
            if entry.message.message_id not in current:
                chat.append(render_message(entry.message))
            continue
        delivery = entry.delivery
        if exclude_turn and delivery.turn_id == exclude_turn:
            continue
        if delivery.kind == m.DELIVERY_KIND_MESSAGE and delivery.message.message_id in stored:
            continue
        chat.append(render_delivery(delivery))
    return chat


async def read_transcript(ctx: TurnContext, keep: int) -> list[m.TranscriptEntry]:
    """The conversation's transcript, the newest `keep` entries: read from its end in one
    request when they fit a page (the default, 200), else page by page from the start."""
    if keep <= PAGE:
        return list((await ctx.transcript(limit=keep, newest=True)).entries)
    entries: collections.deque[m.TranscriptEntry] = collections.deque(maxlen=keep)
    after = ""
    while True:
        page = await ctx.transcript(after=after, limit=PAGE)
        entries.extend(page.entries)
        if len(page.entries) < PAGE or not page.next_cursor or page.next_cursor == after:
            return list(entries)
        after = page.next_cursor


async def conversation_memory(ctx: TurnContext, keep: int) -> Chat:
    """The chat for a turn: the transcript before it, then this turn's deliveries."""
    history = render_transcript(await read_transcript(ctx, keep), exclude_turn=ctx.turn_id)
    return history + [render_delivery(d) for d in ctx.deliveries]
