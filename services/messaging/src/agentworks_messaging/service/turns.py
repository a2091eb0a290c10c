"""Turns (C10, C11): claiming a conversation's pending deliveries as a turn, its lease
and its end, and what a turn's capability may do (T3); the `TurnCases` of
`MessagingService`. No gRPC, no SQL here."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import structlog

from agentworks.core.checks import check_no_nul
from agentworks.core.errors import PermissionDenied, Reason
from agentworks.core.identity import Identity
from agentworks.server.capabilities import ended_refusal, require_item
from agentworks.server.db import Listener
from agentworks.server.shares import shares
from agentworks_messaging.models import TargetKey, Turn
from agentworks_messaging.store import TURN_CHANNEL, MessagingStore

log = structlog.get_logger("agentworks.messaging")

# A turn's lease in seconds when the request leaves it 0 (C10). Its range
# (limits.MIN/MAX_TURN_LEASE_SECONDS), the wait's and the count of targets are the
# protos' field rules (ClaimTurnRequest, HeartbeatTurnRequest), checked before the handler.
LEASE_DEFAULT = 30


class TurnCases:
    """The turn use cases of `MessagingService`."""

    store: MessagingStore
    listener: Listener
    poll_fallback_seconds: float
    draining: asyncio.Event

    async def claim_turn(
        self,
        identity: Identity,
        *,
        targets: Sequence[TargetKey],
        wait_seconds: int,
        lease_seconds: int,
    ) -> Turn | None:
        """Claim one conversation's pending deliveries as a turn, waiting if none (C10)."""
        for key in targets:
            if not identity.serves(key.kind, key.name):
                raise PermissionDenied(
                    f"{identity.principal} may not act for {key}",
                    reason=Reason.OUT_OF_SCOPE,
                    metadata={"target": str(key)},
                )
        lease = timedelta(seconds=lease_seconds or LEASE_DEFAULT)
        deadline = time.monotonic() + wait_seconds
        # One idle claim of a target is woken per notice (`one`), and a claim that takes
        # a turn while more are claimable wakes the next: one claim statement per turn,
        # not one per idle runtime.
        with self.listener.subscribe(TURN_CHANNEL, [str(k) for k in targets], one=True) as waiter:
            turn, more = await self.store.claim_turn(identity.principal, targets, lease)
            if turn is None and wait_seconds > 0 and not self.draining.is_set():
                # B7: waiting holds one of the principal's long-polls.
                with shares().wait(identity.principal):
                    while True:
                        remaining = deadline - time.monotonic()
                        if turn is not None or remaining <= 0 or self.draining.is_set():
                            break
                        await waiter.wait(min(remaining, self.poll_fallback_seconds))
                        turn, more = await self.store.claim_turn(identity.principal, targets, lease)
        if more and turn is not None:
            self.listener.wake_one(TURN_CHANNEL, str(turn.target))
        if turn is not None:
            log.info(
                "turn.claimed",
                turn_id=turn.id,
                conversation_id=turn.conversation_id,
                deliveries=len(turn.deliveries),
            )
        return turn

    async def _check_turn_capability(
        self, identity: Identity, conversation_id: str | None = None
    ) -> None:
        """A turn capability acts only while its turn is active and leased, and sends
        only into its own conversation (T3)."""
        bound = identity.capability
        if bound is None:
            return
        require_item(identity, "turn", bound.id)
        if conversation_id is not None and conversation_id != bound.conversation_id:
            raise PermissionDenied(
                f"this capability is for {bound.describe()}: it acts in that "
                "conversation only (its reply inbox, its transcript)",
                reason=Reason.OUT_OF_SCOPE,
                metadata={"conversation_id": bound.conversation_id},
            )
        _, status = await self.store.turn_lease(bound.id, identity.principal)
        if status != "active":
            raise ended_refusal(bound, status)

    async def heartbeat_turn(
        self, identity: Identity, *, turn_id: str, lease_seconds: int
    ) -> tuple[Any, str]:
        """Extend the caller's turn's lease: (new expiry, conversation id)."""
        require_item(identity, "turn", turn_id)
        await self._check_turn_capability(identity)
        lease = timedelta(seconds=lease_seconds or LEASE_DEFAULT)
        return await self.store.heartbeat(turn_id, identity.principal, lease)

    async def complete_turn(
        self, identity: Identity, *, turn_id: str, interrupted: bool = False, error: str = ""
    ) -> None:
        """End the caller's turn: handled, or given up unhandled (`interrupted`, C11);
        `error` says why it failed (L12), kept on the turn for the target's owner."""
        require_item(identity, "turn", turn_id)
        check_no_nul(error, "error")
        await self._check_turn_capability(identity)
        await self.store.complete_turn(
            turn_id, identity.principal, interrupted=interrupted, error=error
        )
        if interrupted:
            log.warning("turn.interrupted", turn_id=turn_id, reason="given up by its runtime")
        else:
            log.info("turn.completed", turn_id=turn_id, failed=bool(error))

    async def interrupt_expired_turns(self) -> int:
        count = await self.store.interrupt_expired_turns()
        if count:
            log.warning("turns.interrupted", count=count, reason="lease expired")
        return count
