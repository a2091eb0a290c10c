"""The functions gRPC servicer: request -> convert -> service -> convert -> response."""

from __future__ import annotations

import base64
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC

import grpc
import structlog

from agentworks.core import capability as cap
from agentworks.core.errors import InvalidArgument, Reason, rule_meta
from agentworks.core.identity import caller
from agentworks.core.limits import MAX_INPUTS_BYTES
from agentworks.functions.v1 import functions_pb2 as pb
from agentworks.functions.v1 import functions_pb2_grpc
from agentworks.server.capabilities import CapabilityIssuer
from agentworks.server.shares import shares
from agentworks_functions.convert import (
    _ts,
    call_change_out,
    call_summary_out,
    execution_out,
    file_out,
    function_in,
    function_out,
    state_out,
    states_in,
    status_out,
    target_key,
    target_out,
    target_summary_out,
)
from agentworks_functions.jsonin import check_text_size, loads_object_sized
from agentworks_functions.models import (
    OPEN_STATUSES,
    Call,
    CallSource,
    TargetKey,
)
from agentworks_functions.service import FunctionsService

log = structlog.get_logger("agentworks.functions")

# A Call's inputs longer than this are read (parsed, walked, checked) by a check worker
# before the serving process reads them: only inputs that pass are read here (B2, B8).
# With a submission_id they are read here first (measured, at most MAX_INPUTS_BYTES):
# the retry key's hash is of the inputs read (service/calls.py).
READ_IN_PLACE_CHARS = 16 * 1024


def _when(request, field: str):
    """A request's optional timestamp as a UTC datetime, None when unset; one out of
    protobuf's range (nanos outside 0-999,999,999, seconds past year 9999) is refused."""
    if not request.HasField(field):
        return None
    ts = getattr(request, field)
    try:
        if not 0 <= ts.nanos <= 999_999_999:  # ToDatetime would take some of these
            raise ValueError(f"nanos must be 0-999,999,999, got {ts.nanos}")
        return ts.ToDatetime(tzinfo=UTC)
    except (ValueError, OverflowError) as exc:
        raise InvalidArgument(
            f"{field} is not a valid timestamp: {exc}",
            reason=Reason.FIELD_RULE,
            metadata=rule_meta(field, "timestamp.valid"),
        ) from None


def _waiting(principal: str, wait_seconds: int) -> contextlib.AbstractContextManager[None]:
    """B7: a request that may wait (a long-poll) holds one of the principal's waits."""
    return shares().wait(principal) if wait_seconds > 0 else contextlib.nullcontext()


