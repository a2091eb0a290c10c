"""JSON Schema 2020-12 checks, caller patterns and workflow variables: no I/O (validation with
patterns can run in a worker thread, see `off_loop`)."""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

import referencing.jsonschema
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError
from jsonschema_specifications import REGISTRY as METASCHEMAS
from referencing.exceptions import Unresolvable

from agentworks.client.checks import check_json_depth
from agentworks.client.errors import InvalidArgument
from agentworks.client.identity import PRINCIPAL_RE
from agentworks_functions.models import WorkflowBinding, WorkflowVariable
from agentworks_functions.patterns import (
    MatchBudget,
    PatternError,
    PatternValidator,
    compile_pattern,
    declared_patterns,
    format_checker,
    match_budget,
    search,
)

T = TypeVar("T")

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
VARIABLE_TYPES = ("string", "integer", "number", "boolean", "object", "array")
# Violations listed in one error message; the count says how many there were in all.
MAX_LISTED_VIOLATIONS = 50
# A message quoting a value quotes this many characters of it at most.
QUOTED_VALUE_CHARS = 200

# jsonschema's format checks, with `regex` judged by RE2 (as patterns run on it).
_FORMATS = format_checker()

_NAME = r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,127}"
# allowed_callers patterns besides exact principals (documented in docs/functions.md).
CALLER_PATTERN_RE = re.compile(rf"^(?:\*|(?:user|agent|workflow|service):\*|agent:{_NAME}/\*)$")


# ------------------------------------------------------------------------------- schemas


def json_problems(value: Any, path: str) -> list[str]:
    """What in a JSON value PostgreSQL cannot store (jsonb): NUL characters, NaN/Infinity."""
    found: list[str] = []
    if isinstance(value, str):
        if "\x00" in value:
            found.append(f"{path}: contains a NUL character (\\u0000), which cannot be stored")
    elif isinstance(value, float):
        if not math.isfinite(value):
            found.append(f"{path}: {value} is not a finite number")
    elif isinstance(value, dict):
        for key, item in value.items():
            if "\x00" in key:
                found.append(f"{path}: the key {key!r} contains a NUL character (\\u0000)")
            found += json_problems(item, _path(path, [key]))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += json_problems(item, _path(path, [index]))
    return found


def check_storable(value: Any, field: str) -> None:
    """Refuse JSON that cannot be stored, naming where (instead of a database error)."""
    problems = json_problems(value, field)
    if problems:
        raise InvalidArgument(
            describe_violations(
                f"{field} cannot be stored",
                problems,
                "Remove NUL characters and use finite numbers.",
            )
        )


def _references(resource: Any, resolver: Any) -> Iterable[tuple[Any, str]]:
    """Every $ref / $dynamicRef of a schema, with the resolver of its scope."""
    contents = resource.contents
    if isinstance(contents, dict):
        for keyword in ("$ref", "$dynamicRef"):
            if isinstance(contents.get(keyword), str):
                yield resolver, contents[keyword]
    for sub in resource.subresources():
        yield from _references(sub, resolver.in_subresource(sub))


def _root_resolver(schema: dict[str, Any]) -> tuple[Any, Any]:
    """The declared schema as a resource, and the resolver of its root scope."""
    resource = referencing.jsonschema.DRAFT202012.create_resource(schema)
    root = resource.id() or "urn:agentworks:declared-schema"
    return resource, METASCHEMAS.with_resource(root, resource).resolver(base_uri=root)


def _check_references(schema: dict[str, Any], field: str) -> None:
    """Every reference must resolve inside the schema (or to a metaschema): remote
    schemas are never fetched, so a URL cannot make the service read other hosts."""
    resource, resolver = _root_resolver(schema)
    for scope, ref in _references(resource, resolver):
        try:
            scope.lookup(ref)
        except Unresolvable:
            raise InvalidArgument(
                f"{field} has a $ref that cannot be resolved: {ref!r}; use references inside "
                "the schema (such as #/$defs/name) — remote schemas are never fetched"
            ) from None


# Keywords that apply their subschemas to the same value (in place), and those that apply
# them to a part of it (a property, an item, a key). Validation follows references
# through both; a cycle of in-place ones never reaches a smaller value, so it never ends.
_IN_PLACE = {
    "$ref": "ref",
    "$dynamicRef": "ref",
    "allOf": "list",
    "anyOf": "list",
    "oneOf": "list",
    "not": "one",
    "if": "one",
    "then": "one",
    "else": "one",
    "dependentSchemas": "map",
}
_DESCENDING = {
    "properties": "map",
    "patternProperties": "map",
    "additionalProperties": "one",
    "unevaluatedProperties": "one",
    "propertyNames": "one",
    "prefixItems": "list",
    "items": "one",
    "contains": "one",
    "unevaluatedItems": "one",
}

