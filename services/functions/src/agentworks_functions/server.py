"""gRPC servicer for functions: protos in, domain calls, protos out. Plus start/main."""

from __future__ import annotations

import asyncio
import base64
import math
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import structlog
from google.protobuf import json_format, struct_pb2
from google.protobuf.timestamp_pb2 import Timestamp

from agentworks.client import MessagingClient, delivery_request, errors
from agentworks.client.errors import InvalidArgument
from agentworks.client.identity import Minter, caller
from agentworks.client.structs import struct_json
from agentworks.client.targets import check_target
from agentworks.common.v1 import common_pb2
from agentworks.functions.v1 import functions_pb2 as pb
from agentworks.functions.v1 import functions_pb2_grpc
from agentworks.messaging.v1 import messaging_pb2
from agentworks.server.db import Database
from agentworks.server.rpc import GrpcServer
from agentworks.server.service import Running, main_for, prepare_database, read_config
from agentworks_functions.config import Config
from agentworks_functions.metrics import start_refresh
from agentworks_functions.models import (
    RESULT_FILE,
    Call,
    CallSource,
    FileInfo,
    Function,
    FunctionSpec,
    Notice,
    StatusView,
    Target,
    TargetKey,
    WorkflowBinding,
    WorkflowVariable,
)
from agentworks_functions.service import FunctionsService, NoticeSender
from agentworks_functions.store import (
    CALL_CHANNEL,
    EXECUTION_CHANNEL,
    NOTICE_CHANNEL,
    FunctionsStore,
)

log = structlog.get_logger("agentworks.functions")

_KIND_IN = {common_pb2.TARGET_KIND_CREW: "crew", common_pb2.TARGET_KIND_WORKFLOW: "workflow"}
_KIND_OUT = {v: k for k, v in _KIND_IN.items()}


def _ts(value) -> Timestamp | None:
    if value is None:
        return None
    ts = Timestamp()
    ts.FromDatetime(value)
    return ts


def _non_finite(message: Any, path: str) -> str:
    """The path of the first NaN/Infinity in a Struct, ListValue or Value."""
    if isinstance(message, struct_pb2.Struct):
        items: Any = ((f"{path}.{k}", v) for k, v in message.fields.items())
    elif isinstance(message, struct_pb2.ListValue):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(message.values))
    else:
        kind = message.WhichOneof("kind")
        if kind == "number_value":
            return path if not math.isfinite(message.number_value) else ""
        if kind in ("struct_value", "list_value"):
            return _non_finite(getattr(message, kind), path)
        return ""
    return next((found for p, v in items if (found := _non_finite(v, p))), "")


def json_in(message: struct_pb2.Struct | struct_pb2.Value, field: str) -> Any:
    """A Struct/Value from a request as plain JSON; NaN and Infinity are not JSON."""
    try:
        return struct_json(message)
    except (ValueError, json_format.Error):
        where = _non_finite(message, field) or field
        raise InvalidArgument(
            f"{where}: not a finite number (NaN or Infinity); JSON numbers are finite"
        ) from None


def struct_in(message: struct_pb2.Struct, field: str) -> dict[str, Any]:
    return json_in(message, field)


def struct_out(value: dict[str, Any] | None) -> struct_pb2.Struct | None:
    if value is None:
        return None
    out = struct_pb2.Struct()
    out.update(value)
    return out


def value_out(value: Any) -> struct_pb2.Value:
    return json_format.ParseDict(value, struct_pb2.Value())


def target_key(ref: common_pb2.TargetRef, field: str = "target") -> TargetKey:
    kind = _KIND_IN.get(ref.kind)
    if kind is None:
        raise InvalidArgument(f"{field}.kind is required: TARGET_KIND_CREW or TARGET_KIND_WORKFLOW")
    return check_target(kind, ref.name)


def target_ref(key: TargetKey) -> common_pb2.TargetRef:
    return common_pb2.TargetRef(kind=_KIND_OUT[key.kind], name=key.name)


def target_out(target: Target) -> pb.Target:
    return pb.Target(
        ref=target_ref(target.key),
        owner=target.owner,
        running_limit=target.running_limit,
        effective_running_limit=target.effective_running_limit,
        created_at=_ts(target.created_at),
        updated_at=_ts(target.updated_at),
    )


def binding_in(binding: pb.WorkflowBinding) -> WorkflowBinding:
    return WorkflowBinding(
        route=binding.route,
        allowed_groups=tuple(binding.allowed_groups),
        variables=tuple(
            WorkflowVariable(
                name=v.name,
                type=v.type,
                required=v.required,
                has_default=v.HasField("default_value"),
                default=json_in(v.default_value, f"workflow.variables[{v.name!r}].default")
                if v.HasField("default_value")
                else None,
            )
            for v in binding.variables
        ),
    )


