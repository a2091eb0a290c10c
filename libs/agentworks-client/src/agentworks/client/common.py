"""Helpers shared by the typed clients: target references, JSON documents, deadlines."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from agentworks.common.v1 import common_pb2
from agentworks.core.checks import check_json_depth
from agentworks.core.errors import InvalidArgument, Reason
from agentworks.core.jsontext import dumps

TargetKind = common_pb2.TargetKind
_KINDS = {"crew": TargetKind.TARGET_KIND_CREW, "workflow": TargetKind.TARGET_KIND_WORKFLOW}
_KIND_NAMES = {v: k for k, v in _KINDS.items()}

# Long-polls get this much longer than they wait, so the deadline never cuts a wait short.
LONG_POLL_SLACK_SECONDS = 10.0


def target_ref(target: str | common_pb2.TargetRef) -> common_pb2.TargetRef:
    """`crew:demo` / `workflow:wf-1` (or a TargetRef) as a TargetRef."""
    if isinstance(target, common_pb2.TargetRef):
        return target
    kind, sep, name = target.partition(":")
    if not sep or kind not in _KINDS:
        raise ValueError(f"target {target!r} must look like crew:<name> or workflow:<id>")
    return common_pb2.TargetRef(kind=_KINDS[kind], name=name)


def aware_timestamp(value: datetime) -> Timestamp:
    """An aware datetime as a Timestamp. A naive one is refused: protobuf would read it
    as UTC, which is rarely what a local `datetime.now()` meant."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(
            f"{value.isoformat()} has no time zone: give an aware datetime, e.g. "
            "datetime.now(UTC) + timedelta(minutes=5), or one with tzinfo=ZoneInfo(...)"
        )
    ts = Timestamp()
    ts.FromDatetime(value)
    return ts


def target_str(ref: common_pb2.TargetRef) -> str:
    """A TargetRef as `crew:<name>` / `workflow:<id>`."""
    return f"{_KIND_NAMES.get(ref.kind, 'unknown')}:{ref.name}"


def json_document(value: Mapping[str, Any] | None, what: str = "value") -> str:
    """`value` as the JSON text of a `*_json` field ("" for None), refusing what the
    services would (nesting past the depth limit) with the same InvalidArgument."""
    if value is None:
        return ""
    check_json_depth(value, what)
    try:
        return dumps(dict(value))
    except ValueError:  # NaN or Infinity somewhere: not JSON
        raise InvalidArgument(
            f"{_non_finite(value, what)}: not a finite number (NaN or Infinity); "
            "JSON numbers are finite",
            reason=Reason.MALFORMED,
            metadata={"field": what},
        ) from None
    except TypeError as exc:  # a value JSON has no form for (bytes, a set, ...)
        raise InvalidArgument(
            f"{what} is not JSON: {exc}", reason=Reason.MALFORMED, metadata={"field": what}
        ) from None


def _non_finite(value: Any, path: str) -> str:
    """The path of the first NaN or Infinity in `value` (JSON of Python objects)."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return where
        if isinstance(item, Mapping):
            stack.extend((v, f"{where}.{k}") for k, v in reversed(list(item.items())))
        elif isinstance(item, list | tuple):
            stack.extend((v, f"{where}[{i}]") for i, v in reversed(list(enumerate(item))))
    return path
