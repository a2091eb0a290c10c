"""SQL of webhooks (S5): create, read, rotate, delete, list; the replay window of events."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta

from agentworks.core.errors import Conflict, NotFound, Reason
from agentworks_scheduler.models import Delivered, Page, Webhook
from agentworks_scheduler.store.common import (
    WEBHOOK_DELIVERY_LOCK,
    WEBHOOK_SIGNATURE_LOCK,
    Q,
    StoreBase,
    Viewer,
    as_uuid,
    listing,
    session,
    webhook,
)


class WebhookStore(StoreBase):
    async def create_webhook(
        self,
        *,
        webhook_id: str,
        name: str,
        conversation_id: str,
        product: str,
        salt: str,
        secret_fingerprint: str,
        created_by: str,
        secret: str,
        max_per_conversation: int,
        submission_id: str = "",
        request_hash: str = "",
        legacy_hash: str = "",
    ) -> Webhook:
        """A webhook with this id and secret, or the one this retry key created already
        (returned without its secret: the service decides whether to give it again)."""
        row, new = await self._create_attached(
            "webhook",
            conversation_id=conversation_id,
            created_by=created_by,
            submission_id=submission_id,
            request_hash=request_hash,
            legacy_hash=legacy_hash,
            max_per_conversation=max_per_conversation,
            values={
                "id": webhook_id,
                "name": name,
                "product": product,
                "salt": salt,
                "secret_fingerprint": secret_fingerprint,
            },
        )
        return webhook(row, secret) if new else webhook(row)

    async def get_webhook(self, webhook_id: str) -> Webhook:
        async with self.db.raw() as pg:
            row = await Q.one(pg, "get_webhook", {"id": as_uuid(webhook_id, "webhook")})
        if row is None:
            raise NotFound(f"webhook {webhook_id!r} not found")
        return webhook(row)

    async def rotate_webhook_secret(
        self, webhook_id: str, *, salt: str, secret_fingerprint: str, secret: str
    ) -> Webhook:
        params = {
            "id": as_uuid(webhook_id, "webhook"),
            "salt": salt,
            "secret_fingerprint": secret_fingerprint,
        }
        async with self.db.raw() as pg:
            row = await Q.one(pg, "rotate_webhook_secret", params)
        if row is None:
            raise NotFound(f"webhook {webhook_id!r} not found")
        return webhook(row, secret)

    async def delete_webhook(self, webhook_id: str) -> None:
        async with self.db.raw() as pg:
            await Q.execute(pg, "delete_webhook", {"id": as_uuid(webhook_id, "webhook")})

    async def list_webhooks(
        self,
        *,
        conversation_id: str,
        product: str,
        visible_to: Viewer,
        after: int,
        limit: int,
    ) -> Page:
        params = listing(
            conversation_id=conversation_id,
            product=product,
            visible_to=visible_to,
            after=after,
            limit=limit,
        )
        return await self._page("list_webhooks", params, webhook, after)

    async def receive_webhook(
        self,
        *,
        webhook_id: str,
        delivery_key: str,
        signature: str,
        body_sha256: str,
        deliver: Callable[[], Awaitable[Delivered]],
    ) -> Delivered:
        """Deliver the event unless the replay window has it already, and record it there.

        `deliver` runs outside any transaction. While it runs this event's delivery id
        and signature are locked (session-level advisory locks): a concurrent copy of
        the same event waits, then finds the receipt and is refused as a replay. The
        receipt is written once messaging has the event; if delivering fails nothing is
        written and the sender may retry (a retry after a crash between the two is
        deduplicated by messaging, under the same idempotency key).
        """
        async with session(self.db) as conn:
            pg = conn.pg
            async with pg.transaction():
                for lock, value in (
                    (WEBHOOK_DELIVERY_LOCK, delivery_key),
                    (WEBHOOK_SIGNATURE_LOCK, signature),
                ):
                    await Q.execute(
                        pg, "lock_webhook_event", {"lock": lock, "key": f"{webhook_id}:{value}"}
                    )
                earlier = await Q.one(
                    pg,
                    "earlier_receipt",
                    {
                        "webhook_id": webhook_id,
                        "delivery_key": delivery_key,
                        "signature": signature,
                    },
                )
            if earlier is not None:
                what = (
                    f"delivery {delivery_key!r}"
                    if earlier.delivery_key == delivery_key
                    else f"this signature (delivery {earlier.delivery_key!r})"
                )
                raise Conflict(
                    f"replayed webhook event: {what} was already received at "
                    f"{earlier.received_at.isoformat()}; nothing was delivered again — send "
                    "each new event with a new X-AgentWorks-Delivery id, a current timestamp "
                    "and a fresh signature",
                    reason=Reason.REPLAYED,
                    metadata={
                        "delivery_key": earlier.delivery_key,
                        "received_at": earlier.received_at.isoformat(),
                    },
                )
            delivered = await deliver()
            async with pg.transaction():
                await Q.execute(
                    pg,
                    "add_receipt",
                    {
                        "webhook_id": webhook_id,
                        "delivery_key": delivery_key,
                        "signature": signature,
                        "body_sha256": body_sha256,
                        "delivery_id": delivered.delivery_id,
                    },
                )
        return delivered

    async def purge_webhook_receipts(self, older_than: timedelta) -> int:
        async with self.db.raw() as pg:
            return await Q.execute(pg, "purge_webhook_receipts", {"older_than": older_than})
