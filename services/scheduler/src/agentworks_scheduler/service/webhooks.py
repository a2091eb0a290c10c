"""Webhooks (S5): create, read, list, rotate, delete, and receive signed events."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
import uuid
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime

import structlog

from agentworks.client.scheduler import (
    DELIVERY_HEADER,
    SIGNATURE_HEADER,
    SIGNATURE_PREFIX,
    TIMESTAMP_HEADER,
    webhook_signature,
)
from agentworks.core.checks import check_no_nul
from agentworks.core.errors import (
    REFUSED_FOR_GOOD,
    InvalidArgument,
    PermissionDenied,
    PreconditionFailed,
    Reason,
    Unauthenticated,
    rule_meta,
)
from agentworks.core.identity import Identity
from agentworks_scheduler.models import Delivered, Webhook
from agentworks_scheduler.service.access import Access
from agentworks_scheduler.service.rules import (
    DELIVERY_ID_RE,
    MAX_DELIVERY_ID_CHARS,
    MAX_WEBHOOKS_PER_CONVERSATION,
    RETRY_SECRET_WINDOW,
    check_retry_key,
    fingerprint,
    legacy_request_hash,
    request_hash,
    webhook_secret,
)

log = structlog.get_logger("agentworks.scheduler")


class Webhooks(Access):
    def _secret(self, webhook_id: str, salt: str) -> str:
        return webhook_secret(self.config.webhook_key, webhook_id, salt)

    async def create_webhook(
        self,
        identity: Identity,
        *,
        conversation_id: str,
        name: str,
        product: str,
        submission_id: str = "",
    ) -> Webhook:
        """A webhook into a conversation; the secret is in the result (S5).

        With a `submission_id`, a retry of the same request gets the same webhook, with
        its secret if the create was less than RETRY_SECRET_WINDOW ago and the secret was
        not rotated since (the caller is its creator, who was given that secret already);
        otherwise without it.
        """
        check_no_nul(name, "name")  # its length is the proto's rule
        check_retry_key(submission_id)
        place = await self._attach(identity, conversation_id, product)
        webhook_id = str(uuid.uuid4())
        salt = secrets.token_urlsafe(16)
        secret = self._secret(webhook_id, salt)
        webhook = await self.store.create_webhook(
            webhook_id=webhook_id,
            name=name,
            conversation_id=place.conversation_id,
            product=place.product,
            salt=salt,
            secret_fingerprint=fingerprint(secret),
            created_by=identity.principal,
            secret=secret,
            max_per_conversation=MAX_WEBHOOKS_PER_CONVERSATION,
            submission_id=submission_id,
            request_hash=request_hash(conversation_id, name, product),
            legacy_hash=legacy_request_hash(conversation_id, name, product),
        )
        if webhook.id != webhook_id:  # a retry: the webhook the key created earlier
            given_again = webhook.secret_rotated_at is None and (
                datetime.now(UTC) - webhook.created_at < RETRY_SECRET_WINDOW
            )
            log.info("webhook.retried", webhook_id=webhook.id, secret_given=given_again)
            if given_again:
                return replace(webhook, secret=self._secret(webhook.id, webhook.salt))
            return webhook
        log.info("webhook.created", webhook_id=webhook_id, conversation_id=place.conversation_id)
        return webhook

    async def get_webhook(self, identity: Identity, webhook_id: str) -> Webhook:
        return await self._owned_webhook(identity, webhook_id)

    async def list_webhooks(
        self, identity: Identity, *, conversation_id: str, product: str, after: str, limit: int
    ) -> tuple[list[Webhook], str]:
        return await self._list_own(
            identity,
            self.store.list_webhooks,
            conversation_id=conversation_id,
            product=product,
            after=after,
            limit=limit,
        )

    async def rotate_webhook_secret(self, identity: Identity, webhook_id: str) -> Webhook:
        await self._owned_webhook(identity, webhook_id, change=True)
        salt = secrets.token_urlsafe(16)
        secret = self._secret(webhook_id, salt)
        webhook = await self.store.rotate_webhook_secret(
            webhook_id, salt=salt, secret_fingerprint=fingerprint(secret), secret=secret
        )
        log.info("webhook.secret_rotated", webhook_id=webhook_id)
        return webhook

    async def delete_webhook(self, identity: Identity, webhook_id: str) -> None:
        await self._owned_webhook(identity, webhook_id, change=True)
        await self.store.delete_webhook(webhook_id)
        log.info("webhook.deleted", webhook_id=webhook_id)

    async def receive_webhook(
        self,
        identity: Identity,
        *,
        webhook_id: str,
        headers: Mapping[str, str],
        body: bytes,
    ) -> Delivered:
        """Check an incoming event's signature, age and novelty; deliver it raw (S5)."""
        if not identity.is_service:
            raise PermissionDenied(
                "webhook events are handed over by the gateway (a service principal)",
                reason=Reason.ROLE_REQUIRED,
                metadata={"role": "service"},
            )
        limit = self.config.webhook_max_body_bytes
        if len(body) > limit:
            raise InvalidArgument(
                f"webhook body is {len(body)} bytes; the limit is {limit} bytes — "
                "nothing was delivered",
                reason=Reason.REQUEST_LIMIT,
                metadata={"limit": str(limit), "setting": "SCHEDULER_WEBHOOK_MAX_BODY_BYTES"},
            )
        webhook = await self.store.get_webhook(webhook_id)
        lowered = {k.lower(): v.strip() for k, v in headers.items()}
        stamp = lowered.get(TIMESTAMP_HEADER.lower(), "")
        signature = lowered.get(SIGNATURE_HEADER.lower(), "")
        if not stamp or not signature:
            raise Unauthenticated(
                f"webhook request is not signed: send {TIMESTAMP_HEADER} (Unix seconds) and "
                f"{SIGNATURE_HEADER}: {SIGNATURE_PREFIX}<hex HMAC-SHA256 of timestamp + '.' "
                "+ body, keyed with the webhook secret>",
                reason=Reason.CREDENTIALS_MISSING,
                metadata={"header": SIGNATURE_HEADER},
            )
        if not stamp.isdigit() or len(stamp) > 12:
            raise InvalidArgument(
                f"{TIMESTAMP_HEADER} must be Unix seconds, got {stamp!r}",
                reason=Reason.FIELD_RULE,
                metadata=rule_meta(TIMESTAMP_HEADER, "pattern"),
            )
        expected = webhook_signature(self._secret(webhook.id, webhook.salt), stamp, body)
        if not hmac.compare_digest(expected.encode(), signature.lower().encode()):
            raise Unauthenticated(
                f"webhook signature does not match: {SIGNATURE_HEADER} must be "
                f"{SIGNATURE_PREFIX}<hex HMAC-SHA256 of '{stamp}.' + the raw body>, keyed with "
                "this webhook's current secret — nothing was delivered",
                reason=Reason.CREDENTIALS_INVALID,
                metadata={"header": SIGNATURE_HEADER},
            )
        skew = int(time.time()) - int(stamp)
        tolerance = self.config.webhook_tolerance_seconds
        if abs(skew) > tolerance:
            age = f"{skew} s old" if skew > 0 else f"{-skew} s in the future"
            raise Unauthenticated(
                f"webhook timestamp is {age}; the tolerance is {tolerance} s — sign each "
                "request with the current time (and check the sender's clock)",
                reason=Reason.CREDENTIALS_EXPIRED,
                metadata={"header": TIMESTAMP_HEADER, "limit": str(tolerance)},
            )
        delivery = lowered.get(DELIVERY_HEADER.lower(), "")
        if not DELIVERY_ID_RE.match(delivery):
            problem = "is not a valid delivery id" if delivery else "is required"
            raise InvalidArgument(
                f"{DELIVERY_HEADER} {problem}: a unique id per event, 1-"
                f"{MAX_DELIVERY_ID_CHARS} printable ASCII characters without spaces",
                reason=Reason.FIELD_RULE,
                metadata=rule_meta(DELIVERY_HEADER, "pattern", MAX_DELIVERY_ID_CHARS),
            )
        body_sha256 = hashlib.sha256(body).hexdigest()

        async def deliver() -> Delivered:
            try:
                delivery_id, created = await self.conversations.enqueue(
                    conversation_id=webhook.conversation_id,
                    kind="webhook",
                    idempotency_key=f"webhook:{webhook.id}:{delivery}",
                    text=f"webhook event {delivery}"
                    + (f" from {webhook.name}" if webhook.name else ""),
                    payload=body,
                    attributes={
                        "webhook_id": webhook.id,
                        "webhook_name": webhook.name,
                        "delivery": delivery,
                        "content_type": lowered.get("content-type", ""),
                        "signed_at": int(stamp),
                        "body_sha256": body_sha256,
                    },
                )
            except REFUSED_FOR_GOOD as exc:
                raise PreconditionFailed(
                    f"webhook {webhook.id} cannot deliver into conversation "
                    f"{webhook.conversation_id}: {exc.message}; nothing was delivered",
                    reason=exc.reason,
                    metadata={**exc.metadata, "webhook_id": webhook.id},
                ) from None
            return Delivered(delivery_id, created)

        result = await self.store.receive_webhook(
            webhook_id=webhook.id,
            delivery_key=delivery,
            signature=expected,
            body_sha256=body_sha256,
            deliver=deliver,
        )
        log.info(
            "webhook.delivered",
            webhook_id=webhook.id,
            delivery=delivery,
            delivery_id=result.delivery_id,
            created=result.created,
            bytes=len(body),
        )
        return result
