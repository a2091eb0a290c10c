"""Regular expressions of declared JSON Schemas, on RE2 (linear time) instead of Python `re`,
and the budget of one validation's work.

A declared schema's `pattern` and `patternProperties` come from a target's owner and are
matched against callers' inputs and runtimes' results. Python's `re` backtracks: a
pattern such as `^(a+)+$` and an input of thirty `a`s and a `!` take minutes and block
the service's event loop (ReDoS). jsonschema always uses `re`, so the keywords that match
patterns (`pattern`, `patternProperties`, `additionalProperties`, `unevaluatedProperties`:
`schemas.keywords`) call `search` here instead, and `format_checker` checks the `regex`
format: both with RE2 (`google-re2`), whose matching time grows linearly with the input.

Linear is not free: a pattern that compiles to a large program (`[ab]{1000}`,
`\\p{L}{100}`) can cost several seconds on a 256 KiB input. So, besides RE2:

- at declaration every pattern (`declared_patterns`) must compile with RE2 to at most
  `MAX_PATTERN_PROGRAM` instructions (`compile_pattern`);
- each validation may spend at most `MATCH_BUDGET` byte-instructions (the bytes of the
  text times the pattern's program size, summed over every match — an upper bound of
  RE2's work); past it the validation stops with a violation (`MatchBudget`).

Patterns are not the only way to make a check slow: `anyOf` nested through `$ref` is
exponential, and `contains` over hundreds of `const` values on 20,000 items is ten million
comparisons (46 s and 6 minutes before this budget, blocking every tenant). So every
keyword a validation applies counts one step (`step`, called by `schemas.keywords`), and
a validation may take at most `STEP_BUDGET` steps (two to three seconds of jsonschema's
work here, in a check worker process when costly: `schemas.pool`); past it the check
stops with a violation that says so (`StepBudget`), and the call is refused: one caller's
check can slow only that caller.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Iterable, Iterator
from typing import Any

import re2
from jsonschema import FormatChecker

# The largest RE2 program a declared pattern may compile to (`^.{1,255}$` is about 2,300;
# `[\p{L} ]{1,100}` about 120,000: use a simple class with maxLength instead).
MAX_PATTERN_PROGRAM = 5000
# Byte-instructions one validation may spend matching patterns: at RE2's slowest
# (about 10 ns per byte-instruction here) a little under 3 s; typical patterns take
# microseconds, since RE2's DFA touches each byte once.
MATCH_BUDGET = 2**28
# Steps one validation may take: a keyword applied to a value is one step.
# Measured here (bench-free: a unit test pins the counts, not the times): 0.6-0.8 µs a
# step for ordinary checks, up to 1.3 µs for hostile ones, so the budget is 2-3 s at
# worst, spent in a check worker process (validation.off_loop, schemas.pool), off the loop.
# A 256 KiB input of 20,000 strings checked by `items` takes 240,000 steps.
STEP_BUDGET = 2_000_000
# What a descent into a subschema, or a new validator for one (`contains`, `$ref`),
# costs in steps: about five keywords' time.
DESCEND_STEPS = 5

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # refusals are reported to the caller, not logged by RE2


class PatternError(ValueError):
    """A pattern RE2 cannot compile, or one too large; the message says why."""


class MatchBudget(Exception):
    """A validation would pass `MATCH_BUDGET`; the message says which value and pattern."""


class StepBudget(MatchBudget):
    """A validation would pass `STEP_BUDGET` keyword applications; the message says so."""


@functools.lru_cache(maxsize=2048)
def compile_pattern(pattern: str) -> Any:
    """`pattern` compiled with RE2, or PatternError saying what to change."""
    try:
        compiled = re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else "invalid pattern"
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise PatternError(
            f"{reason}. Patterns run on RE2 (linear time): lookahead, lookbehind and "
            "backreferences are not available"
        ) from None
    if compiled.programsize > MAX_PATTERN_PROGRAM:
        raise PatternError(
            f"it compiles to {compiled.programsize} RE2 instructions; the limit is "
            f"{MAX_PATTERN_PROGRAM}. Use a simpler pattern (bound lengths with "
            "minLength/maxLength instead of {m,n} on large classes)"
        )
    return compiled


class _Budget:
    def __init__(self, limit: int, steps: int) -> None:
        self.limit = limit
        self.remaining = limit
        self.step_limit = steps
        self.steps = steps


_budget: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar(
    "agentworks_pattern_budget", default=None
)


@contextlib.contextmanager
def match_budget(limit: int = MATCH_BUDGET, steps: int = STEP_BUDGET) -> Iterator[None]:
    """Matches inside this block share `limit` byte-instructions (past it: MatchBudget)
    and validations `steps` keyword applications (past it: StepBudget)."""
    token = _budget.set(_Budget(limit, steps))
    try:
        yield
    finally:
        _budget.reset(token)


def search(pattern: str, text: str) -> bool:
    """Whether `pattern` matches somewhere in `text` (RE2; counted against the budget)."""
    compiled = compile_pattern(pattern)
    budget = _budget.get()
    if budget is not None:
        size = len(text.encode("utf-8", "surrogatepass"))
        budget.remaining -= size * compiled.programsize
        if budget.remaining < 0:
            shown = pattern if len(pattern) <= 80 else pattern[:77] + "..."
            raise MatchBudget(
                f"too long to check against the pattern {shown!r}: {size} bytes against "
                f"its {compiled.programsize} RE2 instructions pass the limit of "
                f"{budget.limit} byte-instructions per validation; send shorter values (or "
                "ask the owner for a simpler pattern)"
            )
    return compiled.search(text) is not None


def matches_any(patterns: Iterable[str], text: str) -> bool:
    return any(search(pattern, text) for pattern in patterns)


def step(cost: int = 1) -> None:
    """Spend `cost` steps of the current validation's budget (none outside a budget)."""
    budget = _budget.get()
    if budget is None:
        return
    budget.steps -= cost
    if budget.steps < 0:
        raise StepBudget(
            f"too costly to check: the check passed {budget.step_limit} schema steps "
            "(keywords applied to values) before it could end; send smaller inputs, or "
            "ask the function's owner for a simpler schema (deeply nested anyOf/oneOf, or "
            "contains/enum over many values on long arrays)"
        )


