"""gRPC servicer for messaging: protos in, domain calls, protos out. Plus start/main."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import structlog
from google.protobuf import json_format
from google.protobuf.timestamp_pb2 import Timestamp

from agentworks.client.errors import AgentWorksError, InvalidArgument
from agentworks.client.identity import caller
from agentworks.client.targets import check_target
from agentworks.common.v1 import common_pb2
from agentworks.messaging.v1 import messaging_pb2 as pb
from agentworks.messaging.v1 import messaging_pb2_grpc
from agentworks.server.db import Database
from agentworks.server.rpc import GrpcServer
from agentworks.server.service import Running, main_for, prepare_database, read_config
from agentworks_messaging.config import Config
from agentworks_messaging.metrics import start_refresh
from agentworks_messaging.models import Delivery, Message, NewDelivery, Target, TargetKey, Turn
from agentworks_messaging.service import MessagingService, check_delivery
from agentworks_messaging.store import INBOX_CHANNEL, TURN_CHANNEL, MessagingStore

log = structlog.get_logger("agentworks.messaging")

_KIND_IN = {common_pb2.TARGET_KIND_CREW: "crew", common_pb2.TARGET_KIND_WORKFLOW: "workflow"}
_KIND_OUT = {v: k for k, v in _KIND_IN.items()}
_CHANNEL_IN = {
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
}
_DELIVERY_KIND_IN = {v: k for k, v in _DELIVERY_KIND.items()}
_DELIVERY_STATUS = {
    "pending": pb.DELIVERY_STATUS_PENDING,
    "in_turn": pb.DELIVERY_STATUS_IN_TURN,
    "handled": pb.DELIVERY_STATUS_HANDLED,
    "interrupted": pb.DELIVERY_STATUS_INTERRUPTED,
}


def _ts(value) -> Timestamp:
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


def json_in(message: Any, field: str) -> Any:
    """A request's Struct (or Part) as JSON; NaN and Infinity are not JSON."""
    try:
        return json_format.MessageToDict(message)
    except (ValueError, json_format.Error):
        raise InvalidArgument(
            f"{field} holds a number that is not finite (NaN or Infinity); use JSON numbers"
        ) from None


def parts_in(parts) -> list[dict[str, Any]] | None:
    out = [json_in(p, f"parts[{i}]") for i, p in enumerate(parts)]
    return out or None


def parts_out(parts: list[dict[str, Any]] | None) -> list[common_pb2.Part]:
    return [json_format.ParseDict(p, common_pb2.Part()) for p in parts or []]


def target_out(target: Target) -> pb.Target:
    caps = pb.Capabilities()
    if target.free_text_ask is not None:
        caps.free_text_ask = target.free_text_ask
    return pb.Target(
        ref=target_ref(target.key),
        owner=target.owner,
        capabilities=caps,
        created_at=_ts(target.created_at),
        updated_at=_ts(target.updated_at),
    )


def message_out(m: Message) -> pb.Message:
    return pb.Message(
        message_id=m.id,
        conversation_id=m.conversation_id,
        inbox_id=m.inbox_id,
        sender=m.sender,
        text=m.text,
        parts=parts_out(m.parts),
        created_at=_ts(m.created_at),
        direction=m.direction,
    )


def delivery_out(d: Delivery) -> pb.Delivery:
    out = pb.Delivery(
        delivery_id=d.id,
        conversation_id=d.conversation_id,
        kind=_DELIVERY_KIND[d.kind],
        status=_DELIVERY_STATUS[d.status],
        text=d.text,
        payload=d.payload or b"",
        turn_id=d.turn_id or "",
        created_at=_ts(d.created_at),
    )
    if d.message is not None:
        out.message.CopyFrom(message_out(d.message))
    if d.attributes:
        out.attributes.update(d.attributes)
    return out


def turn_out(turn: Turn) -> pb.Turn:
    return pb.Turn(
        turn_id=turn.id,
        conversation_id=turn.conversation_id,
        target=target_ref(turn.target),
        reply_inbox_id=turn.reply_inbox_id,
        deliveries=[delivery_out(d) for d in turn.deliveries],
        lease_expires_at=_ts(turn.lease_expires_at),
    )


def caps_in(caps: pb.Capabilities) -> bool | None:
    return caps.free_text_ask if caps.HasField("free_text_ask") else None


