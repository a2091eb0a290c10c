"""Proto <-> domain conversions of the messaging service."""

from __future__ import annotations

from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from agentworks.common.v1 import common_pb2
from agentworks.core.errors import AgentWorksError, InvalidArgument
from agentworks.core.jsontext import dumps, loads_object
from agentworks.core.targets import check_target
from agentworks.messaging.v1 import messaging_pb2 as pb
from agentworks_messaging.cursors import encode_cursor
from agentworks_messaging.models import (
    Capabilities,
    ConversationSummary,
    Delivery,
    InboxEvent,
    Message,
    Receipt,
    Target,
    TargetKey,
    Transcript,
    Turn,
)

_KIND_IN = {common_pb2.TARGET_KIND_CREW: "crew", common_pb2.TARGET_KIND_WORKFLOW: "workflow"}

_KIND_OUT = {v: k for k, v in _KIND_IN.items()}

_CHANNEL_IN: dict[int, str] = {
    pb.CHANNEL_UNSPECIFIED: "programmatic",
    pb.CHANNEL_PROGRAMMATIC: "programmatic",
    pb.CHANNEL_APP: "app",
}

_DELIVERY_KIND = {
    "message": pb.DELIVERY_KIND_MESSAGE,
    "wake_up": pb.DELIVERY_KIND_WAKE_UP,
    "schedule": pb.DELIVERY_KIND_SCHEDULE,
    "webhook": pb.DELIVERY_KIND_WEBHOOK,
    "function_completed": pb.DELIVERY_KIND_FUNCTION_COMPLETED,
    "conversation_reply": pb.DELIVERY_KIND_CONVERSATION_REPLY,
}

_DELIVERY_KIND_IN = {v: k for k, v in _DELIVERY_KIND.items()}

_DELIVERY_STATUS = {
    "pending": pb.DELIVERY_STATUS_PENDING,
    "in_turn": pb.DELIVERY_STATUS_IN_TURN,
    "handled": pb.DELIVERY_STATUS_HANDLED,
    "interrupted": pb.DELIVERY_STATUS_INTERRUPTED,
}


def timestamp(value) -> Timestamp:
    ts = Timestamp()
    ts.FromDatetime(value)
    return ts


def target_key(ref: common_pb2.TargetRef, field: str = "target") -> TargetKey:
    kind = _KIND_IN.get(ref.kind)
    if kind is None:
        raise InvalidArgument(f"{field}.kind is required: TARGET_KIND_CREW or TARGET_KIND_WORKFLOW")
    return check_target(kind, ref.name)


def channel_in(channel: int) -> str:
    name = _CHANNEL_IN.get(channel)
    if name is None:
        raise InvalidArgument(
            f"channel {channel} is not a channel: CHANNEL_PROGRAMMATIC (the default) or CHANNEL_APP"
        )
    return name


def target_ref(key: TargetKey) -> common_pb2.TargetRef:
    return common_pb2.TargetRef(kind=_KIND_OUT[key.kind], name=key.name)


def parts_in(parts) -> list[dict[str, Any]] | None:
    """Request parts as the domain's `{"text": ...}` / `{"data": {...}}` dicts."""
    out: list[dict[str, Any]] = []
    for i, part in enumerate(parts):
        which = part.WhichOneof("content")
        if which == "text":
            out.append({"text": part.text})
        elif which == "data_json":
            out.append({"data": loads_object(part.data_json, f"parts[{i}].data")})
        else:
            out.append({})
    return out or None


def parts_out(parts: list[dict[str, Any]] | None) -> list[common_pb2.Part]:
    return [
        common_pb2.Part(text=p["text"])
        if "text" in p
        else common_pb2.Part(data_json=dumps(p["data"]))
        for p in parts or []
    ]


def target_out(target: Target) -> pb.Target:
    caps = pb.Capabilities()
    if target.free_text_ask is not None:
        caps.free_text_ask = target.free_text_ask
    if target.a2a_card is not None:
        caps.a2a_card = target.a2a_card
    return pb.Target(
        ref=target_ref(target.key),
        owner=target.owner,
        capabilities=caps,
        created_at=timestamp(target.created_at),
        updated_at=timestamp(target.updated_at),
    )


