"""The use cases of webhooks out (N2), as the `endpoints` tool runs them for a caller.

A caller registers, lists, gets, deletes and rotates its own endpoints, and lists and
redelivers their deliveries; another principal's endpoint or delivery is not found (A3).
Registering checks everything before storing anything: the URL against the address
policy, each source (`call_ends`, or `inbox:<id>` of an inbox the caller may read, read
as the caller), and the caller's cap on endpoints.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime

from agentworks.core import errors
from agentworks.core.checks import check_no_nul
from agentworks.core.identity import Identity
from agentworks_gateway.webhooks_out.models import (
    CALL_ENDS,
    INBOX_PREFIX,
    STATUSES,
    Delivery,
    Endpoint,
)
from agentworks_gateway.webhooks_out.policy import AddressPolicy
from agentworks_gateway.webhooks_out.sending import new_secret
from agentworks_gateway.webhooks_out.settings import WebhooksOutConfig
from agentworks_gateway.webhooks_out.store import WebhookStore

MAX_SOURCES = 10
MAX_DESCRIPTION_CHARS = 500
# Reads one message of an inbox as the caller: NotFound when it may not (A3).
InboxCheck = Callable[[Identity, str], Awaitable[None]]


def _not_found(kind: str, ident: str) -> errors.NotFound:
    return errors.NotFound(
        f"{kind} {ident!r} not found: list yours with `agentworks endpoints list`",
        reason=errors.Reason.NOT_FOUND,
        metadata=errors.kind_meta(kind, ident),
    )


def encode_key(at: datetime, ident: str) -> str:
    """A keyset page's cursor (opaque to callers)."""
    return base64.urlsafe_b64encode(f"{at.isoformat()}|{ident}".encode()).decode()


def decode_key(cursor: str | None, field: str) -> tuple[datetime, str] | None:
    """The key of a cursor from `encode_key`; InvalidArgument for anything else."""
    if not cursor:
        return None
    try:
        at, _, ident = base64.urlsafe_b64decode(cursor.encode()).decode().partition("|")
        return datetime.fromisoformat(at), ident
    except (ValueError, UnicodeError):
        raise errors.InvalidArgument(
            f"{field} is not a cursor this list gave: pass next_cursor as it was returned",
            reason=errors.Reason.INVALID_VALUE,
            metadata={"field": field},
        ) from None


def check_sources(sources: Iterable[str]) -> list[str]:
    """The sources as given, in order, each once; InvalidArgument naming a bad one."""
    found: list[str] = []
    for source in sources:
        inbox = source[len(INBOX_PREFIX) :] if source.startswith(INBOX_PREFIX) else None
        if source != CALL_ENDS and not inbox:
            raise errors.InvalidArgument(
                f'events: {source[:100]!r} is not an event source: use "call_ends" (the ends '
                'of your calls) or "inbox:<inbox_id>" (new messages of an inbox of yours)',
                reason=errors.Reason.INVALID_VALUE,
                metadata={"field": "events", "value": source[:100]},
            )
        check_no_nul(source, "events")
        if source not in found:
            found.append(source)
    if not found:
        raise errors.InvalidArgument(
            'events is empty: give "call_ends" and/or "inbox:<inbox_id>"',
            reason=errors.Reason.FIELD_RULE,
            metadata=errors.rule_meta("events", "repeated.min_items", 1),
        )
    if len(found) > MAX_SOURCES:
        raise errors.InvalidArgument(
            f"events names {len(found)} sources, more than {MAX_SOURCES}: register another "
            "endpoint for the rest",
            reason=errors.Reason.FIELD_RULE,
            metadata=errors.rule_meta("events", "repeated.max_items", MAX_SOURCES),
        )
    return found


