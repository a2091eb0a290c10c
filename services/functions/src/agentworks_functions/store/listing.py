"""Listing calls and targets (V1), by keyset: each page continues after the sort key of
the last item of the one before (never OFFSET), along the indexes of 0008_listing.sql."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from agentworks_functions.models import (
    CallSummary,
    TargetKey,
    TargetSummary,
)
from agentworks_functions.store.base import FunctionsStoreBase, Q
from agentworks_functions.store.rows import _function, _target


class ListingQueries(FunctionsStoreBase):
    async def list_calls(
        self,
        *,
        viewer: str | None,
        target: TargetKey | None,
        caller: str | None,
        statuses: Sequence[str],
        created_after: datetime | None,
        created_before: datetime | None,
        after: tuple[datetime, uuid.UUID] | None,
        limit: int,
    ) -> list[CallSummary]:
        """Up to `limit` calls newest first, after the key `after`; `viewer` None is the
        operator (every call), else the viewer's own calls and those on targets it owns."""
        params = {
            "viewer": viewer,
            "kind": target.kind if target else None,
            "name": target.name if target else None,
            "caller": caller,
            "statuses": list(statuses),
            "created_after": created_after,
            "created_before": created_before,
            "after_at": after[0] if after else None,
            "after_id": after[1] if after else None,
            "limit": limit,
        }
        async with self.db.raw() as pg:
            rows = await Q.all(pg, "list_calls", params)
        return [
            CallSummary(
                id=str(r.id),
                target=TargetKey(r.target_kind, r.target_name),
                function=r.function,
                caller=r.caller,
                status=r.status,
                progress=r.progress,
                question=r.question or "",
                created_at=r.created_at,
                ended_at=r.ended_at,
            )
            for r in rows
        ]

    async def list_targets(
        self,
        *,
        viewer: str | None,
        patterns: Sequence[str],
        target: TargetKey | None,
        after: tuple[str, str] | None,
        limit: int,
    ) -> list[TargetSummary]:
        """Up to `limit` targets by (kind, name) after `after`, each with all its functions
        (the service filters them) and its open calls; `viewer` None is the operator
        (every target), else targets it owns or with a function one of `patterns` admits."""
        params = {
            "viewer": viewer,
            "patterns": list(patterns),
            "kind": target.kind if target else None,
            "name": target.name if target else None,
            "after_kind": after[0] if after else None,
            "after_name": after[1] if after else None,
            "limit": limit,
        }
        async with self.db.raw(transaction=True) as pg:
            rows = await Q.all(pg, "list_targets", params)
            keys = [(r.kind, r.name) for r in rows]
            functions = (
                await Q.all(
                    pg,
                    "functions_of_targets",
                    {"kinds": [k for k, _ in keys], "names": [n for _, n in keys]},
                )
                if keys
                else []
            )
        by_target: dict[tuple[str, str], list[Any]] = {key: [] for key in keys}
        for row in functions:
            by_target[(row.target_kind, row.target_name)].append(_function(row))
        return [
            TargetSummary(
                target=_target(r, self.default_running_limit),
                functions=tuple(by_target[(r.kind, r.name)]),
                running=r.running,
            )
            for r in rows
        ]