def message_out(m: Message) -> pb.Message:
    return pb.Message(
        message_id=m.id,
        conversation_id=m.conversation_id,
        inbox_id=m.inbox_id,
        sender=m.sender,
        text=m.text,
        parts=parts_out(m.parts),
        created_at=timestamp(m.created_at),
        direction=m.direction,
    )


def inbox_event_out(event: InboxEvent) -> pb.InboxEvent:
    """A subscription's event (N1): its message or a heartbeat, with its cursor."""
    if event.message is not None:
        return pb.InboxEvent(message=message_out(event.message), cursor=event.cursor)
    at = timestamp(event.at) if event.at is not None else None
    return pb.InboxEvent(heartbeat=common_pb2.Heartbeat(at=at), cursor=event.cursor)


def delivery_out(d: Delivery) -> pb.Delivery:
    out = pb.Delivery(
        delivery_id=d.id,
        conversation_id=d.conversation_id,
        kind=_DELIVERY_KIND[d.kind],
        status=_DELIVERY_STATUS[d.status],
        text=d.text,
        payload=d.payload or b"",
        turn_id=d.turn_id or "",
        created_at=timestamp(d.created_at),
        turn_error=d.turn_error,
    )
    if d.message is not None:
        out.message.CopyFrom(message_out(d.message))
    if d.attributes:
        out.attributes_json = dumps(d.attributes)
    return out


def conversation_out(c: ConversationSummary) -> pb.ConversationSummary:
    out = pb.ConversationSummary(
        conversation_id=c.conversation_id,
        inbox_id=c.inbox_id,
        principal=c.principal,
        target=target_ref(c.target),
        started_by=c.started_by,
        created_at=timestamp(c.created_at),
        message_count=c.message_count,
        latest_cursor=encode_cursor(c.last_position),
        new_messages=c.new_messages,
    )
    if c.last_message is not None:
        out.last_message.CopyFrom(message_out(c.last_message))
    return out


def receipt_out(receipt: Receipt) -> pb.SendReceipt:
    return pb.SendReceipt(
        accepted=True,
        message_id=receipt.message_id,
        conversation_id=receipt.conversation_id,
        inbox_id=receipt.inbox_id,
        cursor=encode_cursor(receipt.position),
    )


def transcript_out(transcript: Transcript) -> pb.GetTranscriptResponse:
    entries = [
        pb.TranscriptEntry(message=message_out(e))
        if isinstance(e, Message)
        else pb.TranscriptEntry(delivery=delivery_out(e))
        for e in transcript.entries
    ]
    return pb.GetTranscriptResponse(
        entries=entries,
        next_cursor=transcript.next_cursor,
        target=target_ref(transcript.target),
        inbox_id=transcript.inbox_id,
        conversation_id=transcript.conversation_id,
    )


def turn_out(turn: Turn) -> pb.Turn:
    return pb.Turn(
        turn_id=turn.id,
        conversation_id=turn.conversation_id,
        target=target_ref(turn.target),
        reply_inbox_id=turn.reply_inbox_id,
        deliveries=[delivery_out(d) for d in turn.deliveries],
        lease_expires_at=timestamp(turn.lease_expires_at),
        traceparent=turn.traceparent,
    )


def caps_in(caps: pb.Capabilities) -> Capabilities:
    return Capabilities(
        free_text_ask=caps.free_text_ask if caps.HasField("free_text_ask") else None,
        a2a_card=caps.a2a_card if caps.HasField("a2a_card") else None,
    )


def delivery_in(request: pb.EnqueueDeliveryRequest) -> dict[str, Any]:
    attributes = (
        loads_object(request.attributes_json, "attributes") if request.attributes_json else None
    )
    return {
        "conversation_id": request.conversation_id,
        "kind": _DELIVERY_KIND_IN.get(request.kind, ""),
        "text": request.text,
        "payload": request.payload,
        "attributes": attributes,
        "idempotency_key": request.idempotency_key,
    }


def result_out(outcome: tuple[str, bool] | AgentWorksError) -> pb.EnqueueDeliveryResult:
    if isinstance(outcome, AgentWorksError):
        return pb.EnqueueDeliveryResult(
            error=pb.ItemError(
                code=outcome.code.value[0],
                message=outcome.message,
                reason=str(outcome.reason),
                metadata=outcome.metadata,
            )
        )
    delivery_id, created = outcome
    return pb.EnqueueDeliveryResult(
        delivered=pb.EnqueueDeliveryResponse(delivery_id=delivery_id, created=created)
    )