def binding_out(binding: WorkflowBinding) -> pb.WorkflowBinding:
    out = pb.WorkflowBinding(route=binding.route, allowed_groups=list(binding.allowed_groups))
    for v in binding.variables:
        var = out.variables.add(name=v.name, type=v.type, required=v.required)
        if v.has_default:
            var.default_value.CopyFrom(value_out(v.default))
    return out


def function_in(fn: pb.Function) -> FunctionSpec:
    return FunctionSpec(
        target=target_key(fn.target, "function.target"),
        name=fn.name,
        description=fn.description,
        input_schema=struct_in(fn.input_schema, "input_schema")  # type: ignore[arg-type]
        if fn.HasField("input_schema")
        else None,
        output_schema=struct_in(fn.output_schema, "output_schema")
        if fn.HasField("output_schema")
        else None,
        allowed_callers=tuple(fn.allowed_callers),
        starts_work=fn.starts_work,
        workflow=binding_in(fn.workflow) if fn.HasField("workflow") else None,
    )


def function_out(fn: Function) -> pb.Function:
    out = pb.Function(
        target=target_ref(fn.target),
        name=fn.name,
        description=fn.description,
        input_schema=struct_out(fn.input_schema),
        output_schema=struct_out(fn.output_schema),
        allowed_callers=list(fn.allowed_callers),
        starts_work=fn.starts_work,
        created_at=_ts(fn.created_at),
        updated_at=_ts(fn.updated_at),
    )
    if fn.workflow is not None:
        out.workflow.CopyFrom(binding_out(fn.workflow))
    return out


def file_out(f: FileInfo) -> pb.FileInfo:
    return pb.FileInfo(
        name=f.name,
        size=f.size,
        media_type=f.media_type,
        sha256=f.sha256,
        text=f.is_text,
        created_at=_ts(f.created_at),
    )


def source_out(source: CallSource | None) -> pb.CallSource | None:
    if source is None:
        return None
    return pb.CallSource(run_id=source.run_id, step=source.step, group=source.group)


def status_out(view: StatusView) -> pb.CallStatus:
    call = view.call
    out = pb.CallStatus(
        call_id=call.id,
        status=call.status,
        progress=call.progress,
        messages=[
            pb.ExecutionMessage(
                index=m.index, role=m.role, text=m.text, created_at=_ts(m.created_at)
            )
            for m in view.messages
        ],
        next_after=view.next_after,
        events=[
            pb.ExecutionEvent(
                index=e.index,
                kind=e.kind,
                text=e.text,
                tool_name=e.tool_name,
                created_at=_ts(e.created_at),
            )
            for e in view.events
        ],
        next_after_event=view.next_after_event,
        answer=call.answer,
        error=call.error,
        files=[file_out(f) for f in view.files],
        question=view.question,
        target=target_ref(call.target),
        function=call.function,
        caller=call.caller,
        output_folder=call.output_folder,
        started=call.runtime is not None,
        correction_turn=call.correction_turns > 0,
        source=source_out(call.source),
        created_at=_ts(call.created_at),
        ended_at=_ts(call.ended_at),
        has_result=call.has_result,
        version=call.version,
    )
    if call.has_result:
        out.result.CopyFrom(value_out(call.result))
    if call.run_id is not None:
        out.run.CopyFrom(
            pb.WorkflowRun(
                run_id=call.run_id,
                route=call.workflow.route if call.workflow else "",
                steps=[
                    pb.WorkflowStep(
                        index=s.index,
                        step=s.step,
                        group=s.group,
                        status=s.status,
                        detail=s.detail,
                        created_at=_ts(s.created_at),
                    )
                    for s in view.steps
                ],
            )
        )
    return out


def execution_out(call: Call) -> pb.Execution:
    out = pb.Execution(
        call_id=call.id,
        target=target_ref(call.target),
        function=call.function,
        inputs=struct_out(call.inputs),
        output_folder=call.output_folder,
        result_file=RESULT_FILE,
        lease_expires_at=_ts(call.lease_expires_at),
        output_schema=struct_out(call.output_schema),
        has_output_schema=call.output_schema is not None,
        starts_work=call.starts_work,
        caller=call.caller,
        description=call.description,
        run_id=call.run_id or "",
        variables=struct_out(call.variables),
    )
    if call.workflow is not None:
        out.workflow.CopyFrom(binding_out(call.workflow))
    return out


