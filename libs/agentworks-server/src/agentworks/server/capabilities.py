"""Capabilities on the services' side (T3): issuing one with each claimed turn or
execution, and the checks that hold it to its item.

Three layers refuse a capability outside its item:

1. The interceptor (agentworks.server.rpc) lets an identity with a capability reach only
   the methods its service lists for that kind (`GrpcServer(capability_methods=...)`);
   every other method answers PERMISSION_DENIED, and a service that lists none refuses
   every capability.
2. Each of those operations calls `require_item` (or checks the conversation) with the
   item it acts on: another turn's or call's id is PERMISSION_DENIED.
3. The operation checks the lease is still the claimer's, as for the runtime itself, and
   for a capability that the item has not ended (`ended_refusal`): a capability ends with
   the lease, expired, finished or cancelled; its `exp` is the lease's expiry besides.

The capability itself being invalid or expired is the identity check's (UNAUTHENTICATED).
"""

from __future__ import annotations

import time
from datetime import datetime

from agentworks.core.capability import Capability
from agentworks.core.errors import PermissionDenied
from agentworks.core.identity import Identity, mint
from agentworks.core.keys import SigningKey
from agentworks.core.trust import (
    CAPABILITY_PRINCIPAL_KINDS,
    CAPABILITY_SIGNERS,
    MAX_LIFETIME_SECONDS,
)


class CapabilityIssuer:
    """Mints the capability of one kind of item (turn or execution) with the service's
    own key, valid until the lease's expiry (at most MAX_LIFETIME_SECONDS). Mints nothing
    ("") without a key of the kind's signer, or for a claimer that is not an agent or
    workflow (a service runtime): trust.py would refuse it."""

    def __init__(self, key: SigningKey | None, kind: str) -> None:
        self.kind = kind
        self._key = key if key is not None and key.signer == CAPABILITY_SIGNERS[kind] else None

    def issue(self, principal: str, capability: Capability, lease_expires_at: datetime) -> str:
        if self._key is None or principal.split(":", 1)[0] not in CAPABILITY_PRINCIPAL_KINDS:
            return ""
        now = int(time.time())
        ttl = min(MAX_LIFETIME_SECONDS, int(lease_expires_at.timestamp()) - now)
        if ttl <= 0:
            return ""
        return mint(principal, self._key, ttl_seconds=ttl, capability=capability, now=now)


def _a(kind: str) -> str:
    """`kind` with its article: "a turn", "an execution"."""
    return f"{'an' if kind[:1] in 'aeiou' else 'a'} {kind}"


def method_refusal(identity: Identity, method: str, allowed: dict[str, frozenset[str]]) -> str:
    """Why `identity`'s capability may not call `method` here ("" when it may, or when the
    identity is no capability)."""
    bound = identity.capability
    if bound is None:
        return ""
    methods = allowed.get(bound.kind, frozenset())
    if method in methods:
        return ""
    if methods:
        return (
            f"{_a(bound.kind)} capability allows only {', '.join(sorted(methods))} here "
            f"(for {bound.describe()}); not {method}"
        )
    return f"{_a(bound.kind)} capability allows nothing on this service; not {method}"


def require_item(identity: Identity, kind: str, item_id: str) -> None:
    """PermissionDenied unless `identity` is no capability, or the capability of exactly
    this `kind` of item with this id."""
    bound = identity.capability
    if bound is None:
        return
    if bound.kind != kind:
        raise PermissionDenied(
            f"{_a(bound.kind)} capability does not act on {_a(kind)} (it is for {bound.describe()})"
        )
    if bound.id != item_id:
        raise PermissionDenied(
            f"this capability is for {bound.describe()} only, not {kind} {item_id!r}"
        )


def require_conversation(identity: Identity, conversation_id: str) -> None:
    """PermissionDenied unless `identity` is no capability, or the capability of a turn
    of this conversation (how a turn calls functions and asks for wake-ups: for its own
    conversation only)."""
    bound = identity.capability
    if bound is None:
        return
    if bound.kind != "turn":
        raise PermissionDenied(
            f"{_a(bound.kind)} capability does not act for a conversation "
            f"(it is for {bound.describe()})"
        )
    if conversation_id != bound.conversation_id:
        raise PermissionDenied(
            f"this capability is for {bound.describe()}: it acts for that conversation "
            f"only, not {conversation_id or 'none'!r}"
        )


def ended_refusal(capability: Capability, status: str) -> PermissionDenied:
    """The refusal of a capability whose item has ended (`status`): it ends with the lease."""
    return PermissionDenied(
        f"the capability of {capability.describe()} has ended with its lease ({status}): "
        "it allows nothing more"
    )