class MessagingServicer(messaging_pb2_grpc.MessagingServiceServicer):
    """Translates between protos and `MessagingService`; errors map in the interceptor."""

    def __init__(self, service: MessagingService) -> None:
        self.service = service

    async def RegisterTarget(self, request, context):
        target = await self.service.register_target(
            caller(), target_key(request.ref, "ref"), request.owner, caps_in(request.capabilities)
        )
        return target_out(target)

    async def UpdateTarget(self, request, context):
        target = await self.service.update_target(
            caller(), target_key(request.ref, "ref"), caps_in(request.capabilities)
        )
        return target_out(target)

    async def GetTarget(self, request, context):
        return target_out(await self.service.get_target(caller(), target_key(request.ref, "ref")))

    async def Send(self, request, context):
        destination = request.WhichOneof("destination")
        receipt = await self.service.send(
            caller(),
            target=target_key(request.target) if destination == "target" else None,
            inbox_id=request.inbox_id if destination == "inbox_id" else "",
            text=request.text,
            parts=parts_in(request.parts),
            submission_id=request.submission_id,
            channel=channel_in(request.channel),
        )
        structlog.contextvars.bind_contextvars(conversation_id=receipt.conversation_id)
        return pb.SendReceipt(
            accepted=True,
            message_id=receipt.message_id,
            conversation_id=receipt.conversation_id,
            inbox_id=receipt.inbox_id,
        )

    async def Read(self, request, context):
        messages, cursor = await self.service.read(
            caller(),
            inbox_id=request.inbox_id,
            after=request.after,
            limit=request.limit,
            wait_seconds=request.wait_seconds,
        )
        return pb.ReadResponse(messages=[message_out(m) for m in messages], next_cursor=cursor)

    async def GetTranscript(self, request, context):
        transcript = await self.service.transcript(
            caller(),
            conversation_id=request.conversation_id,
            after=request.after,
            limit=request.limit,
        )
        out = [
            pb.TranscriptEntry(message=message_out(e))
            if isinstance(e, Message)
            else pb.TranscriptEntry(delivery=delivery_out(e))
            for e in transcript.entries
        ]
        return pb.GetTranscriptResponse(
            entries=out,
            next_cursor=transcript.next_cursor,
            target=target_ref(transcript.target),
            inbox_id=transcript.inbox_id,
        )

    async def ClaimTurn(self, request, context):
        turn = await self.service.claim_turn(
            caller(),
            targets=[target_key(r, "targets[]") for r in request.targets],
            wait_seconds=request.wait_seconds,
            lease_seconds=request.lease_seconds,
        )
        return pb.ClaimTurnResponse(turn=turn_out(turn)) if turn else pb.ClaimTurnResponse()

    async def HeartbeatTurn(self, request, context):
        expires = await self.service.heartbeat_turn(
            caller(), turn_id=request.turn_id, lease_seconds=request.lease_seconds
        )
        return pb.HeartbeatTurnResponse(lease_expires_at=_ts(expires))

    async def SendMessage(self, request, context):
        receipt = await self.service.send_message(
            caller(),
            inbox_id=request.inbox_id,
            text=request.text,
            parts=parts_in(request.parts),
            submission_id=request.submission_id,
        )
        return pb.SendReceipt(
            accepted=True,
            message_id=receipt.message_id,
            conversation_id=receipt.conversation_id,
            inbox_id=receipt.inbox_id,
        )

    async def CompleteTurn(self, request, context):
        await self.service.complete_turn(
            caller(), turn_id=request.turn_id, interrupted=request.interrupted
        )
        return pb.CompleteTurnResponse()

    async def EnqueueDelivery(self, request, context):
        fields = _delivery_in(request)
        delivery_id, created = await self.service.enqueue_delivery(caller(), **fields)
        return pb.EnqueueDeliveryResponse(delivery_id=delivery_id, created=created)

    async def EnqueueDeliveries(self, request, context):
        items: list[NewDelivery | AgentWorksError] = []
        for item in request.items:
            try:
                items.append(check_delivery(**_delivery_in(item)))
            except AgentWorksError as exc:
                items.append(exc)
        outcomes = await self.service.enqueue_deliveries(caller(), items)
        return pb.EnqueueDeliveriesResponse(results=[_result_out(o) for o in outcomes])


def _delivery_in(request: pb.EnqueueDeliveryRequest) -> dict[str, Any]:
    attributes = (
        json_in(request.attributes, "attributes") if request.HasField("attributes") else None
    )
    return {
        "conversation_id": request.conversation_id,
        "kind": _DELIVERY_KIND_IN.get(request.kind, ""),
        "text": request.text,
        "payload": request.payload,
        "attributes": attributes,
        "idempotency_key": request.idempotency_key,
    }


def _result_out(outcome: tuple[str, bool] | AgentWorksError) -> pb.EnqueueDeliveryResult:
    if isinstance(outcome, AgentWorksError):
        return pb.EnqueueDeliveryResult(
            error=pb.ItemError(code=outcome.code.value[0], message=outcome.message)
        )
    delivery_id, created = outcome
    return pb.EnqueueDeliveryResult(
        delivered=pb.EnqueueDeliveryResponse(delivery_id=delivery_id, created=created)
    )


async def _sweep(service: MessagingService, store: MessagingStore, config: Config) -> None:
    """Interrupt turns whose lease expired (C11) and forget old retry keys (C4)."""
    window = timedelta(hours=config.dedup_window_hours)
    purge_every = 600.0
    last_purge = 0.0
    loop = asyncio.get_running_loop()
    while True:
        try:
            await service.interrupt_expired_turns()
            if loop.time() - last_purge > purge_every:
                await store.purge_submissions(window)
                last_purge = loop.time()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the database may be away; try again next time
            log.warning("sweep.failed", error=str(exc))
        await asyncio.sleep(config.sweep_seconds)


async def start(config: Config) -> Running:
    """Migrate, connect, and serve messaging on `config.service.listen`."""
    await asyncio.to_thread(
        prepare_database, config.service, "messaging", "agentworks_messaging.migrations"
    )
    db = Database(config.service.database_url, pool_size=config.service.pool_size)
    await db.start([INBOX_CHANNEL, TURN_CHANNEL])
    store = MessagingStore(db)
    service = MessagingService(
        store, db.listener, poll_fallback_seconds=config.poll_fallback_seconds
    )

    async def drain() -> None:
        service.draining.set()
        db.listener.wake_all()

    server = GrpcServer(
        name="messaging",
        listen=config.service.listen,
        internal_key=config.service.internal_key,
        accepted_keys=config.service.accepted_keys,
        register=lambda s: messaging_pb2_grpc.add_MessagingServiceServicer_to_server(
            MessagingServicer(service), s
        ),
        service_names=[pb.DESCRIPTOR.services_by_name["MessagingService"].full_name],
        on_drain=drain,
    )
    await server.start()
    sweeper = asyncio.create_task(_sweep(service, store, config), name="messaging-sweep")
    return Running("messaging", server, db, background=[sweeper, *start_refresh(db, config)])


def main() -> None:
    config = read_config("messaging", Config.from_env)
    main_for(config.service, lambda: start(config))
