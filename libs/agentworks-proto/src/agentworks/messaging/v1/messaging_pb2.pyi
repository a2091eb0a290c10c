import datetime

from agentworks.common.v1 import common_pb2 as _common_pb2
from buf.validate import validate_pb2 as _validate_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Channel(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CHANNEL_UNSPECIFIED: _ClassVar[Channel]
    CHANNEL_PROGRAMMATIC: _ClassVar[Channel]
    CHANNEL_APP: _ClassVar[Channel]

class DeliveryKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DELIVERY_KIND_UNSPECIFIED: _ClassVar[DeliveryKind]
    DELIVERY_KIND_MESSAGE: _ClassVar[DeliveryKind]
    DELIVERY_KIND_WAKE_UP: _ClassVar[DeliveryKind]
    DELIVERY_KIND_SCHEDULE: _ClassVar[DeliveryKind]
    DELIVERY_KIND_WEBHOOK: _ClassVar[DeliveryKind]
    DELIVERY_KIND_FUNCTION_COMPLETED: _ClassVar[DeliveryKind]
    DELIVERY_KIND_CONVERSATION_REPLY: _ClassVar[DeliveryKind]

class DeliveryStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DELIVERY_STATUS_UNSPECIFIED: _ClassVar[DeliveryStatus]
    DELIVERY_STATUS_PENDING: _ClassVar[DeliveryStatus]
    DELIVERY_STATUS_IN_TURN: _ClassVar[DeliveryStatus]
    DELIVERY_STATUS_HANDLED: _ClassVar[DeliveryStatus]
    DELIVERY_STATUS_INTERRUPTED: _ClassVar[DeliveryStatus]
CHANNEL_UNSPECIFIED: Channel
CHANNEL_PROGRAMMATIC: Channel
CHANNEL_APP: Channel
DELIVERY_KIND_UNSPECIFIED: DeliveryKind
DELIVERY_KIND_MESSAGE: DeliveryKind
DELIVERY_KIND_WAKE_UP: DeliveryKind
DELIVERY_KIND_SCHEDULE: DeliveryKind
DELIVERY_KIND_WEBHOOK: DeliveryKind
DELIVERY_KIND_FUNCTION_COMPLETED: DeliveryKind
DELIVERY_KIND_CONVERSATION_REPLY: DeliveryKind
DELIVERY_STATUS_UNSPECIFIED: DeliveryStatus
DELIVERY_STATUS_PENDING: DeliveryStatus
DELIVERY_STATUS_IN_TURN: DeliveryStatus
DELIVERY_STATUS_HANDLED: DeliveryStatus
DELIVERY_STATUS_INTERRUPTED: DeliveryStatus

class Capabilities(_message.Message):
    __slots__ = ("free_text_ask", "a2a_card")
    FREE_TEXT_ASK_FIELD_NUMBER: _ClassVar[int]
    A2A_CARD_FIELD_NUMBER: _ClassVar[int]
    free_text_ask: bool
    a2a_card: bool
    def __init__(self, free_text_ask: _Optional[bool] = ..., a2a_card: _Optional[bool] = ...) -> None: ...

class Target(_message.Message):
    __slots__ = ("ref", "owner", "capabilities", "created_at", "updated_at")
    REF_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    ref: _common_pb2.TargetRef
    owner: str
    capabilities: Capabilities
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    def __init__(self, ref: _Optional[_Union[_common_pb2.TargetRef, _Mapping]] = ..., owner: _Optional[str] = ..., capabilities: _Optional[_Union[Capabilities, _Mapping]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class RegisterTargetRequest(_message.Message):
    __slots__ = ("ref", "owner", "capabilities")
    REF_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    ref: _common_pb2.TargetRef
    owner: str
    capabilities: Capabilities
    def __init__(self, ref: _Optional[_Union[_common_pb2.TargetRef, _Mapping]] = ..., owner: _Optional[str] = ..., capabilities: _Optional[_Union[Capabilities, _Mapping]] = ...) -> None: ...

class UpdateTargetRequest(_message.Message):
    __slots__ = ("ref", "capabilities")
    REF_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    ref: _common_pb2.TargetRef
    capabilities: Capabilities
    def __init__(self, ref: _Optional[_Union[_common_pb2.TargetRef, _Mapping]] = ..., capabilities: _Optional[_Union[Capabilities, _Mapping]] = ...) -> None: ...

class GetTargetRequest(_message.Message):
    __slots__ = ("ref",)
    REF_FIELD_NUMBER: _ClassVar[int]
    ref: _common_pb2.TargetRef
    def __init__(self, ref: _Optional[_Union[_common_pb2.TargetRef, _Mapping]] = ...) -> None: ...

class ListTargetsRequest(_message.Message):
    __slots__ = ("after", "limit")
    AFTER_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    after: str
    limit: int
    def __init__(self, after: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListTargetsResponse(_message.Message):
    __slots__ = ("targets", "next_cursor")
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    NEXT_CURSOR_FIELD_NUMBER: _ClassVar[int]
    targets: _containers.RepeatedCompositeFieldContainer[Target]
    next_cursor: str
    def __init__(self, targets: _Optional[_Iterable[_Union[Target, _Mapping]]] = ..., next_cursor: _Optional[str] = ...) -> None: ...

class SendRequest(_message.Message):
    __slots__ = ("target", "inbox_id", "text", "parts", "submission_id", "channel")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    INBOX_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    PARTS_FIELD_NUMBER: _ClassVar[int]
    SUBMISSION_ID_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    target: _common_pb2.TargetRef
    inbox_id: str
    text: str
    parts: _containers.RepeatedCompositeFieldContainer[_common_pb2.Part]
    submission_id: str
    channel: Channel
    def __init__(self, target: _Optional[_Union[_common_pb2.TargetRef, _Mapping]] = ..., inbox_id: _Optional[str] = ..., text: _Optional[str] = ..., parts: _Optional[_Iterable[_Union[_common_pb2.Part, _Mapping]]] = ..., submission_id: _Optional[str] = ..., channel: _Optional[_Union[Channel, str]] = ...) -> None: ...

class SendReceipt(_message.Message):
    __slots__ = ("accepted", "message_id", "conversation_id", "inbox_id", "cursor")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    INBOX_ID_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    accepted: bool
    message_id: str
    conversation_id: str
    inbox_id: str
    cursor: str
    def __init__(self, accepted: _Optional[bool] = ..., message_id: _Optional[str] = ..., conversation_id: _Optional[str] = ..., inbox_id: _Optional[str] = ..., cursor: _Optional[str] = ...) -> None: ...

class Message(_message.Message):
    __slots__ = ("message_id", "conversation_id", "inbox_id", "sender", "text", "parts", "created_at", "direction")
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    INBOX_ID_FIELD_NUMBER: _ClassVar[int]
    SENDER_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    PARTS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    DIRECTION_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    conversation_id: str
    inbox_id: str
    sender: str
    text: str
    parts: _containers.RepeatedCompositeFieldContainer[_common_pb2.Part]
    created_at: _timestamp_pb2.Timestamp
    direction: str
    def __init__(self, message_id: _Optional[str] = ..., conversation_id: _Optional[str] = ..., inbox_id: _Optional[str] = ..., sender: _Optional[str] = ..., text: _Optional[str] = ..., parts: _Optional[_Iterable[_Union[_common_pb2.Part, _Mapping]]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., direction: _Optional[str] = ...) -> None: ...

class ReadRequest(_message.Message):
    __slots__ = ("inbox_id", "after", "limit", "wait_seconds", "newest")
    INBOX_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    WAIT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    NEWEST_FIELD_NUMBER: _ClassVar[int]
    inbox_id: str
    after: str
    limit: int
    wait_seconds: int
    newest: bool
    def __init__(self, inbox_id: _Optional[str] = ..., after: _Optional[str] = ..., limit: _Optional[int] = ..., wait_seconds: _Optional[int] = ..., newest: _Optional[bool] = ...) -> None: ...

class SubscribeRequest(_message.Message):
    __slots__ = ("inbox_id", "after", "heartbeat_seconds")
    INBOX_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    inbox_id: str
    after: str
    heartbeat_seconds: int
    def __init__(self, inbox_id: _Optional[str] = ..., after: _Optional[str] = ..., heartbeat_seconds: _Optional[int] = ...) -> None: ...

class InboxEvent(_message.Message):
    __slots__ = ("message", "heartbeat", "cursor")
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    message: Message
    heartbeat: _common_pb2.Heartbeat
    cursor: str
    def __init__(self, message: _Optional[_Union[Message, _Mapping]] = ..., heartbeat: _Optional[_Union[_common_pb2.Heartbeat, _Mapping]] = ..., cursor: _Optional[str] = ...) -> None: ...

class ReadResponse(_message.Message):
    __slots__ = ("messages", "next_cursor")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    NEXT_CURSOR_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    next_cursor: str
    def __init__(self, messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ..., next_cursor: _Optional[str] = ...) -> None: ...

class Delivery(_message.Message):
    __slots__ = ("delivery_id", "conversation_id", "kind", "status", "message", "text", "payload", "attributes_json", "turn_id", "created_at", "turn_error")
    DELIVERY_ID_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_JSON_FIELD_NUMBER: _ClassVar[int]
    TURN_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    TURN_ERROR_FIELD_NUMBER: _ClassVar[int]
    delivery_id: str
    conversation_id: str
    kind: DeliveryKind
    status: DeliveryStatus
    message: Message
    text: str
    payload: bytes
    attributes_json: str
    turn_id: str
    created_at: _timestamp_pb2.Timestamp
    turn_error: str
    def __init__(self, delivery_id: _Optional[str] = ..., conversation_id: _Optional[str] = ..., kind: _Optional[_Union[DeliveryKind, str]] = ..., status: _Optional[_Union[DeliveryStatus, str]] = ..., message: _Optional[_Union[Message, _Mapping]] = ..., text: _Optional[str] = ..., payload: _Optional[bytes] = ..., attributes_json: _Optional[str] = ..., turn_id: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., turn_error: _Optional[str] = ...) -> None: ...

class GetTranscriptRequest(_message.Message):
    __slots__ = ("conversation_id", "inbox_id", "after", "limit", "newest")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    INBOX_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    NEWEST_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    inbox_id: str
    after: str
    limit: int
    newest: bool
    def __init__(self, conversation_id: _Optional[str] = ..., inbox_id: _Optional[str] = ..., after: _Optional[str] = ..., limit: _Optional[int] = ..., newest: _Optional[bool] = ...) -> None: ...

class TranscriptEntry(_message.Message):
    __slots__ = ("message", "delivery")
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_FIELD_NUMBER: _ClassVar[int]
    message: Message
    delivery: Delivery
    def __init__(self, message: _Optional[_Union[Message, _Mapping]] = ..., delivery: _Optional[_Union[Delivery, _Mapping]] = ...) -> None: ...

class GetTranscriptResponse(_message.Message):
    __slots__ = ("entries", "next_cursor", "target", "inbox_id", "conversation_id")
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_CURSOR_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    INBOX_ID_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[TranscriptEntry]
    next_cursor: str
    target: _common_pb2.TargetRef
    inbox_id: str
    conversation_id: str
    def __init__(self, entries: _Optional[_Iterable[_Union[TranscriptEntry, _Mapping]]] = ..., next_cursor: _Optional[str] = ..., target: _Optional[_Union[_common_pb2.TargetRef, _Mapping]] = ..., inbox_id: _Optional[str] = ..., conversation_id: _Optional[str] = ...) -> None: ...

class ListConversationsRequest(_message.Message):
    __slots__ = ("target", "after", "limit", "since")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    target: _common_pb2.TargetRef
    after: str
    limit: int
    since: str
    def __init__(self, target: _Optional[_Union[_common_pb2.TargetRef, _Mapping]] = ..., after: _Optional[str] = ..., limit: _Optional[int] = ..., since: _Optional[str] = ...) -> None: ...

class ConversationSummary(_message.Message):
    __slots__ = ("conversation_id", "inbox_id", "principal", "target", "started_by", "created_at", "message_count", "last_message", "latest_cursor", "new_messages")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    INBOX_ID_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    STARTED_BY_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    LAST_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LATEST_CURSOR_FIELD_NUMBER: _ClassVar[int]
    NEW_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    inbox_id: str
    principal: str
    target: _common_pb2.TargetRef
    started_by: str
    created_at: _timestamp_pb2.Timestamp
    message_count: int
    last_message: Message
    latest_cursor: str
    new_messages: int
    def __init__(self, conversation_id: _Optional[str] = ..., inbox_id: _Optional[str] = ..., principal: _Optional[str] = ..., target: _Optional[_Union[_common_pb2.TargetRef, _Mapping]] = ..., started_by: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., message_count: _Optional[int] = ..., last_message: _Optional[_Union[Message, _Mapping]] = ..., latest_cursor: _Optional[str] = ..., new_messages: _Optional[int] = ...) -> None: ...

class ListConversationsResponse(_message.Message):
    __slots__ = ("conversations", "next_cursor", "since_cursor")
    CONVERSATIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_CURSOR_FIELD_NUMBER: _ClassVar[int]
    SINCE_CURSOR_FIELD_NUMBER: _ClassVar[int]
    conversations: _containers.RepeatedCompositeFieldContainer[ConversationSummary]
    next_cursor: str
    since_cursor: str
    def __init__(self, conversations: _Optional[_Iterable[_Union[ConversationSummary, _Mapping]]] = ..., next_cursor: _Optional[str] = ..., since_cursor: _Optional[str] = ...) -> None: ...

class Turn(_message.Message):
    __slots__ = ("turn_id", "conversation_id", "target", "reply_inbox_id", "deliveries", "lease_expires_at", "capability", "traceparent")
    TURN_ID_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    REPLY_INBOX_ID_FIELD_NUMBER: _ClassVar[int]
    DELIVERIES_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    CAPABILITY_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    turn_id: str
    conversation_id: str
    target: _common_pb2.TargetRef
    reply_inbox_id: str
    deliveries: _containers.RepeatedCompositeFieldContainer[Delivery]
    lease_expires_at: _timestamp_pb2.Timestamp
    capability: str
    traceparent: str
    def __init__(self, turn_id: _Optional[str] = ..., conversation_id: _Optional[str] = ..., target: _Optional[_Union[_common_pb2.TargetRef, _Mapping]] = ..., reply_inbox_id: _Optional[str] = ..., deliveries: _Optional[_Iterable[_Union[Delivery, _Mapping]]] = ..., lease_expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., capability: _Optional[str] = ..., traceparent: _Optional[str] = ...) -> None: ...

class ClaimTurnRequest(_message.Message):
    __slots__ = ("targets", "wait_seconds", "lease_seconds")
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    WAIT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    LEASE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    targets: _containers.RepeatedCompositeFieldContainer[_common_pb2.TargetRef]
    wait_seconds: int
    lease_seconds: int
    def __init__(self, targets: _Optional[_Iterable[_Union[_common_pb2.TargetRef, _Mapping]]] = ..., wait_seconds: _Optional[int] = ..., lease_seconds: _Optional[int] = ...) -> None: ...

class ClaimTurnResponse(_message.Message):
    __slots__ = ("turn",)
    TURN_FIELD_NUMBER: _ClassVar[int]
    turn: Turn
    def __init__(self, turn: _Optional[_Union[Turn, _Mapping]] = ...) -> None: ...

class HeartbeatTurnRequest(_message.Message):
    __slots__ = ("turn_id", "lease_seconds")
    TURN_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    turn_id: str
    lease_seconds: int
    def __init__(self, turn_id: _Optional[str] = ..., lease_seconds: _Optional[int] = ...) -> None: ...

class HeartbeatTurnResponse(_message.Message):
    __slots__ = ("lease_expires_at", "capability")
    LEASE_EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    CAPABILITY_FIELD_NUMBER: _ClassVar[int]
    lease_expires_at: _timestamp_pb2.Timestamp
    capability: str
    def __init__(self, lease_expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., capability: _Optional[str] = ...) -> None: ...

class SendMessageRequest(_message.Message):
    __slots__ = ("inbox_id", "text", "parts", "submission_id", "complete_turn_id")
    INBOX_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    PARTS_FIELD_NUMBER: _ClassVar[int]
    SUBMISSION_ID_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_TURN_ID_FIELD_NUMBER: _ClassVar[int]
    inbox_id: str
    text: str
    parts: _containers.RepeatedCompositeFieldContainer[_common_pb2.Part]
    submission_id: str
    complete_turn_id: str
    def __init__(self, inbox_id: _Optional[str] = ..., text: _Optional[str] = ..., parts: _Optional[_Iterable[_Union[_common_pb2.Part, _Mapping]]] = ..., submission_id: _Optional[str] = ..., complete_turn_id: _Optional[str] = ...) -> None: ...

class SendFromTurnRequest(_message.Message):
    __slots__ = ("target", "inbox_id", "text", "parts", "submission_id")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    INBOX_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    PARTS_FIELD_NUMBER: _ClassVar[int]
    SUBMISSION_ID_FIELD_NUMBER: _ClassVar[int]
    target: _common_pb2.TargetRef
    inbox_id: str
    text: str
    parts: _containers.RepeatedCompositeFieldContainer[_common_pb2.Part]
    submission_id: str
    def __init__(self, target: _Optional[_Union[_common_pb2.TargetRef, _Mapping]] = ..., inbox_id: _Optional[str] = ..., text: _Optional[str] = ..., parts: _Optional[_Iterable[_Union[_common_pb2.Part, _Mapping]]] = ..., submission_id: _Optional[str] = ...) -> None: ...

class CompleteTurnRequest(_message.Message):
    __slots__ = ("turn_id", "interrupted", "error")
    TURN_ID_FIELD_NUMBER: _ClassVar[int]
    INTERRUPTED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    turn_id: str
    interrupted: bool
    error: str
    def __init__(self, turn_id: _Optional[str] = ..., interrupted: _Optional[bool] = ..., error: _Optional[str] = ...) -> None: ...

class CompleteTurnResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class EnqueueDeliveryRequest(_message.Message):
    __slots__ = ("conversation_id", "kind", "text", "payload", "attributes_json", "idempotency_key")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_JSON_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    conversation_id: str
    kind: DeliveryKind
    text: str
    payload: bytes
    attributes_json: str
    idempotency_key: str
    def __init__(self, conversation_id: _Optional[str] = ..., kind: _Optional[_Union[DeliveryKind, str]] = ..., text: _Optional[str] = ..., payload: _Optional[bytes] = ..., attributes_json: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class EnqueueDeliveryResponse(_message.Message):
    __slots__ = ("delivery_id", "created")
    DELIVERY_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    delivery_id: str
    created: bool
    def __init__(self, delivery_id: _Optional[str] = ..., created: _Optional[bool] = ...) -> None: ...

class EnqueueDeliveriesRequest(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[EnqueueDeliveryRequest]
    def __init__(self, items: _Optional[_Iterable[_Union[EnqueueDeliveryRequest, _Mapping]]] = ...) -> None: ...

class EnqueueDeliveriesResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[EnqueueDeliveryResult]
    def __init__(self, results: _Optional[_Iterable[_Union[EnqueueDeliveryResult, _Mapping]]] = ...) -> None: ...

class EnqueueDeliveryResult(_message.Message):
    __slots__ = ("delivered", "error")
    DELIVERED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    delivered: EnqueueDeliveryResponse
    error: ItemError
    def __init__(self, delivered: _Optional[_Union[EnqueueDeliveryResponse, _Mapping]] = ..., error: _Optional[_Union[ItemError, _Mapping]] = ...) -> None: ...

class ItemError(_message.Message):
    __slots__ = ("code", "message", "reason", "metadata")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    reason: str
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ..., reason: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...
