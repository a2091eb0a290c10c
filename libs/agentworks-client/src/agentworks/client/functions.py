"""Typed client of the functions service; the execution protocol's calls (a runtime's side)
are `ExecutionCalls` in `executions.py`, which this client extends."""

from __future__ import annotations

import base64
import time
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from agentworks.client.call_watch import ENDED_STATES, CallWatching
from agentworks.client.common import (
    LONG_POLL_SLACK_SECONDS,
    aware_timestamp,
    json_document,
    target_ref,
)
from agentworks.client.executions import ExecutionCalls
from agentworks.core import errors
from agentworks.core.jsontext import dumps_value, loads
from agentworks.core.limits import MAX_WAIT_SECONDS
from agentworks.functions.v1 import functions_pb2 as f
from agentworks.functions.v1 import functions_pb2_grpc

# A message/event cursor past any a call can hold: a status read with it has no pages.
PAST_EVERY_PAGE = 2**62

# A call's state (F7) on the wire is the enum `CallState`; people and JSON read its name.
CallState = f.CallState
_STATE_NAMES: dict[f.CallState, str] = {
    f.CALL_STATE_RUNNING: "running",
    f.CALL_STATE_WAITING_FOR_INPUT: "waiting_for_input",
    f.CALL_STATE_COMPLETED: "completed",
    f.CALL_STATE_FAILED: "failed",
    f.CALL_STATE_INTERRUPTED: "interrupted",
    f.CALL_STATE_CANCELLED: "cancelled",
}
_STATES = {name: state for state, name in _STATE_NAMES.items()}
STATE_NAMES = tuple(_STATE_NAMES.values())


def state_name(state: int) -> str:
    """A `CallState` as people and JSON read it: "running", ..., "cancelled"."""
    return _STATE_NAMES.get(state, "unspecified")  # type: ignore[call-overload]


def call_state(name: str) -> f.CallState:
    """The `CallState` of a name ("completed"); ValueError naming the known ones."""
    try:
        return _STATES[name]
    except KeyError:
        raise ValueError(
            f"{name!r} is not a call status: use one of {', '.join(STATE_NAMES)}"
        ) from None


def _binding(workflow: Mapping[str, Any] | f.WorkflowBinding) -> f.WorkflowBinding:
    """A workflow binding from `{"route", "allowed_groups", "variables": [{...}]}`."""
    if isinstance(workflow, f.WorkflowBinding):
        return workflow
    out = f.WorkflowBinding(
        route=workflow.get("route", ""), allowed_groups=list(workflow.get("allowed_groups", ()))
    )
    for var in workflow.get("variables", ()):
        out.variables.add(
            name=var["name"],
            type=var.get("type", ""),
            required=bool(var.get("required")),
            default_json=dumps_value(var["default"]) if "default" in var else "",
        )
    return out


def page_bytes(page: f.FilePage) -> bytes:
    """The bytes of one file page, whichever of content / content_base64 it carries."""
    if page.WhichOneof("data") == "content_base64":
        return base64.b64decode(page.content_base64)
    return page.content.encode("utf-8")


# What a status, a notice and the CLI and MCP output say of a start receipt (L7).
START_RECEIPT_NOTE = (
    "it returned a start receipt: the function only starts work, and the work itself "
    "is not finished"
)


def is_start_receipt(status: f.CallStatus) -> bool:
    """Whether a call of a function declared to start work completed (F9, L7)."""
    return status.starts_work and status.status == f.CALL_STATE_COMPLETED


def call_result(status: f.CallStatus) -> Any:
    """The validated result of a call as plain JSON (None when there is none)."""
    return loads(status.result_json, "result", None)


