"""Listing calls and targets (V1) under A3: the operator sees every one; anyone else
their own calls, every call on a target they own, and the targets they own or may call a
function of (only the functions they may call)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from agentworks.core.checks import (
    decode_key_cursor,
    decode_time_cursor,
    encode_key_cursor,
    encode_time_cursor,
)
from agentworks.core.errors import InvalidArgument, Reason, rule_meta
from agentworks.core.identity import Identity, check_principal
from agentworks.core.limits import LIST_PAGE_DEFAULT
from agentworks_functions.models import CallSummary, TargetKey, TargetSummary
from agentworks_functions.schemas.callers import may_call, patterns_admitting
from agentworks_functions.service.base import FunctionsServiceBase

_CALLS_CURSOR = "fc1:"
_TARGETS_CURSOR = "ft1:"


class Listing(FunctionsServiceBase):
    async def list_calls(
        self,
        identity: Identity,
        *,
        target: TargetKey | None,
        caller: str,
        statuses: Sequence[str],
        created_after: datetime | None,
        created_before: datetime | None,
        after: str,
        limit: int,
    ) -> tuple[list[CallSummary], str]:
        """A page of the calls `identity` may see, newest first, and the next cursor
        ("" after the last page)."""
        limit = limit or LIST_PAGE_DEFAULT  # its range is the proto's rule
        key = decode_time_cursor(after, _CALLS_CURSOR)
        if caller:
            check_principal(caller, "caller")
        if created_after and created_before and created_after >= created_before:
            raise InvalidArgument(
                f"created_after ({created_after.isoformat()}) is not before created_before "
                f"({created_before.isoformat()}): no call could match",
                reason=Reason.FIELD_RULE,
                metadata=rule_meta("created_after", "lt_created_before"),
            )
        calls = await self.store.list_calls(
            viewer=None if identity.is_operator else identity.principal,
            target=target,
            caller=caller or None,
            statuses=tuple(dict.fromkeys(statuses)),
            created_after=created_after,
            created_before=created_before,
            after=key,
            limit=limit + 1,
        )
        more = len(calls) > limit
        calls = calls[:limit]
        last = calls[-1] if more else None
        cursor = encode_time_cursor(_CALLS_CURSOR, last.created_at, last.id) if last else ""
        return calls, cursor

    async def list_targets(
        self, identity: Identity, *, target: TargetKey | None, after: str, limit: int
    ) -> tuple[list[TargetSummary], str]:
        """A page of the targets `identity` may see by (kind, name), each with the
        functions it may see and its running slots, and the next cursor."""
        limit = limit or LIST_PAGE_DEFAULT  # its range is the proto's rule
        key = decode_key_cursor(after, _TARGETS_CURSOR, (str, str))
        viewer = None if identity.is_operator else identity.principal
        targets = await self.store.list_targets(
            viewer=viewer,
            patterns=patterns_admitting(identity.principal),
            target=target,
            after=(key[0], key[1]) if key else None,
            limit=limit + 1,
        )
        more = len(targets) > limit
        targets = targets[:limit]
        shown = [
            s
            if viewer is None or s.target.owner == viewer
            else TargetSummary(
                target=s.target,
                functions=tuple(
                    f for f in s.functions if may_call(viewer, s.target.owner, f.allowed_callers)
                ),
                running=s.running,
            )
            for s in targets
        ]
        last = targets[-1].target.key if more else None
        return shown, encode_key_cursor(_TARGETS_CURSOR, last.kind, last.name) if last else ""
