"""Caller patterns (who may call) and workflow bindings (F2, F14)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from agentworks.core.checks import check_json_depth
from agentworks.core.errors import InvalidArgument, Reason, rule_meta
from agentworks.core.identity import PRINCIPAL_RE
from agentworks_functions.models import WorkflowBinding, WorkflowVariable
from agentworks_functions.schemas.validation import _json_type, check_storable

VARIABLE_TYPES = ("string", "integer", "number", "boolean", "object", "array")

_NAME = r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,127}"

# allowed_callers patterns besides exact principals (documented in docs/functions.md).
CALLER_PATTERN_RE = re.compile(rf"^(?:\*|(?:user|agent|workflow|service):\*|agent:{_NAME}/\*)$")


def check_caller_patterns(patterns: Sequence[str]) -> tuple[str, ...]:
    """Validate allowed_callers entries: exact principals or the documented patterns."""
    bad = [p for p in patterns if not (PRINCIPAL_RE.match(p) or CALLER_PATTERN_RE.match(p))]
    if bad:
        raise InvalidArgument(
            f"allowed_callers entries {bad} are not principals or patterns: use an exact "
            "principal (user:alice, agent:crew/bot, workflow:wf, service:x), '*' for everyone, "
            "'user:*' / 'agent:*' / 'workflow:*' / 'service:*' for a kind, or "
            "'agent:<crew>/*' for every agent of a crew",
            reason=Reason.FIELD_RULE,
            metadata=rule_meta("allowed_callers", "string.pattern"),
        )
    return tuple(dict.fromkeys(patterns))


def caller_matches(principal: str, pattern: str) -> bool:
    """Whether one allowed_callers entry admits `principal`."""
    if pattern == "*" or pattern == principal:
        return True
    if pattern.endswith(":*"):
        return principal.startswith(pattern[:-1])
    if pattern.startswith("agent:") and pattern.endswith("/*"):
        return principal.startswith(pattern[:-1])
    return False


def patterns_admitting(principal: str) -> list[str]:
    """Every allowed_callers entry that admits `principal` (so SQL can match them)."""
    kind, _, rest = principal.partition(":")
    out = [principal, "*", f"{kind}:*"]
    if kind == "agent" and "/" in rest:
        out.append(f"agent:{rest.split('/', 1)[0]}/*")
    return out


def may_call(principal: str, owner: str, allowed_callers: Iterable[str]) -> bool:
    """A3, F2: the owner always may; anyone else when an allowed_callers entry admits them."""
    return principal == owner or any(caller_matches(principal, p) for p in allowed_callers)


def _type_ok(expected: str, value: Any) -> bool:
    actual = _json_type(value)
    return actual == expected or (expected == "number" and actual == "integer")


def check_workflow_binding(
    binding: WorkflowBinding, input_schema: dict[str, Any], name_re: re.Pattern[str]
) -> WorkflowBinding:
    """Check a workflow function's route, groups and typed variables (F1)."""
    if not binding.route or len(binding.route) > 200 or not re.match(r"^[\w./-]+$", binding.route):
        raise InvalidArgument(
            f"workflow.route {binding.route!r} is not valid: 1-200 letters, digits, "
            "'_', '.', '/' or '-'",
            reason=Reason.FIELD_RULE,
            metadata=rule_meta("workflow.route", "string.pattern", 200),
        )
    for group in binding.allowed_groups:
        if not name_re.match(group):
            raise InvalidArgument(
                f"workflow.allowed_groups entry {group!r} is not a valid group name",
                reason=Reason.FIELD_RULE,
                metadata=rule_meta("workflow.allowed_groups", "string.pattern"),
            )
    seen: set[str] = set()
    properties = input_schema.get("properties", {})
    for var in binding.variables:
        where = f"workflow.variables[{var.name!r}]"
        if not name_re.match(var.name):
            raise InvalidArgument(
                f"workflow variable name {var.name!r} is not valid",
                reason=Reason.FIELD_RULE,
                metadata=rule_meta("workflow.variables.name", "string.pattern"),
            )
        if var.name in seen:
            raise InvalidArgument(
                f"{where} is declared twice",
                reason=Reason.FIELD_RULE,
                metadata=rule_meta("workflow.variables.name", "repeated.unique"),
            )
        seen.add(var.name)
        if var.type not in VARIABLE_TYPES:
            raise InvalidArgument(
                f"{where}.type {var.type!r} is not one of {', '.join(VARIABLE_TYPES)}",
                reason=Reason.FIELD_RULE,
                metadata=rule_meta("workflow.variables.type", "string.in"),
            )
        if var.has_default and not _type_ok(var.type, var.default):
            raise InvalidArgument(
                f"{where}.default is {_json_type(var.default)}, but the variable is {var.type}",
                reason=Reason.INVALID_VALUE,
                metadata={"field": "workflow.variables.default", "variable": var.name},
            )
        if var.has_default:
            check_json_depth(var.default, f"{where}.default")
            check_storable(var.default, f"{where}.default")
        declared = (
            properties.get(var.name, {}).get("type") if isinstance(properties, dict) else None
        )
        if isinstance(declared, str) and not (
            declared == var.type or (var.type == "number" and declared == "integer")
        ):
            raise InvalidArgument(
                f"{where} is {var.type} but input_schema declares {var.name!r} as {declared}; "
                "make them agree",
                reason=Reason.INVALID_VALUE,
                metadata={"field": "workflow.variables.type", "variable": var.name},
            )
    return WorkflowBinding(
        route=binding.route,
        allowed_groups=tuple(dict.fromkeys(binding.allowed_groups)),
        variables=binding.variables,
    )


def resolve_variables(
    variables: Sequence[WorkflowVariable], inputs: dict[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """The run's variable values from the inputs (or defaults), and any problems."""
    values: dict[str, Any] = {}
    problems: list[str] = []
    for var in variables:
        if var.name in inputs:
            value = inputs[var.name]
        elif var.has_default:
            value = var.default
        else:
            if var.required:
                problems.append(f"inputs.{var.name}: missing (required workflow variable)")
            continue
        if not _type_ok(var.type, value):
            problems.append(
                f"inputs.{var.name}: expected {var.type} (workflow variable), "
                f"got {_json_type(value)}"
            )
            continue
        values[var.name] = value
    return values, problems
