"""A request's body, after the identity (B8): parsed, then checked against the field rules
its proto states (`buf.validate`, checked by protovalidate), before the handler runs.

The rules (sizes in bytes or characters, ranges, counts, required, patterns) are written
once, on the proto's fields; this is the one place that checks them, for every method of
every service. A refusal is INVALID_ARGUMENT with the reason FIELD_RULE and metadata
naming the field, the rule and the limit, worded for a person with one wording per kind
of rule ("text is 70001 bytes; the limit is 65536 bytes"). Patterns are RE2 (linear
time in the input).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import protovalidate
from buf.validate import validate_pb2
from google.protobuf.message import Message

from agentworks.core import errors

# One validator: it compiles each message type's rules once and keeps them.
_validator = protovalidate.Validator()


class _Unparsable:
    """A request message protobuf could not parse (too deeply nested, malformed bytes), or
    that a service's own parser refused (`AgentWorksError`, e.g. from its size as sent)."""

    def __init__(self, error: Exception) -> None:
        self.error = error


def lenient(deserializer: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    """Parse failures become a value the handler refuses with INVALID_ARGUMENT; raised
    inside gRPC they would end the call UNKNOWN, naming an internal exception."""
    if deserializer is None:
        return None

    def parse(data: bytes) -> Any:
        try:
            return deserializer(data)
        except Exception as exc:
            return _Unparsable(exc)

    return parse


def checked(request: Any) -> Any:
    """The parsed request, once it keeps its proto's field rules; else InvalidArgument."""
    if isinstance(request, _Unparsable):
        if isinstance(request.error, errors.AgentWorksError):
            raise request.error  # the service's parser said why, in its words
        raise errors.InvalidArgument(
            f"the request could not be parsed as the method's message: {request.error}",
            reason=errors.Reason.MALFORMED,
        )
    if isinstance(request, Message):  # not a handler's raw bytes
        refusal = field_rule_refusal(request)
        if refusal is not None:
            raise refusal
    return request


async def checked_stream(requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
    async for request in requests:
        yield checked(request)


def field_rule_refusal(message: Message) -> errors.InvalidArgument | None:
    """The refusal of the first field rule `message` breaks, None when it keeps them all
    (also for an item checked on its own, e.g. one delivery of a batch)."""
    violations = _validator.collect_violations(message, fail_fast=True)
    if not violations:
        return None
    violation = violations[0]
    proto = violation.proto
    elements = proto.field.elements if proto.field is not None else ()  # () for a message rule
    path, descriptor = _path(message, elements)
    rule_id = proto.rule_id or ""
    limit = violation.rule_value
    text = _wording(path, rule_id, limit, violation.field_value, descriptor, proto.message)
    numeric = isinstance(limit, int | float) and not isinstance(limit, bool)
    metadata = errors.rule_meta(path, rule_id, limit if numeric else None)
    low, high = _bounds(descriptor)
    if low is not None and high is not None and not rule_id.startswith("repeated."):
        metadata.update(min=str(low), max=str(high))  # a range, as checks.bounded says it
    return errors.InvalidArgument(text, reason=errors.Reason.FIELD_RULE, metadata=metadata)


def _path(message: Message, elements: Any) -> tuple[str, Any]:
    """`items[2].text` and the last field's descriptor, from a violation's field path."""
    path, descriptor, fields = "", None, message.DESCRIPTOR.fields_by_name
    for element in elements:
        path += ("." if path else "") + element.field_name
        if element.subscript is not None:
            path += f"[{element.subscript}]"
        descriptor = fields.get(element.field_name) if fields is not None else None
        kind = descriptor.message_type if descriptor is not None else None
        fields = kind.fields_by_name if kind is not None else None
    return path or "request", descriptor


# A value longer than this is not quoted in a refusal.
QUOTED_CHARS = 200

_UNITS = {
    "string.max_len": "characters",
    "string.max_bytes": "bytes",
    "bytes.max_len": "bytes",
}


def _wording(path: str, rule_id: str, limit: Any, value: Any, descriptor: Any, said: str) -> str:
    """The refusal's words, one wording per kind of rule: the field, what it must be, and
    what it was."""
    unit = _UNITS.get(rule_id)
    if unit is not None:
        size = len(value.encode()) if rule_id == "string.max_bytes" else len(value)
        return f"{path} is {size} {unit}; the limit is {limit} {unit}"
    if rule_id in ("string.min_len", "bytes.min_len") and limit == 1:
        return f"{path} is required (it is empty)"
    if rule_id == "string.pattern":
        if len(value) > QUOTED_CHARS:  # never echo a long input back (P6): its size says it
            size = len(value.encode())
            return f"{path} is {size} bytes; it must match the pattern {limit}"
        return f"{path} {value!r} does not match the pattern {limit}"
    low, high = _bounds(descriptor)
    if rule_id.startswith("repeated."):
        count, noun = len(value), path.rpartition(".")[2]
        if rule_id == "repeated.max_items":
            return f"{path}: at most {high} {noun} per request, got {count} {noun}"
        if rule_id == "repeated.min_items" and low == 1:
            return f"{path} is empty: give at least one item"
        return f"{path} has {count} items; it {said}"
    if low is not None and high is not None:  # 0 may mean the default (IGNORE_IF_ZERO_VALUE)
        return f"{path} must be between {low} and {high}, got {value}"
    return f"{path} {said}"


def _bounds(descriptor: Any) -> tuple[Any, Any]:
    """(low, high) of a field's range or item count rules, each None when not stated."""
    if descriptor is None:
        return None, None
    rules = descriptor.GetOptions().Extensions[validate_pb2.field]
    kind = rules.WhichOneof("type")
    if kind is None:
        return None, None
    typed = getattr(rules, kind)
    low_name, high_name = ("min_items", "max_items") if kind == "repeated" else ("gte", "lte")
    if typed.DESCRIPTOR.fields_by_name.get(high_name) is None:
        return None, None
    low = getattr(typed, low_name) if typed.HasField(low_name) else None
    high = getattr(typed, high_name) if typed.HasField(high_name) else None
    return low, high
