"""A stream's event as a delivery: its stable id, type and JSON body (N2).

`call.ended` carries the call (`call_id`, `target`, `function`, `state`, `caller`,
`answer`, `result`, `error`, `files`, `created_at`, `ended_at`); `message.created` the
message as the `messages` tool shows it. docs/webhooks-out.md shows both.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from agentworks.client import target_str
from agentworks.client.functions import call_result, state_name
from agentworks.functions.v1 import functions_pb2 as f
from agentworks.messaging.v1 import messaging_pb2 as m
from agentworks_gateway.tools.messages import message_dict
from agentworks_gateway.tools.toolkit import timestamp
from agentworks_gateway.webhooks_out.sending import event_body

CALL_ENDED = "call.ended"
MESSAGE_CREATED = "message.created"
# Delivery ids are derived from the endpoint and the event, so that a feed read again
# from an older cursor (a lease taken over, a restart) stores the same delivery once.
_NAMESPACE = uuid.UUID("5d1c2c7e-6a1f-4a36-9d0e-7b8a35f7c0de")


def delivery_id(endpoint_id: str, event_type: str, key: str) -> str:
    """The stable `webhook-id` of an event for an endpoint: `msg_` and 32 hex digits."""
    return "msg_" + uuid.uuid5(_NAMESPACE, f"{endpoint_id}\n{event_type}\n{key}").hex


def _when(ts: Any) -> datetime | None:
    return ts.ToDatetime(tzinfo=UTC) if ts.seconds or ts.nanos else None


def call_ended_data(status: f.CallStatus) -> dict[str, Any]:
    """What a `call.ended` event says about the call."""
    return {
        "call_id": status.call_id,
        "target": target_str(status.target),
        "function": status.function,
        "state": state_name(status.status),
        "caller": status.caller,
        "answer": status.answer or None,
        "result": call_result(status),
        "error": status.error or None,
        "files": [{"name": file.name, "size": file.size} for file in status.files],
        "created_at": timestamp(status.created_at),
        "ended_at": timestamp(status.ended_at),
    }


def call_ended(endpoint_id: str, status: f.CallStatus, since: datetime) -> dict[str, Any] | None:
    """The delivery of a call's end, or None for an end from before `since`."""
    ended = _when(status.ended_at) or datetime.now(UTC)
    if ended < since:
        return None
    return {
        "delivery_id": delivery_id(endpoint_id, CALL_ENDED, status.call_id),
        "event_type": CALL_ENDED,
        "event_key": status.call_id,
        "payload": event_body(CALL_ENDED, ended, call_ended_data(status)),
    }


def message_created(endpoint_id: str, message: m.Message, since: datetime) -> dict[str, Any] | None:
    """The delivery of an inbox's new message, or None for one from before `since`."""
    created = _when(message.created_at) or datetime.now(UTC)
    if created < since:
        return None
    return {
        "delivery_id": delivery_id(endpoint_id, MESSAGE_CREATED, message.message_id),
        "event_type": MESSAGE_CREATED,
        "event_key": message.message_id,
        "payload": event_body(MESSAGE_CREATED, created, message_dict(message)),
    }
