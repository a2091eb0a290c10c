"""What every use case of the functions service shares: store, listener, access, leases."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

from agentworks.core.checks import bounded
from agentworks.core.errors import NotFound, PermissionDenied, Reason, kind_meta
from agentworks.core.identity import Identity
from agentworks.server.capabilities import ended_refusal, require_item
from agentworks.server.db import Listener, Waiter
from agentworks_functions.models import (
    OPEN_STATUSES,
    Call,
    StatusView,
    Target,
    TargetKey,
)
from agentworks_functions.schemas.pool import CheckPool
from agentworks_functions.service.rules import (
    LEASE_DEFAULT,
    _ClaimGate,
    sees_call,
)
from agentworks_functions.store import (
    FunctionsStore,
    call_not_found,
)


class FunctionsServiceBase:
    """What the parts of `FunctionsService` share."""

    def __init__(
        self,
        store: FunctionsStore,
        listener: Listener,
        *,
        poll_fallback_seconds: float = 5.0,
        min_lease_seconds: int = 5,
        max_lease_seconds: int = 300,
        notice_retry_seconds: float = 5.0,
        claim_timeout_seconds: float = 0.0,
        question_timeout_seconds: float = 0.0,
        target_file_quota_bytes: int = 0,
        checks: CheckPool | None = None,
    ) -> None:
        # Costly schema checks run in these worker processes (B2; app.py stops them).
        self.checks = checks or CheckPool()
        self.target_file_quota_bytes = target_file_quota_bytes
        self.store = store
        self.claim_timeout = timedelta(seconds=claim_timeout_seconds) or None
        self.question_timeout = timedelta(seconds=question_timeout_seconds) or None
        self.listener = listener
        self.poll_fallback_seconds = poll_fallback_seconds
        self.min_lease_seconds = min_lease_seconds
        self.max_lease_seconds = max_lease_seconds
        self.notice_retry = timedelta(seconds=notice_retry_seconds)
        self.draining = asyncio.Event()
        self._claim_gates: dict[tuple[str, ...], _ClaimGate] = {}

    async def _owned_target(self, identity: Identity, key: TargetKey) -> Target:
        target = await self.store.get_target(key)
        if identity.principal != target.owner:
            raise PermissionDenied(
                f"only the owner of {key} ({target.owner}) may declare, update or remove "
                "its functions",
                reason=Reason.NOT_OWNER,
                metadata={"target": str(key), "owner": target.owner},
            )
        return target

    async def _check_reader(
        self, identity: Identity, call_id: str, *, owners_only: str = ""
    ) -> None:
        """A3: the caller, the target's owner and the operator may read and cancel a call;
        everyone else gets NOT_FOUND. `owners_only` names what only the caller and the
        owner may do (answer its question, read its files): the operator, who knows the
        call exists, is told so (PERMISSION_DENIED)."""
        caller, owner = await self.store.call_access(call_id)
        if not sees_call(identity, caller, owner):
            raise call_not_found(call_id)
        if owners_only and identity.principal not in (caller, owner):
            raise PermissionDenied(
                f"only the caller of call {call_id} ({caller}) and the owner of its target "
                f"({owner}) may {owners_only}; the operator may read its status and cancel it",
                reason=Reason.NOT_OWNER,
                metadata={"call_id": call_id, "caller": caller, "owner": owner},
            )

    async def _until_ended(
        self,
        waiter: Waiter,
        call_id: str,
        deadline: float,
        view: StatusView | None,
        page: tuple[int, int, int, int],
    ) -> StatusView | None:
        """Wait (subscribed to the call's end) until it ended or `deadline`; the last view.

        A wake-up means the call ended (or the listener reconnected): the view is read
        once, at the end. Without one, a cheap status check stands in for the NOTIFY.
        """
        while view is None or view.call.is_open:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.draining.is_set():
                break
            woken = await waiter.wait(min(remaining, self.poll_fallback_seconds))
            if not woken and await self.store.call_status(call_id) in OPEN_STATUSES:
                continue
            view = await self._view(call_id, *page)
        return view

    async def _view(
        self, call_id: str, after: int, message_limit: int, after_event: int, event_limit: int
    ) -> StatusView:
        view, _ = await self.store.status(
            call_id,
            after=after,
            message_limit=message_limit,
            after_event=after_event,
            event_limit=event_limit,
        )
        return view

    def _lease(self, lease_seconds: int) -> timedelta:
        return timedelta(
            seconds=bounded(
                lease_seconds,
                "lease_seconds",
                self.min_lease_seconds,
                self.max_lease_seconds,
                max(LEASE_DEFAULT, self.min_lease_seconds),
            )
        )

    async def _ended_status(self, identity: Identity, call_id: str) -> str:
        return (await self._execution(identity, call_id)).status

    async def _execution(self, identity: Identity, call_id: str) -> Call:
        try:
            call: Call | None = await self.store.get_call(call_id)
        except NotFound:
            call = None  # the same answer as for someone else's call (A3)
        if call is None or call.runtime != identity.principal:
            raise NotFound(
                f"execution {call_id!r} not found: claim it with ClaimExecution first",
                reason=Reason.NOT_FOUND,
                metadata=kind_meta("execution", call_id),
            )
        return call

    async def _check_capability(self, identity: Identity, call_id: str) -> None:
        """An execution capability acts on its own call only, while the call is open and
        its lease is live (T3); nothing to check for an identity without one."""
        if identity.capability is None:
            return
        require_item(identity, "execution", call_id)
        await self._live_execution(identity)

    async def _live_execution(self, identity: Identity) -> Call:
        """The call of the execution `identity`'s capability is bound to, while it is open
        and its lease is live (T3); PermissionDenied once it ended."""
        bound = identity.capability
        assert bound is not None and bound.kind == "execution"
        call = await self._execution(identity, bound.id)
        if not call.is_open:
            raise ended_refusal(bound, call.status)
        if call.lease_expires_at is None or call.lease_expires_at <= datetime.now(UTC):
            raise ended_refusal(bound, "its lease expired")
        return call

    async def _check_capability_sees(self, identity: Identity, call: Call) -> None:
        """A capability sees only its item's calls (T3, L2, L8): a turn's, those it asked
        to be notified of in its conversation (made from it); an execution's, those it
        made, while it is live. Any other call is NOT_FOUND, as for a stranger (A3)."""
        bound = identity.capability
        if bound is None:
            return
        if bound.kind == "execution":
            await self._live_execution(identity)
            mine = call.source_call_id == bound.id
        else:
            mine = call.notify_conversation_id == bound.conversation_id
        if not mine:
            raise call_not_found(call.id)
