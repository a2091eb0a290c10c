"""Typed client of the messaging service."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any

import grpc

from agentworks.client.common import (
    LONG_POLL_SLACK_SECONDS,
    json_document,
    target_ref,
)
from agentworks.client.rpc import ServiceClient
from agentworks.client.streams import SILENCE_SLACK_SECONDS, resuming
from agentworks.common.v1 import common_pb2
from agentworks.core.errors import AgentWorksError, from_status
from agentworks.core.jsontext import loads
from agentworks.messaging.v1 import messaging_pb2 as m
from agentworks.messaging.v1 import messaging_pb2_grpc

# The server's heartbeat interval when the request leaves it 0 (SubscribeRequest).
HEARTBEAT_DEFAULT_SECONDS = 15


def parts(items: Iterable[Mapping[str, Any]]) -> list[common_pb2.Part]:
    """Message parts from JSON: `{"text": "..."}` or `{"data": {...JSON object...}}`."""
    out = []
    for i, item in enumerate(items):
        if "data" in item:
            out.append(common_pb2.Part(data_json=json_document(item["data"], f"parts[{i}].data")))
        else:
            out.append(common_pb2.Part(text=item.get("text", "")))
    return out


def parts_json(items: Iterable[common_pb2.Part]) -> list[dict[str, Any]]:
    """Message parts as JSON: `{"text": ...}` or `{"data": {...}}`, numbers as sent."""
    return [
        {"data": loads(p.data_json, "parts.data")}
        if p.WhichOneof("content") == "data_json"
        else {"text": p.text}
        for p in items
    ]


def attributes_json(delivery: m.Delivery) -> dict[str, Any]:
    """A delivery's attributes as JSON (`{}` when it has none)."""
    return loads(delivery.attributes_json, "attributes", {})


def _capabilities(free_text_ask: bool | None, a2a_card: bool | None) -> m.Capabilities:
    caps = m.Capabilities()
    if free_text_ask is not None:
        caps.free_text_ask = free_text_ask
    if a2a_card is not None:
        caps.a2a_card = a2a_card
    return caps


