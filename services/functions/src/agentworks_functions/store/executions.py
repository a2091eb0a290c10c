"""Executions: claims, leases, reports, questions, corrections, finishing (R1, F10-F12)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from agentworks.core.errors import (
    InvalidArgument,
    NotFound,
    PreconditionFailed,
    Reason,
)
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
from agentworks_functions.store.base import FunctionsStoreBase, Q, notify
from agentworks_functions.store.rows import (
    CALL_CHANNEL,
    Claim,
    _call,
    _uuid,
    call_ended,
)


class ExecutionQueries(FunctionsStoreBase):
    async def claim_execution(
        self, runtime: str, keys: Sequence[TargetKey], lease: timedelta
    ) -> Call | None:
        """Take the oldest unclaimed call of these targets (R1).

        One statement in autocommit: pick the oldest unclaimed call (skipping rows other
        claims hold), take it, and notify its status waiters at commit. An empty claim
        (another runtime was faster) costs one round trip.
        """
        params: dict[str, Any] = {"runtime": runtime, "lease": lease}
        if len(keys) == 1:
            name = "claim_execution_of_target"
            params |= {"claim_kind": keys[0].kind, "claim_name": keys[0].name}
        else:
            name = "claim_execution_of_targets"
            params |= {"kinds": [k.kind for k in keys], "names": [k.name for k in keys]}
        async with self.db.raw() as pg:
            row = await Q.one(pg, name, params)
        return _call(row) if row is not None else None

    async def heartbeat(self, call_id: str, runtime: str, lease: timedelta) -> tuple[str, datetime]:
        params = {"call_id": _uuid(call_id, "call"), "runtime": runtime, "lease": lease}
        async with self.db.raw(transaction=True) as pg:
            row = await Q.one(pg, "extend_execution_lease", params)
            if row is not None:
                return row.status, row.lease_expires_at
            row = await Q.one(pg, "execution_lease", {"call_id": params["call_id"]})
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
        async with self.db.raw(transaction=True) as pg:
            row = await self._lock_execution(pg, call_id, runtime)
            if row.status == CANCELLED:
                return CANCELLED
            if row.status not in OPEN_STATUSES:
                raise call_ended(call_id, row.status)
            if sequence:
                stored = await Q.one(
                    pg, "store_report_sequence", {"call_id": row.id, "sequence": sequence}
                )
                if stored is None:
                    return row.status  # a retry of a report already stored
            for what, have, adding, most in (
                ("messages", row.message_count, len(messages), max_messages),
                ("events", row.event_count, len(events), max_events),
                ("steps", row.step_count, len(steps), max_steps),
            ):
                if have + adding > most:
                    raise InvalidArgument(
                        f"call {call_id} would have {have + adding} {what}; the limit is {most} "
                        "per call — report less detail",
                        reason=Reason.STORED_LIMIT,
                        metadata={"call_id": call_id, "counted": what, "limit": str(most)},
                    )
            await _add_details(pg, row, messages, events, steps)
            # Reports sent concurrently may commit out of order: each one's messages,
            # events and steps are all kept, and the progress line is the latest report's.
            latest = not sequence or sequence > row.last_report_seq
            await Q.execute(
                pg,
                "count_report",
                {
                    "call_id": row.id,
                    "message_count": row.message_count + len(messages),
                    "event_count": row.event_count + len(events),
                    "step_count": row.step_count + len(steps),
                    "last_report_seq": sequence if sequence and latest else None,
                    "set_progress": progress is not None and latest,
                    "progress": progress,
                },
            )
            await notify(pg, CALL_CHANNEL, str(row.id))
            return row.status

    async def ask(
        self,
        call_id: str,
        runtime: str,
        ask_id: str,
        question: str,
        choices: Sequence[str] = (),
    ) -> tuple[Question, str]:
        """Record a human-input question (once per ask_id) with the answers it offers, if
        any; (question, call status) (F11)."""
        async with self.db.raw(transaction=True) as pg:
            row = await self._lock_execution(pg, call_id, runtime)
            if row.status == CANCELLED:
                return Question(ask_id, question, None, CANCELLED), CANCELLED
            if row.status not in OPEN_STATUSES:
                raise call_ended(call_id, row.status)
            existing = await Q.one(pg, "question", {"call_id": row.id, "ask_id": ask_id})
            if existing is not None:
                if existing.withdrawn_at is not None:
                    raise PreconditionFailed(
                        f"question {ask_id!r} of call {call_id} was withdrawn; ask again "
                        "with a new ask_id",
                        reason=Reason.QUESTION_WITHDRAWN,
                        metadata={"call_id": call_id, "ask_id": ask_id},
                    )
                return Question(ask_id, existing.question, existing.reply), row.status
            pending = await Q.one(pg, "pending_question", {"call_id": row.id})
            if pending is not None:
                raise PreconditionFailed(
                    f"call {call_id} already has a pending question (ask_id {pending.ask_id!r}); "
                    "wait for its reply before asking another",
                    reason=Reason.QUESTION_PENDING,
                    metadata={"call_id": call_id, "ask_id": pending.ask_id},
                )
            seq = row.question_count + 1
            await Q.execute(
                pg,
                "add_question",
                {
                    "call_id": row.id,
                    "ask_id": ask_id,
                    "seq": seq,
                    "question": question,
                    "choices": list(choices),
                },
            )
            await Q.execute(
                pg, "call_waiting_for_input", {"call_id": row.id, "question_count": seq}
            )
            await notify(pg, CALL_CHANNEL, str(row.id))
        return Question(ask_id, question, None), WAITING_FOR_INPUT

    async def withdraw_question(
        self, call_id: str, runtime: str, ask_id: str
    ) -> tuple[str | None, str]:
        """The runtime stops waiting for question `ask_id` (F11): (its reply, if one came
        first; the call's status). A pending question is withdrawn and the call is
        running again; asking to withdraw it again changes nothing."""
        async with self.db.raw(transaction=True) as pg:
            row = await self._lock_execution(pg, call_id, runtime)
            if row.status == CANCELLED:
                return None, CANCELLED
            if row.status not in OPEN_STATUSES:
                raise call_ended(call_id, row.status)
            asked = await Q.one(pg, "question", {"call_id": row.id, "ask_id": ask_id})
            if asked is None:
                raise NotFound(f"call {call_id} has no question {ask_id!r}")
            if asked.reply is not None or asked.withdrawn_at is not None:
                return asked.reply, row.status
            await Q.execute(pg, "withdraw_question", {"call_id": row.id, "ask_id": ask_id})
            await Q.execute(pg, "call_running_again", {"call_id": row.id})
            await notify(pg, CALL_CHANNEL, str(row.id))
        return None, RUNNING

    async def question_state(self, call_id: str, ask_id: str) -> tuple[str | None, str]:
        """(reply or None, call status) of one question."""
        params = {"call_id": _uuid(call_id, "call"), "ask_id": ask_id}
        async with self.db.raw() as pg:
            row = await Q.one(pg, "question_state", params)
        if row is None:
            raise NotFound(f"call {call_id} has no question {ask_id!r}")
        return row.reply, row.status

    async def request_correction(
        self, call_id: str, runtime: str, prompt: str, event_text: str
    ) -> bool:
        """Grant the one correction turn (F10); False if the call is no longer open."""
        async with self.db.raw(transaction=True) as pg:
            row = await self._lock_execution(pg, call_id, runtime)
            if row.status not in OPEN_STATUSES or row.correction_turns > 0:
                return False
            await Q.execute(
                pg,
                "add_correction_event",
                {"call_id": row.id, "index": row.event_count, "text": event_text},
            )
            await Q.execute(
                pg,
                "grant_correction",
                {"call_id": row.id, "prompt": prompt, "event_count": row.event_count + 1},
            )
            await notify(pg, CALL_CHANNEL, str(row.id))
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
            row = await Q.one(
                pg,
                "finish_execution",
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
        return await self._interrupt(
            "expired_executions",
            {"batch": batch},
            "interrupted: the execution's runtime stopped renewing its lease; saved "
            "progress, messages and files stay readable; the call is not restarted — call "
            "again if the work is still needed",
            notice_text,
        )

    async def fail_unanswered(
        self, notice_text: Callable, older_than: timedelta, batch: int = 100
    ) -> int:
        """Calls whose human-input question went unanswered for `older_than` end `failed`
        (F11), so that questions nobody answers cannot hold a target's running slots."""
        return await self._interrupt(
            "unanswered_calls",
            {"batch": batch, "older_than": older_than},
            f"failed: nobody answered the execution's question within "
            f"{older_than.total_seconds():g} s (FUNCTIONS_QUESTION_TIMEOUT_SECONDS); call "
            "again when someone can answer",
            notice_text,
            status=FAILED,
        )

    async def interrupt_unclaimed(
        self, notice_text: Callable, older_than: timedelta, batch: int = 100
    ) -> int:
        """Calls no runtime claimed within `older_than` end `interrupted` (F5, F12).

        Otherwise a call whose target has no runtime would hold a running slot forever.
        """
        return await self._interrupt(
            "unclaimed_calls",
            {"batch": batch, "older_than": older_than},
            f"interrupted: no runtime claimed the call within {older_than.total_seconds():g} "
            "s (is a runtime serving this target?); it never started — call again when "
            "one is running",
            notice_text,
        )


async def _add_details(
    pg: psycopg.AsyncConnection,
    row: Any,
    messages: Sequence[tuple[str, str]],
    events: Sequence[tuple[str, str, str]],
    steps: Sequence[tuple[str, str, str, str]],
) -> None:
    """A report's messages, events and steps, numbered on from the call's counts (one
    statement each, as many rows as given)."""
    if messages:
        roles, texts = zip(*messages, strict=True)
        await Q.execute(
            pg,
            "add_messages",
            {
                "call_id": row.id,
                "first": row.message_count,
                "roles": list(roles),
                "texts": list(texts),
            },
        )
    if events:
        kinds, texts, tools = zip(*events, strict=True)
        await Q.execute(
            pg,
            "add_events",
            {
                "call_id": row.id,
                "first": row.event_count,
                "kinds": list(kinds),
                "texts": list(texts),
                "tool_names": list(tools),
            },
        )
    if steps:
        names, groups, statuses, details = zip(*steps, strict=True)
        await Q.execute(
            pg,
            "add_steps",
            {
                "call_id": row.id,
                "first": row.step_count,
                "steps": list(names),
                "groups": list(groups),
                "statuses": list(statuses),
                "details": list(details),
            },
        )
