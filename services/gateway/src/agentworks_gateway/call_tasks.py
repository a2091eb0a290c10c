"""A call seen as a task: the one mapping A2A (X2) and MCP Tasks (M1) both read.

A function call already is a durable task: it has an id (`call_id`, which is the task id
in both protocols), a state machine, a pending question, a result and files, and it
survives restarts and replicas. This module says once how a call's status reads as a
task; each protocol's binding only renames the phase into its own enum. A question's
choices are listed in the status message (A2A shows it as is); MCP also builds its
elicitation form from `TaskView.question` (an enum when it offers choices, M2).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from google.protobuf.timestamp_pb2 import Timestamp

from agentworks.functions.v1 import functions_pb2 as f

INTERRUPTED_MESSAGE = (
    "interrupted: the execution was lost (its runtime stopped answering) and the call "
    "was not retried; call again to run it anew"
)


class Phase(StrEnum):
    """Where a task stands, in words both protocols have."""

    SUBMITTED = "submitted"  # made, not yet claimed by a runtime
    WORKING = "working"
    INPUT_REQUIRED = "input_required"  # a human-input question is open (F11)
    COMPLETED = "completed"
    FAILED = "failed"  # failed, or interrupted (then `interrupted` is true)
    CANCELLED = "cancelled"


TERMINAL = frozenset({Phase.COMPLETED, Phase.FAILED, Phase.CANCELLED})

_PHASES = {
    f.CALL_STATE_RUNNING: Phase.WORKING,
    f.CALL_STATE_WAITING_FOR_INPUT: Phase.INPUT_REQUIRED,
    f.CALL_STATE_COMPLETED: Phase.COMPLETED,
    f.CALL_STATE_FAILED: Phase.FAILED,
    f.CALL_STATE_INTERRUPTED: Phase.FAILED,
    f.CALL_STATE_CANCELLED: Phase.CANCELLED,
}

# Each protocol's name for a phase.
A2A_STATES = {
    Phase.SUBMITTED: "TASK_STATE_SUBMITTED",
    Phase.WORKING: "TASK_STATE_WORKING",
    Phase.INPUT_REQUIRED: "TASK_STATE_INPUT_REQUIRED",
    Phase.COMPLETED: "TASK_STATE_COMPLETED",
    Phase.FAILED: "TASK_STATE_FAILED",
    Phase.CANCELLED: "TASK_STATE_CANCELED",
}
MCP_STATUSES = {
    Phase.SUBMITTED: "working",
    Phase.WORKING: "working",
    Phase.INPUT_REQUIRED: "input_required",
    Phase.COMPLETED: "completed",
    Phase.FAILED: "failed",
    Phase.CANCELLED: "cancelled",
}


@dataclass(frozen=True, slots=True)
class TaskView:
    """A call's status read as a task."""

    task_id: str
    phase: Phase
    # Set when the call was interrupted (reported as failed, saying so).
    interrupted: bool
    # What the task says about itself now: the question while input is required (with
    # its choices, when it offers some), the error (or the interruption) once failed, the
    # progress line while working.
    message: str
    # The execution's final message and its validated result (JSON text, "" for none).
    answer: str
    result_json: str
    files: tuple[f.FileInfo, ...]
    version: int
    # The open question while input is required (ask id, text, choices), else None.
    question: f.Question | None = None
    # When the call last changed (unset on a status from before it was kept).
    updated_at: Timestamp | None = None

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL


def task_view(status: f.CallStatus) -> TaskView:
    """The task a call's status shows (X2, M1)."""
    phase = _PHASES.get(status.status, Phase.WORKING)
    if phase is Phase.WORKING and not status.started:
        phase = Phase.SUBMITTED
    interrupted = status.status == f.CALL_STATE_INTERRUPTED
    question = status.pending_question if status.HasField("pending_question") else None
    if phase is Phase.INPUT_REQUIRED:
        message = question_message(question) if question is not None else status.question
    elif interrupted:
        message = status.error or INTERRUPTED_MESSAGE
    elif phase is Phase.FAILED:
        message = status.error
    elif phase is Phase.CANCELLED:
        message = status.error or "cancelled by its caller"
    else:
        message = status.progress
    return TaskView(
        task_id=status.call_id,
        phase=phase,
        interrupted=interrupted,
        message=message,
        answer=status.answer,
        result_json=status.result_json,
        files=tuple(status.files),
        version=status.version,
        question=question if phase is Phase.INPUT_REQUIRED else None,
        updated_at=status.updated_at if status.HasField("updated_at") else None,
    )


def question_message(question: f.Question) -> str:
    """A question as the task's status message: its text, then its choices, if any."""
    if not question.choices:
        return question.text
    return f"{question.text}\nAnswer with one of: " + ", ".join(question.choices)
