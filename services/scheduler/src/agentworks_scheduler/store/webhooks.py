"""SQL of webhooks (S5): create, read, rotate, delete, list; the replay window of events."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert

from agentworks.core.errors import Conflict, NotFound
from agentworks_scheduler import tables as t
from agentworks_scheduler.models import Delivered, Page, Webhook
from agentworks_scheduler.store.common import (
    WEBHOOK_DELIVERY_LOCK,
    WEBHOOK_SIGNATURE_LOCK,
    StoreBase,
    Viewer,
    as_uuid,
    listing,
    lock_key,
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
            t.webhooks,
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
        h = t.webhooks
        async with self.db.transaction() as conn:
            row = (
                await conn.execute(sa.select(h).where(h.c.id == as_uuid(webhook_id, "webhook")))
            ).one_or_none()
        if row is None:
            raise NotFound(f"webhook {webhook_id!r} not found")
        return webhook(row)

    async def rotate_webhook_secret(
        self, webhook_id: str, *, salt: str, secret_fingerprint: str, secret: str
    ) -> Webhook:
        h = t.webhooks
        async with self.db.transaction() as conn:
            row = (
                await conn.execute(
                    h.update()
                    .where(h.c.id == as_uuid(webhook_id, "webhook"))
                    .values(
                        salt=salt,
                        secret_fingerprint=secret_fingerprint,
                        secret_rotated_at=sa.func.now(),
                    )
                    .returning(*h.c)
                )
            ).one_or_none()
        if row is None:
            raise NotFound(f"webhook {webhook_id!r} not found")
        return webhook(row, secret)

    async def delete_webhook(self, webhook_id: str) -> None:
        async with self.db.transaction() as conn:
            await conn.execute(
                t.webhooks.delete().where(t.webhooks.c.id == as_uuid(webhook_id, "webhook"))
            )

    async def list_webhooks(
        self,
        *,
        conversation_id: str,
        product: str,
        visible_to: Viewer,
        after: int,
        limit: int,
    ) -> Page:
        query = listing(
            t.webhooks,
            conversation_id=conversation_id,
            product=product,
            visible_to=visible_to,
            after=after,
        )
        return await self._page(query, webhook, limit, after)

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
        r = t.webhook_receipts
        async with session(self.db) as conn:
            async with conn.begin():
                for lock, value in (
                    (WEBHOOK_DELIVERY_LOCK, delivery_key),
                    (WEBHOOK_SIGNATURE_LOCK, signature),
                ):
                    await conn.execute(
                        sa.select(sa.func.pg_advisory_lock(lock, lock_key(f"{webhook_id}:{value}")))
                    )
                earlier = (
                    await conn.execute(
                        sa.select(r.c.delivery_key, r.c.received_at).where(
                            r.c.webhook_id == webhook_id,
                            sa.or_(r.c.delivery_key == delivery_key, r.c.signature == signature),
                        )
                    )
                ).first()
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
                    "and a fresh signature"
                )
            delivered = await deliver()
            async with conn.begin():
                await conn.execute(
                    pg_insert(r)
                    .values(
                        webhook_id=webhook_id,
                        delivery_key=delivery_key,
                        signature=signature,
                        body_sha256=body_sha256,
                        delivery_id=delivered.delivery_id,
                    )
                    .on_conflict_do_nothing()
                )
        return delivered

    async def purge_webhook_receipts(self, older_than: timedelta) -> int:
        r = t.webhook_receipts
        async with self.db.transaction() as conn:
            result = await conn.execute(
                r.delete().where(r.c.received_at < sa.func.now() - older_than)
            )
        return result.rowcount or 0
