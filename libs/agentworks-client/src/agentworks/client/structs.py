"""JSON from protobuf `Struct`/`Value` messages, as the caller wrote it.

`google.protobuf.Struct` has one number type (a double), so `{"n": 3}` comes back from
the wire as `{"n": 3.0}`; `plain` turns whole numbers back into ints (below 2**53,
where doubles are exact). Used wherever a service, the gateway or a runtime hands such
JSON to people or code: inputs, outputs, variables, delivery attributes.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import json_format


def plain(value: Any) -> Any:
    """`value` (from `MessageToDict`) with whole-number floats as ints, at any depth."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def struct_json(message: Any) -> Any:
    """A `Struct`, `ListValue` or `Value` message as plain JSON."""
    return plain(json_format.MessageToDict(message))
