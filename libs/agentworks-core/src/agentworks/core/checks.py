"""Request checks every service makes the same way: bounds, NUL characters, cursors, retry
keys and their request hashes. Each rule and each refusal's wording is here once; the
refusals name the field."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from agentworks.core.errors import Conflict, InvalidArgument, Reason, rule_meta
from agentworks.core.limits import MAX_JSON_DEPTH

T = TypeVar("T")


def has_nul(value: Any) -> bool:
    """Whether a string, or any string or key in JSON, holds a NUL character, which
    PostgreSQL text and jsonb cannot store."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(has_nul(k) or has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(has_nul(v) for v in value)
    return False


def nul_at(value: Any, path: str) -> str | None:
    """Where in a string or JSON value a NUL character is (`path`, `path.key`,
    `path[0]`, or `path['key']` for a key holding one); None when there is none."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:  # iterative: a deep value must not exhaust Python's recursion
        item, where = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return where
        elif isinstance(item, dict):
            for key, child in reversed(item.items()):
                if isinstance(key, str) and "\x00" in key:
                    stack.append((key, f"{where}[{key!r}]"))
                else:
                    stack.append((child, f"{where}.{key}"))
        elif isinstance(item, list):
            stack.extend((child, f"{where}[{i}]") for i, child in reversed(list(enumerate(item))))
    return None


def nul_refusal(where: str) -> str:
    """The one wording of the NUL refusal (P6): PostgreSQL text and jsonb cannot hold it."""
    return f"{where} contains a NUL character (\\u0000), which cannot be stored; remove it"


def check_no_nul(value: T, field: str) -> T:
    """Refuse a NUL character anywhere in `value` (a string or JSON), naming the field
    and, inside JSON, where."""
    where = nul_at(value, field)
    if where is not None:
        raise InvalidArgument(
            nul_refusal(where), reason=Reason.FIELD_RULE, metadata=rule_meta(field, "no_nul")
        )
    return value


def check_retry_key(key: str, field: str = "submission_id") -> str:
    """A retry key a caller chooses (`submission_id`, a delivery's `idempotency_key`; C4,
    F6, S1): no NUL. Its length (MAX_SUBMISSION_ID characters, not bytes) is a rule of
    every retry-key field in the protos, checked before the handler."""
    check_no_nul(key, field)
    return key


def key_reused(key: str, what: str, field: str = "submission_id") -> Conflict:
    """The one refusal of a retry key that comes back with a different request (C4, F6,
    S1); `what` says what the key stands for (e.g. "a different message")."""
    return Conflict(
        f"{field} {key!r} was already used for {what}; a retry must repeat the same "
        f"request, and a new request needs a new {field}",
        reason=Reason.KEY_REUSED,
        metadata={"field": field},
    )


def is_retry(
    key: str,
    earlier_hash: str | None,
    request_hash: str,
    what: str,
    *,
    field: str = "submission_id",
    legacy_hash: str = "",
) -> bool:
    """Whether a request under retry key `key` repeats the one stored under it, whose
    request_hash is `earlier_hash` (None: nothing stored, so create it). The same request
    is a retry (True: answer with what it made); a different one is refused (key_reused).
    `legacy_hash` also matches: a hash of rows stored before request_hash was the one
    algorithm (the scheduler's)."""
    if earlier_hash is None:
        return False
    if earlier_hash == request_hash or (legacy_hash and earlier_hash == legacy_hash):
        return True
    raise key_reused(key, what, field)


def check_lower_case(value: str, field: str) -> str:
    """Refuse a new target or principal name with upper-case letters, naming the field
    (B10): names that differ only by case (`crew:DEMO` beside `crew:demo`) are
    look-alikes, a spoofing aid, so every new name is lower-case. Names stored before
    this rule keep working by their exact spelling, and where names are registered a
    new one that differs from a stored one only by case is refused."""
    if value != value.lower():
        raise InvalidArgument(
            f"{field} {value!r} has upper-case letters: names are lower-case, so that no "
            f"two differ only by case; use {value.lower()!r}",
            reason=Reason.FIELD_RULE,
            metadata=rule_meta(field, "lower_case"),
        )
    return value


def check_json_depth(value: T, field: str, limit: int = MAX_JSON_DEPTH) -> T:
    """Refuse JSON whose objects and arrays nest more than `limit` deep, naming the field.
    (`{}` is 1 deep.)"""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:  # iterative: a hostile value must not exhaust Python's recursion
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                raise InvalidArgument(
                    f"{field} nests objects and arrays more than {limit} deep; flatten it",
                    reason=Reason.FIELD_RULE,
                    metadata=rule_meta(field, "json_depth", limit),
                )
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return value


def bounded(value: int, field: str, low: int, high: int, default: int) -> int:
    """`value` within [low, high]; 0 (proto3's unset) means `default` when 0 is below
    the range."""
    if value == 0 and low > 0:
        return default
    if not low <= value <= high:
        raise InvalidArgument(
            f"{field} must be between {low} and {high}, got {value}",
            reason=Reason.FIELD_RULE,
            metadata={**rule_meta(field, "range"), "min": str(low), "max": str(high)},
        )
    return value


def encode_key_cursor(prefix: str, *key: str | int) -> str:
    """An opaque keyset cursor (V1): the sort key of the last item of a page."""
    raw = prefix + json.dumps(list(key), separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_key_cursor(
    cursor: str, prefix: str, types: tuple[type, ...], field: str = "after"
) -> tuple[Any, ...] | None:
    """The sort key behind a cursor of `encode_key_cursor` with these `types`; None for
    an empty cursor (the first page). Anything else is refused naming the field."""
    if not cursor:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        if not raw.startswith(prefix):
            raise ValueError(raw)
        key = json.loads(raw[len(prefix) :])
        if not (isinstance(key, list) and len(key) == len(types)):
            raise ValueError(raw)
        for part, kind in zip(key, types, strict=True):
            if type(part) is not kind or (isinstance(part, int) and not 0 <= part < 2**63):
                raise ValueError(raw)
        return tuple(key)
    except (ValueError, UnicodeDecodeError, binascii.Error):
        raise InvalidArgument(
            f"{field} {cursor!r} is not a cursor of this list: pass the next_cursor you "
            "received, or leave it empty to start at the first page",
            reason=Reason.INVALID_VALUE,
            metadata={"field": field},
        ) from None


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def encode_time_cursor(prefix: str, at: datetime, item_id: str) -> str:
    """A keyset cursor of a list sorted by (created_at, id): microseconds since the epoch
    (PostgreSQL's precision, so the key is exact) and the id."""
    delta = at - _EPOCH
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return encode_key_cursor(prefix, micros, item_id)


def decode_time_cursor(
    cursor: str, prefix: str, field: str = "after", *, uuid_id: bool = True
) -> tuple[datetime, Any] | None:
    """The (created_at, id) behind a cursor of `encode_time_cursor`, the id a UUID
    unless `uuid_id` is false; None when the cursor is empty."""
    key = decode_key_cursor(cursor, prefix, (int, str), field)
    if key is None:
        return None
    try:
        return _EPOCH + timedelta(microseconds=key[0]), uuid.UUID(key[1]) if uuid_id else key[1]
    except (ValueError, OverflowError):
        raise InvalidArgument(
            f"{field} {cursor!r} is not a cursor of this list: pass the next_cursor you "
            "received, or leave it empty to start at the first page",
            reason=Reason.INVALID_VALUE,
            metadata={"field": field},
        ) from None


def request_hash(*parts: Any) -> str:
    """What a retry with the same key must repeat, as a SHA-256 of canonical JSON: the one
    request hash every service stores beside a retry key."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def encode_cursor(position: int, prefix: str) -> str:
    """An opaque cursor for a position; `prefix` tells one service's cursors from another's."""
    return base64.urlsafe_b64encode(f"{prefix}{position}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str, prefix: str, field: str = "after") -> int:
    """The position behind a cursor made with `prefix`; empty means the start."""
    if not cursor:
        return 0
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        if not raw.startswith(prefix):
            raise ValueError(raw)
        position = int(raw[len(prefix) :])
        if not 0 <= position < 2**63:  # positions are bigint
            raise ValueError(raw)
        return position
    except (ValueError, UnicodeDecodeError, binascii.Error):
        raise InvalidArgument(
            f"{field} {cursor!r} is not a cursor: pass a next_cursor you received, "
            "or leave it empty to start from the beginning",
            reason=Reason.INVALID_VALUE,
            metadata={"field": field},
        ) from None
