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

from agentworks.client import target_ref
from agentworks.core import errors
from agentworks.core.identity import Identity

Args = dict[str, Any]
Handler = Callable[[Any, Identity, Args], Awaitable[dict[str, Any]]]

# The largest value of the services' int64 fields (cursors, offsets, seconds); schemas
# state it, so a larger number is refused naming the argument instead of failing.
INT64_MAX = 2**63 - 1


# JSON Schema keywords that are not in the subset common hosts' function calling takes
# (OpenAI's: strings take pattern and format, arrays minItems and maxItems, numbers their
# bounds; no combinators). The gateway checks them but leaves them out of the schema it
# publishes; the descriptions say the bounds in words.
UNPUBLISHED_KEYWORDS = frozenset({"minLength", "maxLength", "minProperties", "maxProperties"})
# Keywords that make a schema conditional or composed: no tool schema has them, at any
# level. What an action takes and needs is an `ActionRule`, checked by `arguments`.
COMBINATORS = frozenset(
    {"allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas",
     "dependentRequired", "propertyNames", "$ref", "$defs"}
)  # fmt: skip


@dataclass(frozen=True)
class ActionRule:
    """What one action of a tool takes and needs: `fields` are the arguments it takes
    besides `action`; `required` must be given; of `one_of` exactly one must be given
    (at most one when not `one_of_required`). `arguments.action_faults` words a fault."""

    action: str
    fields: tuple[str, ...]
    required: tuple[str, ...] = ()
    one_of: tuple[str, ...] = ()
    one_of_required: bool = True


def action_rule(
    action: str,
    fields: Iterable[str],
    *,
    required: Iterable[str] = (),
    one_of: Iterable[str] = (),
    one_of_required: bool = True,
) -> ActionRule:
    """The rule of one action (see `ActionRule`)."""
    return ActionRule(action, tuple(fields), tuple(required), tuple(one_of), one_of_required)


@dataclass(frozen=True)
class Tool:
    """One tool: what it is called, what it takes, and what runs it.

    `input_schema` is one flat object schema (an `action` enum where the tool has
    actions, every other argument optional unless every call needs it); `actions` says
    what each action takes and needs (or `faults` finds what the schema cannot say).
    The schema hosts see is `published_schema`.
    """

    name: str
    description: str
    input_schema: dict[str, Any]
    handler: Handler
    # Listed and callable over MCP; operator tools are served on /api only.
    mcp: bool = True
    actions: tuple[ActionRule, ...] = ()
    # Faults of a tool without actions whose arguments still depend on each other
    # (worded like `arguments.action_faults`), checked with the schema.
    faults: Callable[[Args], list[str]] | None = None

    @functools.cached_property
    def validator(self) -> Draft202012Validator:
        """The compiled JSON Schema validator of the arguments (checking the schema is
        flat and every action has its rule)."""
        Draft202012Validator.check_schema(self.input_schema)
        found = sorted(combinators(self.input_schema))
        if found:
            raise ValueError(f"the schema of {self.name} is not flat: {', '.join(found)}")
        enum = self.input_schema["properties"].get("action", {}).get("enum", [])
        ruled = [rule.action for rule in self.actions]
        if self.actions and sorted(ruled) != sorted(enum):
            raise ValueError(f"{self.name}: action rules {ruled} do not match {enum}")
        return Draft202012Validator(self.input_schema)

    @functools.cached_property
    def rules(self) -> dict[str, ActionRule]:
        """The action rules by action."""
        return {rule.action: rule for rule in self.actions}

    @functools.cached_property
    def published_schema(self) -> dict[str, Any]:
        """The schema hosts are given: `input_schema` without `UNPUBLISHED_KEYWORDS`."""
        return _published(self.input_schema)


# Keywords whose values are data, not schemas: nothing in them is a keyword.
_VALUES = frozenset({"enum", "const", "default", "examples", "description", "title", "required"})


def _published(schema: dict[str, Any]) -> dict[str, Any]:
    return {
        key: _subschemas(key, value, _published)
        for key, value in schema.items()
        if key not in UNPUBLISHED_KEYWORDS
    }


def _subschemas(key: str, value: Any, walk: Callable[[dict[str, Any]], Any]) -> Any:
    """`walk` applied to the schemas in the value of keyword `key`."""
    if key in _VALUES:
        return value
    if key == "properties":  # its keys are argument names, its values schemas
        return {name: walk(sub) for name, sub in value.items()}
    if isinstance(value, dict):
        return walk(value)
    if isinstance(value, list):
        return [walk(sub) if isinstance(sub, dict) else sub for sub in value]
    return value


def combinators(schema: dict[str, Any]) -> set[str]:
    """The `COMBINATORS` keywords anywhere in a schema."""
    found = {key for key in schema if key in COMBINATORS}
    for key, value in schema.items():
        sub = _subschemas(key, value, combinators)
        if key in _VALUES:
            continue
        if isinstance(sub, set):
            found |= sub
        elif isinstance(sub, dict):
            found.update(*(v for v in sub.values() if isinstance(v, set)))
        elif isinstance(sub, list):
            found.update(*(v for v in sub if isinstance(v, set)))
    return found


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
            "e.g. 2026-01-31T09:00:00Z or 2026-01-31T10:00:00+01:00",
            reason=errors.Reason.FIELD_RULE,
            metadata=errors.rule_meta(field, "timestamp"),
        ) from None
    if parsed.tzinfo is None:
        raise errors.InvalidArgument(
            f"{field} {value!r} has no time zone: add an offset, e.g. {value}Z for UTC",
            reason=errors.Reason.FIELD_RULE,
            metadata=errors.rule_meta(field, "timestamp"),
        )
    return parsed


def check_target(value: str) -> str:
    """`crew:<name>` or `workflow:<id>`, else InvalidArgument."""
    try:
        target_ref(value)
    except ValueError as exc:
        raise errors.InvalidArgument(
            str(exc),
            reason=errors.Reason.FIELD_RULE,
            metadata=errors.rule_meta("target", "pattern"),
        ) from None
    return value


# ------------------------------------------------------------- per-action arguments


def check_fields(tool: str, action: str, args: Args, allowed: Iterable[str]) -> None:
    """Refuse arguments that belong to another action, so a mistake is never ignored."""
    extra = sorted(set(args) - set(allowed) - {"action"})
    if extra:
        raise errors.InvalidArgument(
            f"{tool} action {action!r} does not take {', '.join(extra)}; "
            f"it takes {', '.join(sorted(allowed))}",
            reason=errors.Reason.FIELD_RULE,
            metadata=errors.rule_meta(", ".join(extra), "not_taken"),
        )


def require(tool: str, action: str, args: Args, *names: str) -> None:
    """Refuse an action without the arguments it needs, naming them."""
    missing = [n for n in names if args.get(n) in (None, "")]
    if missing:
        raise errors.InvalidArgument(
            f"{tool} action {action!r} needs {', '.join(missing)}",
            reason=errors.Reason.FIELD_RULE,
            metadata=errors.rule_meta(", ".join(missing), "required"),
        )
