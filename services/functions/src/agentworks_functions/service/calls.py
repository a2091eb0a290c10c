"""Calling a function (F3-F6, F9, F14); following the call is `following.py`."""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from typing import Any

import structlog

from agentworks.core.checks import (
    check_json_depth,
    check_no_nul,
    check_retry_key,
    is_retry,
    request_hash,
)
from agentworks.core.errors import (
    InvalidArgument,
    PermissionDenied,
    Reason,
    rule_meta,
)
from agentworks.core.identity import Identity
from agentworks.core.limits import (
    MAX_INPUTS_BYTES,
)
from agentworks.server.capabilities import require_conversation
from agentworks_functions.jsonin import loads_object_sized
from agentworks_functions.metrics import counting_busy
from agentworks_functions.models import (
    CallSource,
    Receipt,
    StatusView,
    TargetKey,
)
from agentworks_functions.patterns import json_nodes
from agentworks_functions.schemas import (
    CheckDeadline,
    deadline_refusal,
    describe_violations,
    json_problems,
    may_call,
    off_loop,
    resolve_variables,
    text_problems,
    violations,
)
from agentworks_functions.service.following import Following
from agentworks_functions.service.rules import (
    _FUNCTION_RE,
    _OUTCOME,
    _UUID_RE,
    function_not_found,
    log,
)
from agentworks_functions.store import (
    CALL_CHANNEL,
    DIFFERENT_CALL,
    ended_key,
)


