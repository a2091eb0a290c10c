import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from buf.validate import validate_pb2 as _validate_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class WakeUpStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WAKE_UP_STATUS_UNSPECIFIED: _ClassVar[WakeUpStatus]
    WAKE_UP_STATUS_PENDING: _ClassVar[WakeUpStatus]
    WAKE_UP_STATUS_FIRED: _ClassVar[WakeUpStatus]
    WAKE_UP_STATUS_CANCELLED: _ClassVar[WakeUpStatus]
    WAKE_UP_STATUS_FAILED: _ClassVar[WakeUpStatus]
WAKE_UP_STATUS_UNSPECIFIED: WakeUpStatus
WAKE_UP_STATUS_PENDING: WakeUpStatus
WAKE_UP_STATUS_FIRED: WakeUpStatus
WAKE_UP_STATUS_CANCELLED: WakeUpStatus
WAKE_UP_STATUS_FAILED: WakeUpStatus

class WakeUp(_message.Message):
    __slots__ = ("wake_up_id", "conversation_id", "due_at", "note", "status", "product", "created_by", "created_at", "fired_at", "delivery_id", "late_seconds", "error")
    WAKE_UP_ID_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    DUE_AT_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PRODUCT_FIELD_NUMBER: _ClassVar[int]
    CREATED_BY_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    FIRED_AT_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_ID_FIELD_NUMBER: _ClassVar[int]
    LATE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    wake_up_id: str
    conversation_id: str
    due_at: _timestamp_pb2.Timestamp
    note: str
    status: WakeUpStatus
    product: str
    created_by: str
    created_at: _timestamp_pb2.Timestamp
    fired_at: _timestamp_pb2.Timestamp
    delivery_id: str
    late_seconds: float
    error: str
    def __init__(self, wake_up_id: _Optional[str] = ..., conversation_id: _Optional[str] = ..., due_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., note: _Optional[str] = ..., status: _Optional[_Union[WakeUpStatus, str]] = ..., product: _Optional[str] = ..., created_by: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., fired_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., delivery_id: _Optional[str] = ..., late_seconds: _Optional[float] = ..., error: _Optional[str] = ...) -> None: ...

class CreateWakeUpRequest(_message.Message):
    __slots__ = ("conversation_id", "at", "delay_seconds", "note", "product", "submission_id")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    DELAY_SECONDS_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    PRODUCT_FIELD_NUMBER: _ClassVar[int]
    SUBMISSION_ID_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    at: _timestamp_pb2.Timestamp
    delay_seconds: int
    note: str
    product: str
    submission_id: str
    def __init__(self, conversation_id: _Optional[str] = ..., at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., delay_seconds: _Optional[int] = ..., note: _Optional[str] = ..., product: _Optional[str] = ..., submission_id: _Optional[str] = ...) -> None: ...

class GetWakeUpRequest(_message.Message):
    __slots__ = ("wake_up_id",)
    WAKE_UP_ID_FIELD_NUMBER: _ClassVar[int]
    wake_up_id: str
    def __init__(self, wake_up_id: _Optional[str] = ...) -> None: ...