# A schema as validation applies it: its contents, the resolver of its scope, and where
# it is (a JSON pointer into the declared schema, or the reference that led there).
_Node = tuple[Any, Any, str]


def _pointers(schema: Any) -> dict[int, str]:
    """The JSON pointer of every object and array in the declared schema, by identity."""
    found: dict[int, str] = {}
    stack: list[tuple[Any, str]] = [(schema, "#")]
    while stack:
        item, where = stack.pop()
        if isinstance(item, dict | list):
            found.setdefault(id(item), where)
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            for key, child in pairs:
                part = str(key).replace("~", "~0").replace("/", "~1")
                stack.append((child, f"{where}/{part}"))
    return found


def _applied(node: _Node, keywords: dict[str, str], where: dict[int, str]) -> Iterator[_Node]:
    """The schemas `node` applies through `keywords`, each with the resolver of its scope."""
    contents, resolver, _ = node
    for keyword, shape in keywords.items():
        value = contents.get(keyword)
        if shape == "ref":
            if not isinstance(value, str):
                continue
            try:
                resolved = resolver.lookup(value)
            except Unresolvable:  # reported by validation itself
                continue
            label = where.get(id(resolved.contents), f"{keyword} {value!r}")
            yield resolved.contents, resolved.resolver, label
            continue
        if shape == "one":
            children = [value]
        elif shape == "list":
            children = value if isinstance(value, list) else []
        else:
            children = list(value.values()) if isinstance(value, dict) else []
        for child in children:
            if isinstance(child, dict):  # true and false apply nothing further
                sub = referencing.jsonschema.DRAFT202012.create_resource(child)
                yield child, resolver.in_subresource(sub), where.get(id(child), keyword)


def _check_reference_cycles(schema: dict[str, Any], field: str) -> None:
    """Refuse references that lead back to a schema without descending into the value:
    validation would follow them forever (a RecursionError at every call).

    A depth-first walk along the in-place keywords, started at every schema validation
    can reach; reaching a schema that is still on the walk's path closes a cycle.
    """
    _, resolver = _root_resolver(schema)
    where = _pointers(schema)
    done: set[int] = set()  # schemas whose in-place walk found no cycle
    starts: list[_Node] = [(schema, resolver, "#")]
    while starts:
        start = starts.pop()
        if id(start[0]) in done:
            continue
        path: list[_Node] = [start]
        on_path = {id(start[0]): 0}
        walks = [_applied(start, _IN_PLACE, where)]
        starts.extend(_applied(start, _DESCENDING, where))
        while walks:
            node = next(walks[-1], None)
            if node is None:
                walks.pop()
                finished = path.pop()
                del on_path[id(finished[0])]
                done.add(id(finished[0]))
                continue
            if not isinstance(node[0], dict) or id(node[0]) in done:
                continue
            if id(node[0]) in on_path:
                cycle = " → ".join(n[2] for n in [*path[on_path[id(node[0])] :], node])
                raise InvalidArgument(
                    f"{field} has references that loop forever: {cycle}. Validation would "
                    "never end: a chain of $ref that comes back to a schema must first "
                    "apply to a part of the value (through properties, items, ...)"
                )
            on_path[id(node[0])] = len(path)
            path.append(node)
            walks.append(_applied(node, _IN_PLACE, where))
            starts.extend(_applied(node, _DESCENDING, where))


def _validator(schema: dict[str, Any]) -> Draft202012Validator:
    # An explicit registry: jsonschema's default one fetches unknown $ref URLs over the
    # network (and file://), which would let a declaration make the service read them.
    # Patterns run on RE2, never on Python's backtracking `re` (see patterns.py).
    return PatternValidator(schema, registry=METASCHEMAS, format_checker=_FORMATS)


def _check_patterns(schema: dict[str, Any], field: str) -> None:
    """Every pattern must compile with RE2, small enough to match in bounded time."""
    for where, pattern in declared_patterns(schema):
        try:
            compile_pattern(pattern)
        except PatternError as exc:
            raise InvalidArgument(
                f"{field} at {where}: the pattern {pattern!r} cannot be used: {exc}"
            ) from None


