"""JSON Schema 2020-12 checks, caller patterns and workflow variables: no I/O (a costly
validation runs in a worker process of the check pool, see `off_loop` and `pool`)."""

from __future__ import annotations

from agentworks_functions.schemas.callers import (
    CALLER_PATTERN_RE,
    VARIABLE_TYPES,
    caller_matches,
    check_caller_patterns,
    check_workflow_binding,
    may_call,
    resolve_variables,
)
from agentworks_functions.schemas.cost import MAX_VALUE_STEPS, check_cost, value_cost
from agentworks_functions.schemas.declared import check_schema, closed_inputs
from agentworks_functions.schemas.pool import CheckDeadline, CheckPool, deadline_refusal
from agentworks_functions.schemas.validation import (
    DRAFT_2020_12,
    IN_PLACE_STEPS,
    MAX_LISTED_VIOLATIONS,
    QUOTED_VALUE_CHARS,
    T,
    check_storable,
    describe_violations,
    in_place,
    json_problems,
    off_loop,
    parse_valid_json,
    result_problems,
    text_problems,
    violations,
)

__all__ = [
    "CALLER_PATTERN_RE",
    "DRAFT_2020_12",
    "IN_PLACE_STEPS",
    "MAX_LISTED_VIOLATIONS",
    "MAX_VALUE_STEPS",
    "QUOTED_VALUE_CHARS",
    "VARIABLE_TYPES",
    "CheckDeadline",
    "CheckPool",
    "T",
    "caller_matches",
    "check_caller_patterns",
    "check_cost",
    "check_schema",
    "check_storable",
    "check_workflow_binding",
    "closed_inputs",
    "deadline_refusal",
    "describe_violations",
    "in_place",
    "json_problems",
    "may_call",
    "off_loop",
    "parse_valid_json",
    "resolve_variables",
    "result_problems",
    "text_problems",
    "value_cost",
    "violations",
]
