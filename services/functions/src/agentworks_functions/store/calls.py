"""Calls: the running limit, retry keys, status reads, cancel and replies (F4-F9, F11, F15)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from agentworks.core.checks import is_retry
from agentworks.core.errors import (
    Busy,
    InvalidArgument,
    NotFound,
    PreconditionFailed,
    Reason,
)
from agentworks.server.tracing import current_traceparent
from agentworks_functions.models import (
    CANCELLED,
    OPEN_STATUSES,
    QUESTIONS_IN_STATUS,
    RUNNING,
    WAITING_FOR_INPUT,
    Call,
    CallSource,
    Ending,
    Function,
    Receipt,
    StatusView,
    TargetKey,
)
from agentworks_functions.store.base import FunctionsStoreBase, Q, notify
from agentworks_functions.store.rows import (
    CALL_CHANNEL,
    DIFFERENT_CALL,
    _call,
    _function,
    _uuid,
    busy,
    call_not_found,
    caller_busy,
    status_view,
)
from agentworks_functions.store.sql import BUSY_SQLSTATE, CALLER_BUSY_SQLSTATE


class CallQueries(FunctionsStoreBase):
    async def find_submission(self, caller: str, submission_key: str) -> tuple[Receipt, str] | None:
        """The call an earlier request with this retry key created, and its request hash."""
        async with self.db.raw() as pg:
            row = await Q.one(pg, "submission", {"caller": caller, "key": submission_key})
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
            row = await Q.one(
                pg, "function_for_call", {"kind": key.kind, "target_name": key.name, "name": name}
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
        source_call_id: str | None = None,
    ) -> Receipt:
        """Insert a call if the retry key is new and the target has room (F4-F6).

        `submission_key` is the stored retry key (a workflow's is scoped to its run, step
        and group, F14); `submission_id` is the caller's own, the one errors quote.

        One statement in autocommit: `functions.create_call_v4` (migration 0012) locks the
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
            "caller_share": self.caller_share_percent,
            # The trace of the request making the call, for its runtime (P4).
            "traceparent": current_traceparent(),
            "source_call_id": _uuid(source_call_id, "call") if source_call_id else None,
        }
        # JSON columns keep JSON null for None, as they always did.
        for name in ("inputs", "output_schema", "workflow", "variables", "source"):
            values[name] = Jsonb(values[name])
        async with self.db.raw() as pg:
            try:
                row = await Q.one(pg, "create_call", values)
            except psycopg.Error as exc:
                if exc.sqlstate == CALLER_BUSY_SQLSTATE:
                    mine, share, limit = (exc.diag.message_detail or "0/0/0").split("/")
                    raise caller_busy(key, int(mine), int(share), int(limit)) from None
                if exc.sqlstate != BUSY_SQLSTATE:
                    raise
                running, limit = (exc.diag.message_detail or "0/0").split("/")
                raise busy(key, int(running), int(limit)) from None
            if row.running_limit is None:
                raise NotFound(f"{key} is not registered with the functions service")
            if not row.inserted:
                # A twin with the same retry key committed first: recover it (F6).
                row = await Q.one(pg, "submission", {"caller": caller, "key": submission_key})
                is_retry(submission_id, row.request_hash, request_hash, DIFFERENT_CALL)
                return Receipt(str(row.id), row.status, created=False)
        return Receipt(str(call_id), RUNNING, created=True)

    async def call_status(self, call_id: str) -> str | None:
        """Just the status of a call (a cheap re-check for a waiting read)."""
        async with self.db.raw() as pg:
            row = await Q.one(pg, "call_status", {"call_id": _uuid(call_id, "call")})
        return None if row is None else row.status

    async def get_call(self, call_id: str) -> Call:
        call_uuid = _uuid(call_id, "call")
        async with self.db.raw() as pg:
            row = await Q.one(pg, "get_call", {"call_id": call_uuid})
        if row is None:
            raise call_not_found(call_id)
        return _call(row)

    async def call_access(self, call_id: str) -> tuple[str, str]:
        """(caller, target owner) of a call, for the A3 check."""
        call_uuid = _uuid(call_id, "call")
        async with self.db.raw() as pg:
            row = await Q.one(pg, "call_access", {"call_id": call_uuid})
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
            row = await Q.one(
                pg,
                "call_status_page",
                {
                    "call_id": call_uuid,
                    "after": after,
                    "message_limit": message_limit,
                    "after_event": after_event,
                    "event_limit": event_limit,
                    "question_limit": QUESTIONS_IN_STATUS,
                },
            )
        if row is None:
            raise call_not_found(call_id)
        return status_view(row, after, after_event), row.target_owner

    async def cancel(self, call_id: str, by: str, notice_text: Callable) -> None:
        async with self.db.raw(transaction=True) as pg:
            row = await self._lock_call(pg, call_id)
            if row.status == CANCELLED:
                return
            if row.status not in OPEN_STATUSES:
                raise PreconditionFailed(
                    f"call {call_id} has already ended ({row.status}); there is nothing to cancel",
                    reason=Reason.CALL_ENDED,
                    metadata={"call_id": call_id, "status": row.status},
                )
            await self._end(
                pg,
                [row],
                Ending(CANCELLED, error=f"cancelled by {by}", answer=""),
                notice_text,
            )

    async def reply(self, call_id: str, by: str, text: str) -> None:
        async with self.db.raw(transaction=True) as pg:
            row = await self._lock_call(pg, call_id)
            if row.status != WAITING_FOR_INPUT:
                raise PreconditionFailed(
                    f"call {call_id} is not waiting for input (status {row.status}); reply "
                    "only while its status shows a question",
                    reason=Reason.NO_PENDING_QUESTION,
                    metadata={"call_id": call_id, "status": row.status},
                )
            pending = await Q.one(pg, "pending_question", {"call_id": row.id})
            if pending is not None and pending.choices and text not in pending.choices:
                raise InvalidArgument(
                    f"the reply is not one of the question's choices; reply with one of: "
                    f"{', '.join(repr(c) for c in pending.choices)}",
                    reason=Reason.NOT_A_CHOICE,
                    metadata={
                        "field": "text",
                        "choices": json.dumps(pending.choices),
                        "call_id": call_id,
                    },
                )
            answered = await Q.all(
                pg, "answer_question", {"call_id": row.id, "reply": text, "by": by}
            )
            if not answered:
                raise PreconditionFailed(
                    f"call {call_id} has no pending question",
                    reason=Reason.NO_PENDING_QUESTION,
                    metadata={"call_id": call_id, "status": row.status},
                )
            await Q.execute(pg, "call_running_again", {"call_id": row.id})
            await notify(pg, CALL_CHANNEL, str(row.id))
