"""The SQL of webhooks out (N2): endpoints, feeds and deliveries, by named query."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from agentworks.server.db import Database
from agentworks_gateway.store import Q, _watched
from agentworks_gateway.webhooks_out.models import Attempt, Delivery, Endpoint, Feed


def _feed(row: Any) -> Feed:
    return Feed(
        endpoint_id=row.endpoint_id,
        source=row.source,
        cursor=row.cursor,
        created_at=row.created_at,
        leased_by=getattr(row, "leased_by", None),
        lease_until=getattr(row, "lease_until", None),
        last_error=getattr(row, "last_error", ""),
        principal=getattr(row, "principal", ""),
    )


def _endpoint(row: Any, feeds: Iterable[Feed] = ()) -> Endpoint:
    return Endpoint(
        endpoint_id=row.endpoint_id,
        principal=row.principal,
        url=row.url,
        description=row.description,
        secret=row.secret,
        created_at=row.created_at,
        secret_rotated_at=row.secret_rotated_at,
        feeds=tuple(feeds),
    )


def _delivery(row: Any) -> Delivery:
    return Delivery(
        delivery_id=row.delivery_id,
        endpoint_id=row.endpoint_id,
        event_type=row.event_type,
        event_key=row.event_key,
        status=row.status,
        attempts=row.attempts,
        created_at=row.created_at,
        next_attempt_at=row.next_attempt_at,
        give_up_at=row.give_up_at,
        last_attempt_at=row.last_attempt_at,
        last_error=row.last_error,
        last_status=row.last_status,
        delivered_at=row.delivered_at,
    )


class WebhookStore:
    """Endpoints, feeds and deliveries in the gateway's schema."""

    def __init__(self, database: Database) -> None:
        self.database = database

    # ---------------------------------------------------------------- endpoints

    async def create(
        self,
        *,
        endpoint_id: str,
        principal: str,
        url: str,
        description: str,
        secret: str,
        sources: Iterable[str],
        max_endpoints: int,
    ) -> Endpoint | None:
        """Store an endpoint and its feeds; None when the principal has `max_endpoints`."""
        params = {
            "endpoint_id": endpoint_id,
            "principal": principal,
            "url": url,
            "description": description,
            "secret": secret,
        }
        async with _watched("webhooks"), self.database.raw(transaction=True) as pg:
            # One principal's registrations are made one at a time, so the cap holds.
            await Q.execute(pg, "endpoint_lock", {"principal": principal})
            if await Q.value(pg, "endpoint_count", {"principal": principal}) >= max_endpoints:
                return None
            row = await Q.one(pg, "endpoint_insert", params)
            for source in sources:
                await Q.execute(pg, "feed_insert", {"endpoint_id": endpoint_id, "source": source})
            feeds = await Q.all(pg, "endpoint_feeds", {"endpoint_ids": [endpoint_id]})
        return _endpoint(row, map(_feed, feeds))

    async def page(
        self, principal: str, *, after: tuple[datetime, str] | None, limit: int
    ) -> list[Endpoint]:
        """A principal's endpoints oldest first after the key `after`, with their feeds."""
        params = {
            "principal": principal,
            "after_at": after[0] if after else None,
            "after_id": after[1] if after else None,
            "limit": limit,
        }
        async with _watched("webhooks"), self.database.raw() as pg:
            rows = await Q.all(pg, "endpoint_page", params)
            ids = [r.endpoint_id for r in rows]
            feeds = await Q.all(pg, "endpoint_feeds", {"endpoint_ids": ids}) if ids else []
        return [
            _endpoint(r, (_feed(f) for f in feeds if f.endpoint_id == r.endpoint_id)) for r in rows
        ]

    async def get(self, endpoint_id: str, principal: str) -> Endpoint | None:
        """The principal's endpoint with this id, or None (also when it is another's)."""
        params = {"endpoint_id": endpoint_id, "principal": principal}
        async with _watched("webhooks"), self.database.raw() as pg:
            row = await Q.one(pg, "endpoint_get", params)
            if row is None:
                return None
            feeds = await Q.all(pg, "endpoint_feeds", {"endpoint_ids": [endpoint_id]})
        return _endpoint(row, map(_feed, feeds))

    async def delete(self, endpoint_id: str, principal: str) -> bool:
        """Delete the principal's endpoint, its feeds and deliveries; False if none."""
        params = {"endpoint_id": endpoint_id, "principal": principal}
        async with _watched("webhooks"), self.database.raw() as pg:
            return await Q.one(pg, "endpoint_delete", params) is not None

    async def rotate(self, endpoint_id: str, principal: str, secret: str) -> Endpoint | None:
        """Give the principal's endpoint a new secret; None if it has no such endpoint."""
        params = {"endpoint_id": endpoint_id, "principal": principal, "secret": secret}
        async with _watched("webhooks"), self.database.raw() as pg:
            row = await Q.one(pg, "endpoint_rotate", params)
        return _endpoint(row) if row else None

    # --------------------------------------------------------------- deliveries

    async def deliveries(
        self,
        endpoint_id: str,
        *,
        status: str | None,
        before: tuple[datetime, str] | None,
        limit: int,
    ) -> list[Delivery]:
        """An endpoint's deliveries newest first before the key `before`."""
        params = {
            "endpoint_id": endpoint_id,
            "status": status,
            "before_at": before[0] if before else None,
            "before_id": before[1] if before else None,
            "limit": limit,
        }
        async with _watched("webhooks"), self.database.raw() as pg:
            rows = await Q.all(pg, "delivery_page", params)
        return [_delivery(r) for r in rows]

    async def redeliver(
        self, delivery_id: str, principal: str, retry_seconds: float
    ) -> Delivery | None:
        """Make the delivery due now with a new retry window; None if not the principal's."""
        params = {
            "delivery_id": delivery_id,
            "principal": principal,
            "retry_seconds": retry_seconds,
        }
        async with _watched("webhooks"), self.database.raw() as pg:
            row = await Q.one(pg, "delivery_redeliver", params)
        return _delivery(row) if row else None

    async def purge(self, keep_seconds: float, limit: int) -> tuple[int, int]:
        """Delete up to `limit` finished deliveries and `limit` ended calls' A2A push
        configs older than `keep_seconds`: how many of each."""
        params = {"keep_seconds": keep_seconds, "limit": limit}
        async with _watched("webhooks"), self.database.raw() as pg:
            deliveries = await Q.execute(pg, "deliveries_purge", params)
            pushes = await Q.execute(pg, "a2a_push_purge", params)
        return deliveries, pushes

    async def claim(self, replica: str, *, lease_seconds: float, limit: int) -> list[Attempt]:
        """Up to `limit` due deliveries for this replica to send (SKIP LOCKED)."""
        params = {"replica": replica, "lease_seconds": lease_seconds, "limit": limit}
        async with _watched("webhooks"), self.database.raw() as pg:
            rows = await Q.all(pg, "deliveries_claim", params)
        return [
            Attempt(
                delivery_id=r.delivery_id,
                endpoint_id=r.endpoint_id,
                event_type=r.event_type,
                payload=bytes(r.payload),
                attempts=r.attempts,
                give_up_at=r.give_up_at,
                url=r.url,
                secret=r.secret,
                headers=dict(r.headers or {}),
            )
            for r in rows
        ]

    async def delivered(self, attempt: Attempt, replica: str, http_status: int | None) -> None:
        params = {
            "delivery_id": attempt.delivery_id,
            "replica": replica,
            "attempts": attempt.attempts,
            "http_status": http_status,
        }
        async with _watched("webhooks"), self.database.raw() as pg:
            await Q.execute(pg, "delivery_delivered", params)

    async def failed(
        self,
        attempt: Attempt,
        replica: str,
        *,
        http_status: int | None,
        error: str,
        retry_seconds: float,
    ) -> None:
        params = {
            "delivery_id": attempt.delivery_id,
            "replica": replica,
            "attempts": attempt.attempts,
            "http_status": http_status,
            "error": error,
            "retry_seconds": retry_seconds,
        }
        async with _watched("webhooks"), self.database.raw() as pg:
            await Q.execute(pg, "delivery_failed", params)

    async def next_due(self) -> datetime | None:
        """When the next pending or failing delivery is due, if any is."""
        async with _watched("webhooks"), self.database.raw() as pg:
            due: datetime | None = await Q.value(pg, "next_delivery_due")
        return due

    # -------------------------------------------------------------------- feeds

    async def record(
        self,
        feed: Feed,
        replica: str,
        cursor: str,
        deliveries: Iterable[dict[str, Any]],
        retry_seconds: float,
    ) -> bool:
        """Insert the deliveries read from a feed and move its cursor past them, in one
        transaction; False (nothing written) when this replica lost the feed's lease."""
        advance = {
            "endpoint_id": feed.endpoint_id,
            "source": feed.source,
            "cursor": cursor,
            "replica": replica,
        }
        async with _watched("webhooks"), self.database.raw(transaction=True) as pg:
            if await Q.one(pg, "feed_advance", advance) is None:
                return False
            for delivery in deliveries:
                params = {
                    **delivery,
                    "endpoint_id": feed.endpoint_id,
                    "retry_seconds": retry_seconds,
                }
                await Q.one(pg, "delivery_insert", params)
        return True

    async def feed_error(self, feed: Feed, replica: str, error: str) -> None:
        params = {
            "endpoint_id": feed.endpoint_id,
            "source": feed.source,
            "replica": replica,
            "error": error,
        }
        async with _watched("webhooks"), self.database.raw() as pg:
            await Q.execute(pg, "feed_error", params)

    async def claim_feeds(self, replica: str, *, lease_seconds: float, limit: int) -> list[Feed]:
        """Feeds nobody follows, now this replica's to follow."""
        params = {"replica": replica, "lease_seconds": lease_seconds, "limit": limit}
        async with _watched("webhooks"), self.database.raw() as pg:
            rows = await Q.all(pg, "feeds_claim", params)
        return [_feed(r) for r in rows]

    async def renew_feeds(self, replica: str, *, lease_seconds: float) -> set[tuple[str, str]]:
        """Extend this replica's feed leases; the (endpoint_id, source) it still holds."""
        params = {"replica": replica, "lease_seconds": lease_seconds}
        async with _watched("webhooks"), self.database.raw() as pg:
            rows = await Q.all(pg, "feeds_renew", params)
        return {(r.endpoint_id, r.source) for r in rows}

    async def release_feed(self, endpoint_id: str, source: str, replica: str) -> None:
        """Give up this replica's lease of a feed (another may follow it at once)."""
        params = {"endpoint_id": endpoint_id, "source": source, "replica": replica}
        async with _watched("webhooks"), self.database.raw() as pg:
            await Q.execute(pg, "feed_release", params)
