"""The request checks the services share (P6, C1): each refusal names the field."""

from __future__ import annotations

import pytest

from agentworks.client import json_document
from agentworks.core.checks import (
    MAX_JSON_DEPTH,
    bounded,
    check_json_depth,
    check_no_nul,
    check_retry_key,
    decode_cursor,
    encode_cursor,
    is_retry,
    request_hash,
)
from agentworks.core.errors import Conflict, InvalidArgument
from agentworks.core.jsontext import loads, loads_object
from agentworks.core.targets import TargetKey, check_target


def test_a_cursor_round_trips_and_another_services_cursor_is_refused_P6():
    """P6: positions survive the round trip, up to the bigint limit; a cursor made with
    another prefix (another service's), garbage and positions past int64 are refused
    with a message naming the field."""
    for position in (0, 1, 42, 2**63 - 1):
        assert decode_cursor(encode_cursor(position, "p1:"), "p1:") == position
    assert decode_cursor("", "p1:") == 0
    for bad in (encode_cursor(5, "s1:"), "%%%", encode_cursor(2**63, "p1:"), "cDE6LTE"):
        with pytest.raises(InvalidArgument, match=r"^after .* is not a cursor"):
            decode_cursor(bad, "p1:")
    with pytest.raises(InvalidArgument, match=r"^before "):
        decode_cursor("x", "p1:", "before")


def test_bounds_default_and_refuse_naming_the_field_P6():
    """P6: 0 (unset) takes the default when 0 is out of range; otherwise the range holds."""
    assert bounded(0, "limit", 1, 100, 20) == 20
    assert bounded(0, "wait_seconds", 0, 25, 0) == 0
    assert bounded(100, "limit", 1, 100, 20) == 100
    with pytest.raises(InvalidArgument, match="limit must be between 1 and 100, got 101"):
        bounded(101, "limit", 1, 100, 20)


def test_nul_is_refused_in_text_and_anywhere_in_json_P6():
    """P6: PostgreSQL text and jsonb cannot hold NUL: in a string, a key or a nested value;
    the one refusal names where, says why and what to do."""
    assert check_no_nul({"a": ["b", 1, None]}, "inputs") == {"a": ["b", 1, None]}
    for value, where in (
        ("a\x00b", "inputs"),
        ({"k\x00": 1}, "inputs['k\\x00']"),
        ({"k": ["ok", {"deep": "\x00"}]}, "inputs.k[1].deep"),
    ):
        with pytest.raises(InvalidArgument) as refused:
            check_no_nul(value, "inputs")
        assert refused.value.message == (
            f"{where} contains a NUL character (\\u0000), which cannot be stored; remove it"
        )
        assert refused.value.metadata == {"field": "inputs", "rule": "no_nul"}
        assert refused.value.reason == "FIELD_RULE"


def test_a_retry_key_holds_no_nul_C4_P6():
    """C4 P6: a retry key with a NUL is refused naming the field (its length is the
    protos' rule: tests/test_contract_rules.py)."""
    assert check_retry_key("é" * 200) == "é" * 200
    with pytest.raises(InvalidArgument, match=r"^submission_id contains a NUL character"):
        check_retry_key("k\x00")


def test_a_retry_key_with_another_request_is_refused_in_one_wording_C4():
    """C4: nothing stored under the key: create; the same request hash: a retry; another
    one: ALREADY_EXISTS saying what the key was used for; a legacy hash still matches."""
    digest = request_hash("crew:demo", "hi", None)
    assert digest == request_hash("crew:demo", "hi", None)
    assert is_retry("k1", None, digest, "a different message") is False
    assert is_retry("k1", digest, digest, "a different message") is True
    assert is_retry("k1", "old", digest, "a different message", legacy_hash="old") is True
    with pytest.raises(Conflict) as refused:
        is_retry("k1", digest, request_hash("crew:demo", "other", None), "a different message")
    assert refused.value.message == (
        "submission_id 'k1' was already used for a different message; a retry must repeat "
        "the same request, and a new request needs a new submission_id"
    )


def test_a_target_is_a_crew_or_workflow_C1_P6():
    """C1 P6: a target is a crew or a workflow; any other kind is refused naming
    target.kind. (The name's shape is TargetRef.name's proto rule: test_contract_rules.)"""
    assert str(check_target("crew", "demo")) == "crew:demo"
    assert check_target("workflow", "w.1_x") == TargetKey("workflow", "w.1_x")
    with pytest.raises(InvalidArgument, match=r"^target\.kind must be crew or workflow"):
        check_target("team", "demo")


def nested(depth: int) -> object:
    """Objects and arrays alternating, `depth` deep."""
    value: object = "leaf"
    for level in range(depth):
        value = {"a": value} if level % 2 else [value]
    return value


def test_json_deeper_than_the_limit_is_refused_P6():
    """P6: JSON at the depth limit passes; one level more is refused, naming the field."""
    deepest = nested(MAX_JSON_DEPTH)
    assert check_json_depth(deepest, "inputs") is deepest
    with pytest.raises(InvalidArgument, match=rf"^inputs nests .* more than {MAX_JSON_DEPTH}"):
        check_json_depth(nested(MAX_JSON_DEPTH + 1), "inputs")
    with pytest.raises(InvalidArgument, match="parts"):
        check_json_depth(nested(100_000), "parts")  # no recursion to exhaust
    assert check_json_depth("scalar", "x") == "scalar"


def test_json_documents_keep_every_number_exact_and_refuse_what_is_not_json_F3_P6():
    """F3 P6: JSON documents travel as text: integers of any size and their types come
    back as sent (no double in between); the typed clients refuse JSON nested deeper
    than the services take, and reading refuses NaN, Infinity and broken text, naming
    the field and the place."""
    sent = {"id": 2**53 + 1, "ids": [1, {"n": -(2**64)}], "f": 0.5, "i": 3, "ok": True}
    text = json_document(sent, "inputs")
    assert loads(text, "inputs") == sent and type(loads(text, "inputs")["i"]) is int
    with pytest.raises(InvalidArgument, match=r"^inputs nests"):
        json_document({"v": nested(MAX_JSON_DEPTH)}, "inputs")
    assert json_document(None, "inputs") == ""
    with pytest.raises(InvalidArgument, match=r"^inputs\.a\[1\]: NaN is not a finite number"):
        loads('{"a": [1, NaN]}', "inputs")
    with pytest.raises(InvalidArgument, match=r"^inputs: -Infinity is not a finite number"):
        loads("-Infinity", "inputs")
    with pytest.raises(InvalidArgument, match=r"^inputs is not valid JSON: .* line 1 column 6"):
        loads('{"a":', "inputs")
    with pytest.raises(InvalidArgument, match=r"^inputs must be a JSON object, got array"):
        loads_object("[1]", "inputs")
    assert loads_object("", "inputs") == {} and loads("", "result", None) is None
    with pytest.raises(InvalidArgument, match=r"^result is required"):
        loads("", "result")
