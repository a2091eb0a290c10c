"""The scheduler's adapter to messaging: participation checks and deliveries.

Called with no database transaction open: firing claims in a short transaction, calls
this, then records the outcome (store/firing.py); a webhook event likewise
(store/webhooks.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentworks.client import MessagingClient, delivery_request, target_str
from agentworks.client.rpc import open_channel
from agentworks.core.errors import AgentWorksError
from agentworks.core.identity import Forwarded, Identity, Minter
from agentworks.core.limits import MAX_LIST_PAGE
from agentworks.core.tls import Tls
from agentworks.messaging.v1 import messaging_pb2 as m
from agentworks_scheduler.models import Participation

SERVICE_PRINCIPAL = "service:scheduler"

_DELIVERY_KIND = {
    "wake_up": m.DELIVERY_KIND_WAKE_UP,
    "schedule": m.DELIVERY_KIND_SCHEDULE,
    "webhook": m.DELIVERY_KIND_WEBHOOK,
}


class MessagingConversations:
    """The scheduler's view of messaging, over the typed `MessagingClient`.

    Participation is checked as the caller: the scheduler may sign only for itself (T1),
    so it forwards the identity the caller signed for this request (still valid: the
    check runs while the request is served), and messaging applies exactly its own
    access rule (A2, A3). Deliveries are enqueued as `service:scheduler`.
    """

    def __init__(
        self, address: str, identity: Minter, *, timeout: float, tls: Tls | None = None
    ) -> None:
        self._timeout = timeout
        self._channel = open_channel(address, tls)
        self._as_scheduler = MessagingClient(
            channel=self._channel, identity=identity, timeout=timeout
        )

    def _on_behalf(self, identity: Identity) -> MessagingClient:
        return MessagingClient(
            channel=self._channel, identity=Forwarded(identity.token), timeout=self._timeout
        )

    async def participation(self, identity: Identity, conversation_id: str) -> Participation:
        on_behalf = self._on_behalf(identity)
        # Position 1 of every conversation is the message that opened it.
        page = await on_behalf.get_transcript(conversation_id, limit=1)
        opener = ""
        for entry in page.entries:
            if entry.HasField("message"):
                opener = entry.message.sender
            elif entry.HasField("delivery") and entry.delivery.HasField("message"):
                opener = entry.delivery.message.sender
        return Participation(opener=opener, target=target_str(page.target))

    async def owned_targets(self, identity: Identity) -> frozenset[str]:
        # Asked at each read, not stored with the record: the operator may give a target
        # another owner (RegisterTarget), and the new owner, not the old, sees its timers.
        on_behalf, cursor = self._on_behalf(identity), ""
        owned: set[str] = set()
        while True:
            page = await on_behalf.list_targets(after=cursor, limit=MAX_LIST_PAGE)
            owned.update(target_str(t.ref) for t in page.targets)
            cursor = page.next_cursor
            if not cursor:
                return frozenset(owned)

    async def enqueue(
        self,
        *,
        conversation_id: str,
        kind: str,
        idempotency_key: str,
        text: str,
        payload: bytes = b"",
        attributes: Mapping[str, Any] | None = None,
    ) -> tuple[str, bool]:
        response = await self._as_scheduler.enqueue_delivery(
            conversation_id,
            kind=_DELIVERY_KIND[kind],
            idempotency_key=idempotency_key,
            text=text,
            payload=payload,
            attributes=attributes,
        )
        return response.delivery_id, response.created

    async def enqueue_many(
        self, requests: Sequence[Mapping[str, Any]]
    ) -> list[tuple[str, bool] | AgentWorksError]:
        results = await self._as_scheduler.enqueue_deliveries(
            [
                delivery_request(
                    r["conversation_id"],
                    kind=_DELIVERY_KIND[r["kind"]],
                    idempotency_key=r["idempotency_key"],
                    text=r["text"],
                    payload=r.get("payload", b""),
                    attributes=r.get("attributes"),
                )
                for r in requests
            ]
        )
        return [
            r if isinstance(r, AgentWorksError) else (r.delivery_id, r.created) for r in results
        ]

    async def close(self) -> None:
        await self._channel.close()