def check_schema(schema: Any, field: str, *, require_object: bool) -> dict[str, Any]:
    """Check a declared schema against the 2020-12 metaschema (F1)."""
    if not isinstance(schema, dict):
        raise InvalidArgument(f"{field} must be a JSON object (a JSON Schema 2020-12 document)")
    check_json_depth(schema, field)  # it is sent back as a Struct (ListFunctions, claims)
    check_storable(schema, field)
    declared = schema.get("$schema")
    if declared is not None and (
        not isinstance(declared, str) or declared.rstrip("#") != DRAFT_2020_12
    ):
        raise InvalidArgument(
            f"{field} declares $schema {declared!r}; only JSON Schema 2020-12 "
            f"({DRAFT_2020_12}) is supported — remove $schema or use that URI"
        )
    _check_patterns(schema, field)
    try:
        Draft202012Validator.check_schema(schema, format_checker=_FORMATS)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "(root)"
        raise InvalidArgument(
            f"{field} is not a valid JSON Schema 2020-12 at {where}: {exc.message}"
        ) from None
    if require_object and schema.get("type") != "object":
        raise InvalidArgument(
            f'{field} must describe an object ("type": "object"): inputs are named fields'
        )
    _check_references(schema, field)
    _check_reference_cycles(schema, field)
    return schema


def closed_inputs(schema: dict[str, Any]) -> dict[str, Any]:
    """The input schema as it is enforced: inputs it does not name are refused (F3).

    JSON Schema accepts properties it does not mention unless told otherwise, so a
    top level that says nothing about them gets `"unevaluatedProperties": false`: a key
    is known when `properties`, `patternProperties` or a subschema (`allOf`, `$ref`,
    `if`/`then`, ...) evaluates it. An owner who wants open inputs says so with
    `"additionalProperties": true` (or a schema for them).
    """
    if "additionalProperties" in schema or "unevaluatedProperties" in schema:
        return schema
    return {**schema, "unevaluatedProperties": False}


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _path(prefix: str, parts: Iterable[Any]) -> str:
    out = prefix
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _unknown_keys(error: ValidationError) -> list[str]:
    unexpected = getattr(error, "unexpected", None)  # set by the keywords in patterns.py
    if unexpected is not None:
        return list(unexpected)
    props = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
    patterns = error.schema.get("patternProperties", {}) if isinstance(error.schema, dict) else {}
    instance = error.instance if isinstance(error.instance, dict) else {}
    return [key for key in instance if key not in props and not _matches(patterns, key)]


def _matches(patterns: Iterable[str], key: str) -> bool:
    for pattern in patterns:
        try:
            if search(pattern, key):
                return True
        except PatternError:  # reported by the keyword itself
            continue
    return False


def violations(schema: dict[str, Any], instance: Any, prefix: str = "inputs") -> list[str]:
    """Every way `instance` breaks `schema`, one readable line each (F3).

    Missing, unknown and mistyped fields get their own wording; anything else keeps the
    validator's message. Ordered by path so the list reads top to bottom. Matching the
    schema's patterns has a budget (patterns.py); past it the one problem says so.
    """
    try:
        with match_budget():
            return _violation_lines(_validator(schema).iter_errors(instance), prefix)
    except Unresolvable as exc:  # declared before references were checked
        return [f"{prefix}: the schema has a $ref that cannot be resolved ({exc})"]
    except MatchBudget as exc:
        return [f"{prefix}: {exc}"]
    except RecursionError:  # declared before reference cycles were refused
        return [
            f"{prefix}: cannot be checked: the schema's references loop or nest too deep for "
            "validation to end; the function's owner must fix its declaration"
        ]


async def off_loop(schema: Any, check: Callable[..., T], *args: Any) -> T:
    """`check(*args)` against `schema`, in a worker thread when the schema has patterns.

    Matching within the budget can still take a few seconds at worst; RE2 releases the
    GIL while it matches, so in a thread it leaves the event loop (other requests, health
    checks) free. Schemas without patterns are checked in place: they are fast.
    """
    if next(declared_patterns(schema), None) is None:
        return check(*args)
    return await asyncio.to_thread(check, *args)


def _quoting_less(error: ValidationError) -> str:
    """The validator's message, its quote of the value cut to its first
    `QUOTED_VALUE_CHARS` characters (most messages start by quoting the value whole:
    `[...20,000 items...] is too long`)."""
    quoted = repr(error.instance)
    if len(quoted) > QUOTED_VALUE_CHARS and error.message.startswith(quoted):
        return f"{quoted[:QUOTED_VALUE_CHARS]}… {error.message[len(quoted) :].lstrip()}"
    return error.message


def _violation_lines(errors: Iterable[ValidationError], prefix: str) -> list[str]:
    found: list[tuple[str, str]] = []
    for error in errors:
        path = _path(prefix, error.absolute_path)
        if error.validator == "required":
            missing = re.match(r"^'(.+)' is a required property$", error.message)
            name = missing[1] if missing else str(error.message)
            found.append((_path(path, [name]), f"{_path(path, [name])}: missing (required)"))
        elif error.validator in ("additionalProperties", "unevaluatedProperties"):
            for key in _unknown_keys(error) or ["?"]:
                found.append(
                    (_path(path, [key]), f"{_path(path, [key])}: unknown (not in the schema)")
                )
        elif error.validator is None and error.schema is False:
            found.append((path, f"{path}: not allowed (the schema accepts no value here)"))
        elif error.validator == "type":
            expected = error.validator_value
            if isinstance(expected, list):
                expected = " or ".join(expected)
            found.append((path, f"{path}: expected {expected}, got {_json_type(error.instance)}"))
        else:
            found.append((path, f"{path}: {_quoting_less(error)}"))
    found.sort(key=lambda item: item[0])
    return [text for _, text in found]


