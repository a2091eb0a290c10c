"""Proto <-> domain conversions of the functions service."""

from __future__ import annotations

from google.protobuf.timestamp_pb2 import Timestamp

from agentworks.common.v1 import common_pb2
from agentworks.core.errors import InvalidArgument
from agentworks.core.jsontext import dumps, dumps_value
from agentworks.core.limits import MAX_INPUTS_BYTES, MAX_SCHEMA_BYTES
from agentworks.core.targets import check_target
from agentworks.functions.v1 import functions_pb2 as pb
from agentworks_functions.jsonin import loads_sized
from agentworks_functions.models import (
    CANCELLED,
    COMPLETED,
    FAILED,
    INTERRUPTED,
    RESULT_FILE,
    RUNNING,
    WAITING_FOR_INPUT,
    Call,
    CallChange,
    CallSource,
    CallSummary,
    FileInfo,
    Function,
    FunctionSpec,
    QuestionRecord,
    StatusView,
    Target,
    TargetKey,
    TargetSummary,
    WorkflowBinding,
    WorkflowVariable,
)

_KIND_IN = {common_pb2.TARGET_KIND_CREW: "crew", common_pb2.TARGET_KIND_WORKFLOW: "workflow"}

_KIND_OUT = {v: k for k, v in _KIND_IN.items()}

_STATES = {
    RUNNING: pb.CALL_STATE_RUNNING,
    WAITING_FOR_INPUT: pb.CALL_STATE_WAITING_FOR_INPUT,
    COMPLETED: pb.CALL_STATE_COMPLETED,
    FAILED: pb.CALL_STATE_FAILED,
    INTERRUPTED: pb.CALL_STATE_INTERRUPTED,
    CANCELLED: pb.CALL_STATE_CANCELLED,
}


def state_out(status: str) -> pb.CallState:
    """A call status (models: RUNNING, ..., CANCELLED) as the proto's CallState."""
    return _STATES[status]


_STATES_IN = {v: k for k, v in _STATES.items()}


def states_in(states) -> list[str]:
    """CallState values as call statuses; UNSPECIFIED (or unknown) is refused."""
    out = []
    for state in states:
        if state not in _STATES_IN:
            raise InvalidArgument(
                f"statuses: {state} is not a call state; use CALL_STATE_RUNNING, "
                "_WAITING_FOR_INPUT, _COMPLETED, _FAILED, _INTERRUPTED or _CANCELLED"
            )
        out.append(_STATES_IN[state])
    return out


def _ts(value) -> Timestamp | None:
    if value is None:
        return None
    ts = Timestamp()
    ts.FromDatetime(value)
    return ts


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
                has_default=bool(v.default_json),
                default=loads_sized(
                    v.default_json, f"workflow.variables[{v.name!r}].default", MAX_INPUTS_BYTES
                ),
            )
            for v in binding.variables
        ),
    )


def binding_out(binding: WorkflowBinding) -> pb.WorkflowBinding:
    out = pb.WorkflowBinding(route=binding.route, allowed_groups=list(binding.allowed_groups))
    for v in binding.variables:
        out.variables.add(
            name=v.name,
            type=v.type,
            required=v.required,
            default_json=dumps_value(v.default) if v.has_default else "",
        )
    return out


def function_in(fn: pb.Function) -> FunctionSpec:
    return FunctionSpec(
        target=target_key(fn.target, "function.target"),
        name=fn.name,
        description=fn.description,
        input_schema=loads_sized(fn.input_schema_json, "input_schema", MAX_SCHEMA_BYTES),
        output_schema=loads_sized(fn.output_schema_json, "output_schema", MAX_SCHEMA_BYTES),
        allowed_callers=tuple(fn.allowed_callers),
        starts_work=fn.starts_work,
        workflow=binding_in(fn.workflow) if fn.HasField("workflow") else None,
    )


def function_out(fn: Function) -> pb.Function:
    out = pb.Function(
        target=target_ref(fn.target),
        name=fn.name,
        description=fn.description,
        input_schema_json=dumps(fn.input_schema),
        output_schema_json=dumps(fn.output_schema),
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
        status=state_out(call.status),
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
        result_json=dumps_value(call.result) if call.has_result else "",
        version=call.version,
        starts_work=call.starts_work,
        questions=[question_out(q) for q in view.questions],
        claimed_at=_ts(call.claimed_at),
        updated_at=_ts(call.updated_at),
    )
    pending = view.pending
    if pending is not None:
        out.pending_question.CopyFrom(question_out(pending))
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


def question_out(question: QuestionRecord) -> pb.Question:
    """One of a call's questions, with its choices and times (F11, V7)."""
    return pb.Question(
        ask_id=question.ask_id,
        text=question.text,
        choices=question.choices,
        asked_at=_ts(question.asked_at),
        answered_at=_ts(question.answered_at),
        withdrawn_at=_ts(question.withdrawn_at),
    )


def call_change_out(change: CallChange) -> pb.CallChange:
    """A WatchCall / WatchCallEnds event (N1): a status or a heartbeat, with its cursor."""
    if change.view is not None:
        return pb.CallChange(status=status_out(change.view), cursor=change.cursor)
    return pb.CallChange(heartbeat=common_pb2.Heartbeat(at=_ts(change.at)), cursor=change.cursor)


def execution_out(call: Call) -> pb.Execution:
    out = pb.Execution(
        call_id=call.id,
        target=target_ref(call.target),
        function=call.function,
        inputs_json=dumps(call.inputs),
        output_folder=call.output_folder,
        result_file=RESULT_FILE,
        lease_expires_at=_ts(call.lease_expires_at),
        output_schema_json=dumps(call.output_schema),
        starts_work=call.starts_work,
        caller=call.caller,
        description=call.description,
        run_id=call.run_id or "",
        variables_json=dumps(call.variables),
        traceparent=call.traceparent,
    )
    if call.workflow is not None:
        out.workflow.CopyFrom(binding_out(call.workflow))
    return out


def call_summary_out(call: CallSummary) -> pb.CallSummary:
    return pb.CallSummary(
        call_id=call.id,
        target=target_ref(call.target),
        function=call.function,
        caller=call.caller,
        status=state_out(call.status),
        progress=call.progress,
        question=call.question,
        created_at=_ts(call.created_at),
        ended_at=_ts(call.ended_at),
    )


def target_summary_out(summary: TargetSummary) -> pb.TargetSummary:
    return pb.TargetSummary(
        target=target_out(summary.target),
        functions=[function_out(f) for f in summary.functions],
        running=summary.running,
        free=summary.free,
    )
