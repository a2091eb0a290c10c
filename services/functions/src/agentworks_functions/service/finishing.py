"""Finishing executions: results, output schemas, the correction turn (F10, F12, F13)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from agentworks.core.checks import check_no_nul
from agentworks.core.errors import (
    InvalidArgument,
    PermissionDenied,
    PreconditionFailed,
    Reason,
    rule_meta,
)
from agentworks.core.identity import Identity
from agentworks.core.limits import (
    MAX_RESULT_BYTES,
)
from agentworks_functions.models import (
    CANCELLED,
    COMPLETED,
    FAILED,
    INTERRUPTED,
    OPEN_STATUSES,
    RESULT_FILE,
    RUNNING,
    Ending,
    FinishOutcome,
    TargetKey,
)
from agentworks_functions.schemas import (
    CheckDeadline,
    describe_violations,
    off_loop,
    parse_valid_json,
    result_problems,
)
from agentworks_functions.service.base import FunctionsServiceBase
from agentworks_functions.service.rules import (
    NoticeSender,
    check_claim_targets,
    log,
    notice_text,
    plain_ending,
    same_finish,
)
from agentworks_functions.store import (
    Claim,
    call_ended,
)


class Finishing(FunctionsServiceBase):
    async def finish(
        self,
        identity: Identity,
        *,
        call_id: str,
        failed: bool,
        final_message: str,
        error: str,
        correction_round: int,
        claim_next: Sequence[TargetKey] | None = None,
        lease_seconds: int = 0,
        interrupted: bool = False,
    ) -> FinishOutcome:
        """The execution's terminal outcome, with the F10 result rules.

        With `claim_next`, a finish that ended the call also claims this runtime's next
        execution of those targets, as ClaimExecution would without waiting (R1): one
        request per execution instead of two while work is queued.
        """
        await self._check_capability(identity, call_id)
        if identity.capability is not None and claim_next is not None:
            raise PermissionDenied(
                "an execution capability finishes its own call only: it claims nothing "
                "(claim_next is for the runtime)",
                reason=Reason.OUT_OF_SCOPE,
                metadata={"call_id": call_id},
            )
        claim: Claim | None = None
        if claim_next is not None:
            check_claim_targets(identity, claim_next)
            lease = self._lease(lease_seconds)
            # None while this replica shuts down: the runtime claims from another.
            claim = None if self.draining.is_set() else Claim(claim_next, lease)
        # The finish statement itself claims for one target; for several, a claim follows.
        one_target = claim if claim is not None and len(claim.targets) == 1 else None
        outcome, tried = await self._finish(
            identity,
            call_id=call_id,
            failed=failed,
            interrupted=interrupted,
            final_message=final_message,
            error=error,
            correction_round=correction_round,
            claim=one_target,
        )
        if claim is not None and not tried and outcome.status not in OPEN_STATUSES:
            # Not tried by the finish statement (several targets, or a retried finish).
            call = await self.store.claim_execution(identity.principal, claim.targets, claim.lease)
            outcome = dataclasses.replace(outcome, next=call)
        if outcome.next is not None:
            log.info("execution.claimed", call_id=outcome.next.id, target=str(outcome.next.target))
        return outcome

    async def _finish(
        self,
        identity: Identity,
        *,
        call_id: str,
        failed: bool,
        final_message: str,
        error: str,
        correction_round: int,
        claim: Claim | None,
        interrupted: bool = False,
    ) -> tuple[FinishOutcome, bool]:
        """The finish; True when its statement already tried `claim` (one target)."""
        # Their sizes are the proto's rules (FinishExecutionRequest).
        check_no_nul(final_message, "final_message")
        check_no_nul(error, "error")
        if correction_round not in (0, 1):
            raise InvalidArgument(
                "correction_round must be 0, or 1 after the correction turn",
                reason=Reason.FIELD_RULE,
                metadata=rule_meta("correction_round", "range"),
            )
        if failed and interrupted:
            raise InvalidArgument(
                "failed and interrupted are two endings: give failed when the execution "
                "failed, interrupted when the runtime gives it up unfinished",
                reason=Reason.FIELD_RULE,
                metadata=rule_meta("interrupted", "oneof"),
            )
        if correction_round == 0:
            # The common case in one statement: an open call of this runtime with no
            # output schema and no completion notice ends as reported. Anything else
            # (a result to check, a notice to write, a retried or late finish) takes
            # the full path below.
            status, next_call = await self.store.finish(
                call_id,
                identity.principal,
                plain_ending(failed, final_message, error, interrupted=interrupted),
                claim=claim,
            )
            if status is not None:
                log.info("execution.finished", call_id=call_id, status=status)
                return FinishOutcome(status, next=next_call), claim is not None
        call = await self._execution(identity, call_id)
        if not call.is_open:
            if interrupted and call.status == INTERRUPTED:
                return FinishOutcome(call.status), False  # given up already, or lost
            if call.status == CANCELLED or (
                call.status in (COMPLETED, FAILED)
                and same_finish(
                    call,
                    failed=failed,
                    final_message=final_message,
                    error=error,
                    correction_round=correction_round,
                )
            ):
                return FinishOutcome(call.status), False  # cancelled, or a retried finish
            if call.status in (COMPLETED, FAILED):
                raise PreconditionFailed(
                    f"call {call_id} has already ended ({call.status}) by another finish; "
                    "this one (a different final message, failure or error) was not applied",
                    reason=Reason.CALL_ENDED,
                    metadata={"call_id": call_id, "status": call.status},
                )
            raise call_ended(call_id, call.status)
        if correction_round < call.correction_turns:
            # A retry of the first finish: the correction turn is already granted.
            return FinishOutcome(call.status, True, call.correction_prompt or ""), False
        if failed or interrupted or call.output_schema is None:
            ending = plain_ending(failed, final_message, error, interrupted=interrupted)
        else:
            raw, problems = await self._result_file(call_id)
            value = None
            if not problems:
                try:
                    value, problems = await off_loop(
                        self.checks,
                        "",  # a runtime's results: no share, a free worker within the deadline
                        call.output_schema,
                        result_problems,
                        call.output_schema,
                        raw,
                        values=None if raw is None else len(raw) // 2 + 1,
                        size=None if raw is None else len(raw),
                    )
                except CheckDeadline as exc:
                    problems = [f"result: {exc}; write a smaller result"]
            if not problems:
                ending = Ending(COMPLETED, answer=final_message, has_result=True, result=value)
            elif call.correction_turns == 0:
                prompt = describe_violations(
                    f"The result in FUNCTION_RESULT_FILE ({call.output_folder}{RESULT_FILE}) "
                    "does not match the function's output schema",
                    problems,
                    "Write JSON that matches the output schema to FUNCTION_RESULT_FILE, then "
                    "finish again. This is the only correction turn.",
                )
                granted = await self.store.request_correction(
                    call_id, identity.principal, prompt, prompt
                )
                if granted:
                    log.info("execution.correction_requested", call_id=call_id)
                    return FinishOutcome(RUNNING, True, prompt), False
                return FinishOutcome((await self.store.get_call(call_id)).status), False
            else:
                try:
                    ok, value = await off_loop(
                        self.checks,
                        "",
                        call.output_schema,
                        parse_valid_json,
                        call.output_schema,
                        final_message,
                        values=len(final_message) // 2 + 1,
                        size=len(final_message),
                    )
                except CheckDeadline:
                    ok, value = False, None
                if ok:
                    ending = Ending(COMPLETED, answer=final_message, has_result=True, result=value)
                else:
                    ending = Ending(
                        FAILED,
                        answer=final_message,
                        error=describe_violations(
                            "the result still does not match the output schema after the "
                            "correction turn, and the final message is not JSON valid for it",
                            problems,
                            "The final text is kept as the answer.",
                        ),
                    )
        notice = None
        if call.notify_conversation_id:
            notice = notice_text(dataclasses.replace(call, status=ending.status))
        status, next_call = await self.store.finish(
            call_id,
            identity.principal,
            ending,
            correction_turns=call.correction_turns,
            notice=notice,
            claim=claim,
        )
        if status is None:  # it ended meanwhile (cancelled, interrupted)
            status = await self._ended_status(identity, call_id)
        log.info("execution.finished", call_id=call_id, status=status)
        return FinishOutcome(status, next=next_call), claim is not None

    async def interrupt_expired(self) -> int:
        """End lost executions, and calls no runtime claimed in time, `interrupted` (F12)."""
        count = await self.store.interrupt_expired(notice_text)
        if count:
            log.warning("executions.interrupted", count=count, reason="lease expired")
        if self.claim_timeout is not None:
            unclaimed = await self.store.interrupt_unclaimed(notice_text, self.claim_timeout)
            if unclaimed:
                log.warning(
                    "calls.interrupted",
                    count=unclaimed,
                    reason=f"not claimed within {self.claim_timeout.total_seconds():g} s",
                )
            count += unclaimed
        if self.question_timeout is not None:
            unanswered = await self.store.fail_unanswered(notice_text, self.question_timeout)
            if unanswered:
                log.warning(
                    "calls.failed",
                    count=unanswered,
                    reason=f"question unanswered for {self.question_timeout.total_seconds():g} s",
                )
            count += unanswered
        return count

    async def deliver_notices(self, send: NoticeSender) -> int:
        return await self.store.deliver_notices(send, retry_after=self.notice_retry)

    async def _result_file(self, call_id: str) -> tuple[bytes | None, list[str]]:
        info = await self.store.file_info(call_id, RESULT_FILE)
        if info is None:
            return None, []
        if info.size > MAX_RESULT_BYTES:
            return None, [
                f"the result file is {info.size} bytes; the limit is {MAX_RESULT_BYTES} bytes"
            ]
        return await self.store.blobs.read(info.blob_id, 0, info.size), []
