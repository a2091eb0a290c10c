"""A call as an A2A task (X2), read through the one mapping `call_tasks.task_view`.

Task id and context id are the `call_id`; the status message is the question (input
required), the error (failed, interrupted saying so) or the progress line (working); a
completed call's answer, validated result and files are its artifacts.
"""

from __future__ import annotations

from a2a.types.a2a_pb2 import (
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from google.protobuf.struct_pb2 import Struct, Value
from google.protobuf.timestamp_pb2 import Timestamp

from agentworks.client import target_str
from agentworks.core.jsontext import loads
from agentworks.functions.v1 import functions_pb2 as f
from agentworks_gateway.call_tasks import A2A_STATES, Phase, TaskView, task_view

# Files up to this size travel inside their artifact (`raw`); larger ones are named with
# their size and digest, to be read with the functions tool (`action=read`).
INLINE_FILE_BYTES = 64 * 1024


def task_state(phase: Phase) -> TaskState:
    return TaskState.Value(A2A_STATES[phase])  # type: ignore[return-value]


def _metadata(status: f.CallStatus, view: TaskView) -> Struct:
    meta = Struct()
    meta.update(
        {
            "agentworks": {
                "kind": "call",
                "target": target_str(status.target),
                "function": status.function,
                "caller": status.caller,
                "interrupted": view.interrupted,
                "starts_work": status.starts_work,
                "version": status.version,
            }
        }
    )
    return meta


def status_of(status: f.CallStatus, view: TaskView | None = None) -> TaskStatus:
    """The A2A status of a call: its state and, when the task says something, a message."""
    view = view or task_view(status)
    out = TaskStatus(state=task_state(view.phase))
    if view.message:
        out.message.CopyFrom(
            Message(
                message_id=f"{status.call_id}:{view.version}",
                context_id=status.call_id,
                task_id=status.call_id,
                role=Role.ROLE_AGENT,
                parts=[Part(text=view.message)],
            )
        )
    stamp = status.ended_at if status.HasField("ended_at") else status.created_at
    if stamp.seconds:
        out.timestamp.CopyFrom(Timestamp(seconds=stamp.seconds, nanos=stamp.nanos))
    return out


def artifacts(status: f.CallStatus, files: dict[str, bytes] | None = None) -> list[Artifact]:
    """A completed call's answer, result and files as artifacts (F10); none before."""
    view = task_view(status)
    if view.phase is not Phase.COMPLETED:
        return []
    out = []
    if view.answer:
        out.append(Artifact(artifact_id="answer", name="answer", parts=[Part(text=view.answer)]))
    if view.result_json:
        value = Value()
        value.MergeFrom(_value(loads(view.result_json, "result")))
        out.append(
            Artifact(
                artifact_id="result",
                name="result",
                description="the validated result (the function's output schema)",
                parts=[Part(data=value, media_type="application/json")],
            )
        )
    for info in view.files:
        part = Part(filename=info.name, media_type=info.media_type or "application/octet-stream")
        content = (files or {}).get(info.name)
        if content is not None:
            part.raw = content
        else:
            part.data.CopyFrom(
                _value(
                    {
                        "file": info.name,
                        "size": info.size,
                        "sha256": info.sha256,
                        "read": "functions tool action=read with call_id and file",
                    }
                )
            )
        out.append(
            Artifact(
                artifact_id=f"file:{info.name}",
                name=info.name,
                description=f"{info.size} bytes, sha256 {info.sha256}",
                parts=[part],
            )
        )
    return out


def _value(data: object) -> Value:
    holder = Struct()
    holder.update({"v": data})
    return holder.fields["v"]


def call_task(status: f.CallStatus, files: dict[str, bytes] | None = None) -> Task:
    """The A2A task a call is."""
    view = task_view(status)
    return Task(
        id=status.call_id,
        context_id=status.call_id,
        status=status_of(status, view),
        artifacts=artifacts(status, files),
        metadata=_metadata(status, view),
    )


def status_event(status: f.CallStatus) -> TaskStatusUpdateEvent:
    return TaskStatusUpdateEvent(
        task_id=status.call_id, context_id=status.call_id, status=status_of(status)
    )


def artifact_events(
    status: f.CallStatus, files: dict[str, bytes] | None = None
) -> list[TaskArtifactUpdateEvent]:
    return [
        TaskArtifactUpdateEvent(
            task_id=status.call_id, context_id=status.call_id, artifact=a, last_chunk=True
        )
        for a in artifacts(status, files)
    ]


def small_files(status: f.CallStatus) -> list[str]:
    """The files of a completed call small enough to travel inside the task."""
    if task_view(status).phase is not Phase.COMPLETED:
        return []
    return [info.name for info in status.files if info.size <= INLINE_FILE_BYTES]
