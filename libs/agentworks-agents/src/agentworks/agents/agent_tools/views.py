"""Service replies as the compact JSON the agent tools return (L1, L3).

Compact: fields that are empty, unset or false by default are left out, so a model reads
what is there; ids, statuses and times keep the contract's names.
"""

from __future__ import annotations

import base64
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from agentworks.client import target_str
from agentworks.client.functions import call_result, state_name
from agentworks.client.messaging import attributes_json, parts_json
from agentworks.core.jsontext import loads
from agentworks.functions.v1 import functions_pb2 as f
from agentworks.messaging.v1 import messaging_pb2 as m
from agentworks.scheduler.v1 import scheduler_pb2 as s


def timestamp(value: Timestamp) -> str | None:
    """RFC 3339 in UTC, or None when unset."""
    if not value.seconds and not value.nanos:
        return None
    return value.ToJsonString()


def compact(values: dict[str, Any]) -> dict[str, Any]:
    """`values` without None, "" and empty lists or objects (False and 0 stay)."""
    return {k: v for k, v in values.items() if v is not None and v != "" and v != [] and v != {}}


def _enum(name: str, prefix: str) -> str:
    return name.removeprefix(prefix).lower()


def send_receipt(receipt: m.SendReceipt) -> dict[str, Any]:
    """A send's delivery receipt (C2): never an answer."""
    return {
        "accepted": receipt.accepted,
        "message_id": receipt.message_id,
        "conversation_id": receipt.conversation_id,
        "inbox_id": receipt.inbox_id,
    }


def wake_up(w: s.WakeUp) -> dict[str, Any]:
    """A wake-up (S1): its id, when it is due, its note and status."""
    return compact(
        {
            "wake_up_id": w.wake_up_id,
            "status": _enum(s.WakeUpStatus.Name(w.status), "WAKE_UP_STATUS_"),
            "due_at": timestamp(w.due_at),
            "note": w.note,
            "created_at": timestamp(w.created_at),
            "fired_at": timestamp(w.fired_at),
            "error": w.error,
        }
    )


def message(msg: m.Message) -> dict[str, Any]:
    return compact(
        {
            "type": "message",
            "message_id": msg.message_id,
            "sender": msg.sender,
            "direction": msg.direction,
            "text": msg.text,
            "parts": parts_json(msg.parts),
            "created_at": timestamp(msg.created_at),
        }
    )


def delivery(d: m.Delivery) -> dict[str, Any]:
    """A delivery record: what came into the conversation's turn queue, and how it went.

    A delivery that carries a message of another conversation (another target's reply,
    `conversation_reply`, L5) shows it whole, as `message`: the transcript has no entry
    of its own for it (L9). A `message` delivery's message is its own entry."""
    payload: dict[str, Any] = {}
    if d.payload:
        try:
            payload["payload"] = d.payload.decode()
        except UnicodeDecodeError:
            payload["payload_base64"] = base64.b64encode(d.payload).decode()
    kind = m.DeliveryKind.Name(d.kind)
    return compact(
        {
            "type": "delivery",
            "delivery_id": d.delivery_id,
            "kind": _enum(kind, "DELIVERY_KIND_"),
            "status": _enum(m.DeliveryStatus.Name(d.status), "DELIVERY_STATUS_"),
            "message_id": d.message.message_id if d.HasField("message") else "",
            "text": d.text,
            "message": message(d.message)
            if d.HasField("message") and d.kind != m.DELIVERY_KIND_MESSAGE
            else None,
            "attributes": attributes_json(d),
            **payload,
            "created_at": timestamp(d.created_at),
        }
    )


def transcript(page: m.GetTranscriptResponse) -> dict[str, Any]:
    """A transcript page (C12): messages and delivery records, oldest first."""
    entries = [
        message(e.message) if e.WhichOneof("entry") == "message" else delivery(e.delivery)
        for e in page.entries
    ]
    return {"entries": entries, "next_cursor": page.next_cursor}


def function(fn: f.Function) -> dict[str, Any]:
    """A declared function as a model needs it to call it (F1, F2)."""
    return compact(
        {
            "target": target_str(fn.target),
            "name": fn.name,
            "description": fn.description,
            "input_schema": loads(fn.input_schema_json, "input_schema", {}),
            "output_schema": loads(fn.output_schema_json, "output_schema", None),
            "starts_work": fn.starts_work or None,
        }
    )


def call_receipt(receipt: f.CallReceipt) -> dict[str, Any]:
    """A call receipt (F4, F6): keep call_id; `created` false means an existing call."""
    out = {
        "call_id": receipt.call_id,
        "status": state_name(receipt.status),
        "created": receipt.created,
        "output_folder": receipt.output_folder,
    }
    if receipt.HasField("outcome"):
        out["outcome"] = call_status(receipt.outcome)
    return out


def call_status(st: f.CallStatus) -> dict[str, Any]:
    """A call's status (F7): progress, question, messages, answer/result, error, files."""
    return compact(
        {
            "call_id": st.call_id,
            "target": target_str(st.target),
            "function": st.function,
            "status": state_name(st.status),
            "progress": st.progress,
            "question": st.question,
            "messages": [{"index": x.index, "role": x.role, "text": x.text} for x in st.messages],
            "next_after": st.next_after if st.messages else None,
            "answer": st.answer,
            "result": call_result(st) if st.result_json else None,
            "error": st.error,
            "files": [
                compact({"name": x.name, "size": x.size, "media_type": x.media_type})
                for x in st.files
            ],
            "ended_at": timestamp(st.ended_at),
        }
    )
