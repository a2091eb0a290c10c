"""Proto <-> domain conversions of the functions service."""

from __future__ import annotations

import math
from typing import Any

from google.protobuf import json_format, struct_pb2
from google.protobuf.timestamp_pb2 import Timestamp

from agentworks.client.errors import InvalidArgument
from agentworks.client.structs import struct_json
from agentworks.client.targets import check_target
from agentworks.common.v1 import common_pb2
from agentworks.functions.v1 import functions_pb2 as pb
from agentworks_functions.models import (
    RESULT_FILE,
    Call,
    CallSource,
    FileInfo,
    Function,
    FunctionSpec,
    StatusView,
    Target,
    TargetKey,
    WorkflowBinding,
    WorkflowVariable,
)

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