class ListWakeUpsRequest(_message.Message):
    __slots__ = ("conversation_id", "product", "include_finished", "after", "limit")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCT_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_FINISHED_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    product: str
    include_finished: bool
    after: str
    limit: int
    def __init__(self, conversation_id: _Optional[str] = ..., product: _Optional[str] = ..., include_finished: _Optional[bool] = ..., after: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListWakeUpsResponse(_message.Message):
    __slots__ = ("wake_ups", "next_cursor")
    WAKE_UPS_FIELD_NUMBER: _ClassVar[int]
    NEXT_CURSOR_FIELD_NUMBER: _ClassVar[int]
    wake_ups: _containers.RepeatedCompositeFieldContainer[WakeUp]
    next_cursor: str
    def __init__(self, wake_ups: _Optional[_Iterable[_Union[WakeUp, _Mapping]]] = ..., next_cursor: _Optional[str] = ...) -> None: ...

class CancelWakeUpRequest(_message.Message):
    __slots__ = ("wake_up_id",)
    WAKE_UP_ID_FIELD_NUMBER: _ClassVar[int]
    wake_up_id: str
    def __init__(self, wake_up_id: _Optional[str] = ...) -> None: ...

class RescheduleWakeUpRequest(_message.Message):
    __slots__ = ("wake_up_id", "at", "delay_seconds")
    WAKE_UP_ID_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    DELAY_SECONDS_FIELD_NUMBER: _ClassVar[int]
    wake_up_id: str
    at: _timestamp_pb2.Timestamp
    delay_seconds: int
    def __init__(self, wake_up_id: _Optional[str] = ..., at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., delay_seconds: _Optional[int] = ...) -> None: ...

class Recurrence(_message.Message):
    __slots__ = ("cron", "interval_seconds", "time_zone")
    CRON_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    TIME_ZONE_FIELD_NUMBER: _ClassVar[int]
    cron: str
    interval_seconds: int
    time_zone: str
    def __init__(self, cron: _Optional[str] = ..., interval_seconds: _Optional[int] = ..., time_zone: _Optional[str] = ...) -> None: ...

class Schedule(_message.Message):
    __slots__ = ("schedule_id", "name", "conversation_id", "product", "prompt", "recurrence", "paused", "next_fire_at", "last_fired_at", "fire_count", "created_by", "created_at", "updated_at", "last_error")
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCT_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    RECURRENCE_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIRE_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_FIRED_AT_FIELD_NUMBER: _ClassVar[int]
    FIRE_COUNT_FIELD_NUMBER: _ClassVar[int]
    CREATED_BY_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    name: str
    conversation_id: str
    product: str
    prompt: str
    recurrence: Recurrence
    paused: bool
    next_fire_at: _timestamp_pb2.Timestamp
    last_fired_at: _timestamp_pb2.Timestamp
    fire_count: int
    created_by: str
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    last_error: str
    def __init__(self, schedule_id: _Optional[str] = ..., name: _Optional[str] = ..., conversation_id: _Optional[str] = ..., product: _Optional[str] = ..., prompt: _Optional[str] = ..., recurrence: _Optional[_Union[Recurrence, _Mapping]] = ..., paused: _Optional[bool] = ..., next_fire_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_fired_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., fire_count: _Optional[int] = ..., created_by: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_error: _Optional[str] = ...) -> None: ...

class CreateScheduleRequest(_message.Message):
    __slots__ = ("conversation_id", "prompt", "recurrence", "name", "product", "start_at", "paused", "submission_id")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    RECURRENCE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PRODUCT_FIELD_NUMBER: _ClassVar[int]
    START_AT_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    SUBMISSION_ID_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    prompt: str
    recurrence: Recurrence
    name: str
    product: str
    start_at: _timestamp_pb2.Timestamp
    paused: bool
    submission_id: str
    def __init__(self, conversation_id: _Optional[str] = ..., prompt: _Optional[str] = ..., recurrence: _Optional[_Union[Recurrence, _Mapping]] = ..., name: _Optional[str] = ..., product: _Optional[str] = ..., start_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., paused: _Optional[bool] = ..., submission_id: _Optional[str] = ...) -> None: ...

class GetScheduleRequest(_message.Message):
    __slots__ = ("schedule_id",)
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    def __init__(self, schedule_id: _Optional[str] = ...) -> None: ...

class UpdateScheduleRequest(_message.Message):
    __slots__ = ("schedule_id", "prompt", "name", "recurrence")
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    RECURRENCE_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    prompt: str
    name: str
    recurrence: Recurrence
    def __init__(self, schedule_id: _Optional[str] = ..., prompt: _Optional[str] = ..., name: _Optional[str] = ..., recurrence: _Optional[_Union[Recurrence, _Mapping]] = ...) -> None: ...

class PauseScheduleRequest(_message.Message):
    __slots__ = ("schedule_id",)
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    def __init__(self, schedule_id: _Optional[str] = ...) -> None: ...

class ResumeScheduleRequest(_message.Message):
    __slots__ = ("schedule_id",)
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    def __init__(self, schedule_id: _Optional[str] = ...) -> None: ...

class DeleteScheduleRequest(_message.Message):
    __slots__ = ("schedule_id",)
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    def __init__(self, schedule_id: _Optional[str] = ...) -> None: ...

class DeleteScheduleResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListSchedulesRequest(_message.Message):
    __slots__ = ("conversation_id", "product", "after", "limit")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCT_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    product: str
    after: str
    limit: int
    def __init__(self, conversation_id: _Optional[str] = ..., product: _Optional[str] = ..., after: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListSchedulesResponse(_message.Message):
    __slots__ = ("schedules", "next_cursor")
    SCHEDULES_FIELD_NUMBER: _ClassVar[int]
    NEXT_CURSOR_FIELD_NUMBER: _ClassVar[int]
    schedules: _containers.RepeatedCompositeFieldContainer[Schedule]
    next_cursor: str
    def __init__(self, schedules: _Optional[_Iterable[_Union[Schedule, _Mapping]]] = ..., next_cursor: _Optional[str] = ...) -> None: ...

class PreviewScheduleRequest(_message.Message):
    __slots__ = ("schedule_id", "recurrence", "count", "after")
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    RECURRENCE_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    recurrence: Recurrence
    count: int
    after: _timestamp_pb2.Timestamp
    def __init__(self, schedule_id: _Optional[str] = ..., recurrence: _Optional[_Union[Recurrence, _Mapping]] = ..., count: _Optional[int] = ..., after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class PreviewScheduleResponse(_message.Message):
    __slots__ = ("fire_times",)
    FIRE_TIMES_FIELD_NUMBER: _ClassVar[int]
    fire_times: _containers.RepeatedCompositeFieldContainer[_timestamp_pb2.Timestamp]
    def __init__(self, fire_times: _Optional[_Iterable[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]]] = ...) -> None: ...

class PauseRequest(_message.Message):
    __slots__ = ("product", "reason")
    PRODUCT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    product: str
    reason: str
    def __init__(self, product: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class ResumeRequest(_message.Message):
    __slots__ = ("product",)
    PRODUCT_FIELD_NUMBER: _ClassVar[int]
    product: str
    def __init__(self, product: _Optional[str] = ...) -> None: ...

class GetPauseStateRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PauseEntry(_message.Message):
    __slots__ = ("product", "reason", "paused_by", "paused_at")
    PRODUCT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    PAUSED_BY_FIELD_NUMBER: _ClassVar[int]
    PAUSED_AT_FIELD_NUMBER: _ClassVar[int]
    product: str
    reason: str
    paused_by: str
    paused_at: _timestamp_pb2.Timestamp
    def __init__(self, product: _Optional[str] = ..., reason: _Optional[str] = ..., paused_by: _Optional[str] = ..., paused_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class PauseState(_message.Message):
    __slots__ = ("global_paused", "paused_products", "pauses", "resumed")
    GLOBAL_PAUSED_FIELD_NUMBER: _ClassVar[int]
    PAUSED_PRODUCTS_FIELD_NUMBER: _ClassVar[int]
    PAUSES_FIELD_NUMBER: _ClassVar[int]
    RESUMED_FIELD_NUMBER: _ClassVar[int]
    global_paused: bool
    paused_products: _containers.RepeatedScalarFieldContainer[str]
    pauses: _containers.RepeatedCompositeFieldContainer[PauseEntry]
    resumed: bool
    def __init__(self, global_paused: _Optional[bool] = ..., paused_products: _Optional[_Iterable[str]] = ..., pauses: _Optional[_Iterable[_Union[PauseEntry, _Mapping]]] = ..., resumed: _Optional[bool] = ...) -> None: ...

class Webhook(_message.Message):
    __slots__ = ("webhook_id", "conversation_id", "secret", "name", "product", "secret_fingerprint", "created_by", "created_at", "secret_rotated_at")
    WEBHOOK_ID_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PRODUCT_FIELD_NUMBER: _ClassVar[int]
    SECRET_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    CREATED_BY_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    SECRET_ROTATED_AT_FIELD_NUMBER: _ClassVar[int]
    webhook_id: str
    conversation_id: str
    secret: str
    name: str
    product: str
    secret_fingerprint: str
    created_by: str
    created_at: _timestamp_pb2.Timestamp
    secret_rotated_at: _timestamp_pb2.Timestamp
    def __init__(self, webhook_id: _Optional[str] = ..., conversation_id: _Optional[str] = ..., secret: _Optional[str] = ..., name: _Optional[str] = ..., product: _Optional[str] = ..., secret_fingerprint: _Optional[str] = ..., created_by: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., secret_rotated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CreateWebhookRequest(_message.Message):
    __slots__ = ("conversation_id", "name", "product", "submission_id")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PRODUCT_FIELD_NUMBER: _ClassVar[int]
    SUBMISSION_ID_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    name: str
    product: str
    submission_id: str
    def __init__(self, conversation_id: _Optional[str] = ..., name: _Optional[str] = ..., product: _Optional[str] = ..., submission_id: _Optional[str] = ...) -> None: ...

class GetWebhookRequest(_message.Message):
    __slots__ = ("webhook_id",)
    WEBHOOK_ID_FIELD_NUMBER: _ClassVar[int]
    webhook_id: str
    def __init__(self, webhook_id: _Optional[str] = ...) -> None: ...

class ListWebhooksRequest(_message.Message):
    __slots__ = ("conversation_id", "product", "after", "limit")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCT_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    product: str
    after: str
    limit: int
    def __init__(self, conversation_id: _Optional[str] = ..., product: _Optional[str] = ..., after: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListWebhooksResponse(_message.Message):
    __slots__ = ("webhooks", "next_cursor")
    WEBHOOKS_FIELD_NUMBER: _ClassVar[int]
    NEXT_CURSOR_FIELD_NUMBER: _ClassVar[int]
    webhooks: _containers.RepeatedCompositeFieldContainer[Webhook]
    next_cursor: str
    def __init__(self, webhooks: _Optional[_Iterable[_Union[Webhook, _Mapping]]] = ..., next_cursor: _Optional[str] = ...) -> None: ...

class RotateWebhookSecretRequest(_message.Message):
    __slots__ = ("webhook_id",)
    WEBHOOK_ID_FIELD_NUMBER: _ClassVar[int]
    webhook_id: str
    def __init__(self, webhook_id: _Optional[str] = ...) -> None: ...

class DeleteWebhookRequest(_message.Message):
    __slots__ = ("webhook_id",)
    WEBHOOK_ID_FIELD_NUMBER: _ClassVar[int]
    webhook_id: str
    def __init__(self, webhook_id: _Optional[str] = ...) -> None: ...

class DeleteWebhookResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ReceiveWebhookRequest(_message.Message):
    __slots__ = ("webhook_id", "headers", "body")
    class HeadersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    WEBHOOK_ID_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    webhook_id: str
    headers: _containers.ScalarMap[str, str]
    body: bytes
    def __init__(self, webhook_id: _Optional[str] = ..., headers: _Optional[_Mapping[str, str]] = ..., body: _Optional[bytes] = ...) -> None: ...

class ReceiveWebhookResponse(_message.Message):
    __slots__ = ("delivery_id", "created")
    DELIVERY_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    delivery_id: str
    created: bool
    def __init__(self, delivery_id: _Optional[str] = ..., created: _Optional[bool] = ...) -> None: ...
