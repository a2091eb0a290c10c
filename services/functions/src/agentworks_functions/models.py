"""Domain objects the functions store returns and the servicer translates to protos."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from agentworks.core.targets import TargetKey

# Call statuses (F7). Open calls count against the running limit (F5).
RUNNING = "running"
WAITING_FOR_INPUT = "waiting_for_input"
COMPLETED = "completed"
FAILED = "failed"
INTERRUPTED = "interrupted"
CANCELLED = "cancelled"
OPEN_STATUSES = (RUNNING, WAITING_FOR_INPUT)
TERMINAL_STATUSES = (COMPLETED, FAILED, INTERRUPTED, CANCELLED)

# The file name, inside the output folder, that FUNCTION_RESULT_FILE points at (F10).
RESULT_FILE = "result.json"


def output_folder(call_id: str) -> str:
    """The call's private output folder, relative to the target's project (F4)."""
    return f".calls/{call_id}/"


@dataclass(frozen=True)
class Target:
    key: TargetKey
    owner: str
    running_limit: int  # 0: the service default
    effective_running_limit: int
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class WorkflowVariable:
    name: str
    type: str
    required: bool = False
    has_default: bool = False
    default: Any = None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "type": self.type, "required": self.required}
        if self.has_default:
            out["default"] = self.default
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WorkflowVariable:
        return cls(
            name=data["name"],
            type=data["type"],
            required=bool(data.get("required", False)),
            has_default="default" in data,
            default=data.get("default"),
        )


@dataclass(frozen=True)
class WorkflowBinding:
    """What a workflow function runs (F1, F14)."""

    route: str
    allowed_groups: tuple[str, ...] = ()
    variables: tuple[WorkflowVariable, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {
            "route": self.route,
            "allowed_groups": list(self.allowed_groups),
            "variables": [v.as_json() for v in self.variables],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> WorkflowBinding | None:
        if data is None:
            return None
        return cls(
            route=data["route"],
            allowed_groups=tuple(data.get("allowed_groups", ())),
            variables=tuple(WorkflowVariable.from_json(v) for v in data.get("variables", ())),
        )


@dataclass(frozen=True)
class FunctionSpec:
    """A declaration as the owner sends it."""

    target: TargetKey
    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    allowed_callers: tuple[str, ...]
    starts_work: bool
    workflow: WorkflowBinding | None


@dataclass(frozen=True)
class Function(FunctionSpec):
    created_at: datetime | None = None
    updated_at: datetime | None = None


@dataclass(frozen=True)
class CallSource:
    """Where in a workflow run a call was made (F14)."""

    run_id: str
    step: str
    group: str = ""

    def as_json(self) -> dict[str, str]:
        return {"run_id": self.run_id, "step": self.step, "group": self.group}


@dataclass(frozen=True)
class Receipt:
    call_id: str
    status: str
    created: bool
    # The ended call, when the caller asked to wait for the end and it came in time.
    outcome: StatusView | None = None

    @property
    def output_folder(self) -> str:
        return output_folder(self.call_id)


@dataclass(frozen=True)
class Call:
    """A call and its one execution."""

    id: str
    target: TargetKey
    function: str
    caller: str
    inputs: dict[str, Any]
    description: str
    output_schema: dict[str, Any] | None
    starts_work: bool
    workflow: WorkflowBinding | None
    variables: dict[str, Any] | None
    run_id: str | None
    source: CallSource | None
    notify_conversation_id: str | None
    status: str
    progress: str
    runtime: str | None
    lease_expires_at: datetime | None
    correction_turns: int
    correction_prompt: str | None
    answer: str
    has_result: bool
    result: Any
    error: str
    version: int
    created_at: datetime
    ended_at: datetime | None
    # The W3C trace context of the request that made the call ("" without tracing).
    traceparent: str = ""
    # The execution whose capability made this call (T3, L8), else None.
    source_call_id: str | None = None
    # When a runtime claimed the execution, and when the call last changed (V7, M1).
    claimed_at: datetime | None = None
    updated_at: datetime | None = None

    @property
    def is_open(self) -> bool:
        return self.status in OPEN_STATUSES

    @property
    def output_folder(self) -> str:
        return output_folder(self.id)


@dataclass(frozen=True)
class CallSummary:
    """One call in a list (V1): what it is and where it is."""

    id: str
    target: TargetKey
    function: str
    caller: str
    status: str
    progress: str
    question: str
    created_at: datetime
    ended_at: datetime | None


@dataclass(frozen=True)
class TargetSummary:
    """One target in a list (V1): its functions the viewer may see, its slots in use."""

    target: Target
    functions: tuple[Function, ...]
    running: int

    @property
    def free(self) -> int:
        return max(0, self.target.effective_running_limit - self.running)


@dataclass(frozen=True)
class ExecutionMessage:
    index: int
    role: str
    text: str
    created_at: datetime | None = None


@dataclass(frozen=True)
class ExecutionEvent:
    index: int
    kind: str
    text: str
    tool_name: str
    created_at: datetime | None = None


@dataclass(frozen=True)
class WorkflowStep:
    index: int
    step: str
    group: str
    status: str
    detail: str
    created_at: datetime | None = None


@dataclass(frozen=True)
class FileInfo:
    name: str
    size: int
    media_type: str
    sha256: str
    is_text: bool
    created_at: datetime
    blob_id: str = ""


@dataclass(frozen=True)
class QuestionRecord:
    """One human-input question of a call as its status shows it (F11, V7)."""

    ask_id: str
    text: str
    choices: tuple[str, ...]
    asked_at: datetime
    answered_at: datetime | None = None
    withdrawn_at: datetime | None = None

    @property
    def open(self) -> bool:
        return self.answered_at is None and self.withdrawn_at is None


# How many of a call's latest questions its status carries (CallStatus.questions).
QUESTIONS_IN_STATUS = 20


@dataclass(frozen=True)
class StatusView:
    """Everything `status` returns for one call (F7)."""

    call: Call
    messages: list[ExecutionMessage]
    next_after: int
    events: list[ExecutionEvent]
    next_after_event: int
    files: list[FileInfo]
    steps: list[WorkflowStep]
    # The latest questions, oldest first (at most QUESTIONS_IN_STATUS).
    questions: list[QuestionRecord] = field(default_factory=list)

    @property
    def pending(self) -> QuestionRecord | None:
        """The question the call waits on, while waiting_for_input (F11)."""
        if self.call.status != WAITING_FOR_INPUT or not self.questions:
            return None
        last = self.questions[-1]
        return last if last.open else None

    @property
    def question(self) -> str:
        """The pending question's text, else ""."""
        pending = self.pending
        return pending.text if pending is not None else ""