class MessagingClient(ServiceClient):
    """Client of `agentworks.messaging.v1.MessagingService`."""

    stub_class = messaging_pb2_grpc.MessagingServiceStub

    async def register_target(
        self,
        target: str,
        *,
        owner: str,
        free_text_ask: bool | None = None,
        a2a_card: bool | None = None,
    ) -> m.Target:
        """Register `target` (operator); a capability left None keeps its stored value."""
        caps = _capabilities(free_text_ask, a2a_card)
        return await self._unary(
            "RegisterTarget",
            m.RegisterTargetRequest(ref=target_ref(target), owner=owner, capabilities=caps),
        )

    async def update_target(
        self, target: str, *, free_text_ask: bool | None = None, a2a_card: bool | None = None
    ) -> m.Target:
        """Change the target's capabilities (owner, operator); None keeps the stored value."""
        caps = _capabilities(free_text_ask, a2a_card)
        return await self._unary(
            "UpdateTarget", m.UpdateTargetRequest(ref=target_ref(target), capabilities=caps)
        )

    async def get_target(self, target: str) -> m.Target:
        return await self._unary("GetTarget", m.GetTargetRequest(ref=target_ref(target)))

    async def list_targets(self, *, after: str = "", limit: int = 0) -> m.ListTargetsResponse:
        """The targets you own (the operator: all), by kind and name (V1)."""
        return await self._unary("ListTargets", m.ListTargetsRequest(after=after, limit=limit))

    async def send(
        self,
        text: str,
        *,
        target: str | None = None,
        inbox_id: str | None = None,
        submission_id: str = "",
        parts: Iterable[common_pb2.Part] = (),
        channel: m.Channel = m.CHANNEL_PROGRAMMATIC,
    ) -> m.SendReceipt:
        request = m.SendRequest(
            text=text, submission_id=submission_id, parts=list(parts), channel=channel
        )
        if inbox_id:
            request.inbox_id = inbox_id
        elif target:
            request.target.CopyFrom(target_ref(target))
        return await self._unary("Send", request)

    async def read(
        self,
        inbox_id: str,
        *,
        after: str = "",
        limit: int = 0,
        wait_seconds: int = 0,
        newest: bool = False,
    ) -> m.ReadResponse:
        """A page of your inbox after `after` (C7), waiting up to `wait_seconds` for a
        first message; with `newest`, its newest `limit` messages and the cursor after
        them (without `after` and `wait_seconds`)."""
        request = m.ReadRequest(
            inbox_id=inbox_id, after=after, limit=limit, wait_seconds=wait_seconds, newest=newest
        )
        return await self._unary(
            "Read",
            request,
            timeout=max(self.timeout, wait_seconds + LONG_POLL_SLACK_SECONDS),
        )

    async def subscribe(
        self,
        inbox_id: str,
        *,
        after: str = "",
        heartbeat_seconds: int = 0,
        heartbeats: bool = False,
    ) -> AsyncIterator[m.InboxEvent]:
        """Your inbox's messages after `after`, then each new one as it arrives (N1).

        Never ends on its own: the stream is opened again from the last event's cursor
        whenever it breaks (a replica drained or killed, a connection reset), so each
        message is yielded exactly once. Each event's `cursor` resumes after it (here or
        in `read`). Heartbeats (sent every `heartbeat_seconds`, 5-60, default 15, while
        nothing arrives, and once the backlog is through) are yielded only with
        `heartbeats`. A refusal (NOT_FOUND for an inbox not yours, INVALID_ARGUMENT,
        RESOURCE_EXHAUSTED past your share of open streams) is raised.
        """
        events = resuming(
            self,
            "Subscribe",
            lambda cursor: m.SubscribeRequest(
                inbox_id=inbox_id, after=cursor, heartbeat_seconds=heartbeat_seconds
            ),
            lambda event: event.cursor,
            cursor=after,
            silence_seconds=(heartbeat_seconds or HEARTBEAT_DEFAULT_SECONDS)
            + SILENCE_SLACK_SECONDS,
        )
        async for event in events:
            if heartbeats or event.WhichOneof("event") == "message":
                yield event

    async def get_transcript(
        self,
        conversation_id: str = "",
        *,
        inbox_id: str = "",
        after: str = "",
        limit: int = 0,
        newest: bool = False,
    ) -> m.GetTranscriptResponse:
        """A page of a conversation's transcript (by its id or its inbox's), both
        directions and every delivery kind (C12, V2); with `newest`, its newest `limit`
        entries (without `after`)."""
        return await self._unary(
            "GetTranscript",
            m.GetTranscriptRequest(
                conversation_id=conversation_id,
                inbox_id=inbox_id,
                after=after,
                limit=limit,
                newest=newest,
            ),
        )

    async def list_conversations(
        self, *, target: str = "", after: str = "", limit: int = 0, since: str = ""
    ) -> m.ListConversationsResponse:
        """Conversations you may see, newest first; with `since` only what is new (V1)."""
        request = m.ListConversationsRequest(after=after, limit=limit, since=since)
        if target:
            request.target.CopyFrom(target_ref(target))
        return await self._unary("ListConversations", request)

    async def claim_turn(
        self, targets: Iterable[str], *, wait_seconds: int = 0, lease_seconds: int = 0
    ) -> m.Turn | None:
        response = await self._unary(
            "ClaimTurn",
            m.ClaimTurnRequest(
                targets=[target_ref(t) for t in targets],
                wait_seconds=wait_seconds,
                lease_seconds=lease_seconds,
            ),
            timeout=max(self.timeout, wait_seconds + LONG_POLL_SLACK_SECONDS),
        )
        return response.turn if response.HasField("turn") else None

    async def heartbeat_turn(
        self, turn_id: str, *, lease_seconds: int = 0
    ) -> m.HeartbeatTurnResponse:
        return await self._unary(
            "HeartbeatTurn", m.HeartbeatTurnRequest(turn_id=turn_id, lease_seconds=lease_seconds)
        )

    async def send_message(
        self,
        inbox_id: str,
        text: str,
        *,
        submission_id: str = "",
        parts: Iterable[common_pb2.Part] = (),
        complete_turn_id: str = "",
    ) -> m.SendReceipt:
        """An agent's reply to a conversation's inbox (C6); with `complete_turn_id`, the
        reply also completes that turn, in the same request."""
        return await self._unary(
            "SendMessage",
            m.SendMessageRequest(
                inbox_id=inbox_id,
                text=text,
                submission_id=submission_id,
                parts=list(parts),
                complete_turn_id=complete_turn_id,
            ),
        )

    async def send_from_turn(
        self,
        text: str,
        *,
        target: str | None = None,
        inbox_id: str | None = None,
        submission_id: str = "",
        parts: Iterable[common_pb2.Part] = (),
    ) -> m.SendReceipt:
        """Start (`target`) or continue (`inbox_id`) a conversation with another target
        from a turn, tied to the turn's conversation (L5); the client's identity must be
        the turn's capability."""
        request = m.SendFromTurnRequest(text=text, submission_id=submission_id, parts=list(parts))
        if inbox_id:
            request.inbox_id = inbox_id
        elif target:
            request.target.CopyFrom(target_ref(target))
        return await self._unary("SendFromTurn", request)

    async def complete_turn(
        self, turn_id: str, *, interrupted: bool = False, error: str = ""
    ) -> None:
        """End a claimed turn: handled, or with `interrupted` given up unhandled (C11);
        `error` (at most 4 KiB) says why it failed, for the target's owner (L12)."""
        await self._unary(
            "CompleteTurn",
            m.CompleteTurnRequest(turn_id=turn_id, interrupted=interrupted, error=error),
        )

    async def enqueue_delivery(
        self,
        conversation_id: str,
        *,
        kind: m.DeliveryKind,
        idempotency_key: str,
        text: str = "",
        payload: bytes = b"",
        attributes: Mapping[str, Any] | None = None,
    ) -> m.EnqueueDeliveryResponse:
        return await self._unary(
            "EnqueueDelivery",
            delivery_request(
                conversation_id,
                kind=kind,
                idempotency_key=idempotency_key,
                text=text,
                payload=payload,
                attributes=attributes,
            ),
        )

    async def enqueue_deliveries(
        self, requests: Sequence[m.EnqueueDeliveryRequest]
    ) -> list[m.EnqueueDeliveryResponse | AgentWorksError]:
        """Many deliveries in one request (see `delivery_request`); one outcome per item.

        An item's outcome is its response, or the error EnqueueDelivery would have raised
        for it alone; an error of the whole request (access, transport) is raised.
        """
        response = await self._unary(
            "EnqueueDeliveries", m.EnqueueDeliveriesRequest(items=requests)
        )
        return [
            r.delivered
            if r.HasField("delivered")
            else from_status(
                _STATUS_BY_NUMBER.get(r.error.code, grpc.StatusCode.UNKNOWN),
                r.error.message,
                r.error.reason,
                metadata=dict(r.error.metadata),
            )
            for r in response.results
        ]


def delivery_request(
    conversation_id: str,
    *,
    kind: m.DeliveryKind,
    idempotency_key: str,
    text: str = "",
    payload: bytes = b"",
    attributes: Mapping[str, Any] | None = None,
) -> m.EnqueueDeliveryRequest:
    """One item of `enqueue_deliveries` (or the request of `enqueue_delivery`)."""
    return m.EnqueueDeliveryRequest(
        conversation_id=conversation_id,
        kind=kind,
        text=text,
        payload=payload,
        attributes_json=json_document(attributes, "attributes"),
        idempotency_key=idempotency_key,
    )


_STATUS_BY_NUMBER = {code.value[0]: code for code in grpc.StatusCode}
