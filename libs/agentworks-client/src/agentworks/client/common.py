"""Helpers shared by the typed clients: target references, structs, deadlines."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from google.protobuf import struct_pb2

from agentworks.client.checks import EXACT_INTEGERS, check_json_depth
from agentworks.common.v1 import common_pb2

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


def target_str(ref: common_pb2.TargetRef) -> str:
    """A TargetRef as `crew:<name>` / `workflow:<id>`."""
    return f"{_KIND_NAMES.get(ref.kind, 'unknown')}:{ref.name}"


def _inexact(value: Any) -> int | None:
    """The first integer in `value` (JSON) that a double would round, if any."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, bool):
            continue
        if isinstance(item, int) and abs(item) > EXACT_INTEGERS:
            return item
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return None


def struct(value: Mapping[str, Any] | None, what: str = "value") -> struct_pb2.Struct | None:
    """`value` as a Struct; ValueError (naming `what`) for what a Struct cannot carry
    exactly or back: integers past ±2^53, nesting past the services' depth limit."""
    if value is None:
        return None
    check_json_depth(value, what)  # InvalidArgument, as the service would answer
    inexact = _inexact(value)
    if inexact is not None:
        raise ValueError(
            f"{what}: {inexact} is too large to pass exactly (numbers travel as doubles, "
            "exact up to ±2^53): send it as a string"
        )
    s = struct_pb2.Struct()
    s.update(dict(value))
    return s
