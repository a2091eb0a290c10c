"""Executions: claims, leases, reports, questions, corrections, finishing (R1, F10-F12)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from psycopg.types.json import Jsonb
from sqlalchemy.dialects.postgresql import insert as pg_insert

from agentworks.core.errors import (
    InvalidArgument,
    NotFound,
    PreconditionFailed,
)
from agentworks.server.db import fetch_one, notify
from agentworks_functions import tables as t
from agentworks_functions.models import (
    CANCELLED,
    FAILED,
    OPEN_STATUSES,
    RUNNING,
    WAITING_FOR_INPUT,
    Call,
    Ending,
    Question,
    TargetKey,
)
from agentworks_functions.store.base import FunctionsStoreBase
from agentworks_functions.store.rows import (
    CALL_CHANNEL,
    Claim,
    _call,
    _uuid,
    call_ended,
)
from agentworks_functions.store.sql import _CLAIM_ONE, _FINISH


class ExecutionQueries(FunctionsStoreBase):
    async def claim_execution(
        self, runtime: str, keys: Sequence[TargetKey], lease: timedelta
    ) -> Call | None:
        """Take the oldest unclaimed call of these targets (R1).

        One statement in autocommit: pick the oldest unclaimed call (skipping rows other
        claims hold), take it, and notify its status waiters at commit. An empty claim
        (another runtime was faster) costs one round trip.
        """
        if len(keys) == 1:
            params = {"claim_kind": keys[0].kind, "claim_name": keys[0].name, "runtime": runtime}
            async with self.db.raw() as pg:
                row = await fetch_one(pg, _CLAIM_ONE, {**params, "lease": lease})
            return _call(row) if row is not None else None
        c, q = t.calls, t.queued_calls
        by_kind: dict[str, list[str]] = {}
        for key in keys:
            by_kind.setdefault(key.kind, []).append(key.name)
        target_filter = sa.or_(
            *(
                sa.and_(q.c.target_kind == kind, q.c.target_name.in_(names))
                for kind, names in by_kind.items()
            )
        )
        oldest = (  # as _CLAIM_CTES: from the queue, the call's row locked
            sa.select(c.c.id)
            .join(q, q.c.call_id == c.c.id)
            .where(target_filter, c.c.status == RUNNING, c.c.runtime.is_(None))
            .order_by(q.c.created_at)
            .limit(1)
            .with_for_update(of=c, skip_locked=True)
            .cte("oldest")
        )
        claimed = (
            c.update()
            .where(c.c.id == oldest.c.id)
            .values(
                runtime=runtime,
                claimed_at=sa.func.now(),
                lease_expires_at=sa.func.now() + lease,
                version=c.c.version + 1,
            )
            .returning(*c.c)
            .cte("claimed")
        )
        stmt = sa.select(
            claimed,
            sa.func.pg_notify(CALL_CHANNEL, sa.cast(claimed.c.id, sa.Text)).label("notified"),
        )
        async with self.db.autocommit() as conn:
            row = (await conn.execute(stmt)).one_or_none()
        return _call(row) if row is not None else None

    async def heartbeat(self, call_id: str, runtime: str, lease: timedelta) -> tuple[str, datetime]:
        c = t.calls
        call_uuid = _uuid(call_id, "call")
        async with self.db.transaction() as conn:
            row = (
                await conn.execute(
                    c.update()
                    .where(
                        c.c.id == call_uuid, c.c.runtime == runtime, c.c.status.in_(OPEN_STATUSES)
                    )
                    .values(lease_expires_at=sa.func.now() + lease)
                    .returning(c.c.status, c.c.lease_expires_at)
                )
            ).one_or_none()
            if row is not None:
                return row.status, row.lease_expires_at
            row = (
                await conn.execute(
                    sa.select(c.c.status, c.c.runtime, c.c.lease_expires_at).where(
                        c.c.id == call_uuid
                    )
                )
            ).one_or_none()
        if row is None or row.runtime != runtime:
            raise NotFound(f"execution {call_id!r} not found: claim it with ClaimExecution first")
        if row.status == CANCELLED:
            return row.status, row.lease_expires_at
        raise call_ended(call_id, row.status)

    async def report(
        self,
        call_id: str,
        runtime: str,
        *,
        progress: str | None,
        messages: Sequence[tuple[str, str]],
        events: Sequence[tuple[str, str, str]],
        steps: Sequence[tuple[str, str, str, str]],
        sequence: int,
        max_messages: int,
        max_events: int,
        max_steps: int,
    ) -> str:
        """Append an execution's progress, messages, events and steps; its status."""
        c = t.calls
        async with self.db.transaction() as conn:
            row = await self._lock_execution(conn, call_id, runtime)
            if row.status == CANCELLED:
                return CANCELLED
            if row.status not in OPEN_STATUSES:
                raise call_ended(call_id, row.status)
            if sequence:
                stored = await conn.execute(
                    pg_insert(t.execution_reports)
                    .values(call_id=row.id, sequence=sequence)
                    .on_conflict_do_nothing()
                    .returning(t.execution_reports.c.sequence)
                )
                if stored.first() is None:
                    return row.status  # a retry of a report already stored
            for what, have, adding, most in (
                ("messages", row.message_count, len(messages), max_messages),
                ("events", row.event_count, len(events), max_events),
                ("steps", row.step_count, len(steps), max_steps),
            ):
                if have + adding > most:
                    raise InvalidArgument(
                        f"call {call_id} would have {have + adding} {what}; the limit is {most} "
                        "per call — report less detail"
                    )
            if messages:
                await conn.execute(
                    t.execution_messages.insert(),
                    [
                        {"call_id": row.id, "index": row.message_count + i, "role": r, "text": x}
                        for i, (r, x) in enumerate(messages)
                    ],
                )
            if events:
                await conn.execute(
                    t.execution_events.insert(),
                    [
                        {
                            "call_id": row.id,
                            "index": row.event_count + i,
                            "kind": k,
                            "text": x,
                            "tool_name": tool,
                        }
                        for i, (k, x, tool) in enumerate(events)
                    ],
                )
            if steps:
                await conn.execute(
                    t.workflow_steps.insert(),
                    [
                        {
                            "call_id": row.id,
                            "index": row.step_count + i,
                            "step": st,
                            "group_name": g,
                            "status": stat,
                            "detail": d,
                        }
                        for i, (st, g, stat, d) in enumerate(steps)
                    ],
                )
            values: dict[str, Any] = {
                "message_count": row.message_count + len(messages),
                "event_count": row.event_count + len(events),
                "step_count": row.step_count + len(steps),
                "version": c.c.version + 1,
            }
            # Reports sent concurrently may commit out of order: each one's messages,
            # events and steps are all kept, and the progress line is the latest report's.
            latest = not sequence or sequence > row.last_report_seq
            if sequence and latest:
                values["last_report_seq"] = sequence
            if progress is not None and latest:
                values["progress"] = progress
            await conn.execute(c.update().where(c.c.id == row.id).values(**values))
            await conn.execute(notify(CALL_CHANNEL, str(row.id)))
            return row.status

    async def ask(
        self, call_id: str, runtime: str, ask_id: str, question: str
    ) -> tuple[Question, str]:
        """Record a human-input question (once per ask_id); (question, call status) (F11)."""
        q = t.questions
        async with self.db.transaction() as conn:
            row = await self._lock_execution(conn, call_id, runtime)
            if row.status == CANCELLED:
                return Question(ask_id, question, None, CANCELLED), CANCELLED
            if row.status not in OPEN_STATUSES:
                raise call_ended(call_id, row.status)
            existing = (
                await conn.execute(sa.select(q).where(q.c.call_id == row.id, q.c.ask_id == ask_id))
            ).one_or_none()
            if existing is not None:
                if existing.withdrawn_at is not None:
                    raise PreconditionFailed(
                        f"question {ask_id!r} of call {call_id} was withdrawn; ask again "
                        "with a new ask_id"
                    )
                return Question(ask_id, existing.question, existing.reply), row.status
            pending = (
                await conn.execute(
                    sa.select(q.c.ask_id).where(
                        q.c.call_id == row.id, q.c.reply.is_(None), q.c.withdrawn_at.is_(None)
                    )
                )
            ).first()
            if pending is not None:
                raise PreconditionFailed(
                    f"call {call_id} already has a pending question (ask_id {pending.ask_id!r}); "
                    "wait for its reply before asking another"
                )
            await conn.execute(
                q.insert().values(
                    call_id=row.id, ask_id=ask_id, seq=row.question_count + 1, question=question
                )
            )
            await conn.execute(
                t.calls.update()
                .where(t.calls.c.id == row.id)
                .values(
                    status=WAITING_FOR_INPUT,
                    question_count=row.question_count + 1,
                    version=t.calls.c.version + 1,
                )
            )
            await conn.execute(notify(CALL_CHANNEL, str(row.id)))
        return Question(ask_id, question, None), WAITING_FOR_INPUT

    async def withdraw_question(
        self, call_id: str, runtime: str, ask_id: str
    ) -> tuple[str | None, str]:
        """The runtime stops waiting for question `ask_id` (F11): (its reply, if one came
        first; the call's status). A pending question is withdrawn and the call is
        running again; asking to withdraw it again changes nothing."""
        q = t.questions
        async with self.db.transaction() as conn:
            row = await self._lock_execution(conn, call_id, runtime)
            if row.status == CANCELLED:
                return None, CANCELLED
            if row.status not in OPEN_STATUSES:
                raise call_ended(call_id, row.status)
            asked = (
                await conn.execute(sa.select(q).where(q.c.call_id == row.id, q.c.ask_id == ask_id))
            ).one_or_none()
            if asked is None:
                raise NotFound(f"call {call_id} has no question {ask_id!r}")
            if asked.reply is not None or asked.withdrawn_at is not None:
                return asked.reply, row.status
            await conn.execute(
                q.update()
                .where(q.c.call_id == row.id, q.c.ask_id == ask_id)
                .values(withdrawn_at=sa.func.now())
            )
            await conn.execute(
                t.calls.update()
                .where(t.calls.c.id == row.id)
                .values(status=RUNNING, version=t.calls.c.version + 1)
            )
            await conn.execute(notify(CALL_CHANNEL, str(row.id)))
        return None, RUNNING

    async def question_state(self, call_id: str, ask_id: str) -> tuple[str | None, str]:
        """(reply or None, call status) of one question."""
        q, c = t.questions, t.calls
        call_uuid = _uuid(call_id, "call")
        async with self.db.autocommit() as conn:
            row = (
                await conn.execute(
                    sa.select(q.c.reply, c.c.status)
                    .select_from(q.join(c, c.c.id == q.c.call_id))
                    .where(q.c.call_id == call_uuid, q.c.ask_id == ask_id)
                )
            ).one()
        return row.reply, row.status

    async def request_correction(
        self, call_id: str, runtime: str, prompt: str, event_text: str
    ) -> bool:
        """Grant the one correction turn (F10); False if the call is no longer open."""
        c = t.calls
        async with self.db.transaction() as conn:
            row = await self._lock_execution(conn, call_id, runtime)
            if row.status not in OPEN_STATUSES or row.correction_turns > 0:
                return False
            await conn.execute(
                t.execution_events.insert().values(
                    call_id=row.id, index=row.event_count, kind="correction", text=event_text
                )
            )
            await conn.execute(
                c.update()
                .where(c.c.id == row.id)
                .values(
                    correction_turns=1,
                    correction_prompt=prompt,
                    event_count=row.event_count + 1,
                    version=c.c.version + 1,
                )
            )
            await conn.execute(notify(CALL_CHANNEL, str(row.id)))
        return True

    async def finish(
        self,
        call_id: str,
        runtime: str,
        ending: Ending,
        *,
        correction_turns: int | None = None,
        notice: str | None = None,
        claim: Claim | None = None,
    ) -> tuple[str | None, Call | None]:
        """End an execution the runtime finished: (the status it ended with, or None;
        the runtime's next execution, claimed for `claim`, or None).

        One statement: the guarded UPDATE ends the call only while it is open, held by
        this runtime and in the expected correction round (so it ends exactly once); the
        completion notice (F13, text `notice`) is written by the same statement, and so is
        the claim of the oldest unclaimed call of the claim's one target (only if the call
        ended). Without `correction_turns` it ends only a plain call: no output schema, no
        notice, no correction turn.
        """
        if claim is not None and len(claim.targets) != 1:
            raise ValueError("a finish claims for one target; use claim_execution for more")
        key = claim.targets[0] if claim is not None else None
        async with self.db.raw() as pg:
            row = await fetch_one(
                pg,
                _FINISH,
                {
                    "call_id": _uuid(call_id, "call"),
                    "runtime": runtime,
                    "plain": correction_turns is None,
                    "correction_turns": correction_turns or 0,
                    "status": ending.status,
                    "answer": ending.answer,
                    "has_result": ending.has_result,
                    "result": None if ending.result is None else Jsonb(ending.result),
                    "error": ending.error,
                    "notice_text": notice or "",
                    "claim": key is not None,
                    "claim_kind": key.kind if key else "",
                    "claim_name": key.name if key else "",
                    "lease": claim.lease if claim is not None else timedelta(0),
                },
            )
        return row.ended_status, _call(row) if row.id is not None else None

    async def interrupt_expired(self, notice_text: Callable, batch: int = 100) -> int:
        """Executions whose lease ran out end `interrupted`, never restarted (F12)."""
        c = t.calls
        return await self._interrupt(
            [c.c.runtime.isnot(None), c.c.lease_expires_at < sa.func.now()],
            "interrupted: the execution's runtime stopped renewing its lease; saved "
            "progress, messages and files stay readable; the call is not restarted — call "
            "again if the work is still needed",
            notice_text,
            batch,
        )

    async def fail_unanswered(
        self, notice_text: Callable, older_than: timedelta, batch: int = 100
    ) -> int:
        """Calls whose human-input question went unanswered for `older_than` end `failed`
        (F11), so that questions nobody answers cannot hold a target's running slots."""
        c, q = t.calls, t.questions
        unanswered = (
            sa.select(q.c.call_id)
            .where(
                q.c.call_id == c.c.id,
                q.c.reply.is_(None),
                q.c.withdrawn_at.is_(None),
                q.c.asked_at < sa.func.now() - older_than,
            )
            .exists()
        )
        return await self._interrupt(
            [c.c.status == WAITING_FOR_INPUT, unanswered],
            f"failed: nobody answered the execution's question within "
            f"{older_than.total_seconds():g} s (FUNCTIONS_QUESTION_TIMEOUT_SECONDS); call "
            "again when someone can answer",
            notice_text,
            batch,
            status=FAILED,
        )

    async def interrupt_unclaimed(
        self, notice_text: Callable, older_than: timedelta, batch: int = 100
    ) -> int:
        """Calls no runtime claimed within `older_than` end `interrupted` (F5, F12).

        Otherwise a call whose target has no runtime would hold a running slot forever.
        """
        c = t.calls
        return await self._interrupt(
            [c.c.runtime.is_(None), c.c.created_at < sa.func.now() - older_than],
            f"interrupted: no runtime claimed the call within {older_than.total_seconds():g} "
            "s (is a runtime serving this target?); it never started — call again when "
            "one is running",
            notice_text,
            batch,
        )
