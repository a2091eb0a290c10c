"""Measure before walking (B8): every messaging request is refused from its size as sent
before it is parsed (`add_to_server`: each method's largest legal request), and from its
fields' sizes (a string's length, a repeated field's count, a few parts' encoded size)
before anything walks or converts them (`measured`).

A `Send` of 1.5 M parts (7.5 MB, under gRPC's 8 MiB cap) used to be turned into 1.5 M
dicts, walked for NUL characters and serialised as JSON before the 256 KiB rule refused
it: seconds of the serving loop and a gigabyte of memory per request. Here the count of
a repeated field is read without touching its items (`len` of the container), and only a
count that can still be legal is measured further. A field with a rule in the proto
(`buf.validate`: text, payload, keys, counts, ranges) was checked before the handler by
the server's one validator (`agentworks.server.validation`), so it is not measured
again; the rest get the generic bounds below. Parts as JSON and NUL characters stay in
`service.rules` and run on what passed.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import grpc
from buf.validate import validate_pb2
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from agentworks.core.errors import InvalidArgument, Reason, rule_meta
from agentworks.core.limits import (
    MAX_ATTRIBUTES_BYTES,
    MAX_PARTS_BYTES,
    MAX_PAYLOAD_BYTES,
    MAX_REQUEST_BYTES,
    MAX_TEXT_BYTES,
)
from agentworks.messaging.v1 import messaging_pb2 as pb

# Every part is non-empty (`{"text": "x"}` at least), so each takes at least 15 bytes of
# the parts' JSON (with the ", " between parts): more parts than this cannot be legal.
MIN_PART_JSON_BYTES = len('{"text": "x"}, ')
MAX_PARTS = MAX_PARTS_BYTES // MIN_PART_JSON_BYTES
# Any string field without a rule in the proto: ids, cursors, names (all far shorter).
MAX_FIELD_CHARS = 1024
# Items of a repeated field without a rule in the proto.
MAX_ITEMS = 1024


# The rules that bound a field's size; a field whose rule states only a minimum or a
# pattern (e.g. `min_len: 1` on an id) is still measured here.
_BOUNDING = {
    "string": ("max_len", "max_bytes", "len", "len_bytes", "const"),
    "bytes": ("max_len", "len", "const"),
    "repeated": ("max_items",),
}


@functools.cache
def _ruled(field: FieldDescriptor) -> bool:
    """Whether the proto bounds this field's size (checked by the validator already)."""
    options = field.GetOptions()
    if not options.HasExtension(validate_pb2.field):
        return False
    rules = options.Extensions[validate_pb2.field]
    kind = rules.WhichOneof("type")
    if kind not in _BOUNDING:
        return kind is not None and field.type not in (
            FieldDescriptor.TYPE_STRING,
            FieldDescriptor.TYPE_BYTES,
        )
    typed = getattr(rules, kind)
    return any(typed.HasField(name) for name in _BOUNDING[kind])


def _refuse(path: str, what: str, limit: int, unit: str) -> InvalidArgument:
    return InvalidArgument(
        f"{path} {what}; the limit is {limit} {unit} (refused before it was read)",
        reason=Reason.FIELD_RULE,
        metadata=rule_meta(path, "measured_size", limit),
    )


def measure(message: Message, prefix: str = "") -> None:
    """Refuse `message` if a field is over its limit, reading sizes only (B8)."""
    for field, value in message.ListFields():
        path = prefix + field.name
        if field.is_repeated:
            count = len(value)  # the container's length: no item is touched
            limit = MAX_PARTS if field.name == "parts" else MAX_ITEMS
            if count > limit and (field.name == "parts" or not _ruled(field)):
                raise _refuse(path, f"has too many items: got {count}", limit, "items")
            if field.name == "parts":
                _measure_parts(path, value)
            elif field.type == FieldDescriptor.TYPE_MESSAGE:
                for i, item in enumerate(value):
                    measure(item, f"{path}[{i}].")
            elif field.type in (FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BYTES):
                for i, item in enumerate(value):
                    _measure_scalar(f"{path}[{i}]", field.name, item)
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            measure(value, path + ".")
        elif field.type in (FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BYTES) and not (
            _ruled(field)
        ):
            _measure_scalar(path, field.name, value)


def _measure_scalar(path: str, name: str, value: str | bytes) -> None:
    limit = MAX_FIELD_CHARS
    if len(value) > limit:
        if isinstance(value, bytes):
            raise _refuse(path, f"is {len(value)} bytes", limit, "bytes")
        # Encoding costs what the request's size (bounded before parsing) allows.
        raise _refuse(path, f"is {len(value.encode())} bytes", limit, "bytes")