class Endpoints:
    """Webhooks-out endpoints and deliveries, for the principal that owns them."""

    def __init__(
        self,
        store: WebhookStore,
        config: WebhooksOutConfig,
        check_inbox: InboxCheck,
        wake: Callable[[], None] = lambda: None,
    ) -> None:
        self.store = store
        self.config = config
        self.policy = AddressPolicy(config.allow)
        self.check_inbox = check_inbox
        # Tells this replica's dispatcher and feeds there is something new to do.
        self.wake = wake

    async def register(
        self, caller: Identity, *, url: str, events: list[str], description: str = ""
    ) -> Endpoint:
        """A new endpoint with its secret; nothing stored when anything is refused."""
        sources = check_sources(events)
        check_no_nul(description, "description")
        if len(description) > MAX_DESCRIPTION_CHARS:
            raise errors.InvalidArgument(
                f"description has {len(description)} characters, more than {MAX_DESCRIPTION_CHARS}",
                reason=errors.Reason.FIELD_RULE,
                metadata=errors.rule_meta("description", "string.max_len", MAX_DESCRIPTION_CHARS),
            )
        await self.policy.check(url)
        for source in sources:
            if source.startswith(INBOX_PREFIX):
                await self.check_inbox(caller, source[len(INBOX_PREFIX) :])
        endpoint = await self.store.create(
            endpoint_id="ep_" + uuid.uuid4().hex,
            principal=caller.principal,
            url=url,
            description=description,
            secret=new_secret(),
            sources=sources,
            max_endpoints=self.config.max_endpoints,
        )
        if endpoint is None:
            raise errors.InvalidArgument(
                f"{caller.principal} has {self.config.max_endpoints} webhook endpoints, the "
                "most one principal may have (GATEWAY_WEBHOOKS_MAX_ENDPOINTS): delete one first",
                reason=errors.Reason.STORED_LIMIT,
                metadata={
                    "limit": str(self.config.max_endpoints),
                    "counted": "endpoints",
                    "setting": "GATEWAY_WEBHOOKS_MAX_ENDPOINTS",
                },
            )
        self.wake()
        return endpoint

    async def list_endpoints(
        self, caller: Identity, *, after: str | None, limit: int
    ) -> tuple[list[Endpoint], str]:
        """The caller's endpoints oldest first, and the cursor of the next page ("")."""
        rows = await self.store.page(
            caller.principal, after=decode_key(after, "after"), limit=limit + 1
        )
        more = len(rows) > limit
        rows = rows[:limit]
        cursor = encode_key(rows[-1].created_at, rows[-1].endpoint_id) if more else ""
        return rows, cursor

    async def get(self, caller: Identity, endpoint_id: str) -> Endpoint:
        endpoint = await self.store.get(endpoint_id, caller.principal)
        if endpoint is None:
            raise _not_found("endpoint", endpoint_id)
        return endpoint

    async def delete(self, caller: Identity, endpoint_id: str) -> None:
        if not await self.store.delete(endpoint_id, caller.principal):
            raise _not_found("endpoint", endpoint_id)

    async def rotate(self, caller: Identity, endpoint_id: str) -> Endpoint:
        """A new secret, used from the next attempt on; the old one is not used again."""
        endpoint = await self.store.rotate(endpoint_id, caller.principal, new_secret())
        if endpoint is None:
            raise _not_found("endpoint", endpoint_id)
        return endpoint

    async def deliveries(
        self,
        caller: Identity,
        endpoint_id: str,
        *,
        status: str | None,
        after: str | None,
        limit: int,
    ) -> tuple[list[Delivery], str]:
        """The endpoint's deliveries newest first (of one status), and the next cursor."""
        if status is not None and status not in STATUSES:
            raise errors.InvalidArgument(
                f"status {status[:50]!r} is not one of {', '.join(STATUSES)}",
                reason=errors.Reason.INVALID_VALUE,
                metadata={"field": "status"},
            )
        await self.get(caller, endpoint_id)  # another's endpoint is not found (A3)
        rows = await self.store.deliveries(
            endpoint_id, status=status, before=decode_key(after, "after"), limit=limit + 1
        )
        more = len(rows) > limit
        rows = rows[:limit]
        cursor = encode_key(rows[-1].created_at, rows[-1].delivery_id) if more else ""
        return rows, cursor

    async def redeliver(self, caller: Identity, delivery_id: str) -> Delivery:
        """Send a delivery again under its id, now, with a new retry window."""
        delivery = await self.store.redeliver(
            delivery_id, caller.principal, self.config.retry_seconds
        )
        if delivery is None:
            raise _not_found("delivery", delivery_id)
        self.wake()
        return delivery
