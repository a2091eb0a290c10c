"""Validating inputs and results against a declared schema, and saying what is wrong (F3, F10)."""

from __future__ import annotations

import asyncio
import functools
import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from itertools import islice
from typing import TYPE_CHECKING, Any, TypeVar

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from jsonschema_specifications import REGISTRY as METASCHEMAS
from referencing.exceptions import Unresolvable

from agentworks.core.checks import check_json_depth, nul_refusal
from agentworks.core.errors import InvalidArgument, Reason
from agentworks_functions.jsonin import number_refusal
from agentworks_functions.patterns import (
    MatchBudget,
    PatternError,
    compile_pattern,
    declared_patterns,
    format_checker,
    match_budget,
    search,
)
from agentworks_functions.schemas.cost import value_cost
from agentworks_functions.schemas.keywords import PatternValidator

if TYPE_CHECKING:
    from agentworks_functions.schemas.pool import CheckPool

T = TypeVar("T")

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"

# Violations listed in one error message; the count says how many there were in all.
MAX_LISTED_VIOLATIONS = 50

# Problems one check collects at most (each is an object with its paths: a check of
# 60,000 wrong items would otherwise keep 60,000 of them).
MAX_ERRORS = 1000

# Schemas whose validators are kept (`_compiled`): the functions called most.
SCHEMA_CACHE_SIZE = 256

# A message quoting a value quotes this many characters of it at most.
QUOTED_VALUE_CHARS = 200

# jsonschema's format checks, with `regex` judged by RE2 (as patterns run on it).
_FORMATS = format_checker()


def json_problems(value: Any, path: str) -> list[str]:
    """What in a JSON value PostgreSQL cannot store (jsonb): NUL characters, NaN/Infinity."""
    found: list[str] = []
    if isinstance(value, str):
        if "\x00" in value:
            found.append(nul_refusal(path))
    elif isinstance(value, float):
        if not math.isfinite(value):
            found.append(f"{path}: {value} is not a finite number")
    elif isinstance(value, dict):
        for key, item in value.items():
            if "\x00" in key:
                found.append(nul_refusal(f"{path}[{key!r}]"))
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
            ),
            reason=Reason.INVALID_VALUE,
            metadata={"field": field},
        )


def _validator(schema: dict[str, Any]) -> Draft202012Validator:
    return _compiled(_schema_key(schema))[0]


def _schema_key(schema: Any) -> str:
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))


@functools.lru_cache(maxsize=SCHEMA_CACHE_SIZE)
def _compiled(key: str) -> tuple[Draft202012Validator, int]:
    """The validator of a schema (given as its canonical JSON) and the size of its largest
    pattern's RE2 program (0 without patterns: see `in_place`), made once per schema:
    a call is checked against its function's schema, the same one call after call.
    A validator keeps no state between checks (a check's pattern budget is a context
    variable), so threads share it."""
    schema = json.loads(key)
    # An explicit registry: jsonschema's default one fetches unknown $ref URLs over the
    # network (and file://), which would let a declaration make the service read them.
    # Patterns run on RE2, never on Python's backtracking `re` (see patterns.py).
    validator = PatternValidator(schema, registry=METASCHEMAS, format_checker=_FORMATS)
    program = 0
    for _, pattern in declared_patterns(schema):
        try:
            program = max(program, compile_pattern(pattern).programsize)
        except PatternError:  # reported by the check itself
            continue
    return validator, program


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
    unexpected = getattr(error, "unexpected", None)  # set by schemas.keywords
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
            errors = list(islice(_validator(schema).iter_errors(instance), MAX_ERRORS + 1))
            lines = _violation_lines(errors[:MAX_ERRORS], prefix)
            if len(errors) > MAX_ERRORS:
                lines.append(f"{prefix}: the check stopped after {MAX_ERRORS} problems")
            return lines
    except Unresolvable as exc:  # declared before references were checked
        return [f"{prefix}: the schema has a $ref that cannot be resolved ({exc})"]
    except MatchBudget as exc:
        return [f"{prefix}: {exc}"]
    except RecursionError:  # declared before reference cycles were refused
        return [
            f"{prefix}: cannot be checked: the schema's references loop or nest too deep for "
            "validation to end; the function's owner must fix its declaration"
        ]


# A check runs in place (on the serving loop) when its static bound is small: (values in
# the input) x (the schema's cost per value, schemas.cost) at most IN_PLACE_STEPS steps
# (about 20 ms), and (bytes of the input) x (its largest pattern's RE2 program) at most
# IN_PLACE_MATCH byte-instructions (about 10 ms at RE2's slowest). Else in the check pool.
IN_PLACE_STEPS = 20_000
IN_PLACE_MATCH = 2**20


def in_place(schema: Any, values: int | None, size: int | None) -> bool:
    """Whether checking an input of `values` JSON values and `size` bytes against `schema`
    is cheap enough to do in place, by the schema's static bound (None: not known)."""
    if values is None or size is None:
        return False
    _, program = _compiled(_schema_key(schema))
    return values * value_cost(schema) <= IN_PLACE_STEPS and size * program <= IN_PLACE_MATCH


async def off_loop(
    pool: CheckPool | None,
    principal: str,
    schema: Any,
    check: Callable[..., T],
    *args: Any,
    values: int | None = None,
    size: int | None = None,
) -> T:
    """`check(*args)` against `schema`: in place when `in_place`, else in `pool` (a worker
    process with a hard deadline: CheckDeadline past it; Busy past the principal's
    share), or in a thread without a pool.
    """
    if in_place(schema, values, size):
        return check(*args)
    if pool is None:
        return await asyncio.to_thread(check, *args)
    return await pool.run(principal, check, *args)


def text_problems(schema: dict[str, Any], text: str, prefix: str = "inputs") -> list[str]:
    """Everything wrong with the JSON object in `text` for `schema`: not JSON, too deep,
    not storable, or invalid. For large inputs, read and checked in a check worker, so
    the serving process only measures them (B2, B8)."""
    try:
        value = _parse(text)
    except ValueError as exc:
        return [f"{prefix} is not valid JSON: {exc}".replace(": it holds", " holds")]
    if not isinstance(value, dict):
        return [f"{prefix} must be a JSON object, got {_json_type(value)}"]
    try:
        check_json_depth(value, prefix)
    except InvalidArgument as exc:
        return [exc.message]
    return json_problems(value, prefix) + violations(schema, value, prefix)


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
    except ValueError as exc:  # an integer too long to read: said in our words (B10)
        words = number_refusal("it", text) if "digits" in str(exc) else None
        if words is None:
            raise
        raise ValueError(words) from None


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