@dataclass(frozen=True)
class CallChange:
    """One event of WatchCall or WatchCallEnds (N1): a status, or a heartbeat (`view`
    None) sent at `at`; `cursor` (WatchCallEnds only) is where to resume after it."""

    view: StatusView | None = None
    at: datetime | None = None
    cursor: str = ""


@dataclass(frozen=True)
class FilePage:
    name: str
    data: bytes
    as_text: str | None  # the page as text when the file is text and the bytes decode
    offset: int
    size: int
    next_offset: int | None
    media_type: str


@dataclass(frozen=True)
class FinishOutcome:
    status: str
    correction_requested: bool = False
    correction_prompt: str = ""
    # The runtime's next execution, when the finish was asked to claim one (R1).
    next: Call | None = None


@dataclass(frozen=True)
class Ending:
    """How a call ends: written once, with the notice for an internal caller (F13)."""

    status: str
    answer: str = ""
    has_result: bool = False
    result: Any = None
    error: str = ""


@dataclass(frozen=True)
class Notice:
    call_id: str
    conversation_id: str
    text: str
    attributes: dict[str, Any]
    attempts: int


# What became of one sent completion notice (F13): decided by the sender from messaging's
# answer, recorded by the outbox in typed columns (delivered_at, failed_at, last_error_*).
@dataclass(frozen=True)
class Delivered:
    """Messaging took the notice (or already held it under its idempotency key)."""


@dataclass(frozen=True)
class NoticeFailure:
    """Messaging did not take the notice: its status code's name, message and reason."""

    code: str  # a grpc.StatusCode name: UNAVAILABLE, NOT_FOUND...
    message: str
    reason: str = ""  # the ErrorInfo reason, when messaging gave one


@dataclass(frozen=True)
class RetryLater(NoticeFailure):
    """Messaging may take it later (unreachable, busy...): due again after a backoff."""


@dataclass(frozen=True)
class GaveUp(NoticeFailure):
    """Messaging refuses it the same way on every try: recorded as failed, not resent."""


NoticeOutcome = Delivered | RetryLater | GaveUp


@dataclass
class Question:
    ask_id: str
    question: str
    reply: str | None
    status: str = field(default=RUNNING)
