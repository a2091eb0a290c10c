"""JSON Schema 2020-12 checks, caller patterns and workflow variables: no I/O (validation with
patterns can run in a worker thread, see `off_loop`)."""

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
from agentworks_functions.schemas.declared import check_schema, closed_inputs
from agentworks_functions.schemas.validation import (
    DRAFT_2020_12,
    MAX_LISTED_VIOLATIONS,
    QUOTED_VALUE_CHARS,
    T,
    check_storable,
    describe_violations,
    json_problems,
    off_loop,
    parse_valid_json,
    result_problems,
    violations,
)

__all__ = [
    "CALLER_PATTERN_RE",
    "DRAFT_2020_12",
    "MAX_LISTED_VIOLATIONS",
    "QUOTED_VALUE_CHARS",
    "VARIABLE_TYPES",
    "T",
    "caller_matches",
    "check_caller_patterns",
    "check_schema",
    "check_storable",
    "check_workflow_binding",
    "closed_inputs",
    "describe_violations",
    "json_problems",
    "may_call",
    "off_loop",
    "parse_valid_json",
    "resolve_variables",
    "result_problems",
    "violations",
]
