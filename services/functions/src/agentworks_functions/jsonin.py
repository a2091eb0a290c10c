"""JSON taken in by the functions service, measured before it is read (B8, B10).

Every JSON field of a functions RPC (a Call's `inputs_json`, a declaration's schemas and
workflow variable defaults) is refused from its size before it is parsed: parsing 8 MiB
of JSON builds hundreds of megabytes of Python objects before any rule could say no. The
limits are the contract's own (`agentworks.core.limits`); the refusal names the field
and the limit.

Numbers (B10): an integer of more than `MAX_INTEGER_DIGITS` digits is refused in our own
words (Python's reader would refuse it with advice about `sys.set_int_max_str_digits`,
which a caller cannot act on). Send a longer number as a string.
"""

from __future__ import annotations

import re
import sys
from typing import Any

from agentworks.core.errors import InvalidArgument, Reason, rule_meta
from agentworks.core.jsontext import json_type, loads

# The longest integer a JSON input, schema or result may hold, in digits: Python's own
# bound for reading integers (sys.get_int_max_str_digits(), 4,300 by default), which
# keeps reading a number linear in its length.
MAX_INTEGER_DIGITS = sys.get_int_max_str_digits() or 4300

_LONG_INTEGER = re.compile(rf"-?\d{{{MAX_INTEGER_DIGITS + 1},}}")


def too_large(field: str, size: int, limit: int) -> InvalidArgument:
    verb = "are" if field == "inputs" else "is"
    return InvalidArgument(
        f"{field} {verb} larger than {limit} bytes as JSON ({size} bytes, refused before "
        "reading it)",
        reason=Reason.FIELD_RULE,
        metadata=rule_meta(field, "string.max_bytes", limit),
    )


def check_text_size(text: str | bytes, field: str, limit: int) -> None:
    """Refuse `text` over `limit` bytes (UTF-8) without reading it as JSON."""
    if len(text) > limit:  # at least one byte a character: over already
        size = len(text) if isinstance(text, bytes) else len(text.encode("utf-8", "replace"))
        raise too_large(field, size, limit)
    if isinstance(text, str) and len(text) * 4 > limit:  # may be over once encoded
        size = len(text.encode("utf-8", "replace"))
        if size > limit:
            raise too_large(field, size, limit)


def number_refusal(field: str, text: str | bytes) -> str | None:
    """Our words for an integer too long to read in `text`, or None if there is none."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    found = _LONG_INTEGER.search(text)
    if found is None:
        return None
    digits = len(found[0].lstrip("-"))
    return (
        f"{field} holds an integer of {digits} digits; numbers have at most "
        f"{MAX_INTEGER_DIGITS} digits (send a longer number as a string)"
    )


def loads_sized(text: str, field: str, limit: int, default: Any = None) -> Any:
    """The JSON document in `text` ("" is `default`), refused first when over `limit`
    bytes and, for integers too long to read, in our own words."""
    check_text_size(text, field, limit)
    try:
        return loads(text, field, default)
    except InvalidArgument as exc:
        words = number_refusal(field, text) if "digits" in exc.message else None
        if words is None:
            raise
        raise InvalidArgument(
            words,
            reason=Reason.REQUEST_LIMIT,
            metadata={"field": field, "limit": str(MAX_INTEGER_DIGITS)},
        ) from None


def loads_object_sized(text: str, field: str, limit: int) -> dict[str, Any]:
    """A JSON object from `text` ("" is `{}`), measured before it is read."""
    value = loads_sized(text, field, limit, default={})
    if not isinstance(value, dict):
        raise InvalidArgument(
            f"{field} must be a JSON object, got {json_type(value)}",
            reason=Reason.MALFORMED,
            metadata={"field": field},
        )
    return value