class FunctionsServicer(functions_pb2_grpc.FunctionsServiceServicer):
    """Translates between protos and `FunctionsService`; errors map in the interceptor."""

    def __init__(self, service: FunctionsService) -> None:
        self.service = service

    async def RegisterTarget(self, request, context):
        target = await self.service.register_target(
            caller(), target_key(request.ref, "ref"), request.owner, request.running_limit
        )
        return target_out(target)

    async def GetTarget(self, request, context):
        return target_out(await self.service.get_target(caller(), target_key(request.ref, "ref")))

    async def DeclareFunction(self, request, context):
        return function_out(
            await self.service.declare_function(caller(), function_in(request.function))
        )

    async def RemoveFunction(self, request, context):
        await self.service.remove_function(caller(), target_key(request.target), request.name)
        return pb.RemoveFunctionResponse()

    async def ListFunctions(self, request, context):
        functions = await self.service.list_functions(caller(), target_key(request.target))
        return pb.ListFunctionsResponse(functions=[function_out(f) for f in functions])

    async def Call(self, request, context):
        source = None
        if request.HasField("source"):
            source = CallSource(request.source.run_id, request.source.step, request.source.group)
        receipt = await self.service.call(
            caller(),
            target=target_key(request.target),
            function=request.function,
            inputs=struct_in(request.inputs, "inputs"),
            submission_id=request.submission_id,
            notify_conversation_id=request.notify_conversation_id,
            source=source,
            wait_seconds=request.wait_seconds,
            fresh_submission_id=request.fresh_submission_id,
        )
        out = pb.CallReceipt(
            call_id=receipt.call_id,
            status=receipt.status,
            output_folder=receipt.output_folder,
            created=receipt.created,
        )
        if receipt.outcome is not None:
            out.outcome.CopyFrom(status_out(receipt.outcome))
        return out

    async def GetStatus(self, request, context):
        structlog.contextvars.bind_contextvars(call_id=request.call_id)
        view = await self.service.status(
            caller(),
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

    async def ReadFile(self, request, context):
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

    async def Reply(self, request, context):
        return status_out(
            await self.service.reply(caller(), call_id=request.call_id, text=request.text)
        )

    async def Cancel(self, request, context):
        return status_out(await self.service.cancel(caller(), call_id=request.call_id))

    async def ClaimExecution(self, request, context):
        call = await self.service.claim_execution(
            caller(),
            targets=[target_key(r, "targets[]") for r in request.targets],
            wait_seconds=request.wait_seconds,
            lease_seconds=request.lease_seconds,
        )
        if call is None:
            return pb.ClaimExecutionResponse()
        return pb.ClaimExecutionResponse(execution=execution_out(call))

    async def HeartbeatExecution(self, request, context):
        status, expires = await self.service.heartbeat(
            caller(), call_id=request.call_id, lease_seconds=request.lease_seconds
        )
        return pb.HeartbeatExecutionResponse(status=status, lease_expires_at=_ts(expires))

    async def Report(self, request, context):
        status = await self.service.report(
            caller(),
            call_id=request.call_id,
            progress=request.progress if request.HasField("progress") else None,
            messages=[(m.role, m.text) for m in request.messages],
            events=[(e.kind, e.text, e.tool_name) for e in request.events],
            steps=[(s.step, s.group, s.status, s.detail) for s in request.steps],
            sequence=request.sequence,
        )
        return pb.ReportResponse(status=status)

    async def UploadFile(self, request_iterator, context):
        async def chunks() -> AsyncIterator[tuple[str, str, str, bytes]]:
            async for chunk in request_iterator:
                yield chunk.call_id, chunk.name, chunk.media_type, chunk.data

        return file_out(await self.service.upload_file(caller(), chunks()))

    async def AskInput(self, request, context):
        answered, reply, status = await self.service.ask_input(
            caller(),
            call_id=request.call_id,
            ask_id=request.ask_id,
            question=request.question,
            wait_seconds=request.wait_seconds,
            withdraw=request.withdraw,
        )
        return pb.AskInputResponse(answered=answered, reply=reply, status=status)

    async def FinishExecution(self, request, context):
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
            status=outcome.status,
            correction_requested=outcome.correction_requested,
            correction_prompt=outcome.correction_prompt,
        )
        if outcome.next is not None:
            response.next.CopyFrom(execution_out(outcome.next))
        return response


