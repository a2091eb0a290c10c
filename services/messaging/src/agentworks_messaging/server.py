"""The messaging gRPC servicer: request -> convert -> service -> convert -> response."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import structlog

from agentworks.core import capability as cap
from agentworks.core.errors import AgentWorksError
from agentworks.core.identity import caller
from agentworks.messaging.v1 import messaging_pb2 as pb
from agentworks.messaging.v1 import messaging_pb2_grpc
from agentworks.server.capabilities import CapabilityIssuer
from agentworks.server.validation import field_rule_refusal
from agentworks_messaging.convert import (
    caps_in,
    channel_in,
    conversation_out,
    delivery_in,
    inbox_event_out,
    message_out,
    parts_in,
    receipt_out,
    result_out,
    target_key,
    target_out,
    timestamp,
    transcript_out,
    turn_out,
)
from agentworks_messaging.models import NewDelivery
from agentworks_messaging.service import MessagingService
from agentworks_messaging.service.deliveries import check_delivery
from agentworks_messaging.sizes import measured

log = structlog.get_logger("agentworks.messaging")


@measured  # every request's fields are measured before they are read (B8)
class MessagingServicer(messaging_pb2_grpc.MessagingServiceServicer):
    """Translates between protos and `MessagingService`; errors map in the interceptor."""

    def __init__(
        self, service: MessagingService, capabilities: CapabilityIssuer | None = None
    ) -> None:
        self.service = service
        # Mints each claimed turn's capability (T3); none without the service's key.
        self.capabilities = capabilities or CapabilityIssuer(None, cap.TURN)

    async def RegisterTarget(
        self, request: pb.RegisterTargetRequest, context: grpc.aio.ServicerContext
    ) -> pb.Target:
        target = await self.service.register_target(
            caller(), target_key(request.ref, "ref"), request.owner, caps_in(request.capabilities)
        )
        return target_out(target)

    async def UpdateTarget(
        self, request: pb.UpdateTargetRequest, context: grpc.aio.ServicerContext
    ) -> pb.Target:
        target = await self.service.update_target(
            caller(), target_key(request.ref, "ref"), caps_in(request.capabilities)
        )
        return target_out(target)

    async def GetTarget(
        self, request: pb.GetTargetRequest, context: grpc.aio.ServicerContext
    ) -> pb.Target:
        return target_out(await self.service.get_target(caller(), target_key(request.ref, "ref")))

    async def ListTargets(
        self, request: pb.ListTargetsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListTargetsResponse:
        targets, cursor = await self.service.list_targets(
            caller(), after=request.after, limit=request.limit
        )
        return pb.ListTargetsResponse(targets=[target_out(t) for t in targets], next_cursor=cursor)

    async def Send(
        self, request: pb.SendRequest, context: grpc.aio.ServicerContext
    ) -> pb.SendReceipt:
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
        return receipt_out(receipt)

    async def Read(
        self, request: pb.ReadRequest, context: grpc.aio.ServicerContext
    ) -> pb.ReadResponse:
        messages, cursor = await self.service.read(
            caller(),
            inbox_id=request.inbox_id,
            after=request.after,
            limit=request.limit,
            wait_seconds=request.wait_seconds,
            newest=request.newest,
        )
        return pb.ReadResponse(messages=[message_out(m) for m in messages], next_cursor=cursor)

    async def Subscribe(
        self, request: pb.SubscribeRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.InboxEvent]:
        events = self.service.subscribe(
            caller(),
            inbox_id=request.inbox_id,
            after=request.after,
            heartbeat_seconds=request.heartbeat_seconds,
        )
        async for event in events:
            yield inbox_event_out(event)

    async def GetTranscript(
        self, request: pb.GetTranscriptRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetTranscriptResponse:
        transcript = await self.service.transcript(
            caller(),
            conversation_id=request.conversation_id,
            after=request.after,
            limit=request.limit,
            inbox_id=request.inbox_id,
            newest=request.newest,
        )
        return transcript_out(transcript)

    async def ListConversations(
        self, request: pb.ListConversationsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListConversationsResponse:
        items, cursor, since = await self.service.list_conversations(
            caller(),
            target=target_key(request.target) if request.HasField("target") else None,
            after=request.after,
            limit=request.limit,
            since=request.since,
        )
        return pb.ListConversationsResponse(
            conversations=[conversation_out(c) for c in items],
            next_cursor=cursor,
            since_cursor=since,
        )

    async def ClaimTurn(
        self, request: pb.ClaimTurnRequest, context: grpc.aio.ServicerContext
    ) -> pb.ClaimTurnResponse:
        turn = await self.service.claim_turn(
            caller(),
            targets=[target_key(r, "targets[]") for r in request.targets],
            wait_seconds=request.wait_seconds,
            lease_seconds=request.lease_seconds,
        )
        if turn is None:
            return pb.ClaimTurnResponse()
        out = turn_out(turn)
        out.capability = self.capabilities.issue(
            caller().principal, cap.turn(turn.id, turn.conversation_id), turn.lease_expires_at
        )
        return pb.ClaimTurnResponse(turn=out)

    async def HeartbeatTurn(
        self, request: pb.HeartbeatTurnRequest, context: grpc.aio.ServicerContext
    ) -> pb.HeartbeatTurnResponse:
        identity = caller()
        expires, conversation_id = await self.service.heartbeat_turn(
            identity, turn_id=request.turn_id, lease_seconds=request.lease_seconds
        )
        capability = self.capabilities.issue(
            identity.principal, cap.turn(request.turn_id, conversation_id), expires
        )
        return pb.HeartbeatTurnResponse(lease_expires_at=timestamp(expires), capability=capability)

    async def SendMessage(
        self, request: pb.SendMessageRequest, context: grpc.aio.ServicerContext
    ) -> pb.SendReceipt:
        receipt = await self.service.send_message(
            caller(),
            inbox_id=request.inbox_id,
            text=request.text,
            parts=parts_in(request.parts),
            submission_id=request.submission_id,
            complete_turn_id=request.complete_turn_id,
        )
        return receipt_out(receipt)

    async def SendFromTurn(
        self, request: pb.SendFromTurnRequest, context: grpc.aio.ServicerContext
    ) -> pb.SendReceipt:
        destination = request.WhichOneof("destination")
        receipt = await self.service.send_from_turn(
            caller(),
            target=target_key(request.target) if destination == "target" else None,
            inbox_id=request.inbox_id if destination == "inbox_id" else "",
            text=request.text,
            parts=parts_in(request.parts),
            submission_id=request.submission_id,
        )
        structlog.contextvars.bind_contextvars(conversation_id=receipt.conversation_id)
        return receipt_out(receipt)

    async def CompleteTurn(
        self, request: pb.CompleteTurnRequest, context: grpc.aio.ServicerContext
    ) -> pb.CompleteTurnResponse:
        await self.service.complete_turn(
            caller(),
            turn_id=request.turn_id,
            interrupted=request.interrupted,
            error=request.error,
        )
        return pb.CompleteTurnResponse()

    async def EnqueueDelivery(
        self, request: pb.EnqueueDeliveryRequest, context: grpc.aio.ServicerContext
    ) -> pb.EnqueueDeliveryResponse:
        fields = delivery_in(request)
        delivery_id, created = await self.service.enqueue_delivery(caller(), **fields)
        return pb.EnqueueDeliveryResponse(delivery_id=delivery_id, created=created)

    async def EnqueueDeliveries(
        self, request: pb.EnqueueDeliveriesRequest, context: grpc.aio.ServicerContext
    ) -> pb.EnqueueDeliveriesResponse:
        items: list[NewDelivery | AgentWorksError] = []
        for item in request.items:
            refusal = field_rule_refusal(item)  # each item's rules, on its own (S6)
            if refusal is not None:
                items.append(refusal)
                continue
            try:
                items.append(check_delivery(**delivery_in(item)))
            except AgentWorksError as exc:
                items.append(exc)
        outcomes = await self.service.enqueue_deliveries(caller(), items)
        return pb.EnqueueDeliveriesResponse(results=[result_out(o) for o in outcomes])
