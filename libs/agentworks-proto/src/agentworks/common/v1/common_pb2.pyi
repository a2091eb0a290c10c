import datetime

from buf.validate import validate_pb2 as _validate_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TargetKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TARGET_KIND_UNSPECIFIED: _ClassVar[TargetKind]
    TARGET_KIND_CREW: _ClassVar[TargetKind]
    TARGET_KIND_WORKFLOW: _ClassVar[TargetKind]
TARGET_KIND_UNSPECIFIED: TargetKind
TARGET_KIND_CREW: TargetKind
TARGET_KIND_WORKFLOW: TargetKind

class TargetRef(_message.Message):
    __slots__ = ("kind", "name")
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    kind: TargetKind
    name: str
    def __init__(self, kind: _Optional[_Union[TargetKind, str]] = ..., name: _Optional[str] = ...) -> None: ...

class Part(_message.Message):
    __slots__ = ("text", "data_json")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    DATA_JSON_FIELD_NUMBER: _ClassVar[int]
    text: str
    data_json: str
    def __init__(self, text: _Optional[str] = ..., data_json: _Optional[str] = ...) -> None: ...

class Heartbeat(_message.Message):
    __slots__ = ("at",)
    AT_FIELD_NUMBER: _ClassVar[int]
    at: _timestamp_pb2.Timestamp
    def __init__(self, at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
