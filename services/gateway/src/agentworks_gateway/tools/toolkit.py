"""What every tool module shares: the `Tool` record, JSON translation and argument helpers.

Each tool module (messages, operator, functions, declarations, wake_ups, schedules,
pauses, webhooks) defines its tools with these, so they read alike; `registry` lists
them and `arguments` checks a call's arguments against a tool's schema.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from google.protobuf import timestamp_pb2
from jsonschema import Draft202012Validator

from agentworks.client import errors, target_ref
from agentworks.client.identity import Identity

Args = dict[str, Any]
Handler = Callable[[Any, Identity, Args], Awaitable[dict[str, Any]]]

# The largest value of the services' int64 fields (cursors, offsets, seconds); schemas
# state it, so a larger number is refused naming the argument instead of failing.
INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class Tool:
    """One tool: what it is called, what it takes, and what runs it."""

    name: str
    description: str
    input_schema: dict[str, Any]
    handler: Handler
    # Listed and callable over MCP; operator tools are served on /api only.
    mcp: bool = True

    @functools.cached_property
    def validator(self) -> Draft202012Validator:
        """The compiled JSON Schema validator of the arguments."""
        Draft202012Validator.check_schema(self.input_schema)
        return Draft202012Validator(self.input_schema)


# ------------------------------------------------------------------------ translation


def timestamp(ts: timestamp_pb2.Timestamp) -> str | None:
    """A protobuf timestamp as RFC 3339 (UTC), or None when unset."""
    if not ts.seconds and not ts.nanos:
        return None
    return ts.ToDatetime(tzinfo=UTC).isoformat()


def parse_time(value: str, field: str) -> datetime:
    """An RFC 3339 / ISO 8601 time with an offset (`Z` works), else InvalidArgument."""
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise errors.InvalidArgument(
            f"{field} {value!r} is not a time: use ISO 8601 with an offset, "
            "e.g. 2026-01-31T09:00:00Z or 2026-01-31T10:00:00+01:00"
        ) from None
    if parsed.tzinfo is None:
        raise errors.InvalidArgument(
            f"{field} {value!r} has no time zone: add an offset, e.g. {value}Z for UTC"
        )
    return parsed


def check_target(value: str) -> str:
    """`crew:<name>` or `workflow:<id>`, else InvalidArgument."""
    try:
        target_ref(value)
    except ValueError as exc:
        raise errors.InvalidArgument(str(exc)) from None
    return value


# ------------------------------------------------------------- per-action arguments


def check_fields(tool: str, action: str, args: Args, allowed: Iterable[str]) -> None:
    """Refuse arguments that belong to another action, so a mistake is never ignored."""
    extra = sorted(set(args) - set(allowed) - {"action"})
    if extra:
        raise errors.InvalidArgument(
            f"{tool} action {action!r} does not take {', '.join(extra)}; "
            f"it takes {', '.join(sorted(allowed))}"
        )


def require(tool: str, action: str, args: Args, *names: str) -> None:
    """Refuse an action without the arguments it needs, naming them."""
    missing = [n for n in names if args.get(n) in (None, "")]
    if missing:
        raise errors.InvalidArgument(f"{tool} action {action!r} needs {', '.join(missing)}")


def action_rule(
    action: str,
    fields: Iterable[str],
    *,
    required: Iterable[str] = (),
    one_of: Iterable[str] = (),
    one_of_required: bool = True,
) -> dict[str, Any]:
    """A 2020-12 `if`/`then` rule: what one action takes and needs.

    `fields` are the arguments the action takes besides `action`; `required` must be
    given; of `one_of` exactly one must be given (at most one when not
    `one_of_required`). Faults are worded by `arguments.describe_faults`.
    """
    fields = list(fields)
    then: dict[str, Any] = {"propertyNames": {"enum": ["action", *fields]}}
    if required:
        then["required"] = list(required)
    choice = list(one_of)
    if choice:
        alternatives = [{"required": [name]} for name in choice]
        if one_of_required:
            then["oneOf"] = alternatives
        else:
            then["not"] = {"anyOf": _pairs(choice)}
    return {
        "if": {"properties": {"action": {"const": action}}, "required": ["action"]},
        "then": then,
    }


def _pairs(names: list[str]) -> list[dict[str, Any]]:
    return [{"required": [a, b]} for i, a in enumerate(names) for b in names[i + 1 :]]
