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

import dataclasses
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

import psycopg
import sqlalchemy as sa
from psycopg.types.json import Jsonb
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from agentworks.client.errors import (
    Busy,
    Conflict,
    InvalidArgument,
    NotFound,
    PreconditionFailed,
)
from agentworks.server.db import Database, fetch_one, fixed_sql, notify
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
# payload: call_id — the call changed; when it ended, "<call_id> ended" is sent as well.
CALL_CHANNEL = "functions_calls"
NOTICE_CHANNEL = "functions_notices"  # payload: "due" — a completion notice to deliver

# Bytes of message or event text one status page carries at most (always >= 1 item).
PAGE_TEXT_BUDGET = 1024 * 1024


@dataclasses.dataclass(frozen=True)
class Claim:
    """A claim of the runtime's next execution, made with its finish (R1)."""

    targets: Sequence[TargetKey]
    lease: timedelta


def ended_key(call_id: object) -> str:
    """The CALL_CHANNEL payload that says a call ended: what a wait for the end hears."""
    return f"{call_id} ended"


def _uuid(value: str, what: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except (ValueError, AttributeError, TypeError):
        # Not an id at all: the same answer as an id nobody may see (A3).
        raise (
            call_not_found(value) if what == "call" else NotFound(f"{what} {value!r} not found")
        ) from None


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


def _budgeted(rows: Sequence[dict[str, Any]], budget: int) -> list[dict[str, Any]]:
    """The leading rows whose text fits the byte budget (at least one)."""
    out: list[dict[str, Any]] = []
    used = 0
    for row in rows:
        used += len(row["text"].encode())
        if out and used > budget:
            break
        out.append(row)
    return out


def _when(value: str) -> datetime:
    """A timestamp from a JSON page (PostgreSQL writes them in ISO 8601)."""
    return datetime.fromisoformat(value)


def ended_message(call_id: str, status: str) -> str:
    if status == INTERRUPTED:
        return (
            f"call {call_id} was recorded as interrupted (its lease expired, or its runtime "
            "gave it up); it is not restarted — stop working on it"
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
        async with self.db.autocommit() as conn:
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
        async with self.db.autocommit() as conn:
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
        async with self.db.autocommit() as conn:
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
        async with self.db.autocommit() as conn:
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

    async def function_for_call(
        self, key: TargetKey, name: str
    ) -> tuple[str, Function | None, Busy | None]:
        """(target owner, the declared function or None, Busy if the target is full).

        One read, no lock. "Full" means the target's committed open calls already reach
        its limit: a call without a retry key can be refused at once, without queueing
        for the target's lock (calls are only ever accepted under that lock, so the
        limit stays exact). NotFound if the target is not registered.
        """
        async with self.db.raw() as pg:
            row = await fetch_one(
                pg, _FUNCTION_FOR_CALL, {"kind": key.kind, "target_name": key.name, "name": name}
            )
        if row is None:
            raise NotFound(f"{key} is not registered with the functions service")
        limit = row.running_limit or self.default_running_limit
        full = busy(key, row.open_calls, limit) if row.open_calls >= limit else None
        return row.target_owner, _function(row) if row.name is not None else None, full

    async def create_call(
        self,
        *,
        call_id: uuid.UUID,
        function: Function,
        caller: str,
        inputs: dict[str, Any],
        variables: dict[str, Any] | None,
        source: CallSource | None,
        submission_key: str | None,
        request_hash: str,
        notify_conversation_id: str | None,
        submission_id: str,
    ) -> Receipt:
        """Insert a call if the retry key is new and the target has room (F4-F6).

        `submission_key` is the stored retry key (a workflow's is scoped to its run, step
        and group, F14); `submission_id` is the caller's own, the one errors quote.

        One statement in autocommit: `functions.create_call` (migration 0002) locks the
        target row, inserts the call, and counts the target's open calls with a snapshot
        taken after the lock was granted, so every call committed by an earlier holder is
        counted; over the limit it raises AW001, which undoes the insert.
        """
        key = function.target
        values: dict[str, Any] = {
            "id": call_id,
            "target_kind": key.kind,
            "target_name": key.name,
            "function": function.name,
            "caller": caller,
            "inputs": inputs,
            "description": function.description,
            "output_schema": function.output_schema,
            "starts_work": function.starts_work,
            "workflow": function.workflow.as_json() if function.workflow else None,
            "variables": variables,
            "run_id": uuid.uuid4() if function.workflow else None,
            "source": source.as_json() if source else None,
            "submission_key": submission_key,
            "request_hash": request_hash,
            "notify_conversation_id": notify_conversation_id,
            "default_limit": self.default_running_limit,
        }
        # JSON columns keep JSON null for None, as they always did.
        for name in ("inputs", "output_schema", "workflow", "variables", "source"):
            values[name] = Jsonb(values[name])
        async with self.db.raw() as pg:
            try:
                row = await fetch_one(pg, _CREATE_CALL, values)
            except psycopg.Error as exc:
                if exc.sqlstate != BUSY_SQLSTATE:
                    raise
                running, limit = (exc.diag.message_detail or "0/0").split("/")
                raise busy(key, int(running), int(limit)) from None
            if row.running_limit is None:
                raise NotFound(f"{key} is not registered with the functions service")
            if not row.inserted:
                # A twin with the same retry key committed first: recover it (F6).
                row = await fetch_one(pg, _SUBMISSION, {"caller": caller, "key": submission_key})
                if row.request_hash != request_hash:
                    raise submission_conflict(submission_id)
                return Receipt(str(row.id), row.status, created=False)
        return Receipt(str(call_id), RUNNING, created=True)

    async def call_status(self, call_id: str) -> str | None:
        """Just the status of a call (a cheap re-check for a waiting read)."""
        async with self.db.raw() as pg:
            row = await fetch_one(pg, _CALL_STATUS, {"call_id": _uuid(call_id, "call")})
        return None if row is None else row.status

    async def get_call(self, call_id: str) -> Call:
        call_uuid = _uuid(call_id, "call")
        async with self.db.raw() as pg:
            row = await fetch_one(pg, _GET_CALL, {"call_id": call_uuid})
        if row is None:
            raise call_not_found(call_id)
        return _call(row)

    async def call_access(self, call_id: str) -> tuple[str, str]:
        """(caller, target owner) of a call, for the A3 check."""
        call_uuid = _uuid(call_id, "call")
        async with self.db.raw() as pg:
            row = await fetch_one(pg, _CALL_ACCESS, {"call_id": call_uuid})
        if row is None:
            raise call_not_found(call_id)
        return row.caller, row.owner

    async def status(
        self, call_id: str, *, after: int, message_limit: int, after_event: int, event_limit: int
    ) -> tuple[StatusView, str]:
        """One consistent snapshot of a call's record (F7), and the target's owner (A3).

        One statement (one snapshot, one round trip): the call row, its target's owner and
        the message, event, file, step and question pages as JSON arrays.
        """
        call_uuid = _uuid(call_id, "call")
        async with self.db.raw() as pg:
            row = await fetch_one(
                pg,
                _STATUS,
                {
                    "call_id": call_uuid,
                    "after": after,
                    "message_limit": message_limit,
                    "after_event": after_event,
                    "event_limit": event_limit,
                },
            )
        if row is None:
            raise call_not_found(call_id)
        messages = _budgeted(row.page_messages, PAGE_TEXT_BUDGET)
        events = _budgeted(row.page_events, PAGE_TEXT_BUDGET)
        view = StatusView(
            call=_call(row),
            messages=[
                ExecutionMessage(r["index"], r["role"], r["text"], _when(r["created_at"]))
                for r in messages
            ],
            next_after=messages[-1]["index"] if messages else after,
            events=[
                ExecutionEvent(
                    r["index"], r["kind"], r["text"], r["tool_name"], _when(r["created_at"])
                )
                for r in events
            ],
            next_after_event=events[-1]["index"] if events else after_event,
            files=[
                FileInfo(
                    name=r["name"],
                    size=r["size"],
                    media_type=r["media_type"],
                    sha256=r["sha256"],
                    is_text=r["is_text"],
                    created_at=_when(r["created_at"]),
                    blob_id=r["blob_id"],
                )
                for r in row.page_files
            ],
            steps=[
                WorkflowStep(
                    r["index"],
                    r["step"],
                    r["group_name"],
                    r["status"],
                    r["detail"],
                    _when(r["created_at"]),
                )
                for r in row.page_steps or ()
            ],
            question=row.pending_question or "",
        )
        return view, row.target_owner

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
        try:
            row = await self._lock_call(conn, call_id)
        except NotFound:
            row = None  # the same answer as for someone else's call (A3)
        if row is None or row.runtime != runtime:
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
            await conn.execute(notify(CALL_CHANNEL, ended_key(row.id)))
            # No notice to runtimes: a freed slot makes no call claimable (over the limit a
            # call is refused, never queued), so waking them would only cost empty claims.

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
                    .where(q.c.call_id == row.id, q.c.reply.is_(None), q.c.withdrawn_at.is_(None))
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
        oldest = (
            sa.select(c.c.id)
            .where(target_filter, c.c.status == RUNNING, c.c.runtime.is_(None))
            .order_by(c.c.created_at)
            .limit(1)
            .with_for_update(skip_locked=True)
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
                raise PreconditionFailed(ended_message(call_id, row.status))
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
                raise PreconditionFailed(ended_message(call_id, row.status))
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
        async with self.db.autocommit() as conn:
            row = (
                await conn.execute(sa.select(f).where(f.c.call_id == call_uuid, f.c.name == name))
            ).one_or_none()
        return _file(row) if row else None

    async def file_count(self, call_id: str) -> int:
        f = t.files
        async with self.db.autocommit() as conn:
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

    async def _interrupt(
        self,
        conditions: list[sa.ColumnElement[bool]],
        error: str,
        notice_text: Callable,
        batch: int,
    ) -> int:
        c = t.calls
        async with self.db.transaction() as conn:
            rows = (
                await conn.execute(
                    sa.select(c.c.id)
                    .where(c.c.status.in_(OPEN_STATUSES), *conditions)
                    .limit(batch)
                    .with_for_update(skip_locked=True)
                )
            ).all()
            if rows:
                await self._end(conn, rows, Ending(INTERRUPTED, error=error), notice_text)
        return len(rows)

    # ------------------------------------------------------------------ notices

    async def deliver_notices(
        self,
        send: Callable[[list[Notice]], Awaitable[list[str | None]]],
        *,
        retry_after: timedelta,
        batch: int = 100,
    ) -> int:
        """Send due completion notices, a batch at a time; `send` says per notice None
        (delivered) or why it failed.

        The notices stay locked while they are sent, so replicas never send one twice at
        once; after a crash they are sent again and messaging's idempotency key drops the
        repeats.
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
            if not rows:
                return 0
            notices = [
                Notice(str(r.call_id), str(r.conversation_id), r.text, r.attributes, r.attempts)
                for r in rows
            ]
            outcomes = await send(notices)
            # Every outcome in one statement: delivered, failed for good, or due again
            # after a backoff that doubles per attempt (capped at 60 x retry_after).
            await conn.execute(
                _NOTICES_ATTEMPTED,
                {
                    "ids": [row.call_id for row in rows],
                    "errors": outcomes,
                    "delays": [
                        (retry_after * min(2**row.attempts, 60)).total_seconds() for row in rows
                    ],
                },
            )
        return len(rows)

    async def purge_unlinked_blobs(self, older_than: timedelta) -> int:
        return await self.blobs.purge_unlinked(older_than)


def busy(key: TargetKey, running: int, limit: int) -> Busy:
    return Busy(
        f"busy: {key} is running {running} calls and its running limit is {limit}; "
        "the call was not queued or stored — retry later (the same submission_id "
        "is safe), or ask the operator to raise the limit"
    )


def submission_conflict(submission_key: str) -> Conflict:
    return Conflict(
        f"submission_id {submission_key!r} was already used for a call of a different "
        "function or with different inputs; use a new submission_id for a new call (or "
        "repeat the same call to recover it)"
    )


# One sent batch's outcomes (deliver_notices): an error of None means delivered, one
# that starts with "permanent:" means refused for good, any other means try again later.
_NOTICES_ATTEMPTED = sa.text(
    """
UPDATE functions.notices n
SET attempts = n.attempts + 1,
    last_error = b.error,
    delivered_at = CASE WHEN b.error IS NULL THEN now() END,
    failed_at = CASE WHEN b.error LIKE 'permanent:%' THEN now() END,
    next_attempt_at = CASE
        WHEN b.error IS NULL OR b.error LIKE 'permanent:%' THEN n.next_attempt_at
        ELSE now() + make_interval(secs => b.delay) END
FROM unnest(CAST(:ids AS uuid[]), CAST(:errors AS text[]), CAST(:delays AS float8[]))
    AS b (call_id, error, delay)
WHERE n.call_id = b.call_id
"""
)


# The hot statements run on the pooled connection's own psycopg connection (see _raw),
# written with psycopg placeholders.


# Claim the oldest unclaimed call of one target (:claim_kind, :claim_name) for :runtime,
# skipping rows other claims hold: ClaimExecution, and a finish that claims the next.
_CLAIM_CTES = """oldest AS (
    SELECT id FROM functions.calls
    WHERE {only_if} target_kind = :claim_kind AND target_name = :claim_name
      AND status = 'running' AND runtime IS NULL
    ORDER BY created_at
    LIMIT 1
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE functions.calls c
    SET runtime = :runtime, claimed_at = now(), lease_expires_at = now() + :lease,
        version = c.version + 1
    FROM oldest WHERE c.id = oldest.id
    RETURNING c.*
)"""

# FinishExecution: end the call once (guarded by status, runtime and correction round),
# queue its completion notice in the same statement, and wake its status waiters.
_FINISH = fixed_sql(
    """
WITH ended AS (
    UPDATE functions.calls
    SET status = :status, answer = :answer, has_result = :has_result, result = :result,
        error = :error, ended_at = now(), version = version + 1
    WHERE id = :call_id AND runtime = :runtime AND correction_turns = :correction_turns
      AND status IN ('running', 'waiting_for_input')
      AND (NOT :plain OR (coalesce(output_schema, 'null') = 'null'
                          AND notify_conversation_id IS NULL))
    RETURNING id, status, target_kind, target_name, function, notify_conversation_id
), notice AS (
    INSERT INTO functions.notices (call_id, conversation_id, text, attributes)
    SELECT id, notify_conversation_id, :notice_text,
           jsonb_build_object('call_id', CAST(id AS text), 'status', status,
                              'target', target_kind || ':' || target_name,
                              'function', function)
    FROM ended WHERE notify_conversation_id IS NOT NULL
    ON CONFLICT DO NOTHING
    RETURNING call_id
), """
    + _CLAIM_CTES.format(only_if=":claim AND EXISTS (SELECT 1 FROM ended) AND")
    + """
SELECT (SELECT status FROM ended) AS ended_status,
       (SELECT pg_notify('functions_calls', CAST(id AS text)) FROM ended) AS call_notified,
       (SELECT pg_notify('functions_calls', CAST(id AS text) || ' ended') FROM ended)
           AS end_notified,
       (SELECT pg_notify('functions_notices', 'due') FROM notice) AS notice_notified,
       (SELECT pg_notify('functions_calls', CAST(id AS text)) FROM claimed) AS claim_notified,
       claimed.*
FROM (SELECT) AS one LEFT JOIN claimed ON true
"""
)

# GetStatus: the call, its target's owner and every page in one statement and snapshot.
_STATUS = fixed_sql(
    """
SELECT c.*, t.owner AS target_owner,
    (SELECT coalesce(json_agg(m ORDER BY m.index), '[]')
     FROM (SELECT index, role, text, created_at FROM functions.execution_messages
           WHERE call_id = c.id AND index > :after ORDER BY index LIMIT :message_limit) m
    ) AS page_messages,
    (SELECT coalesce(json_agg(e ORDER BY e.index), '[]')
     FROM (SELECT index, kind, text, tool_name, created_at FROM functions.execution_events
           WHERE call_id = c.id AND index > :after_event ORDER BY index LIMIT :event_limit) e
    ) AS page_events,
    (SELECT coalesce(json_agg(f ORDER BY f.name), '[]')
     FROM (SELECT name, size, media_type, sha256, is_text, created_at, blob_id
           FROM functions.files WHERE call_id = c.id) f
    ) AS page_files,
    CASE WHEN c.run_id IS NOT NULL THEN
        (SELECT coalesce(json_agg(s ORDER BY s.index), '[]')
         FROM (SELECT index, step, group_name, status, detail, created_at
               FROM functions.workflow_steps WHERE call_id = c.id) s)
    END AS page_steps,
    CASE WHEN c.status = 'waiting_for_input' THEN
        (SELECT question FROM functions.questions
         WHERE call_id = c.id AND reply IS NULL AND withdrawn_at IS NULL
         ORDER BY seq DESC LIMIT 1)
    END AS pending_question
FROM functions.calls c
JOIN functions.targets t ON t.kind = c.target_kind AND t.name = c.target_name
WHERE c.id = :call_id
"""
)

_FUNCTION_FOR_CALL = fixed_sql(
    """
SELECT t.owner AS target_owner, t.running_limit,
       (SELECT count(*) FROM functions.calls c
        WHERE c.target_kind = t.kind AND c.target_name = t.name
          AND c.status IN ('running', 'waiting_for_input')) AS open_calls,
       f.*
FROM functions.targets t
LEFT JOIN functions.functions f
    ON f.target_kind = t.kind AND f.target_name = t.name AND f.name = :name
WHERE t.kind = :kind AND t.name = :target_name
"""
)

# Call: see migrations/0002_create_call.sql.
_CREATE_CALL = fixed_sql(
    """
SELECT * FROM functions.create_call(
    :id, :target_kind, :target_name, :function, :caller, :inputs, :description,
    :output_schema, :starts_work, :workflow, :variables, :run_id, :source, :submission_key,
    :request_hash, :notify_conversation_id, :default_limit)
"""
)
# What create_call raises when the target is at its running limit.
BUSY_SQLSTATE = "AW001"

# ClaimExecution for one target (the common case).
_CLAIM_ONE = fixed_sql(
    "WITH "
    + _CLAIM_CTES.format(only_if="")
    + """
SELECT claimed.*, pg_notify('functions_calls', CAST(claimed.id AS text)) AS notified
FROM claimed
"""
)

_GET_CALL = fixed_sql("SELECT * FROM functions.calls WHERE id = :call_id")

_CALL_ACCESS = fixed_sql(
    """
SELECT c.caller, t.owner
FROM functions.calls c
JOIN functions.targets t ON t.kind = c.target_kind AND t.name = c.target_name
WHERE c.id = :call_id
"""
)

_SUBMISSION = fixed_sql(
    """
SELECT id, status, request_hash FROM functions.calls
WHERE caller = :caller AND submission_key = :key
"""
)

_CALL_STATUS = fixed_sql("SELECT status FROM functions.calls WHERE id = :call_id")
