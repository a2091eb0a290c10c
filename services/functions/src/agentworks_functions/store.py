"""SQL for the functions use cases: one method per use case, each one short transaction.

Concurrency rests on PostgreSQL alone (P3):

- F5 running limit: a new call is inserted, then the target row is locked
  (`FOR NO KEY UPDATE`, which does not conflict with the key-share lock the insert's
  foreign key took) and the target's open calls are counted. Concurrent calls on one
  target serialize on that lock and each count sees every committed call, so the limit
  holds exactly across replicas. Over the limit the transaction rolls back: nothing stored.
- F6 dedup: the unique index on (caller, submission_key). A concurrent twin blocks on the
  index entry until the first commits, then finds its row — before the limit is checked,
  so a retry recovers its call even when the target is busy.
- Each call row is locked (`FOR UPDATE`) for every change to its execution; per-call
  message, event and step indexes are assigned under that lock. Every end of a call is an
  `UPDATE ... WHERE status IN (open)`, so a call ends exactly once, and the completion
  notice (F13) is written in that same transaction.
- `pg_notify` (sent at commit) wakes claims, status long-polls, AskInput waits and the
  notice worker on every replica.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from agentworks.core.db import Database, notify
from agentworks.core.errors import Busy, Conflict, InvalidArgument, NotFound, PreconditionFailed
from agentworks_functions import tables as t
from agentworks_functions.blobs import Blob, BlobStore, PostgresBlobStore
from agentworks_functions.models import (
    CANCELLED,
    INTERRUPTED,
    OPEN_STATUSES,
    RUNNING,
    WAITING_FOR_INPUT,
    Call,
    CallSource,
    Ending,
    ExecutionEvent,
    ExecutionMessage,
    FileInfo,
    Function,
    FunctionSpec,
    Notice,
    Question,
    Receipt,
    StatusView,
    Target,
    TargetKey,
    WorkflowBinding,
    WorkflowStep,
)

EXECUTION_CHANNEL = "functions_executions"  # payload: "crew:<name>" — a call to claim
CALL_CHANNEL = "functions_calls"  # payload: call_id — the call changed
NOTICE_CHANNEL = "functions_notices"  # payload: "due" — a completion notice to deliver

# Bytes of message or event text one status page carries at most (always >= 1 item).
PAGE_TEXT_BUDGET = 1024 * 1024


def _uuid(value: str, what: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except (ValueError, AttributeError, TypeError):
        raise NotFound(f"{what} {value!r} not found") from None


def call_not_found(call_id: str) -> NotFound:
    return NotFound(
        f"call {call_id!r} not found: check the call_id (only the call's caller and the "
        "target's owner can see a call)"
    )


def _target(row: Any, default_limit: int) -> Target:
    return Target(
        key=TargetKey(row.kind, row.name),
        owner=row.owner,
        running_limit=row.running_limit,
        effective_running_limit=row.running_limit or default_limit,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def _function(row: Any) -> Function:
    return Function(
        target=TargetKey(row.target_kind, row.target_name),
        name=row.name,
        description=row.description,
        input_schema=row.input_schema,
        output_schema=row.output_schema,
        allowed_callers=tuple(row.allowed_callers or ()),
        starts_work=row.starts_work,
        workflow=WorkflowBinding.from_json(row.workflow),
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def _call(row: Any) -> Call:
    source = row.source
    return Call(
        id=str(row.id),
        target=TargetKey(row.target_kind, row.target_name),
        function=row.function,
        caller=row.caller,
        inputs=row.inputs,
        description=row.description,
        output_schema=row.output_schema,
        starts_work=row.starts_work,
        workflow=WorkflowBinding.from_json(row.workflow),
        variables=row.variables,
        run_id=str(row.run_id) if row.run_id else None,
        source=CallSource(**source) if source else None,
        notify_conversation_id=str(row.notify_conversation_id)
        if row.notify_conversation_id
        else None,
        status=row.status,
        progress=row.progress,
        runtime=row.runtime,
        lease_expires_at=row.lease_expires_at,
        correction_turns=row.correction_turns,
        correction_prompt=row.correction_prompt,
        answer=row.answer,
        has_result=row.has_result,
        result=row.result,
        error=row.error,
        version=row.version,
        created_at=row.created_at,
        ended_at=row.ended_at,
    )


def _file(row: Any) -> FileInfo:
    return FileInfo(
        name=row.name,
        size=row.size,
        media_type=row.media_type,
        sha256=row.sha256,
        is_text=row.is_text,
        created_at=row.created_at,
        blob_id=str(row.blob_id),
    )


def _budgeted(rows: Sequence[Any], budget: int) -> list[Any]:
    """The leading rows whose text fits the byte budget (at least one)."""
    out, used = [], 0
    for row in rows:
        used += len(row.text.encode())
        if out and used > budget:
            break
        out.append(row)
    return out


def ended_message(call_id: str, status: str) -> str:
    if status == INTERRUPTED:
        return (
            f"call {call_id} was recorded as interrupted (its lease expired); it is not "
            "restarted — stop working on it"
        )
    return f"call {call_id} has already ended ({status}); nothing more can be recorded"


class FunctionsStore:
    """All SQL of the functions service."""

    def __init__(
        self, db: Database, *, default_running_limit: int, blobs: BlobStore | None = None
    ) -> None:
        self.db = db
        self.default_running_limit = default_running_limit
        self.blobs: BlobStore = blobs or PostgresBlobStore(db)

    # ------------------------------------------------------------------ targets

    async def put_target(self, key: TargetKey, owner: str, running_limit: int) -> Target:
        stmt = (
            pg_insert(t.targets)
            .values(kind=key.kind, name=key.name, owner=owner, running_limit=running_limit)
            .on_conflict_do_update(
                index_elements=["kind", "name"],
                set_={"owner": owner, "running_limit": running_limit, "updated_at": sa.func.now()},
            )
            .returning(*t.targets.c)
        )
        async with self.db.transaction() as conn:
            return _target((await conn.execute(stmt)).one(), self.default_running_limit)

    async def get_target(self, key: TargetKey) -> Target:
        async with self.db.transaction() as conn:
            row = (
                await conn.execute(
                    sa.select(t.targets).where(
                        t.targets.c.kind == key.kind, t.targets.c.name == key.name
                    )
                )
            ).one_or_none()
        if row is None:
            raise NotFound(f"{key} is not registered with the functions service")
        return _target(row, self.default_running_limit)

    # ------------------------------------------------------------- declarations

    async def put_function(self, spec: FunctionSpec) -> Function:
        values = {
            "description": spec.description,
            "input_schema": spec.input_schema,
            "output_schema": spec.output_schema,
            "allowed_callers": list(spec.allowed_callers),
            "starts_work": spec.starts_work,
            "workflow": spec.workflow.as_json() if spec.workflow else None,
        }
        stmt = (
            pg_insert(t.functions)
            .values(
                target_kind=spec.target.kind, target_name=spec.target.name, name=spec.name, **values
            )
            .on_conflict_do_update(
                index_elements=["target_kind", "target_name", "name"],
                set_={**values, "updated_at": sa.func.now()},
            )
            .returning(*t.functions.c)
        )
        async with self.db.transaction() as conn:
            return _function((await conn.execute(stmt)).one())

    async def delete_function(self, key: TargetKey, name: str) -> bool:
        f = t.functions
        async with self.db.transaction() as conn:
            result = await conn.execute(
                f.delete().where(
                    f.c.target_kind == key.kind, f.c.target_name == key.name, f.c.name == name
                )
            )
        return bool(result.rowcount)

    async def get_function(self, key: TargetKey, name: str) -> Function | None:
        f = t.functions
        async with self.db.transaction() as conn:
            row = (
                await conn.execute(
                    sa.select(f).where(
                        f.c.target_kind == key.kind, f.c.target_name == key.name, f.c.name == name
                    )
                )
            ).one_or_none()
        return _function(row) if row else None

    async def list_functions(self, key: TargetKey) -> list[Function]:
        f = t.functions
        async with self.db.transaction() as conn:
            rows = (
                await conn.execute(
                    sa.select(f)
                    .where(f.c.target_kind == key.kind, f.c.target_name == key.name)
                    .order_by(f.c.name)
                )
            ).all()
        return [_function(r) for r in rows]

    # -------------------------------------------------------------------- calls

    async def find_submission(self, caller: str, submission_key: str) -> tuple[Receipt, str] | None:
        """The call an earlier request with this retry key created, and its request hash."""
        c = t.calls
        async with self.db.transaction() as conn:
            row = (
                await conn.execute(
                    sa.select(c.c.id, c.c.status, c.c.request_hash).where(
                        c.c.caller == caller, c.c.submission_key == submission_key
                    )
                )
            ).one_or_none()
        if row is None:
            return None
        return Receipt(str(row.id), row.status, created=False), row.request_hash

    async def create_call(
        self,
        *,
        function: Function,
        caller: str,
        inputs: dict[str, Any],
        variables: dict[str, Any] | None,
        source: CallSource | None,
        submission_key: str | None,
        request_hash: str,
        notify_conversation_id: str | None,
    ) -> Receipt:
        """Insert a call if the retry key is new and the target has room (F4-F6)."""
        call_id = uuid.uuid4()
        key = function.target
        c = t.calls
        async with self.db.transaction() as conn:
            inserted = (
                await conn.execute(
                    pg_insert(c)
                    .values(
                        id=call_id,
                        target_kind=key.kind,
                        target_name=key.name,
                        function=function.name,
                        caller=caller,
                        inputs=inputs,
                        description=function.description,
                        output_schema=function.output_schema,
                        starts_work=function.starts_work,
                        workflow=function.workflow.as_json() if function.workflow else None,
                        variables=variables,
                        run_id=uuid.uuid4() if function.workflow else None,
                        source=source.as_json() if source else None,
                        submission_key=submission_key,
                        request_hash=request_hash,
                        notify_conversation_id=notify_conversation_id,
                        status=RUNNING,
                    )
                    .on_conflict_do_nothing(
                        index_elements=["caller", "submission_key"],
                        index_where=c.c.submission_key.isnot(None),
                    )
                    .returning(c.c.id)
                )
            ).first()
            if inserted is None:
                # A twin with the same retry key committed first: recover it (F6).
                row = (
                    await conn.execute(
                        sa.select(c.c.id, c.c.status, c.c.request_hash).where(
                            c.c.caller == caller, c.c.submission_key == submission_key
                        )
                    )
                ).one()
                if row.request_hash != request_hash:
                    raise submission_conflict(submission_key or "")
                return Receipt(str(row.id), row.status, created=False)
            limit = (
                await conn.execute(
                    sa.select(t.targets.c.running_limit)
                    .where(t.targets.c.kind == key.kind, t.targets.c.name == key.name)
                    .with_for_update(key_share=True)  # FOR NO KEY UPDATE
                )
            ).scalar_one_or_none()
            if limit is None:
                raise NotFound(f"{key} is not registered with the functions service")
            limit = limit or self.default_running_limit
            running = (
                await conn.execute(
                    sa.select(sa.func.count())
                    .select_from(c)
                    .where(
                        c.c.target_kind == key.kind,
                        c.c.target_name == key.name,
                        c.c.status.in_(OPEN_STATUSES),
                    )
                )
            ).scalar_one()
            if running > limit:
                raise Busy(
                    f"busy: {key} is running {running - 1} calls and its running limit is {limit}; "
                    "the call was not queued or stored — retry later (the same submission_id "
                    "is safe), or ask the operator to raise the limit"
                )
            await conn.execute(notify(EXECUTION_CHANNEL, str(key)))
        return Receipt(str(call_id), RUNNING, created=True)

    async def get_call(self, call_id: str) -> Call:
        call_uuid = _uuid(call_id, "call")
        async with self.db.transaction() as conn:
            row = (
                await conn.execute(sa.select(t.calls).where(t.calls.c.id == call_uuid))
            ).one_or_none()
        if row is None:
            raise call_not_found(call_id)
        return _call(row)

    async def call_access(self, call_id: str) -> tuple[str, str]:
        """(caller, target owner) of a call, for the A3 check."""
        call_uuid = _uuid(call_id, "call")
        c = t.calls
        async with self.db.transaction() as conn:
            row = (
                await conn.execute(
                    sa.select(c.c.caller, t.targets.c.owner)
                    .select_from(
                        c.join(
                            t.targets,
                            sa.and_(
                                t.targets.c.kind == c.c.target_kind,
                                t.targets.c.name == c.c.target_name,
                            ),
                        )
                    )
                    .where(c.c.id == call_uuid)
                )
            ).one_or_none()
        if row is None:
            raise call_not_found(call_id)
        return row.caller, row.owner

    async def status(
        self, call_id: str, *, after: int, message_limit: int, after_event: int, event_limit: int
    ) -> StatusView:
        """One consistent snapshot of a call's record (F7)."""
        call_uuid = _uuid(call_id, "call")
        m, e, s, f, q = (
            t.execution_messages,
            t.execution_events,
            t.workflow_steps,
            t.files,
            t.questions,
        )
        async with self.db.transaction() as conn:
            # One snapshot for the call row and its pages.
            await conn.execute(sa.text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"))
            row = (
                await conn.execute(sa.select(t.calls).where(t.calls.c.id == call_uuid))
            ).one_or_none()
            if row is None:
                raise call_not_found(call_id)
            messages = _budgeted(
                (
                    await conn.execute(
                        sa.select(m)
                        .where(m.c.call_id == call_uuid, m.c.index > after)
                        .order_by(m.c.index)
                        .limit(message_limit)
                    )
                ).all(),
                PAGE_TEXT_BUDGET,
            )
            events = _budgeted(
                (
                    await conn.execute(
                        sa.select(e)
                        .where(e.c.call_id == call_uuid, e.c.index > after_event)
                        .order_by(e.c.index)
                        .limit(event_limit)
                    )
                ).all(),
                PAGE_TEXT_BUDGET,
            )
            files = (
                await conn.execute(sa.select(f).where(f.c.call_id == call_uuid).order_by(f.c.name))
            ).all()
            steps = []
            if row.run_id is not None:
                steps = (
                    await conn.execute(
                        sa.select(s).where(s.c.call_id == call_uuid).order_by(s.c.index)
                    )
                ).all()
            question = ""
            if row.status == WAITING_FOR_INPUT:
                question = (
                    await conn.execute(
                        sa.select(q.c.question)
                        .where(q.c.call_id == call_uuid, q.c.reply.is_(None))
                        .order_by(q.c.seq.desc())
                        .limit(1)
                    )
                ).scalar_one_or_none() or ""
        return StatusView(
            call=_call(row),
            messages=[ExecutionMessage(r.index, r.role, r.text, r.created_at) for r in messages],
            next_after=messages[-1].index if messages else after,
            events=[
                ExecutionEvent(r.index, r.kind, r.text, r.tool_name, r.created_at) for r in events
            ],
            next_after_event=events[-1].index if events else after_event,
            files=[_file(r) for r in files],
            steps=[
                WorkflowStep(r.index, r.step, r.group_name, r.status, r.detail, r.created_at)
                for r in steps
            ],
            question=question,
        )

    async def _lock_call(self, conn: AsyncConnection, call_id: str) -> Any:
        call_uuid = _uuid(call_id, "call")
        row = (
            await conn.execute(
                sa.select(t.calls).where(t.calls.c.id == call_uuid).with_for_update()
            )
        ).one_or_none()
        if row is None:
            raise call_not_found(call_id)
        return row

    async def _lock_execution(self, conn: AsyncConnection, call_id: str, runtime: str) -> Any:
        """The call row, locked, if this runtime holds its execution."""
        row = await self._lock_call(conn, call_id)
        if row.runtime != runtime:
            raise NotFound(f"execution {call_id!r} not found: claim it with ClaimExecution first")
        return row

    async def _end(
        self, conn: AsyncConnection, rows: Sequence[Any], ending: Ending, notice_text: Callable
    ) -> None:
        """End open calls once (guarded by status) and queue their completion notices."""
        c = t.calls
        ids = [r.id for r in rows]
        ended = (
            await conn.execute(
                c.update()
                .where(c.c.id.in_(ids), c.c.status.in_(OPEN_STATUSES))
                .values(
                    status=ending.status,
                    answer=ending.answer,
                    has_result=ending.has_result,
                    result=ending.result,
                    error=ending.error,
                    ended_at=sa.func.now(),
                    version=c.c.version + 1,
                )
                .returning(*c.c)
            )
        ).all()
        for row in ended:
            if row.notify_conversation_id is not None:
                call = _call(row)
                await conn.execute(
                    pg_insert(t.notices)
                    .values(
                        call_id=row.id,
                        conversation_id=row.notify_conversation_id,
                        text=notice_text(call),
                        attributes={
                            "call_id": str(row.id),
                            "status": row.status,
                            "target": f"{row.target_kind}:{row.target_name}",
                            "function": row.function,
                        },
                    )
                    .on_conflict_do_nothing()
                )
                await conn.execute(notify(NOTICE_CHANNEL, "due"))
            await conn.execute(notify(CALL_CHANNEL, str(row.id)))
            # A slot is free again: runtimes may find more work for this target.
            await conn.execute(notify(EXECUTION_CHANNEL, f"{row.target_kind}:{row.target_name}"))

    async def cancel(self, call_id: str, by: str, notice_text: Callable) -> None:
        async with self.db.transaction() as conn:
            row = await self._lock_call(conn, call_id)
            if row.status == CANCELLED:
                return
            if row.status not in OPEN_STATUSES:
                raise PreconditionFailed(
                    f"call {call_id} has already ended ({row.status}); there is nothing to cancel"
                )
            await self._end(
                conn,
                [row],
                Ending(CANCELLED, error=f"cancelled by {by}", answer=""),
                notice_text,
            )

    async def reply(self, call_id: str, by: str, text: str) -> None:
        q = t.questions
        async with self.db.transaction() as conn:
            row = await self._lock_call(conn, call_id)
            if row.status != WAITING_FOR_INPUT:
                raise PreconditionFailed(
                    f"call {call_id} is not waiting for input (status {row.status}); reply "
                    "only while its status shows a question"
                )
            answered = (
                await conn.execute(
                    q.update()
                    .where(q.c.call_id == row.id, q.c.reply.is_(None))
                    .values(reply=text, answered_by=by, answered_at=sa.func.now())
                    .returning(q.c.ask_id)
                )
            ).all()
            if not answered:
                raise PreconditionFailed(f"call {call_id} has no pending question")
            await conn.execute(
                t.calls.update()
                .where(t.calls.c.id == row.id)
                .values(status=RUNNING, version=t.calls.c.version + 1)
            )
            await conn.execute(notify(CALL_CHANNEL, str(row.id)))

    # ------------------------------------------------------------------ runtime

    async def claim_execution(
        self, runtime: str, keys: Sequence[TargetKey], lease: timedelta
    ) -> Call | None:
        """Take the oldest unclaimed call of these targets (R1)."""
        c = t.calls
        by_kind: dict[str, list[str]] = {}
        for key in keys:
            by_kind.setdefault(key.kind, []).append(key.name)
        target_filter = sa.or_(
            *(
                sa.and_(c.c.target_kind == kind, c.c.target_name.in_(names))
                for kind, names in by_kind.items()
            )
        )
        async with self.db.transaction() as conn:
            call_id = (
                await conn.execute(
                    sa.select(c.c.id)
                    .where(target_filter, c.c.status == RUNNING, c.c.runtime.is_(None))
                    .order_by(c.c.created_at)
                    .limit(1)
                    .with_for_update(skip_locked=True)
                )
            ).scalar_one_or_none()
            if call_id is None:
                return None
            row = (
                await conn.execute(
                    c.update()
                    .where(c.c.id == call_id)
                    .values(
                        runtime=runtime,
                        claimed_at=sa.func.now(),
                        lease_expires_at=sa.func.now() + lease,
                        version=c.c.version + 1,
                    )
                    .returning(*c.c)
                )
            ).one()
            await conn.execute(notify(CALL_CHANNEL, str(call_id)))
        return _call(row)

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
        raise PreconditionFailed(ended_message(call_id, row.status))

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
                raise PreconditionFailed(ended_message(call_id, row.status))
            if sequence and sequence <= row.last_report_seq:
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
            if sequence:
                values["last_report_seq"] = sequence
            if progress is not None:
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
                raise PreconditionFailed(ended_message(call_id, row.status))
            existing = (
                await conn.execute(sa.select(q).where(q.c.call_id == row.id, q.c.ask_id == ask_id))
            ).one_or_none()
            if existing is not None:
                return Question(ask_id, existing.question, existing.reply), row.status
            pending = (
                await conn.execute(
                    sa.select(q.c.ask_id).where(q.c.call_id == row.id, q.c.reply.is_(None))
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

    async def question_state(self, call_id: str, ask_id: str) -> tuple[str | None, str]:
        """(reply or None, call status) of one question."""
        q, c = t.questions, t.calls
        call_uuid = _uuid(call_id, "call")
        async with self.db.transaction() as conn:
            row = (
                await conn.execute(
                    sa.select(q.c.reply, c.c.status)
                    .select_from(q.join(c, c.c.id == q.c.call_id))
                    .where(q.c.call_id == call_uuid, q.c.ask_id == ask_id)
                )
            ).one()
        return row.reply, row.status

    async def link_file(
        self,
        call_id: str,
        runtime: str,
        *,
        name: str,
        blob: Blob,
        media_type: str,
        is_text: bool,
        max_files: int,
    ) -> FileInfo:
        """Make an uploaded blob the call's file `name`, replacing an earlier one (F8)."""
        f = t.files
        async with self.db.transaction() as conn:
            row = await self._lock_execution(conn, call_id, runtime)
            if row.status not in OPEN_STATUSES:
                raise PreconditionFailed(ended_message(call_id, row.status))
            old = (
                await conn.execute(
                    sa.select(f.c.blob_id).where(f.c.call_id == row.id, f.c.name == name)
                )
            ).scalar_one_or_none()
            if old is None:
                count = (
                    await conn.execute(
                        sa.select(sa.func.count()).select_from(f).where(f.c.call_id == row.id)
                    )
                ).scalar_one()
                if count >= max_files:
                    raise InvalidArgument(
                        f"call {call_id} already has {count} files, the limit is {max_files}; "
                        "put results in fewer files (an archive, for instance)"
                    )
            await conn.execute(
                t.blobs.update().where(t.blobs.c.id == blob.id).values(complete=True)
            )
            values = {
                "blob_id": blob.id,
                "size": blob.size,
                "media_type": media_type,
                "sha256": blob.sha256,
                "is_text": is_text,
            }
            info = (
                await conn.execute(
                    pg_insert(f)
                    .values(call_id=row.id, name=name, **values)
                    .on_conflict_do_update(
                        index_elements=["call_id", "name"],
                        set_={**values, "created_at": sa.func.now()},
                    )
                    .returning(*f.c)
                )
            ).one()
            if old is not None:
                await conn.execute(t.blobs.delete().where(t.blobs.c.id == old))
            await conn.execute(
                t.calls.update().where(t.calls.c.id == row.id).values(version=t.calls.c.version + 1)
            )
            await conn.execute(notify(CALL_CHANNEL, str(row.id)))
        return _file(info)

    async def file_info(self, call_id: str, name: str) -> FileInfo | None:
        f = t.files
        call_uuid = _uuid(call_id, "call")
        async with self.db.transaction() as conn:
            row = (
                await conn.execute(sa.select(f).where(f.c.call_id == call_uuid, f.c.name == name))
            ).one_or_none()
        return _file(row) if row else None

    async def file_count(self, call_id: str) -> int:
        f = t.files
        async with self.db.transaction() as conn:
            return (
                await conn.execute(
                    sa.select(sa.func.count())
                    .select_from(f)
                    .where(f.c.call_id == _uuid(call_id, "call"))
                )
            ).scalar_one()

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
        correction_turns: int,
        notice_text: Callable,
    ) -> str:
        """End an execution the runtime finished; the call's status afterwards."""
        async with self.db.transaction() as conn:
            row = await self._lock_execution(conn, call_id, runtime)
            if row.status in OPEN_STATUSES and row.correction_turns == correction_turns:
                await self._end(conn, [row], ending, notice_text)
                return ending.status
            return row.status

    async def interrupt_expired(self, notice_text: Callable, batch: int = 100) -> int:
        """Executions whose lease ran out end `interrupted`, never restarted (F12)."""
        c = t.calls
        async with self.db.transaction() as conn:
            rows = (
                await conn.execute(
                    sa.select(c.c.id)
                    .where(
                        c.c.runtime.isnot(None),
                        c.c.status.in_(OPEN_STATUSES),
                        c.c.lease_expires_at < sa.func.now(),
                    )
                    .limit(batch)
                    .with_for_update(skip_locked=True)
                )
            ).all()
            if rows:
                await self._end(
                    conn,
                    rows,
                    Ending(
                        INTERRUPTED,
                        error=(
                            "interrupted: the execution's runtime stopped renewing its lease; "
                            "saved progress, messages and files stay readable; the call is not "
                            "restarted — call again if the work is still needed"
                        ),
                    ),
                    notice_text,
                )
        return len(rows)

    # ------------------------------------------------------------------ notices

    async def deliver_notices(
        self,
        send: Callable[[Notice], Awaitable[str | None]],
        *,
        retry_after: timedelta,
        batch: int = 20,
    ) -> int:
        """Send due completion notices; `send` returns None on success or why it failed.

        A notice stays locked while it is sent, so replicas never send one twice at once;
        after a crash it is sent again and messaging's idempotency key drops the repeat.
        """
        n = t.notices
        async with self.db.transaction() as conn:
            rows = (
                await conn.execute(
                    sa.select(n)
                    .where(
                        n.c.delivered_at.is_(None),
                        n.c.failed_at.is_(None),
                        n.c.next_attempt_at <= sa.func.now(),
                    )
                    .order_by(n.c.next_attempt_at)
                    .limit(batch)
                    .with_for_update(skip_locked=True)
                )
            ).all()
            for row in rows:
                notice = Notice(
                    str(row.call_id),
                    str(row.conversation_id),
                    row.text,
                    row.attributes,
                    row.attempts,
                )
                outcome = await send(notice)
                if outcome is None:
                    values: dict[str, Any] = {"delivered_at": sa.func.now(), "last_error": None}
                elif outcome.startswith("permanent:"):
                    values = {"failed_at": sa.func.now(), "last_error": outcome}
                else:
                    delay = retry_after * min(2**row.attempts, 60)
                    values = {"next_attempt_at": sa.func.now() + delay, "last_error": outcome}
                await conn.execute(
                    n.update()
                    .where(n.c.call_id == row.call_id)
                    .values(attempts=row.attempts + 1, **values)
                )
        return len(rows)

    async def purge_unlinked_blobs(self, older_than: timedelta) -> int:
        return await self.blobs.purge_unlinked(older_than)


def submission_conflict(submission_key: str) -> Conflict:
    return Conflict(
        f"submission_id {submission_key!r} was already used for a call with different inputs; "
        "use a new submission_id for a new call (or resend the same inputs to recover it)"
    )
