import datetime

from agentworks.common.v1 import common_pb2 as _common_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from buf.validate import validate_pb2 as _validate_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CallState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CALL_STATE_UNSPECIFIED: _ClassVar[CallState]
    CALL_STATE_RUNNING: _ClassVar[CallState]
    CALL_STATE_WAITING_FOR_INPUT: _ClassVar[CallState]
    CALL_STATE_COMPLETED: _ClassVar[CallState]
    CALL_STATE_FAILED: _ClassVar[CallState]
    CALL_STATE_INTERRUPTED: _ClassVar[CallState]
    CALL_STATE_CANCELLED: _ClassVar[CallState]
CALL_STATE_UNSPECIFIED: CallState
CALL_STATE_RUNNING: CallState
CALL_STATE_WAITING_FOR_INPUT: CallState
CALL_STATE_COMPLETED: CallState
CALL_STATE_FAILED: CallState
CALL_STATE_INTERRUPTED: CallState
CALL_STATE_CANCELLED: CallState

class Target(_message.Message):
    __slots__ = ("ref", "owner", "running_limit", "effective_running_limit", "created_at", "updated_at")
    REF_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    RUNNING_LIMIT_FIELD_NUMBER: _ClassVar[int]
    EFFECTIVE_RUNNING_LIMIT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    ref: _common_pb2.TargetRef
    owner: str
    running_limit: int
    effective_running_limit: int
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    def __init__(self, ref: _Optional[_Union[_common_pb2.TargetRef, _Mapping]] = ..., owner: _Optional[str] = ..., running_limit: _Optional[int] = ..., effective_running_limit: _Optional[int] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class RegisterTargetRequest(_message.Message):
    __slots__ = ("ref", "owner", "running_limit")
    REF_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    RUNNING_LIMIT_FIELD_NUMBER: _ClassVar[int]
    ref: _common_pb2.TargetRef
    owner: str
    running_limit: int
    def __init__(self, ref: _Optional[_Union[_common_pb2.TargetRef, _Mapping]] = ..., owner: _Optional[str] = ..., running_limit: _Optional[int] = ...) -> None: ...

class GetTargetRequest(_message.Message):
    __slots__ = ("ref",)
    REF_FIELD_NUMBER: _ClassVar[int]
    ref: _common_pb2.TargetRef
    def __init__(self, ref: _Optional[_Union[_common_pb2.TargetRef, _Mapping]] = ...) -> None: ...

class ListTargetsRequest(_message.Message):
    __slots__ = ("target", "after", "limit")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    target: _common_pb2.TargetRef
    after: str
    limit: int
    def __init__(self, target: _Optional[_Union[_common_pb2.TargetRef, _Mapping]] = ..., after: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class TargetSummary(_message.Message):
    __slots__ = ("target", "functions", "running", "free")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    FUNCTIONS_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    FREE_FIELD_NUMBER: _ClassVar[int]
    target: Target
    functions: _containers.RepeatedCompositeFieldContainer[Function]
    running: int
    free: int
    def __init__(self, target: _Optional[_Union[Target, _Mapping]] = ..., functions: _Optional[_Iterable[_Union[Function, _Mapping]]] = ..., running: _Optional[int] = ..., free: _Optional[int] = ...) -> None: ...

class ListTargetsResponse(_message.Message):
    __slots__ = ("targets", "next_cursor")
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    NEXT_CURSOR_FIELD_NUMBER: _ClassVar[int]
    targets: _containers.RepeatedCompositeFieldContainer[TargetSummary]
    next_cursor: str
    def __init__(self, targets: _Optional[_Iterable[_Union[TargetSummary, _Mapping]]] = ..., next_cursor: _Optional[str] = ...) -> None: ...

class WorkflowVariable(_message.Message):
    __slots__ = ("name", "type", "default_json", "required")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_JSON_FIELD_NUMBER: _ClassVar[int]
    REQUIRED_FIELD_NUMBER: _ClassVar[int]
    name: str
    type: str
    default_json: str
    required: bool
    def __init__(self, name: _Optional[str] = ..., type: _Optional[str] = ..., default_json: _Optional[str] = ..., required: _Optional[bool] = ...) -> None: ...

class WorkflowBinding(_message.Message):
    __slots__ = ("route", "allowed_groups", "variables")
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_GROUPS_FIELD_NUMBER: _ClassVar[int]
    VARIABLES_FIELD_NUMBER: _ClassVar[int]
    route: str
    allowed_groups: _containers.RepeatedScalarFieldContainer[str]
    variables: _containers.RepeatedCompositeFieldContainer[WorkflowVariable]
    def __init__(self, route: _Optional[str] = ..., allowed_groups: _Optional[_Iterable[str]] = ..., variables: _Optional[_Iterable[_Union[WorkflowVariable, _Mapping]]] = ...) -> None: ...

class Function(_message.Message):
    __slots__ = ("target", "name", "description", "input_schema_json", "output_schema_json", "allowed_callers", "starts_work", "workflow", "created_at", "updated_at")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    INPUT_SCHEMA_JSON_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_SCHEMA_JSON_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_CALLERS_FIELD_NUMBER: _ClassVar[int]
    STARTS_WORK_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    target: _common_pb2.TargetRef
    name: str
    description: str
    input_schema_json: str
    output_schema_json: str
    allowed_callers: _containers.RepeatedScalarFieldContainer[str]
    starts_work: bool
    workflow: WorkflowBinding
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    def __init__(self, target: _Optional[_Union[_common_pb2.TargetRef, _Mapping]] = ..., name: _Optional[str] = ..., description: _Optional[str] = ..., input_schema_json: _Optional[str] = ..., output_schema_json: _Optional[str] = ..., allowed_callers: _Optional[_Iterable[str]] = ..., starts_work: _Optional[bool] = ..., workflow: _Optional[_Union[WorkflowBinding, _Mapping]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class DeclareFunctionRequest(_message.Message):
    __slots__ = ("function",)
    FUNCTION_FIELD_NUMBER: _ClassVar[int]
    function: Function
    def __init__(self, function: _Optional[_Union[Function, _Mapping]] = ...) -> None: ...

class RemoveFunctionRequest(_message.Message):
    __slots__ = ("target", "name")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    target: _common_pb2.TargetRef
    name: str
    def __init__(self, target: _Optional[_Union[_common_pb2.TargetRef, _Mapping]] = ..., name: _Optional[str] = ...) -> None: ...

class RemoveFunctionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListFunctionsRequest(_message.Message):
    __slots__ = ("target",)
    TARGET_FIELD_NUMBER: _ClassVar[int]
    target: _common_pb2.TargetRef
    def __init__(self, target: _Optional[_Union[_common_pb2.TargetRef, _Mapping]] = ...) -> None: ...

class ListFunctionsResponse(_message.Message):
    __slots__ = ("functions",)
    FUNCTIONS_FIELD_NUMBER: _ClassVar[int]
    functions: _containers.RepeatedCompositeFieldContainer[Function]
    def __init__(self, functions: _Optional[_Iterable[_Union[Function, _Mapping]]] = ...) -> None: ...

class CallSource(_message.Message):
    __slots__ = ("run_id", "step", "group")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    step: str
    group: str
    def __init__(self, run_id: _Optional[str] = ..., step: _Optional[str] = ..., group: _Optional[str] = ...) -> None: ...

class CallRequest(_message.Message):
    __slots__ = ("target", "function", "inputs_json", "submission_id", "notify_conversation_id", "source", "wait_seconds", "fresh_submission_id")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_FIELD_NUMBER: _ClassVar[int]
    INPUTS_JSON_FIELD_NUMBER: _ClassVar[int]
    SUBMISSION_ID_FIELD_NUMBER: _ClassVar[int]
    NOTIFY_CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    WAIT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    FRESH_SUBMISSION_ID_FIELD_NUMBER: _ClassVar[int]
    target: _common_pb2.TargetRef
    function: str
    inputs_json: str
    submission_id: str
    notify_conversation_id: str
    source: CallSource
    wait_seconds: int
    fresh_submission_id: bool
    def __init__(self, target: _Optional[_Union[_common_pb2.TargetRef, _Mapping]] = ..., function: _Optional[str] = ..., inputs_json: _Optional[str] = ..., submission_id: _Optional[str] = ..., notify_conversation_id: _Optional[str] = ..., source: _Optional[_Union[CallSource, _Mapping]] = ..., wait_seconds: _Optional[int] = ..., fresh_submission_id: _Optional[bool] = ...) -> None: ...

class CallReceipt(_message.Message):
    __slots__ = ("call_id", "status", "output_folder", "created", "outcome")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FOLDER_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    status: CallState
    output_folder: str
    created: bool
    outcome: CallStatus
    def __init__(self, call_id: _Optional[str] = ..., status: _Optional[_Union[CallState, str]] = ..., output_folder: _Optional[str] = ..., created: _Optional[bool] = ..., outcome: _Optional[_Union[CallStatus, _Mapping]] = ...) -> None: ...

class GetStatusRequest(_message.Message):
    __slots__ = ("call_id", "after", "message_limit", "after_event", "event_limit", "wait_seconds", "seen_version", "until_ended")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_LIMIT_FIELD_NUMBER: _ClassVar[int]
    AFTER_EVENT_FIELD_NUMBER: _ClassVar[int]
    EVENT_LIMIT_FIELD_NUMBER: _ClassVar[int]
    WAIT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    SEEN_VERSION_FIELD_NUMBER: _ClassVar[int]
    UNTIL_ENDED_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    after: int
    message_limit: int
    after_event: int
    event_limit: int
    wait_seconds: int
    seen_version: int
    until_ended: bool
    def __init__(self, call_id: _Optional[str] = ..., after: _Optional[int] = ..., message_limit: _Optional[int] = ..., after_event: _Optional[int] = ..., event_limit: _Optional[int] = ..., wait_seconds: _Optional[int] = ..., seen_version: _Optional[int] = ..., until_ended: _Optional[bool] = ...) -> None: ...

class ExecutionMessage(_message.Message):
    __slots__ = ("index", "role", "text", "created_at")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    index: int
    role: str
    text: str
    created_at: _timestamp_pb2.Timestamp
    def __init__(self, index: _Optional[int] = ..., role: _Optional[str] = ..., text: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ExecutionEvent(_message.Message):
    __slots__ = ("index", "kind", "text", "tool_name", "created_at", "raw_json")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    RAW_JSON_FIELD_NUMBER: _ClassVar[int]
    index: int
    kind: str
    text: str
    tool_name: str
    created_at: _timestamp_pb2.Timestamp
    raw_json: str
    def __init__(self, index: _Optional[int] = ..., kind: _Optional[str] = ..., text: _Optional[str] = ..., tool_name: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., raw_json: _Optional[str] = ...) -> None: ...

class WorkflowStep(_message.Message):
    __slots__ = ("index", "step", "group", "status", "detail", "created_at")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    index: int
    step: str
    group: str
    status: str
    detail: str
    created_at: _timestamp_pb2.Timestamp
    def __init__(self, index: _Optional[int] = ..., step: _Optional[str] = ..., group: _Optional[str] = ..., status: _Optional[str] = ..., detail: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class WorkflowRun(_message.Message):
    __slots__ = ("run_id", "route", "steps")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    route: str
    steps: _containers.RepeatedCompositeFieldContainer[WorkflowStep]
    def __init__(self, run_id: _Optional[str] = ..., route: _Optional[str] = ..., steps: _Optional[_Iterable[_Union[WorkflowStep, _Mapping]]] = ...) -> None: ...

class FileInfo(_message.Message):
    __slots__ = ("name", "size", "media_type", "sha256", "text", "created_at")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    MEDIA_TYPE_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    name: str
    size: int
    media_type: str
    sha256: str
    text: bool
    created_at: _timestamp_pb2.Timestamp
    def __init__(self, name: _Optional[str] = ..., size: _Optional[int] = ..., media_type: _Optional[str] = ..., sha256: _Optional[str] = ..., text: _Optional[bool] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CallStatus(_message.Message):
    __slots__ = ("call_id", "status", "progress", "messages", "next_after", "events", "next_after_event", "answer", "result_json", "error", "files", "question", "target", "function", "caller", "output_folder", "started", "correction_turn", "run", "source", "created_at", "ended_at", "version", "starts_work", "pending_question", "questions", "claimed_at", "updated_at")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    NEXT_AFTER_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_AFTER_EVENT_FIELD_NUMBER: _ClassVar[int]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    RESULT_JSON_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    QUESTION_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_FIELD_NUMBER: _ClassVar[int]
    CALLER_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FOLDER_FIELD_NUMBER: _ClassVar[int]
    STARTED_FIELD_NUMBER: _ClassVar[int]
    CORRECTION_TURN_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    ENDED_AT_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    STARTS_WORK_FIELD_NUMBER: _ClassVar[int]
    PENDING_QUESTION_FIELD_NUMBER: _ClassVar[int]
    QUESTIONS_FIELD_NUMBER: _ClassVar[int]
    CLAIMED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    status: CallState
    progress: str
    messages: _containers.RepeatedCompositeFieldContainer[ExecutionMessage]
    next_after: int
    events: _containers.RepeatedCompositeFieldContainer[ExecutionEvent]
    next_after_event: int
    answer: str
    result_json: str
    error: str
    files: _containers.RepeatedCompositeFieldContainer[FileInfo]
    question: str
    target: _common_pb2.TargetRef
    function: str
    caller: str
    output_folder: str
    started: bool
    correction_turn: bool
    run: WorkflowRun
    source: CallSource
    created_at: _timestamp_pb2.Timestamp
    ended_at: _timestamp_pb2.Timestamp
    version: int
    starts_work: bool
    pending_question: Question
    questions: _containers.RepeatedCompositeFieldContainer[Question]
    claimed_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    def __init__(self, call_id: _Optional[str] = ..., status: _Optional[_Union[CallState, str]] = ..., progress: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[ExecutionMessage, _Mapping]]] = ..., next_after: _Optional[int] = ..., events: _Optional[_Iterable[_Union[ExecutionEvent, _Mapping]]] = ..., next_after_event: _Optional[int] = ..., answer: _Optional[str] = ..., result_json: _Optional[str] = ..., error: _Optional[str] = ..., files: _Optional[_Iterable[_Union[FileInfo, _Mapping]]] = ..., question: _Optional[str] = ..., target: _Optional[_Union[_common_pb2.TargetRef, _Mapping]] = ..., function: _Optional[str] = ..., caller: _Optional[str] = ..., output_folder: _Optional[str] = ..., started: _Optional[bool] = ..., correction_turn: _Optional[bool] = ..., run: _Optional[_Union[WorkflowRun, _Mapping]] = ..., source: _Optional[_Union[CallSource, _Mapping]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., ended_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., version: _Optional[int] = ..., starts_work: _Optional[bool] = ..., pending_question: _Optional[_Union[Question, _Mapping]] = ..., questions: _Optional[_Iterable[_Union[Question, _Mapping]]] = ..., claimed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Question(_message.Message):
    __slots__ = ("ask_id", "text", "choices", "asked_at", "answered_at", "withdrawn_at")
    ASK_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    CHOICES_FIELD_NUMBER: _ClassVar[int]
    ASKED_AT_FIELD_NUMBER: _ClassVar[int]
    ANSWERED_AT_FIELD_NUMBER: _ClassVar[int]
    WITHDRAWN_AT_FIELD_NUMBER: _ClassVar[int]
    ask_id: str
    text: str
    choices: _containers.RepeatedScalarFieldContainer[str]
    asked_at: _timestamp_pb2.Timestamp
    answered_at: _timestamp_pb2.Timestamp
    withdrawn_at: _timestamp_pb2.Timestamp
    def __init__(self, ask_id: _Optional[str] = ..., text: _Optional[str] = ..., choices: _Optional[_Iterable[str]] = ..., asked_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., answered_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., withdrawn_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class WatchCallRequest(_message.Message):
    __slots__ = ("call_id", "after", "after_event", "seen_version", "heartbeat_seconds")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    AFTER_EVENT_FIELD_NUMBER: _ClassVar[int]
    SEEN_VERSION_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    after: int
    after_event: int
    seen_version: int
    heartbeat_seconds: int
    def __init__(self, call_id: _Optional[str] = ..., after: _Optional[int] = ..., after_event: _Optional[int] = ..., seen_version: _Optional[int] = ..., heartbeat_seconds: _Optional[int] = ...) -> None: ...

class WatchCallEndsRequest(_message.Message):
    __slots__ = ("after", "heartbeat_seconds")
    AFTER_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    after: str
    heartbeat_seconds: int
    def __init__(self, after: _Optional[str] = ..., heartbeat_seconds: _Optional[int] = ...) -> None: ...

class CallChange(_message.Message):
    __slots__ = ("status", "heartbeat", "cursor")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    status: CallStatus
    heartbeat: _common_pb2.Heartbeat
    cursor: str
    def __init__(self, status: _Optional[_Union[CallStatus, _Mapping]] = ..., heartbeat: _Optional[_Union[_common_pb2.Heartbeat, _Mapping]] = ..., cursor: _Optional[str] = ...) -> None: ...

class ReadFileRequest(_message.Message):
    __slots__ = ("call_id", "file", "offset", "limit")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    FILE_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    file: str
    offset: int
    limit: int
    def __init__(self, call_id: _Optional[str] = ..., file: _Optional[str] = ..., offset: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class FilePage(_message.Message):
    __slots__ = ("file", "content", "content_base64", "next_offset", "size", "offset", "media_type")
    FILE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    CONTENT_BASE64_FIELD_NUMBER: _ClassVar[int]
    NEXT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    MEDIA_TYPE_FIELD_NUMBER: _ClassVar[int]
    file: str
    content: str
    content_base64: str
    next_offset: int
    size: int
    offset: int
    media_type: str
    def __init__(self, file: _Optional[str] = ..., content: _Optional[str] = ..., content_base64: _Optional[str] = ..., next_offset: _Optional[int] = ..., size: _Optional[int] = ..., offset: _Optional[int] = ..., media_type: _Optional[str] = ...) -> None: ...

class ReplyRequest(_message.Message):
    __slots__ = ("call_id", "text")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    text: str
    def __init__(self, call_id: _Optional[str] = ..., text: _Optional[str] = ...) -> None: ...

class CancelRequest(_message.Message):
    __slots__ = ("call_id",)
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    def __init__(self, call_id: _Optional[str] = ...) -> None: ...

class ListCallsRequest(_message.Message):
    __slots__ = ("target", "caller", "statuses", "created_after", "created_before", "after", "limit")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    CALLER_FIELD_NUMBER: _ClassVar[int]
    STATUSES_FIELD_NUMBER: _ClassVar[int]
    CREATED_AFTER_FIELD_NUMBER: _ClassVar[int]
    CREATED_BEFORE_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    target: _common_pb2.TargetRef
    caller: str
    statuses: _containers.RepeatedScalarFieldContainer[CallState]
    created_after: _timestamp_pb2.Timestamp
    created_before: _timestamp_pb2.Timestamp
    after: str
    limit: int
    def __init__(self, target: _Optional[_Union[_common_pb2.TargetRef, _Mapping]] = ..., caller: _Optional[str] = ..., statuses: _Optional[_Iterable[_Union[CallState, str]]] = ..., created_after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., created_before: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., after: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class CallSummary(_message.Message):
    __slots__ = ("call_id", "target", "function", "caller", "status", "progress", "question", "created_at", "ended_at")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_FIELD_NUMBER: _ClassVar[int]
    CALLER_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    QUESTION_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    ENDED_AT_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    target: _common_pb2.TargetRef
    function: str
    caller: str
    status: CallState
    progress: str
    question: str
    created_at: _timestamp_pb2.Timestamp
    ended_at: _timestamp_pb2.Timestamp
    def __init__(self, call_id: _Optional[str] = ..., target: _Optional[_Union[_common_pb2.TargetRef, _Mapping]] = ..., function: _Optional[str] = ..., caller: _Optional[str] = ..., status: _Optional[_Union[CallState, str]] = ..., progress: _Optional[str] = ..., question: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., ended_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListCallsResponse(_message.Message):
    __slots__ = ("calls", "next_cursor")
    CALLS_FIELD_NUMBER: _ClassVar[int]
    NEXT_CURSOR_FIELD_NUMBER: _ClassVar[int]
    calls: _containers.RepeatedCompositeFieldContainer[CallSummary]
    next_cursor: str
    def __init__(self, calls: _Optional[_Iterable[_Union[CallSummary, _Mapping]]] = ..., next_cursor: _Optional[str] = ...) -> None: ...

class ClaimExecutionRequest(_message.Message):
    __slots__ = ("targets", "wait_seconds", "lease_seconds")
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    WAIT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    LEASE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    targets: _containers.RepeatedCompositeFieldContainer[_common_pb2.TargetRef]
    wait_seconds: int
    lease_seconds: int
    def __init__(self, targets: _Optional[_Iterable[_Union[_common_pb2.TargetRef, _Mapping]]] = ..., wait_seconds: _Optional[int] = ..., lease_seconds: _Optional[int] = ...) -> None: ...

class Execution(_message.Message):
    __slots__ = ("call_id", "target", "function", "inputs_json", "output_folder", "result_file", "lease_expires_at", "output_schema_json", "starts_work", "caller", "description", "run_id", "workflow", "variables_json", "capability", "traceparent")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_FIELD_NUMBER: _ClassVar[int]
    INPUTS_JSON_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FOLDER_FIELD_NUMBER: _ClassVar[int]
    RESULT_FILE_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_SCHEMA_JSON_FIELD_NUMBER: _ClassVar[int]
    STARTS_WORK_FIELD_NUMBER: _ClassVar[int]
    CALLER_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    VARIABLES_JSON_FIELD_NUMBER: _ClassVar[int]
    CAPABILITY_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    target: _common_pb2.TargetRef
    function: str
    inputs_json: str
    output_folder: str
    result_file: str
    lease_expires_at: _timestamp_pb2.Timestamp
    output_schema_json: str
    starts_work: bool
    caller: str
    description: str
    run_id: str
    workflow: WorkflowBinding
    variables_json: str
    capability: str
    traceparent: str
    def __init__(self, call_id: _Optional[str] = ..., target: _Optional[_Union[_common_pb2.TargetRef, _Mapping]] = ..., function: _Optional[str] = ..., inputs_json: _Optional[str] = ..., output_folder: _Optional[str] = ..., result_file: _Optional[str] = ..., lease_expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., output_schema_json: _Optional[str] = ..., starts_work: _Optional[bool] = ..., caller: _Optional[str] = ..., description: _Optional[str] = ..., run_id: _Optional[str] = ..., workflow: _Optional[_Union[WorkflowBinding, _Mapping]] = ..., variables_json: _Optional[str] = ..., capability: _Optional[str] = ..., traceparent: _Optional[str] = ...) -> None: ...

class ClaimExecutionResponse(_message.Message):
    __slots__ = ("execution",)
    EXECUTION_FIELD_NUMBER: _ClassVar[int]
    execution: Execution
    def __init__(self, execution: _Optional[_Union[Execution, _Mapping]] = ...) -> None: ...

class HeartbeatExecutionRequest(_message.Message):
    __slots__ = ("call_id", "lease_seconds")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    lease_seconds: int
    def __init__(self, call_id: _Optional[str] = ..., lease_seconds: _Optional[int] = ...) -> None: ...

class HeartbeatExecutionResponse(_message.Message):
    __slots__ = ("status", "lease_expires_at", "capability")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    CAPABILITY_FIELD_NUMBER: _ClassVar[int]
    status: CallState
    lease_expires_at: _timestamp_pb2.Timestamp
    capability: str
    def __init__(self, status: _Optional[_Union[CallState, str]] = ..., lease_expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., capability: _Optional[str] = ...) -> None: ...

class ReportRequest(_message.Message):
    __slots__ = ("call_id", "progress", "messages", "events", "steps", "sequence")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    progress: str
    messages: _containers.RepeatedCompositeFieldContainer[ExecutionMessage]
    events: _containers.RepeatedCompositeFieldContainer[ExecutionEvent]
    steps: _containers.RepeatedCompositeFieldContainer[WorkflowStep]
    sequence: int
    def __init__(self, call_id: _Optional[str] = ..., progress: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[ExecutionMessage, _Mapping]]] = ..., events: _Optional[_Iterable[_Union[ExecutionEvent, _Mapping]]] = ..., steps: _Optional[_Iterable[_Union[WorkflowStep, _Mapping]]] = ..., sequence: _Optional[int] = ...) -> None: ...

class ReportResponse(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: CallState
    def __init__(self, status: _Optional[_Union[CallState, str]] = ...) -> None: ...

class FileChunk(_message.Message):
    __slots__ = ("call_id", "name", "data", "media_type")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    MEDIA_TYPE_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    name: str
    data: bytes
    media_type: str
    def __init__(self, call_id: _Optional[str] = ..., name: _Optional[str] = ..., data: _Optional[bytes] = ..., media_type: _Optional[str] = ...) -> None: ...

class AskInputRequest(_message.Message):
    __slots__ = ("call_id", "ask_id", "question", "choices", "wait_seconds", "withdraw")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    ASK_ID_FIELD_NUMBER: _ClassVar[int]
    QUESTION_FIELD_NUMBER: _ClassVar[int]
    CHOICES_FIELD_NUMBER: _ClassVar[int]
    WAIT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    WITHDRAW_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    ask_id: str
    question: str
    choices: _containers.RepeatedScalarFieldContainer[str]
    wait_seconds: int
    withdraw: bool
    def __init__(self, call_id: _Optional[str] = ..., ask_id: _Optional[str] = ..., question: _Optional[str] = ..., choices: _Optional[_Iterable[str]] = ..., wait_seconds: _Optional[int] = ..., withdraw: _Optional[bool] = ...) -> None: ...

class AskInputResponse(_message.Message):
    __slots__ = ("answered", "reply", "status")
    ANSWERED_FIELD_NUMBER: _ClassVar[int]
    REPLY_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    answered: bool
    reply: str
    status: CallState
    def __init__(self, answered: _Optional[bool] = ..., reply: _Optional[str] = ..., status: _Optional[_Union[CallState, str]] = ...) -> None: ...

class FinishExecutionRequest(_message.Message):
    __slots__ = ("call_id", "failed", "final_message", "error", "correction_round", "claim_next", "interrupted")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    FINAL_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    CORRECTION_ROUND_FIELD_NUMBER: _ClassVar[int]
    CLAIM_NEXT_FIELD_NUMBER: _ClassVar[int]
    INTERRUPTED_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    failed: bool
    final_message: str
    error: str
    correction_round: int
    claim_next: ClaimExecutionRequest
    interrupted: bool
    def __init__(self, call_id: _Optional[str] = ..., failed: _Optional[bool] = ..., final_message: _Optional[str] = ..., error: _Optional[str] = ..., correction_round: _Optional[int] = ..., claim_next: _Optional[_Union[ClaimExecutionRequest, _Mapping]] = ..., interrupted: _Optional[bool] = ...) -> None: ...

class FinishExecutionResponse(_message.Message):
    __slots__ = ("status", "correction_requested", "correction_prompt", "next")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CORRECTION_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    CORRECTION_PROMPT_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIELD_NUMBER: _ClassVar[int]
    status: CallState
    correction_requested: bool
    correction_prompt: str
    next: Execution
    def __init__(self, status: _Optional[_Union[CallState, str]] = ..., correction_requested: _Optional[bool] = ..., correction_prompt: _Optional[str] = ..., next: _Optional[_Union[Execution, _Mapping]] = ...) -> None: ...