def describe_violations(what: str, problems: Sequence[str], advice: str) -> str:
    """One message listing every violation (bounded)."""
    listed = list(problems[:MAX_LISTED_VIOLATIONS])
    more = len(problems) - len(listed)
    tail = f"; and {more} more" if more > 0 else ""
    count = f"{len(problems)} problem" + ("s" if len(problems) != 1 else "")
    return f"{what} ({count}): " + "; ".join(listed) + tail + f". {advice}"


def _result_value(value: Any) -> list[str]:
    """What keeps a parsed result from being stored and sent back (in a status)."""
    try:
        check_json_depth(value, "result")
    except InvalidArgument as exc:  # protobuf could not carry it back: never readable
        return [exc.message]
    return json_problems(value, "result")


def _parse(text: str | bytes) -> Any:
    """JSON, or ValueError; a value nested beyond Python's recursion is not JSON to us."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("it nests objects and arrays too deep to read") from None


def result_problems(schema: dict[str, Any], raw: bytes | None) -> tuple[Any, list[str]]:
    """Parse and validate a result file; (value, problems) — no problems means valid (F10)."""
    if raw is None:
        return None, ["the result file was not written (FUNCTION_RESULT_FILE is missing)"]
    try:
        value = _parse(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        return None, [f"the result file is not valid JSON: {exc}"]
    return value, _result_value(value) or violations(schema, value, prefix="result")


def parse_valid_json(schema: dict[str, Any], text: str) -> tuple[bool, Any]:
    """Whether `text` parses as JSON valid for `schema` (the F10 fallback), and the value."""
    try:
        value = _parse(text)
    except ValueError:
        return False, None
    return (not _result_value(value) and not violations(schema, value, prefix="result")), value


# ------------------------------------------------------------------------------- callers


def check_caller_patterns(patterns: Sequence[str]) -> tuple[str, ...]:
    """Validate allowed_callers entries: exact principals or the documented patterns."""
    bad = [p for p in patterns if not (PRINCIPAL_RE.match(p) or CALLER_PATTERN_RE.match(p))]
    if bad:
        raise InvalidArgument(
            f"allowed_callers entries {bad} are not principals or patterns: use an exact "
            "principal (user:alice, agent:crew/bot, workflow:wf, service:x), '*' for everyone, "
            "'user:*' / 'agent:*' / 'workflow:*' / 'service:*' for a kind, or "
            "'agent:<crew>/*' for every agent of a crew"
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


def may_call(principal: str, owner: str, allowed_callers: Iterable[str]) -> bool:
    """A3, F2: the owner always may; anyone else when an allowed_callers entry admits them."""
    return principal == owner or any(caller_matches(principal, p) for p in allowed_callers)


# ------------------------------------------------------------------- workflow variables


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
            "'_', '.', '/' or '-'"
        )
    for group in binding.allowed_groups:
        if not name_re.match(group):
            raise InvalidArgument(
                f"workflow.allowed_groups entry {group!r} is not a valid group name"
            )
    seen: set[str] = set()
    properties = input_schema.get("properties", {})
    for var in binding.variables:
        where = f"workflow.variables[{var.name!r}]"
        if not name_re.match(var.name):
            raise InvalidArgument(f"workflow variable name {var.name!r} is not valid")
        if var.name in seen:
            raise InvalidArgument(f"{where} is declared twice")
        seen.add(var.name)
        if var.type not in VARIABLE_TYPES:
            raise InvalidArgument(
                f"{where}.type {var.type!r} is not one of {', '.join(VARIABLE_TYPES)}"
            )
        if var.has_default and not _type_ok(var.type, var.default):
            raise InvalidArgument(
                f"{where}.default is {_json_type(var.default)}, but the variable is {var.type}"
            )
        if var.has_default:
            check_json_depth(var.default, f"{where}.default")  # sent back as a Value
            check_storable(var.default, f"{where}.default")
        declared = (
            properties.get(var.name, {}).get("type") if isinstance(properties, dict) else None
        )
        if isinstance(declared, str) and not (
            declared == var.type or (var.type == "number" and declared == "integer")
        ):
            raise InvalidArgument(
                f"{where} is {var.type} but input_schema declares {var.name!r} as {declared}; "
                "make them agree"
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
