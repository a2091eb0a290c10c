import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class WakeUp(_message.Message):
    __slots__ = ("wake_up_id", "conversation_id", "due_at", "note", "status")
    WAKE_UP_ID_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    DUE_AT_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    wake_up_id: str
    conversation_id: str
    due_at: _timestamp_pb2.Timestamp
    note: str
    status: str
    def __init__(self, wake_up_id: _Optional[str] = ..., conversation_id: _Optional[str] = ..., due_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., note: _Optional[str] = ..., status: _Optional[str] = ...) -> None: ...

class CreateWakeUpRequest(_message.Message):
    __slots__ = ("conversation_id", "at", "delay_seconds", "note")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    DELAY_SECONDS_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    at: _timestamp_pb2.Timestamp
    delay_seconds: int
    note: str
    def __init__(self, conversation_id: _Optional[str] = ..., at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., delay_seconds: _Optional[int] = ..., note: _Optional[str] = ...) -> None: ...

class ListWakeUpsRequest(_message.Message):
    __slots__ = ("conversation_id",)
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    def __init__(self, conversation_id: _Optional[str] = ...) -> None: ...

class ListWakeUpsResponse(_message.Message):
    __slots__ = ("wake_ups",)
    WAKE_UPS_FIELD_NUMBER: _ClassVar[int]
    wake_ups: _containers.RepeatedCompositeFieldContainer[WakeUp]
    def __init__(self, wake_ups: _Optional[_Iterable[_Union[WakeUp, _Mapping]]] = ...) -> None: ...

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

class Schedule(_message.Message):
    __slots__ = ("schedule_id", "product", "conversation_id", "prompt", "cron", "interval_seconds", "time_zone", "paused", "next_fire_at")
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCT_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    CRON_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    TIME_ZONE_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIRE_AT_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    product: str
    conversation_id: str
    prompt: str
    cron: str
    interval_seconds: int
    time_zone: str
    paused: bool
    next_fire_at: _timestamp_pb2.Timestamp
    def __init__(self, schedule_id: _Optional[str] = ..., product: _Optional[str] = ..., conversation_id: _Optional[str] = ..., prompt: _Optional[str] = ..., cron: _Optional[str] = ..., interval_seconds: _Optional[int] = ..., time_zone: _Optional[str] = ..., paused: _Optional[bool] = ..., next_fire_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class DeleteScheduleRequest(_message.Message):
    __slots__ = ("schedule_id",)
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    def __init__(self, schedule_id: _Optional[str] = ...) -> None: ...

class DeleteScheduleResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListSchedulesRequest(_message.Message):
    __slots__ = ("product",)
    PRODUCT_FIELD_NUMBER: _ClassVar[int]
    product: str
    def __init__(self, product: _Optional[str] = ...) -> None: ...

class ListSchedulesResponse(_message.Message):
    __slots__ = ("schedules",)
    SCHEDULES_FIELD_NUMBER: _ClassVar[int]
    schedules: _containers.RepeatedCompositeFieldContainer[Schedule]
    def __init__(self, schedules: _Optional[_Iterable[_Union[Schedule, _Mapping]]] = ...) -> None: ...

class PauseRequest(_message.Message):
    __slots__ = ("product",)
    PRODUCT_FIELD_NUMBER: _ClassVar[int]
    product: str
    def __init__(self, product: _Optional[str] = ...) -> None: ...

class PauseState(_message.Message):
    __slots__ = ("global_paused", "paused_products")
    GLOBAL_PAUSED_FIELD_NUMBER: _ClassVar[int]
    PAUSED_PRODUCTS_FIELD_NUMBER: _ClassVar[int]
    global_paused: bool
    paused_products: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, global_paused: _Optional[bool] = ..., paused_products: _Optional[_Iterable[str]] = ...) -> None: ...

class Webhook(_message.Message):
    __slots__ = ("webhook_id", "conversation_id", "secret")
    WEBHOOK_ID_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    webhook_id: str
    conversation_id: str
    secret: str
    def __init__(self, webhook_id: _Optional[str] = ..., conversation_id: _Optional[str] = ..., secret: _Optional[str] = ...) -> None: ...

class CreateWebhookRequest(_message.Message):
    __slots__ = ("conversation_id",)
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    def __init__(self, conversation_id: _Optional[str] = ...) -> None: ...

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
    __slots__ = ("delivery_id",)
    DELIVERY_ID_FIELD_NUMBER: _ClassVar[int]
    delivery_id: str
    def __init__(self, delivery_id: _Optional[str] = ...) -> None: ...