def json_nodes(value: Any) -> int:
    """How many JSON values `value` holds, itself included (what comparing it costs)."""
    count, stack = 0, [value]
    while stack:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return count


def _is_regex(instance: object) -> bool:
    if not isinstance(instance, str):
        return True
    compile_pattern(instance)
    return True


def format_checker() -> FormatChecker:
    """jsonschema's format checks, with `regex` meaning "RE2 accepts it" (a fresh copy)."""
    checker = FormatChecker()  # copies the known checks; adding one changes only this copy
    checker.checks("regex", raises=PatternError)(_is_regex)
    return checker


# ---------------------------------------------------------------------- declaration

_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_ONE = (
    "additionalProperties",
    "unevaluatedProperties",
    "items",
    "additionalItems",
    "unevaluatedItems",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
    "contentSchema",
)
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")


def _join(where: str, *parts: Any) -> str:
    return "/".join([where, *map(str, parts)]) if where else "/".join(map(str, parts))


def declared_patterns(schema: Any, where: str = "") -> Iterator[tuple[str, str]]:
    """(where, pattern) of every `pattern` and `patternProperties` key in a schema."""
    if not isinstance(schema, dict):
        return
    if isinstance(schema.get("pattern"), str):
        yield _join(where, "pattern"), schema["pattern"]
    if isinstance(schema.get("patternProperties"), dict):
        for key in schema["patternProperties"]:
            yield _join(where, "patternProperties"), key
    for keyword in _SCHEMA_MAPS:
        if isinstance(schema.get(keyword), dict):
            for name, subschema in schema[keyword].items():
                yield from declared_patterns(subschema, _join(where, keyword, name))
    for keyword in _SCHEMA_ONE:
        if keyword in schema:  # (a Call walks its schema: no work for absent keywords)
            yield from declared_patterns(schema[keyword], _join(where, keyword))
    for keyword in _SCHEMA_LISTS:
        if isinstance(schema.get(keyword), list):
            for index, subschema in enumerate(schema[keyword]):
                yield from declared_patterns(subschema, _join(where, keyword, index))
