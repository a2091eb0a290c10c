"""Pauses (S3): operators hold timers globally, per product or per kind of product."""

from __future__ import annotations

import structlog

from agentworks.core.checks import check_no_nul
from agentworks.core.errors import InvalidArgument, PermissionDenied, Reason, rule_meta
from agentworks.core.identity import Identity
from agentworks_scheduler.models import PauseEntry
from agentworks_scheduler.service.access import Access
from agentworks_scheduler.service.rules import MAX_REASON_CHARS, check_pause_scope

log = structlog.get_logger("agentworks.scheduler")


class Pauses(Access):
    async def pause(self, identity: Identity, *, product: str, reason: str) -> list[PauseEntry]:
        """Hold timers globally or for a product (S3); operators only."""
        if not identity.is_operator:
            raise PermissionDenied(
                "pausing timers needs the operator role",
                reason=Reason.ROLE_REQUIRED,
                metadata={"role": "operator"},
            )
        check_pause_scope(product)
        if len(reason) > MAX_REASON_CHARS:
            raise InvalidArgument(
                f"reason is longer than {MAX_REASON_CHARS} characters",
                reason=Reason.FIELD_RULE,
                metadata=rule_meta("reason", "string.max_len", MAX_REASON_CHARS),
            )
        check_no_nul(reason, "reason")
        entries = await self.store.pause(product, reason, identity.principal)
        log.warning("timers.paused", product=product or "(global)", reason=reason)
        return entries

    async def resume(self, identity: Identity, *, product: str) -> tuple[bool, list[PauseEntry]]:
        """Lift the pause of exactly this scope; held timers fire on the next tick (S3).

        Idempotent: a scope that is not paused changes nothing. Returns whether a pause
        was lifted, and the pauses in force.
        """
        if not identity.is_operator:
            raise PermissionDenied(
                "resuming timers needs the operator role",
                reason=Reason.ROLE_REQUIRED,
                metadata={"role": "operator"},
            )
        check_pause_scope(product)
        resumed, entries = await self.store.resume(product)
        log.warning("timers.resumed", product=product or "(global)", resumed=resumed)
        return resumed, entries

    async def pause_state(self, identity: Identity) -> list[PauseEntry]:
        return await self.store.pauses()