class Calls(Following):
    async def call(
        self,
        identity: Identity,
        *,
        target: TargetKey,
        function: str,
        inputs: dict[str, Any] | None,
        submission_id: str,
        notify_conversation_id: str,
        source: CallSource | None,
        wait_seconds: int = 0,
        fresh_submission_id: bool = False,
        inputs_text: str = "",
    ) -> Receipt:
        """Check inputs, then start a fresh execution within the running limit (F3-F6).

        With `wait_seconds`, wait that long for the call to end, and return it ended as
        the receipt's `outcome` if it did: call and result in one request.
        `fresh_submission_id`: the caller vouches that `submission_id` was never sent
        before, so no earlier call is looked for and a full target refuses at once.
        """
        source_call_id = await self._capability_caller(identity, notify_conversation_id, source)
        deadline = time.monotonic() + wait_seconds
        call_id = uuid.uuid4()
        # Listening for the end before the call exists: the end cannot be missed, and
        # nothing needs reading before the first wait.
        ends = [ended_key(call_id)] if wait_seconds else []
        view: StatusView | None = None
        with self.listener.subscribe(CALL_CHANNEL, ends) as waiter:
            receipt = await self._call(
                identity,
                call_id=call_id,
                target=target,
                function=function,
                inputs=inputs,
                inputs_text=inputs_text,
                submission_id=submission_id,
                notify_conversation_id=notify_conversation_id,
                source=source,
                fresh_submission_id=fresh_submission_id,
                source_call_id=source_call_id,
            )
            if not wait_seconds:
                return receipt
            if receipt.created:
                view = await self._until_ended(waiter, receipt.call_id, deadline, None, _OUTCOME)
        if not receipt.created:  # an earlier call with this retry key: wait for that one
            view = await self.status(
                identity,
                call_id=receipt.call_id,
                message_limit=_OUTCOME[1],
                event_limit=_OUTCOME[3],
                wait_seconds=max(1, round(deadline - time.monotonic())),
                until_ended=True,
            )
        if view is None or view.call.is_open:
            return receipt
        return dataclasses.replace(receipt, status=view.call.status, outcome=view)

    async def _capability_caller(
        self, identity: Identity, notify_conversation_id: str, source: CallSource | None
    ) -> str | None:
        """Hold a capability's Call to its item (T3): a turn's notifies its own
        conversation only (L6); an execution's, while live, asks for no notice and, in a
        workflow run, names that run as its source (L8). The calling execution's call id
        (stored with the call: what its capability may read later), else None."""
        bound = identity.capability
        if bound is None:
            return None
        if bound.kind != "execution" or notify_conversation_id:
            require_conversation(identity, notify_conversation_id)
            return None
        own = await self._live_execution(identity)
        if own.run_id and (source is None or source.run_id != own.run_id):
            raise PermissionDenied(
                f"the capability of {bound.describe()} calls as a step of its own run: give "
                f"source {{run_id: {own.run_id!r}, step, group}} (ExecutionContext."
                "call_function does); no call was created",
                reason=Reason.OUT_OF_SCOPE,
                metadata={"field": "source", "run_id": own.run_id},
            )
        return own.id

    async def _call(
        self,
        identity: Identity,
        *,
        call_id: uuid.UUID,
        target: TargetKey,
        function: str,
        inputs: dict[str, Any] | None,
        submission_id: str,
        notify_conversation_id: str,
        source: CallSource | None,
        fresh_submission_id: bool = False,
        source_call_id: str | None = None,
        inputs_text: str = "",
    ) -> Receipt:
        """`inputs` parsed, or None: `inputs_text` is read by a check worker first."""
        if not function:
            raise InvalidArgument(
                "function is required: the name of a declared function",
                reason=Reason.FIELD_RULE,
                metadata=rule_meta("function", "required"),
            )
        check_no_nul(function, "function")  # a refusal saying so, not "not found"
        if not _FUNCTION_RE.match(function):  # cannot be declared; keep it away from SQL
            raise function_not_found(target, function)
        check_retry_key(submission_id)
        if inputs is None:  # a worker will read them: refused now if the caller holds its share
            self.checks.check_share(identity.principal)
        if inputs is None and submission_id:  # a retry key hashes the inputs: read them
            inputs = loads_object_sized(inputs_text, "inputs", MAX_INPUTS_BYTES)
        if inputs is not None:
            size = len(json.dumps(inputs).encode())
            if size > MAX_INPUTS_BYTES:
                raise InvalidArgument(
                    f"inputs are larger than {MAX_INPUTS_BYTES} bytes as JSON",
                    reason=Reason.FIELD_RULE,
                    metadata=rule_meta("inputs", "json.max_bytes", MAX_INPUTS_BYTES),
                )
            check_json_depth(inputs, "inputs")
        if notify_conversation_id:
            if identity.kind not in ("agent", "workflow"):
                raise InvalidArgument(
                    "notify_conversation_id is for internal callers (agents and workflows); "
                    "other callers poll status instead",
                    reason=Reason.INVALID_VALUE,
                    metadata=rule_meta("notify_conversation_id"),
                )
            if not _UUID_RE.match(notify_conversation_id):
                raise InvalidArgument(
                    f"notify_conversation_id {notify_conversation_id!r} is not a conversation id",
                    reason=Reason.INVALID_VALUE,
                    metadata=rule_meta("notify_conversation_id"),
                )
            if identity.capability is None:
                # L6: a notice goes only to a conversation the caller takes part in, and
                # the turn's capability (signed by messaging, naming its conversation) is
                # the proof; call() checked that it names this one.
                raise PermissionDenied(
                    f"notify_conversation_id {notify_conversation_id!r} refused: completion "
                    "notices go only to a conversation the caller takes part in, shown by "
                    "the capability of a turn of that conversation. Call from within the "
                    "turn, with its capability (TurnContext.call_function does), or leave "
                    "notify_conversation_id empty and poll status. No call was created.",
                    reason=Reason.OUT_OF_SCOPE,
                    metadata=rule_meta("notify_conversation_id"),
                )
        if source is not None:
            if identity.kind != "workflow":
                raise InvalidArgument(
                    "source (run, step, group) is only for workflow callers",
                    reason=Reason.INVALID_VALUE,
                    metadata=rule_meta("source"),
                )
            for field, value in (("run_id", source.run_id), ("step", source.step)):
                if not value or len(value) > 200:
                    raise InvalidArgument(
                        f"source.{field} is required (at most 200 characters)",
                        reason=Reason.FIELD_RULE,
                        metadata=rule_meta(f"source.{field}", "string.max_len", 200),
                    )
            if len(source.group) > 200:
                raise InvalidArgument(
                    "source.group is longer than 200 characters",
                    reason=Reason.FIELD_RULE,
                    metadata=rule_meta("source.group", "string.max_len", 200),
                )
            for field, value in source.as_json().items():
                check_no_nul(value, f"source.{field}")
        # F14: a workflow's retry ids are scoped to its run, step and group; an
        # execution capability's outside a run to its execution (T3: none reaches another's).
        submission_key = None
        if submission_id:
            if source:
                submission_key = f"{source.run_id}/{source.step}/{source.group}/{submission_id}"
            elif source_call_id:
                submission_key = f"call:{source_call_id}/{submission_id}"
            else:
                submission_key = submission_id
        digest = (
            request_hash(
                str(target),
                function,
                inputs,
                notify_conversation_id,
                source.as_json() if source else None,
            )
            if submission_key
            else ""  # no retry key: nothing to compare a retry with
        )
        if submission_key and not fresh_submission_id:
            found = await self.store.find_submission(identity.principal, submission_key)
            if found is not None:
                receipt, earlier_hash = found
                is_retry(submission_id, earlier_hash, digest, DIFFERENT_CALL)  # or refused
                log.info("call.recovered", call_id=receipt.call_id, status=receipt.status)
                return receipt
        owner, declared, full = await self.store.function_for_call(target, function)
        if declared is None or not may_call(identity.principal, owner, declared.allowed_callers):
            raise function_not_found(target, function)
        try:
            if inputs is None:  # large: read and checked in a worker, then read here
                problems = await self.checks.run(
                    identity.principal, text_problems, declared.input_schema, inputs_text
                )
                if not problems:
                    inputs = loads_object_sized(inputs_text, "inputs", MAX_INPUTS_BYTES)
            else:
                problems = json_problems(inputs, "inputs") + await off_loop(
                    self.checks,
                    identity.principal,
                    declared.input_schema,
                    violations,
                    declared.input_schema,
                    inputs,
                    values=json_nodes(inputs),
                    size=size,
                )
        except CheckDeadline as exc:
            raise deadline_refusal(f"inputs for {target} {function}", exc.deadline) from None
        variables = None
        if declared.workflow is not None and inputs is not None:
            variables, variable_problems = resolve_variables(declared.workflow.variables, inputs)
            problems += variable_problems
        if problems or inputs is None:
            raise InvalidArgument(
                describe_violations(
                    f"inputs for {target} {function} are invalid",
                    problems,
                    "Fix them and call again; no call was created.",
                ),
                reason=Reason.INVALID_VALUE,
                metadata=rule_meta("inputs", "input_schema"),
            )
        with counting_busy(target):  # both refusals below count as busy (metrics)
            # At the limit already: refused at once (F5). A retry must not be refused so,
            # as its call may exist (the lookup above missed a twin still being stored);
            # a fresh key has no earlier call to return.
            if full is not None and (not submission_key or fresh_submission_id):
                raise full
            receipt = await self.store.create_call(
                call_id=call_id,
                function=declared,
                caller=identity.principal,
                inputs=inputs,
                variables=variables,
                source=source,
                submission_key=submission_key,
                request_hash=digest,
                notify_conversation_id=notify_conversation_id or None,
                submission_id=submission_id,
                source_call_id=source_call_id,
            )
        structlog.contextvars.bind_contextvars(call_id=receipt.call_id)
        log.info(
            "call.accepted" if receipt.created else "call.recovered",
            call_id=receipt.call_id,
            target=str(target),
            function=function,
        )
        return receipt
