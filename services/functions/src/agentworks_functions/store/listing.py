"""Listing calls and targets (V1), by keyset: each page continues after the sort key of
the last item of the one before (never OFFSET), along the indexes of 0008_listing.sql."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa

from agentworks_functions import tables as t
from agentworks_functions.models import (
    OPEN_STATUSES,
    WAITING_FOR_INPUT,
    CallSummary,
    TargetKey,
    TargetSummary,
)
from agentworks_functions.store.base import FunctionsStoreBase
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
        c, tg, q = t.calls, t.targets, t.questions
        question = (
            sa.select(q.c.question)
            .where(q.c.call_id == c.c.id, q.c.reply.is_(None), q.c.withdrawn_at.is_(None))
            .order_by(q.c.seq.desc())
            .limit(1)
            .scalar_subquery()
        )
        query = sa.select(
            c.c.id,
            c.c.target_kind,
            c.c.target_name,
            c.c.function,
            c.c.caller,
            c.c.status,
            c.c.progress,
            sa.case((c.c.status == WAITING_FOR_INPUT, question), else_=None).label("question"),
            c.c.created_at,
            c.c.ended_at,
        )
        if viewer is not None:
            owned = sa.select(tg.c.kind, tg.c.name).where(tg.c.owner == viewer)
            query = query.where(
                sa.or_(
                    c.c.caller == viewer,
                    sa.tuple_(c.c.target_kind, c.c.target_name).in_(owned),
                )
            )
        if target is not None:
            query = query.where(c.c.target_kind == target.kind, c.c.target_name == target.name)
        if caller is not None:
            query = query.where(c.c.caller == caller)
        if statuses:
            query = query.where(c.c.status.in_(list(statuses)))
        if created_after is not None:
            query = query.where(c.c.created_at >= created_after)
        if created_before is not None:
            query = query.where(c.c.created_at < created_before)
        if after is not None:
            query = query.where(sa.tuple_(c.c.created_at, c.c.id) < sa.tuple_(*after))
        query = query.order_by(c.c.created_at.desc(), c.c.id.desc()).limit(limit)
        async with self.db.autocommit() as conn:
            rows = (await conn.execute(query)).all()
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
        tg, f, c = t.targets, t.functions, t.calls
        running = (
            sa.select(sa.func.count())
            .where(
                c.c.target_kind == tg.c.kind,
                c.c.target_name == tg.c.name,
                c.c.status.in_(OPEN_STATUSES),
            )
            .scalar_subquery()
        )
        query = sa.select(tg, running.label("running"))
        if viewer is not None:
            callable_here = sa.exists().where(
                f.c.target_kind == tg.c.kind,
                f.c.target_name == tg.c.name,
                f.c.allowed_callers.overlap(sa.cast(list(patterns), f.c.allowed_callers.type)),
            )
            query = query.where(sa.or_(tg.c.owner == viewer, callable_here))
        if target is not None:
            query = query.where(tg.c.kind == target.kind, tg.c.name == target.name)
        if after is not None:
            query = query.where(sa.tuple_(tg.c.kind, tg.c.name) > sa.tuple_(*after))
        query = query.order_by(tg.c.kind, tg.c.name).limit(limit)
        async with self.db.transaction() as conn:
            rows = (await conn.execute(query)).all()
            keys = [(r.kind, r.name) for r in rows]
            functions = (
                (
                    await conn.execute(
                        sa.select(f)
                        .where(sa.tuple_(f.c.target_kind, f.c.target_name).in_(keys))
                        .order_by(f.c.target_kind, f.c.target_name, f.c.name)
                    )
                ).all()
                if keys
                else []
            )
        by_target: dict[tuple[str, str], list] = {key: [] for key in keys}
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