def _measure_parts(path: str, parts: Any) -> None:
    # At most MAX_PARTS of them here: their encoded size is cheap to ask. A part's JSON is
    # at least its encoded size but for data_json's own spacing: parts sent with more than
    # the limit are refused as sent, before their JSON is parsed.
    sent = sum(part.ByteSize() for part in parts)
    if sent > MAX_PARTS_BYTES:
        raise _refuse(path, f"are {sent} bytes as sent", MAX_PARTS_BYTES, "bytes")


_Servicer = TypeVar("_Servicer", bound=type)


def measured(cls: _Servicer) -> _Servicer:
    """Class decorator: every MessagingService RPC of `cls` measures its request first."""
    for method in pb.DESCRIPTOR.services_by_name["MessagingService"].methods:
        original = getattr(cls, method.name)
        setattr(cls, method.name, _measuring(original))
    return cls


def _measuring(handler: Callable[..., Any]) -> Callable[..., Any]:
    if inspect.isasyncgenfunction(handler):  # a server stream (Subscribe): one request too

        @functools.wraps(handler)
        async def streaming(self: Any, request: Message, context: Any) -> AsyncIterator[Any]:
            measure(request)
            async for item in handler(self, request, context):
                yield item

        return streaming

    @functools.wraps(handler)
    async def wrapper(self: Any, request: Message, context: Any) -> Any:
        measure(request)
        return await handler(self, request, context)

    return wrapper


# The largest request message messaging receives at all (the gRPC server's receive
# limit, B8): a larger one is refused by gRPC from its length prefix, before Python sees
# a byte of it. The largest legal request is an EnqueueDeliveries, which its callers cut
# at about 2 MiB of text plus one delivery (the scheduler's firing.MAX_ENQUEUE_BYTES).
RECEIVE_BYTES = MAX_REQUEST_BYTES

# Room for a request's ids, keys, cursors and target beside its big fields.
SMALL_FIELDS_BYTES = 8 * 1024
_SEND_BYTES = MAX_TEXT_BYTES + MAX_PARTS_BYTES + SMALL_FIELDS_BYTES
# The largest legal request of each method, as sent; parsing a larger one would cost
# what its size says (1.5 M parts: 0.1 s of the serving loop) only to refuse it.
REQUEST_BYTES: dict[str, int] = {
    "Send": _SEND_BYTES,
    "SendMessage": _SEND_BYTES,
    "SendFromTurn": _SEND_BYTES,
    "EnqueueDelivery": MAX_TEXT_BYTES
    + MAX_PAYLOAD_BYTES
    + MAX_ATTRIBUTES_BYTES
    + SMALL_FIELDS_BYTES,
    # Up to 500 deliveries of a platform service: what the server receives at most.
    "EnqueueDeliveries": RECEIVE_BYTES,
}
# Every other method: targets, reads, listings, claims (100 targets), turn ends.
OTHER_REQUEST_BYTES = 64 * 1024


def _bounded(method: str, parse: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    limit = REQUEST_BYTES.get(method, OTHER_REQUEST_BYTES)

    def deserialize(data: bytes) -> Any:
        if len(data) > limit:
            # The interceptor's parser (agentworks.server.validation) answers with it.
            raise InvalidArgument(
                f"{method}'s request is {len(data)} bytes as sent; the limit is {limit} "
                "bytes (refused before it was read)",
                reason=Reason.REQUEST_LIMIT,
                metadata={"limit": str(limit)},
            )
        return parse(data)

    return deserialize


def add_to_server(servicer: Any, server: grpc.aio.Server) -> None:
    """`add_MessagingServiceServicer_to_server`, with each method's request refused from
    its size before it is parsed (B8)."""
    service = pb.DESCRIPTOR.services_by_name["MessagingService"]
    handlers = {}
    for method in service.methods:
        request = getattr(pb, method.input_type.name)
        response = getattr(pb, method.output_type.name)
        make = (
            grpc.unary_stream_rpc_method_handler  # Subscribe (N1)
            if method.server_streaming
            else grpc.unary_unary_rpc_method_handler
        )
        handlers[method.name] = make(
            getattr(servicer, method.name),
            request_deserializer=_bounded(method.name, request.FromString),
            response_serializer=response.SerializeToString,
        )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(service.full_name, handlers),)
    )
    server.add_registered_method_handlers(service.full_name, handlers)
