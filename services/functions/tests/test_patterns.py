"""Declared JSON Schema patterns run on RE2 (linear time), never on Python's backtracking
`re`: a catastrophic pattern with a hostile input is answered at once, patterns RE2
cannot run are refused at declaration naming the place, and ordinary patterns keep
working (F1, F3, P6)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from agentworks.client import FunctionsClient
from agentworks.core.errors import InvalidArgument
from agentworks_functions.patterns import MATCH_BUDGET, MAX_PATTERN_PROGRAM, compile_pattern
from agentworks_functions.schemas import check_schema, violations

# With Python's `re`, `^(a+)+$` tries every way to split the a's before failing at the
# `!`: 2^5000 steps. RE2 answers in microseconds.
HOSTILE = "a" * 5000 + "!"
CATASTROPHIC = "^(a+)+$"

REDOS_SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string", "pattern": CATASTROPHIC}},
    "patternProperties": {"^x_(a+)+$": {"type": "integer"}},
    "additionalProperties": False,
}
UNEVALUATED_SCHEMA = {
    "type": "object",
    "$defs": {"tagged": {"patternProperties": {"^t_(a|aa)+$": {"type": "string"}}}},
    "allOf": [{"$ref": "#/$defs/tagged"}],
    "unevaluatedProperties": False,
}


@pytest.mark.alone
@pytest.mark.reliability(
    scenario="ReDoS through a declared JSON Schema pattern (F3, P6)",
    action="an owner declares `^(a+)+$` as a property pattern and as patternProperties "
    "(also judged through a $ref by unevaluatedProperties); a caller sends 5000 a's and a "
    "'!' in the value and in property names, 20 such calls at once, to a functions process",
    check="each refused INVALID_ARGUMENT naming the field in < 2 s (20 at once in < 5 s, "
    "the process answering others meanwhile); matching inputs still accepted. With "
    "Python's re the first call misses its 10 s deadline",
)
@pytest.mark.timeout(60)
async def test_a_catastrophic_pattern_and_a_hostile_input_are_answered_at_once_F3_P6(
    service_process, database_url, identity
):
    """F3 P6: `^(a+)+$` against 5000 a's and a `!` (in a value, a property name matched
    by patternProperties, and one judged by unevaluatedProperties through a $ref) is
    refused in well under a second, naming the field; the same process keeps serving.

    The service runs as its own process, so a service that backtracked would show up as
    a missed deadline here (10 s), not as a hung test."""
    proc = service_process(
        "agentworks_functions", "FUNCTIONS", database_url, FUNCTIONS_MESSAGING_ADDRESS="127.0.0.1:1"
    )

    def client(principal: str, roles: frozenset[str] = frozenset()) -> FunctionsClient:
        return FunctionsClient(proc.address, identity=identity(principal, roles), timeout=10)

    async with (
        client("user:ops", frozenset({"operator"})) as ops,
        client("user:owner") as owner,
        client("user:alice") as alice,
    ):
        await ops.register_target("crew:demo", owner="user:owner")
        for name, schema in (("redos", REDOS_SCHEMA), ("unevaluated", UNEVALUATED_SCHEMA)):
            await owner.declare_function(
                "crew:demo", name, input_schema=schema, allowed_callers=["user:*"]
            )
        hostile: list[tuple[str, dict[str, Any], str]] = [
            ("redos", {"text": HOSTILE}, "inputs.text: 'aaaa"),
            ("redos", {"x_" + HOSTILE: 1}, f"inputs.x_{HOSTILE}: unknown (not in the schema)"),
            ("unevaluated", {"t_" + HOSTILE: "v"}, "unknown (not in the schema)"),
        ]
        for function, inputs, words in hostile:
            started = time.monotonic()
            with pytest.raises(InvalidArgument) as refused:
                await alice.call("crew:demo", function, inputs)
            elapsed = time.monotonic() - started
            assert elapsed < 2.0, f"{function} took {elapsed:.1f} s"
            assert words in refused.value.message
            assert "no call was created" in refused.value.message

        # Several hostile calls at once leave the process free for everyone else.
        started = time.monotonic()
        results = await asyncio.gather(
            *(alice.call("crew:demo", "redos", {"text": HOSTILE}) for _ in range(20)),
            alice.list_functions("crew:demo"),
            return_exceptions=True,
        )
        assert time.monotonic() - started < 5.0
        assert all(isinstance(r, InvalidArgument) for r in results[:-1])
        listed = results[-1]
        assert isinstance(listed, list), listed
        assert [f.name for f in listed] == ["redos", "unevaluated"]

        # The same patterns still accept what they describe.
        receipt = await alice.call("crew:demo", "redos", {"text": "aaaa", "x_aa": 3})
        assert receipt.call_id
        receipt = await alice.call("crew:demo", "unevaluated", {"t_aaa": "v"})
        assert receipt.call_id


# jsonschema compares every pair of objects for uniqueItems: 15,000 of them (about 200
# KiB of inputs) would take hours, holding the service's event loop all the while.
UNIQUE_SCHEMA = {
    "type": "object",
    "properties": {"tags": {"type": "array", "maxItems": 100, "uniqueItems": True}},
}
MANY_OBJECTS = [{"a": n} for n in range(15_000)]


@pytest.mark.alone
@pytest.mark.reliability(
    scenario="Quadratic uniqueItems through a declared JSON Schema (F3, P6)",
    action="an owner declares an array with uniqueItems (and maxItems 100); a caller sends "
    "15,000 distinct objects, then the same with a repeat at the end",
    check="each refused INVALID_ARGUMENT in < 2 s, naming the limit or the equal items, its "
    "message a few hundred bytes (the input is not echoed whole); jsonschema's pairwise "
    "check took 2.4 s for 1,000 objects and grows with the square",
)
@pytest.mark.timeout(60)
async def test_unique_items_are_checked_in_linear_time_and_errors_do_not_echo_the_input_F3_P6(
    service_process, database_url, identity
):
    """F3 P6: `uniqueItems` over 15,000 objects is answered at once (each item hashed
    once, not compared with every other), naming the first equal pair; a message quoting
    a huge value (`... is too long`) quotes its start only. The service runs as its own
    process, so a quadratic check would show up as a missed deadline, not a hung test."""
    proc = service_process(
        "agentworks_functions", "FUNCTIONS", database_url, FUNCTIONS_MESSAGING_ADDRESS="127.0.0.1:1"
    )
    async with (
        FunctionsClient(
            proc.address, identity=identity("user:ops", frozenset({"operator"})), timeout=10
        ) as ops,
        FunctionsClient(proc.address, identity=identity("user:owner"), timeout=10) as owner,
        FunctionsClient(proc.address, identity=identity("user:alice"), timeout=10) as alice,
    ):
        await ops.register_target("crew:demo", owner="user:owner")
        await owner.declare_function(
            "crew:demo", "tag", input_schema=UNIQUE_SCHEMA, allowed_callers=["user:*"]
        )
        for tags, words in (
            (MANY_OBJECTS, "inputs.tags: [{'a': 0}, {'a': 1}, "),
            ([*MANY_OBJECTS, {"a": 7}], "inputs.tags: items [7] and [15000] are equal"),
        ):
            started = time.monotonic()
            with pytest.raises(InvalidArgument) as refused:
                await alice.call("crew:demo", "tag", {"tags": tags})
            elapsed = time.monotonic() - started
            assert elapsed < 2.0, f"took {elapsed:.1f} s"
            assert words in refused.value.message
            assert len(refused.value.message) < 1000, len(refused.value.message)
        assert violations(UNIQUE_SCHEMA, {"tags": [1, True, [1], [True], {"a": 1}]}) == []
        for same in ([1, 1.0], [{"a": 1, "b": [2]}, {"b": [2.0], "a": 1}]):
            assert violations(UNIQUE_SCHEMA, {"tags": same}) == [
                "inputs.tags: items [0] and [1] are equal; the items must be unique"
            ]


OBJECT_WITH = {"type": "object", "properties": {"code": {"type": "string"}}}


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        (
            {"type": "object", "properties": {"code": {"pattern": "^(?=.*[0-9]).+$"}}},
            "input_schema at properties/code/pattern: the pattern '^(?=.*[0-9]).+$' cannot be "
            "used: invalid perl operator: (?=",
        ),
        (
            {"type": "object", "properties": {"code": {"pattern": r"(a)\1"}}},
            "input_schema at properties/code/pattern: the pattern '(a)\\\\1' cannot be used: "
            "invalid escape sequence: \\1",
        ),
        (
            {"type": "object", "patternProperties": {"(?<=x)y": {}}},
            "input_schema at patternProperties: the pattern '(?<=x)y' cannot be used",
        ),
        (
            {"type": "object", "properties": {"code": {"pattern": "("}}},
            "input_schema at properties/code/pattern: the pattern '(' cannot be used: missing )",
        ),
        (
            {
                "type": "object",
                "$defs": {"name": {"type": "string", "pattern": r"^[\p{L} ]{1,100}$"}},
                "properties": {"name": {"$ref": "#/$defs/name"}},
            },
            "input_schema at $defs/name/pattern: the pattern '^[\\\\p{L} ]{1,100}$' cannot be "
            "used: it compiles to ",
        ),
        (
            {"type": "object", "anyOf": [{}, {"properties": {"a": {"items": {"pattern": "["}}}}]},
            "input_schema at anyOf/1/properties/a/items/pattern: the pattern '[' cannot be used",
        ),
    ],
    ids=["lookahead", "backreference", "lookbehind-key", "unbalanced", "too-large", "nested"],
)
def test_patterns_re2_cannot_run_are_refused_at_declaration_naming_the_place_F1_P6(schema, words):
    """F1 P6: lookaround, backreferences, syntax errors and patterns compiling to more
    than MAX_PATTERN_PROGRAM RE2 instructions are refused, naming where they are."""
    with pytest.raises(InvalidArgument) as refused:
        check_schema(schema, "input_schema", require_object=True)
    assert words in refused.value.message
    assert (
        "Patterns run on RE2" in refused.value.message
        or f"RE2 instructions; the limit is {MAX_PATTERN_PROGRAM}" in refused.value.message
    )


# (field, its schema, a value it accepts, one it refuses, the problem with that one)
ORDINARY = [
    (
        "email",
        {"type": "string", "pattern": r"^[^@\s]+@[^@\s]+\.[a-z]{2,}$"},
        "ana@example.org",
        "ana at example",
        "inputs.email: 'ana at example' does not match '^[^@\\\\s]+@[^@\\\\s]+\\\\.[a-z]{2,}$'",
    ),
    (
        "name",
        {"type": "string", "pattern": r"^\p{L}+$"},
        "Zoë",
        "Zoë2",
        "inputs.name: 'Zoë2' does not match '^\\\\p{L}+$'",
    ),
    (
        "day",
        {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"},
        "2026-01-31",
        "31.01.2026",
        "inputs.day: '31.01.2026' does not match '^\\\\d{4}-\\\\d{2}-\\\\d{2}$'",
    ),
    (
        "tags",
        {"type": "array", "items": {"pattern": "^#"}},
        ["#a", "#b"],
        ["#a", "b"],
        "inputs.tags[1]: 'b' does not match '^#'",
    ),
    (
        "rule",
        {"type": "string", "format": "regex"},
        "^a+$",
        "(?=a)",
        "inputs.rule: '(?=a)' is not a 'regex'",
    ),
]


def test_ordinary_patterns_keep_their_meaning_F1_F3():
    """F1 F3: anchors, classes, Unicode classes (RE2 accepts \\p{L}, which `re` does not),
    patternProperties with additionalProperties, unevaluatedProperties through $ref and
    format regex all validate as before."""
    schema = {
        "type": "object",
        "properties": {name: field for name, field, *_ in ORDINARY},
        "patternProperties": {"^n_[0-9]+$": {"type": "integer"}},
        "additionalProperties": False,
    }
    check_schema(schema, "input_schema", require_object=True)
    good = {name: value for name, _, value, _, _ in ORDINARY}
    assert violations(schema, {**good, "n_1": 1, "n_22": 2}) == []
    bad = {name: value for name, _, _, value, _ in ORDINARY}
    assert violations(schema, {**bad, "n_1": "one", "n_x": 1}) == sorted(
        [problem for *_, problem in ORDINARY]
        + ["inputs.n_1: expected integer, got string", "inputs.n_x: unknown (not in the schema)"]
    )
    # Unanchored, as JSON Schema says: a pattern matches anywhere in the string.
    assert violations({"properties": {"a": {"pattern": "b"}}}, {"a": "abc"}) == []
    unevaluated = {
        "$defs": {"n": {"patternProperties": {"^n_": {"type": "integer"}}}},
        "$ref": "#/$defs/n",
        "unevaluatedProperties": False,
    }
    assert violations(unevaluated, {"n_a": 1}) == []
    assert violations(unevaluated, {"n_a": 1, "m": 2}) == ["inputs.m: unknown (not in the schema)"]


def test_matching_has_a_budget_per_validation_P6():
    """P6: RE2 is linear, but a long value against a large program still costs: past
    MATCH_BUDGET byte-instructions the validation stops at once with a clear problem."""
    pattern = "^.{1,500}$"
    size = compile_pattern(pattern).programsize
    assert size <= MAX_PATTERN_PROGRAM
    schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": pattern}}}
    long_value = "x" * (MATCH_BUDGET // size + 1)
    started = time.monotonic()
    problems = violations(schema, {"a": long_value})
    assert time.monotonic() - started < 1.0
    assert len(problems) == 1
    assert problems[0].startswith("inputs: too long to check against the pattern '^.{1,500}$'")
    assert f"the limit of {MATCH_BUDGET} byte-instructions per validation" in problems[0]
    # A value within the budget is matched as usual.
    assert violations(schema, {"a": "x" * 500}) == []
    assert violations(schema, {"a": "x" * 501}) == [
        f"inputs.a: {'x' * 80!r}... (501 characters) does not match '^.{{1,500}}$'"
    ]
