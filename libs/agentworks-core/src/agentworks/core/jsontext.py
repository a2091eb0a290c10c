"""JSON documents on the wire: schemas, inputs, results, variables, data parts and
attributes travel as JSON text in `*_json` proto fields.

Text keeps what a `google.protobuf.Struct` would lose (a number's type: 3 stays 3, and
integers of any size stay exact), so each side converts once: `dumps` where a value is
put on the wire, `loads` where it is taken off, and nothing in between. "" means none.
"""

from __future__ import annotations

import json
from typing import Any

from agentworks.core.errors import InvalidArgument

_NONE: Any = object()


def dumps(value: Any) -> str:
    """`value` as compact JSON text; "" for None (no document)."""
    return "" if value is None else dumps_value(value)


def dumps_value(value: Any) -> str:
    """`value` as JSON text where None is the document `null`, not "none"."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class _NonFinite:
    """Where Python's `json` found NaN, Infinity or -Infinity, which JSON has not."""

    def __init__(self, name: str) -> None:
        self.name = name


def _path_to(value: Any, marker: _NonFinite, path: str = "") -> str | None:
    if value is marker:
        return path
    items = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for key, item in items:
        found = _path_to(
            item, marker, f"{path}.{key}" if isinstance(key, str) else f"{path}[{key}]"
        )
        if found is not None:
            return found
    return None


def loads(text: str, field: str, default: Any = _NONE) -> Any:
    """The JSON document in `text`; `default` when it is "" (InvalidArgument without one).

    Refusals name `field` (and the path inside it) and say where the text stops being
    JSON. NaN and Infinity, which Python's `json` would accept, are refused: they are
    not JSON numbers.
    """
    if not text:
        if default is _NONE:
            raise InvalidArgument(f"{field} is required: send a JSON document as text")
        return default
    found: list[_NonFinite] = []

    def non_finite(name: str) -> _NonFinite:
        found.append(_NonFinite(name))
        return found[-1]

    try:
        value = json.loads(text, parse_constant=non_finite)
    except json.JSONDecodeError as exc:
        raise InvalidArgument(
            f"{field} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except ValueError as exc:  # an integer too long to read
        raise InvalidArgument(f"{field}: {exc}") from None
    except RecursionError:
        raise InvalidArgument(f"{field} nests objects and arrays too deep; flatten it") from None
    if found:
        where = _path_to(value, found[0]) or ""
        raise InvalidArgument(
            f"{field}{where}: {found[0].name} is not a finite number; JSON numbers are finite"
        )
    return value


def loads_object(text: str, field: str) -> dict[str, Any]:
    """A JSON object from `text` ("" is `{}`); InvalidArgument for any other JSON."""
    value = loads(text, field, default={})
    if not isinstance(value, dict):
        raise InvalidArgument(f"{field} must be a JSON object, got {json_type(value)}")
    return value


def json_type(value: Any) -> str:
    """The JSON name of a value's type: object, array, string, number, boolean or null."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"
