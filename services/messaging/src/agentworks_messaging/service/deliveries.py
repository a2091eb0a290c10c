"""Deliveries from the platform's services: wake-ups, schedule prompts, webhook events and
completion notices into a conversation's turn queue (S6, F13). No gRPC, no SQL here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import structlog

from agentworks.core.checks import check_json_depth, check_no_nul, check_retry_key
from agentworks.core.errors import (
    AgentWorksError,
    InvalidArgument,
    PermissionDenied,
    Reason,
    rule_meta,
)
from agentworks.core.identity import Identity
from agentworks_messaging.models import NewDelivery
from agentworks_messaging.store import MessagingStore
from agentworks_messaging.store.rows import reply_refused

log = structlog.get_logger("agentworks.messaging")

# The kinds other services enqueue; messages come by Send, and `conversation_reply`
# deliveries (L5) are messaging's own, queued with the reply they carry, except an
# external A2A agent's reply (X4), which only the gateway brings, one at a time.
ENQUEUED_KINDS = ("wake_up", "schedule", "webhook", "function_completed")
EXTERNAL_REPLY = "conversation_reply"
# The one signer that holds the operator's allow-list of external agents (X4, T1).
EXTERNAL_REPLIER = "service:gateway"


class DeliveryCases:
    """The EnqueueDelivery(ies) use cases of `MessagingService`."""

    store: MessagingStore

    async def enqueue_delivery(self, identity: Identity, **fields: Any) -> tuple[str, bool]:
        """Queue a wake-up, schedule prompt, webhook event or completion notice (S6, F13)."""
        _check_enqueuer(identity)
        delivery = check_delivery(**fields, kinds=(*ENQUEUED_KINDS, EXTERNAL_REPLY))
        if delivery.kind == EXTERNAL_REPLY:
            await self._check_external_reply(identity, delivery)
        [outcome] = await self.store.enqueue_deliveries([delivery])
        if isinstance(outcome, AgentWorksError):
            raise outcome
        delivery_id, created = outcome
        log.info(
            "delivery.enqueued",
            delivery_id=delivery_id,
            conversation_id=delivery.conversation_id,
            kind=delivery.kind,
            created=created,
        )
        return delivery_id, created

    async def _check_external_reply(self, identity: Identity, delivery: NewDelivery) -> None:
        """An external agent's reply (X4): from the gateway only, and refused like any
        incoming conversational message while the conversation's target has agent
        messaging off (C8, L5)."""
        if identity.principal != EXTERNAL_REPLIER:
            raise PermissionDenied(
                f"only {EXTERNAL_REPLIER} brings external agents' replies",
                reason=Reason.ROLE_REQUIRED,
                metadata={"role": EXTERNAL_REPLIER},
            )
        key, *_ = await self.store.conversation(delivery.conversation_id)
        if not (await self.store.get_target(key)).messaging_enabled:
            raise reply_refused(key)

    async def enqueue_deliveries(
        self, identity: Identity, items: Sequence[NewDelivery | AgentWorksError]
    ) -> list[tuple[str, bool] | AgentWorksError]:
        """Queue many deliveries in one statement; each item succeeds or fails alone.

        `items` are checked deliveries, or the error an item's checks already gave. Their
        count (1 to limits.MAX_DELIVERIES_PER_REQUEST) is the proto's rule.
        """
        _check_enqueuer(identity)
        outcomes: dict[int, tuple[str, bool] | AgentWorksError] = {}
        fresh: list[tuple[int, NewDelivery]] = []
        first: dict[str, int] = {}
        for n, item in enumerate(items):
            if isinstance(item, AgentWorksError):
                outcomes[n] = item
            elif item.idempotency_key in first:
                outcomes[n] = InvalidArgument(
                    f"idempotency_key {item.idempotency_key!r} appears twice in this "
                    f"request (items {first[item.idempotency_key]} and {n}); one key per "
                    "occurrence",
                    reason=Reason.INVALID_VALUE,
                    metadata=rule_meta(f"items[{n}].idempotency_key"),
                )
            else:
                first[item.idempotency_key] = n
                fresh.append((n, item))
        if fresh:
            stored = await self.store.enqueue_deliveries([item for _, item in fresh])
            outcomes.update(zip([n for n, _ in fresh], stored, strict=True))
        results = [outcomes[n] for n in range(len(items))]
        created = sum(1 for r in results if isinstance(r, tuple) and r[1])
        failed = sum(1 for r in results if isinstance(r, AgentWorksError))
        log.info(
            "deliveries.enqueued",
            count=len(items),
            created=created,
            duplicates=len(items) - created - failed,
            failed=failed,
        )
        for n, result in enumerate(results):
            if isinstance(result, AgentWorksError):
                item = items[n]
                key = item.idempotency_key if isinstance(item, NewDelivery) else ""
                log.warning("delivery.refused", item=n, key=key, error=result.message)
        return results


def _check_enqueuer(identity: Identity) -> None:
    if not (identity.is_service or identity.is_operator):
        raise PermissionDenied(
            "only platform services may enqueue deliveries",
            reason=Reason.ROLE_REQUIRED,
            metadata={"role": "service"},
        )


def check_delivery(
    *,
    conversation_id: str,
    kind: str,
    text: str,
    payload: bytes,
    attributes: dict[str, Any] | None,
    idempotency_key: str,
    kinds: Sequence[str] = ENQUEUED_KINDS,
) -> NewDelivery:
    """A delivery's fields checked (S6, F13); InvalidArgument says what is wrong. The
    sizes of text, payload and attributes and the key's presence and length are the
    proto's field rules (EnqueueDeliveryRequest), checked before: by the interceptor, and
    for each item of EnqueueDeliveries by the servicer (`field_rule_refusal`)."""
    if kind not in kinds:
        raise InvalidArgument(
            f"kind must be one of {', '.join(kinds)}",
            reason=Reason.FIELD_RULE,
            metadata=rule_meta("kind", "enum"),
        )
    check_retry_key(idempotency_key, "idempotency_key")
    for field, value in (
        ("text", text),
        ("attributes", attributes),
    ):
        check_no_nul(value, field)
    check_json_depth(attributes, "attributes")
    return NewDelivery(
        conversation_id=conversation_id,
        kind=kind,
        text=text,
        payload=payload or None,
        attributes=attributes,
        idempotency_key=idempotency_key,
    )