def notice_sender(client: MessagingClient) -> NoticeSender:
    """Deliver completion notices into the callers' conversations (F13), once per call.

    A batch of due notices goes in one EnqueueDeliveries request; each notice succeeds
    or fails on its own.
    """

    async def send(notices: list[Notice]) -> list[str | None]:
        try:
            results = await client.enqueue_deliveries(
                [
                    delivery_request(
                        notice.conversation_id,
                        kind=messaging_pb2.DELIVERY_KIND_FUNCTION_COMPLETED,
                        idempotency_key=f"call:{notice.call_id}:done",
                        text=notice.text,
                        attributes=notice.attributes,
                    )
                    for notice in notices
                ]
            )
        except errors.AgentWorksError as exc:  # the whole request: every notice waits
            log.warning("notices.retry", count=len(notices), code=exc.code.name, error=exc.message)
            return [f"retry: {exc.code.name}: {exc.message}"] * len(notices)
        return [_notice_outcome(n, r) for n, r in zip(notices, results, strict=True)]

    return send


def _notice_outcome(notice: Notice, result: object) -> str | None:
    if isinstance(result, errors.REFUSED_FOR_GOOD):
        log.error(
            "notice.refused", call_id=notice.call_id, code=result.code.name, error=result.message
        )
        return f"permanent: {result.code.name}: {result.message}"
    if isinstance(result, errors.AgentWorksError):
        log.warning(
            "notice.retry", call_id=notice.call_id, code=result.code.name, error=result.message
        )
        return f"retry: {result.code.name}: {result.message}"
    log.info("notice.delivered", call_id=notice.call_id, conversation_id=notice.conversation_id)
    return None


async def _sweep(service: FunctionsService, store: FunctionsStore, config: Config) -> None:
    """Interrupt executions whose lease expired (F12) and purge unfinished uploads."""
    purge_every = 600.0
    last_purge = 0.0
    loop = asyncio.get_running_loop()
    while True:
        try:
            await service.interrupt_expired()
            if loop.time() - last_purge > purge_every:
                await store.purge_unlinked_blobs(timedelta(seconds=config.stale_upload_seconds))
                last_purge = loop.time()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the database may be away; try again next time
            log.warning("sweep.failed", error=str(exc))
        await asyncio.sleep(config.sweep_seconds)


async def _deliver_notices(service: FunctionsService, send: NoticeSender, config: Config) -> None:
    """The outbox worker: deliver completion notices, woken by NOTIFY (F13)."""
    wait = min(config.poll_fallback_seconds, config.notice_retry_seconds)
    with service.listener.subscribe(NOTICE_CHANNEL, ["due"]) as waiter:
        while True:
            try:
                if await service.deliver_notices(send):
                    continue  # maybe more are due
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("notices.failed", error=str(exc))
            await waiter.wait(wait)


async def start(config: Config) -> Running:
    """Migrate, connect, and serve functions on `config.service.listen`."""
    await asyncio.to_thread(
        prepare_database, config.service, "functions", "agentworks_functions.migrations"
    )
    db = Database(config.service.database_url, pool_size=config.service.pool_size)
    await db.start([EXECUTION_CHANNEL, CALL_CHANNEL, NOTICE_CHANNEL])
    store = FunctionsStore(db, default_running_limit=config.default_running_limit)
    service = FunctionsService(
        store,
        db.listener,
        poll_fallback_seconds=config.poll_fallback_seconds,
        min_lease_seconds=config.min_lease_seconds,
        max_lease_seconds=config.max_lease_seconds,
        notice_retry_seconds=config.notice_retry_seconds,
        claim_timeout_seconds=config.claim_timeout_seconds,
    )
    messaging = MessagingClient(
        config.messaging_address,
        identity=Minter(config.principal, config.service.internal_key),
        timeout=10,
    )

    async def drain() -> None:
        service.draining.set()
        db.listener.wake_all()

    server = GrpcServer(
        name="functions",
        listen=config.service.listen,
        internal_key=config.service.internal_key,
        accepted_keys=config.service.accepted_keys,
        register=lambda s: functions_pb2_grpc.add_FunctionsServiceServicer_to_server(
            FunctionsServicer(service), s
        ),
        service_names=[pb.DESCRIPTOR.services_by_name["FunctionsService"].full_name],
        on_drain=drain,
    )
    await server.start()
    background = [
        asyncio.create_task(_sweep(service, store, config), name="functions-sweep"),
        asyncio.create_task(
            _deliver_notices(service, notice_sender(messaging), config), name="functions-notices"
        ),
        *start_refresh(db, config),
    ]
    return Running("functions", server, db, background=background, on_stop=[messaging.close])


def main() -> None:
    config = read_config("functions", Config.from_env)
    main_for(config.service, lambda: start(config))