class FunctionsClient(ExecutionCalls, CallWatching):
    """Client of `agentworks.functions.v1.FunctionsService`."""

    stub_class = functions_pb2_grpc.FunctionsServiceStub

    # ---------------------------------------------------------------- targets

    async def register_target(self, target: str, *, owner: str, running_limit: int = 0) -> f.Target:
        return await self._unary(
            "RegisterTarget",
            f.RegisterTargetRequest(
                ref=target_ref(target), owner=owner, running_limit=running_limit
            ),
        )

    async def get_target(self, target: str) -> f.Target:
        return await self._unary("GetTarget", f.GetTargetRequest(ref=target_ref(target)))

    async def list_targets(
        self, *, target: str = "", after: str = "", limit: int = 0
    ) -> f.ListTargetsResponse:
        """Targets you may see with their functions and running slots (V1)."""
        request = f.ListTargetsRequest(after=after, limit=limit)
        if target:
            request.target.CopyFrom(target_ref(target))
        return await self._unary("ListTargets", request)

    # ----------------------------------------------------------- declarations

    async def declare_function(
        self,
        target: str,
        name: str,
        *,
        input_schema: Mapping[str, Any],
        description: str = "",
        output_schema: Mapping[str, Any] | None = None,
        allowed_callers: Iterable[str] = (),
        starts_work: bool = False,
        workflow: Mapping[str, Any] | f.WorkflowBinding | None = None,
    ) -> f.Function:
        """Declare (or replace) a function on a target you own (F1)."""
        function = f.Function(
            target=target_ref(target),
            name=name,
            description=description,
            input_schema_json=json_document(input_schema, "input_schema"),
            output_schema_json=json_document(output_schema, "output_schema"),
            allowed_callers=list(allowed_callers),
            starts_work=starts_work,
        )
        if workflow is not None:
            function.workflow.CopyFrom(_binding(workflow))
        return await self._unary("DeclareFunction", f.DeclareFunctionRequest(function=function))

    async def remove_function(self, target: str, name: str) -> None:
        await self._unary(
            "RemoveFunction", f.RemoveFunctionRequest(target=target_ref(target), name=name)
        )

    async def list_functions(self, target: str) -> list[f.Function]:
        """The functions you may invoke on a target (F2)."""
        response = await self._unary(
            "ListFunctions", f.ListFunctionsRequest(target=target_ref(target))
        )
        return list(response.functions)

    # ------------------------------------------------------------------ calls

    async def list_calls(
        self,
        *,
        target: str = "",
        caller: str = "",
        statuses: Iterable[str] = (),
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        after: str = "",
        limit: int = 0,
    ) -> f.ListCallsResponse:
        """Calls you may see, newest first, with filters (V1); statuses by name."""
        request = f.ListCallsRequest(
            caller=caller,
            statuses=[call_state(s) for s in statuses],
            after=after,
            limit=limit,
        )
        if target:
            request.target.CopyFrom(target_ref(target))
        for field, moment in (("created_after", created_after), ("created_before", created_before)):
            if moment is not None:
                getattr(request, field).CopyFrom(aware_timestamp(moment))
        return await self._unary("ListCalls", request)

    async def call(
        self,
        target: str,
        function: str,
        inputs: Mapping[str, Any] | None = None,
        *,
        submission_id: str = "",
        notify_conversation_id: str = "",
        source: Mapping[str, str] | None = None,
        wait_seconds: int = 0,
        fresh_submission_id: bool = False,
    ) -> f.CallReceipt:
        """Call a function; `source` is `{run_id, step, group}` for workflow callers (F14).

        With `wait_seconds` (up to 25) the receipt carries the ended call as `outcome`
        when it ends within that time (check `receipt.HasField("outcome")`).
        `fresh_submission_id`: `submission_id` was made for this call and never sent
        before (a retry with it must leave this False).
        """
        request = f.CallRequest(
            target=target_ref(target),
            function=function,
            inputs_json=json_document(inputs or {}, "inputs"),
            submission_id=submission_id,
            notify_conversation_id=notify_conversation_id,
            wait_seconds=wait_seconds,
            fresh_submission_id=fresh_submission_id,
        )
        if source is not None:
            request.source.CopyFrom(
                f.CallSource(
                    run_id=source.get("run_id", ""),
                    step=source.get("step", ""),
                    group=source.get("group", ""),
                )
            )
        return await self._unary(
            "Call", request, timeout=max(self.timeout, wait_seconds + LONG_POLL_SLACK_SECONDS)
        )

    async def get_status(
        self,
        call_id: str,
        *,
        after: int = -1,
        message_limit: int = 0,
        after_event: int = -1,
        event_limit: int = 0,
        wait_seconds: int = 0,
        seen_version: int | None = None,
        until_ended: bool = False,
    ) -> f.CallStatus:
        """Status, progress, message and event pages, answer/result/error, files (F7)."""
        request = f.GetStatusRequest(
            call_id=call_id,
            after=after,
            message_limit=message_limit,
            after_event=after_event,
            event_limit=event_limit,
            wait_seconds=wait_seconds,
            until_ended=until_ended,
        )
        if seen_version is not None:
            request.seen_version = seen_version
        return await self._unary(
            "GetStatus", request, timeout=max(self.timeout, wait_seconds + LONG_POLL_SLACK_SECONDS)
        )

    async def wait(
        self, call_id: str, *, until: Iterable[str] = (), timeout: float = 60.0
    ) -> f.CallStatus:
        """Long-poll status until it is one of `until` (names such as "completed"; default:
        any end); bounded by timeout.

        One request per change of the call (one in all when waiting for an end). The
        status has the first message and event only when the first answer already
        matched or the wait was for an end: page them with `get_status`. Raises
        DeadlineExceeded naming the last status if the timeout passes first.
        """
        ended = set(ENDED_STATES)
        wanted = {call_state(name) for name in until} or ended
        # Waiting for an end only: one request that the service holds until the call
        # ends, whatever else happens meanwhile. Otherwise wake at every change.
        until_ended = wanted <= ended
        deadline = time.monotonic() + timeout
        status: f.CallStatus | None = None
        while status is None or status.status not in wanted:
            remaining = deadline - time.monotonic()
            if status is not None and remaining <= 0:
                raise errors.DeadlineExceeded(
                    f"call {call_id} is still {state_name(status.status)} after {timeout} s"
                )
            # Waiting for a change other than the end: the service answers at once while
            # any message or event is after the cursors, so after the first answer the
            # cursors go past them all and the version alone says what changed (from -1
            # every request would return at once: a spin).
            cursor = -1 if status is None or until_ended else PAST_EVERY_PAGE
            status = await self.get_status(
                call_id,
                after=cursor,
                message_limit=1,
                after_event=cursor,
                event_limit=1,
                wait_seconds=min(MAX_WAIT_SECONDS, max(1, int(remaining))),
                seen_version=None if status is None or until_ended else status.version,
                until_ended=until_ended,
            )
        return status

    async def read_file(
        self, call_id: str, file: str, *, offset: int = 0, limit: int = 0
    ) -> f.FilePage:
        """One page of an output file, from a byte offset (F8)."""
        return await self._unary(
            "ReadFile", f.ReadFileRequest(call_id=call_id, file=file, offset=offset, limit=limit)
        )

    async def read_file_bytes(self, call_id: str, file: str, *, page_size: int = 0) -> bytes:
        """A whole output file, page by page."""
        data = bytearray()
        offset = 0
        while True:
            page = await self.read_file(call_id, file, offset=offset, limit=page_size)
            data += page_bytes(page)
            if not page.HasField("next_offset"):
                return bytes(data)
            offset = page.next_offset

    async def reply(self, call_id: str, text: str) -> f.CallStatus:
        """Answer a call's pending human-input question (F11)."""
        return await self._unary("Reply", f.ReplyRequest(call_id=call_id, text=text))

    async def cancel(self, call_id: str) -> f.CallStatus:
        """Cancel an open call (F15)."""
        return await self._unary("Cancel", f.CancelRequest(call_id=call_id))