class FunctionsServicer(functions_pb2_grpc.FunctionsServiceServicer):
    """Translates between protos and `FunctionsService`; errors map in the interceptor."""

    def __init__(
        self, service: FunctionsService, capabilities: CapabilityIssuer | None = None
    ) -> None:
        self.service = service
        # Mints each claimed execution's capability (T3); none without the service's key.
        self.capabilities = capabilities or CapabilityIssuer(None, cap.EXECUTION)

    def _execution_out(self, call: Call) -> pb.Execution:
        """A claimed execution, with its capability bound to the call and its lease."""
        out = execution_out(call)
        if call.runtime and call.lease_expires_at is not None:
            out.capability = self.capabilities.issue(
                call.runtime, cap.execution(call.id), call.lease_expires_at
            )
        return out

    async def RegisterTarget(
        self, request: pb.RegisterTargetRequest, context: grpc.aio.ServicerContext
    ) -> pb.Target:
        target = await self.service.register_target(
            caller(), target_key(request.ref, "ref"), request.owner, request.running_limit
        )
        return target_out(target)

    async def GetTarget(
        self, request: pb.GetTargetRequest, context: grpc.aio.ServicerContext
    ) -> pb.Target:
        return target_out(await self.service.get_target(caller(), target_key(request.ref, "ref")))

    async def ListTargets(
        self, request: pb.ListTargetsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListTargetsResponse:
        targets, cursor = await self.service.list_targets(
            caller(),
            target=target_key(request.target) if request.HasField("target") else None,
            after=request.after,
            limit=request.limit,
        )
        return pb.ListTargetsResponse(
            targets=[target_summary_out(s) for s in targets], next_cursor=cursor
        )

    async def ListCalls(
        self, request: pb.ListCallsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListCallsResponse:
        calls, cursor = await self.service.list_calls(
            caller(),
            target=target_key(request.target) if request.HasField("target") else None,
            caller=request.caller,
            statuses=states_in(request.statuses),
            created_after=_when(request, "created_after"),
            created_before=_when(request, "created_before"),
            after=request.after,
            limit=request.limit,
        )
        return pb.ListCallsResponse(calls=[call_summary_out(c) for c in calls], next_cursor=cursor)

    async def DeclareFunction(
        self, request: pb.DeclareFunctionRequest, context: grpc.aio.ServicerContext
    ) -> pb.Function:
        return function_out(
            await self.service.declare_function(caller(), function_in(request.function))
        )

    async def RemoveFunction(
        self, request: pb.RemoveFunctionRequest, context: grpc.aio.ServicerContext
    ) -> pb.RemoveFunctionResponse:
        await self.service.remove_function(caller(), target_key(request.target), request.name)
        return pb.RemoveFunctionResponse()

    async def ListFunctions(
        self, request: pb.ListFunctionsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListFunctionsResponse:
        functions = await self.service.list_functions(caller(), target_key(request.target))
        return pb.ListFunctionsResponse(functions=[function_out(f) for f in functions])

    async def Call(
        self, request: pb.CallRequest, context: grpc.aio.ServicerContext
    ) -> pb.CallReceipt:
        identity = caller()
        # B7: a call is one of the principal's creations (a rate per replica), taken
        # before any work; B8: the inputs are measured before they are read.
        shares().create(identity.principal, "calls")
        text = request.inputs_json
        check_text_size(text, "inputs", MAX_INPUTS_BYTES)
        # Large inputs are read by a check worker first (service/calls.py), small ones here.
        inputs = None
        if len(text) <= READ_IN_PLACE_CHARS:
            inputs = loads_object_sized(text, "inputs", MAX_INPUTS_BYTES)
        source = None
        if request.HasField("source"):
            source = CallSource(request.source.run_id, request.source.step, request.source.group)
        with _waiting(identity.principal, request.wait_seconds):
            receipt = await self.service.call(
                identity,
                target=target_key(request.target),
                function=request.function,
                inputs=inputs,
                inputs_text=text,
                submission_id=request.submission_id,
                notify_conversation_id=request.notify_conversation_id,
                source=source,
                wait_seconds=request.wait_seconds,
                fresh_submission_id=request.fresh_submission_id,
            )
        out = pb.CallReceipt(
            call_id=receipt.call_id,
            status=state_out(receipt.status),
            output_folder=receipt.output_folder,
            created=receipt.created,
        )
        if receipt.outcome is not None:
            out.outcome.CopyFrom(status_out(receipt.outcome))
        return out

    async def GetStatus(
        self, request: pb.GetStatusRequest, context: grpc.aio.ServicerContext
    ) -> pb.CallStatus:
        structlog.contextvars.bind_contextvars(call_id=request.call_id)
        identity = caller()
        with _waiting(identity.principal, request.wait_seconds):
            view = await self.service.status(
                identity,
                call_id=request.call_id,
                after=request.after if request.HasField("after") else -1,
                message_limit=request.message_limit,
                after_event=request.after_event if request.HasField("after_event") else -1,
                event_limit=request.event_limit,
                wait_seconds=request.wait_seconds,
                seen_version=request.seen_version if request.HasField("seen_version") else None,
                until_ended=request.until_ended,
            )
        return status_out(view)

    async def WatchCall(
        self, request: pb.WatchCallRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.CallChange]:
        structlog.contextvars.bind_contextvars(call_id=request.call_id)
        changes = self.service.watch_call(
            caller(),
            call_id=request.call_id,
            after=request.after if request.HasField("after") else -1,
            after_event=request.after_event if request.HasField("after_event") else -1,
            seen_version=request.seen_version if request.HasField("seen_version") else None,
            heartbeat_seconds=request.heartbeat_seconds,
        )
        async for change in changes:
            yield call_change_out(change)

    async def WatchCallEnds(
        self, request: pb.WatchCallEndsRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.CallChange]:
        changes = self.service.watch_call_ends(
            caller(), after=request.after, heartbeat_seconds=request.heartbeat_seconds
        )
        async for change in changes:
            yield call_change_out(change)

    async def ReadFile(
        self, request: pb.ReadFileRequest, context: grpc.aio.ServicerContext
    ) -> pb.FilePage:
        page = await self.service.read_file(
            caller(),
            call_id=request.call_id,
            file=request.file,
            offset=request.offset,
            limit=request.limit,
        )
        out = pb.FilePage(
            file=page.name, size=page.size, offset=page.offset, media_type=page.media_type
        )
        if page.as_text is not None:
            out.content = page.as_text
        else:
            out.content_base64 = base64.b64encode(page.data).decode("ascii")
        if page.next_offset is not None:
            out.next_offset = page.next_offset
        return out

    async def Reply(
        self, request: pb.ReplyRequest, context: grpc.aio.ServicerContext
    ) -> pb.CallStatus:
        return status_out(
            await self.service.reply(caller(), call_id=request.call_id, text=request.text)
        )

    async def Cancel(
        self, request: pb.CancelRequest, context: grpc.aio.ServicerContext
    ) -> pb.CallStatus:
        return status_out(await self.service.cancel(caller(), call_id=request.call_id))

    async def ClaimExecution(
        self, request: pb.ClaimExecutionRequest, context: grpc.aio.ServicerContext
    ) -> pb.ClaimExecutionResponse:
        identity = caller()  # targets counted by the proto's rule, before the handler
        with _waiting(identity.principal, request.wait_seconds):
            call = await self.service.claim_execution(
                identity,
                targets=[target_key(r, "targets[]") for r in request.targets],
                wait_seconds=request.wait_seconds,
                lease_seconds=request.lease_seconds,
            )
        if call is None:
            return pb.ClaimExecutionResponse()
        return pb.ClaimExecutionResponse(execution=self._execution_out(call))

    async def HeartbeatExecution(
        self, request: pb.HeartbeatExecutionRequest, context: grpc.aio.ServicerContext
    ) -> pb.HeartbeatExecutionResponse:
        identity = caller()
        status, expires = await self.service.heartbeat(
            identity, call_id=request.call_id, lease_seconds=request.lease_seconds
        )
        capability = ""
        if status in OPEN_STATUSES and expires is not None:
            capability = self.capabilities.issue(
                identity.principal, cap.execution(request.call_id), expires
            )
        return pb.HeartbeatExecutionResponse(
            status=state_out(status), lease_expires_at=_ts(expires), capability=capability
        )

    async def Report(
        self, request: pb.ReportRequest, context: grpc.aio.ServicerContext
    ) -> pb.ReportResponse:
        # Messages, events and steps are counted by the proto's rules, before the handler.
        status = await self.service.report(
            caller(),
            call_id=request.call_id,
            progress=request.progress if request.HasField("progress") else None,
            messages=[(m.role, m.text) for m in request.messages],
            events=[(e.kind, e.text, e.tool_name) for e in request.events],
            steps=[(s.step, s.group, s.status, s.detail) for s in request.steps],
            sequence=request.sequence,
        )
        return pb.ReportResponse(status=state_out(status))

    async def UploadFile(
        self, request_iterator: AsyncIterator[pb.FileChunk], context: grpc.aio.ServicerContext
    ) -> pb.FileInfo:
        async def chunks() -> AsyncIterator[tuple[str, str, str, bytes]]:
            async for chunk in request_iterator:
                yield chunk.call_id, chunk.name, chunk.media_type, chunk.data

        return file_out(await self.service.upload_file(caller(), chunks()))

    async def AskInput(
        self, request: pb.AskInputRequest, context: grpc.aio.ServicerContext
    ) -> pb.AskInputResponse:
        identity = caller()
        with _waiting(identity.principal, 0 if request.withdraw else request.wait_seconds):
            answered, reply, status = await self.service.ask_input(
                identity,
                call_id=request.call_id,
                ask_id=request.ask_id,
                question=request.question,
                wait_seconds=request.wait_seconds,
                withdraw=request.withdraw,
                choices=tuple(request.choices),
            )
        return pb.AskInputResponse(answered=answered, reply=reply, status=state_out(status))

    async def FinishExecution(
        self, request: pb.FinishExecutionRequest, context: grpc.aio.ServicerContext
    ) -> pb.FinishExecutionResponse:
        claim_next: list[TargetKey] | None = None
        lease_seconds = 0
        if request.HasField("claim_next"):
            if request.claim_next.wait_seconds:
                raise InvalidArgument(
                    "claim_next.wait_seconds must be 0: a finish does not wait; "
                    "wait with ClaimExecution"
                )
            claim_next = [target_key(r, "claim_next.targets[]") for r in request.claim_next.targets]
            lease_seconds = request.claim_next.lease_seconds
        outcome = await self.service.finish(
            caller(),
            call_id=request.call_id,
            failed=request.failed,
            interrupted=request.interrupted,
            final_message=request.final_message,
            error=request.error,
            correction_round=request.correction_round,
            claim_next=claim_next,
            lease_seconds=lease_seconds,
        )
        response = pb.FinishExecutionResponse(
            status=state_out(outcome.status),
            correction_requested=outcome.correction_requested,
            correction_prompt=outcome.correction_prompt,
        )
        if outcome.next is not None:
            response.next.CopyFrom(self._execution_out(outcome.next))
        return response
