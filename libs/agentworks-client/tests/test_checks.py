"""The request checks the services share (P6, C1): each refusal names the field."""

from __future__ import annotations

import pytest
from google.protobuf import struct_pb2

from agentworks.client import struct
from agentworks.client.checks import (
    MAX_JSON_DEPTH,
    bounded,
    check_json_depth,
    check_no_nul,
    decode_cursor,
    encode_cursor,
)
from agentworks.client.errors import InvalidArgument
from agentworks.client.targets import TargetKey, check_target


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
    """P6: PostgreSQL text and jsonb cannot hold NUL: in a string, a key or a nested value."""
    assert check_no_nul({"a": ["b", 1, None]}, "inputs") == {"a": ["b", 1, None]}
    for value in ("a\x00b", {"k\x00": 1}, {"k": ["ok", {"deep": "\x00"}]}):
        with pytest.raises(InvalidArgument, match=r"^inputs contains a NUL character"):
            check_no_nul(value, "inputs")


def test_a_target_is_a_crew_or_workflow_with_a_plain_name_C1_P6():
    """C1 P6: crew and workflow targets with 1-128 letters, digits, '.', '_' or '-' (a
    letter or digit first); anything else is refused naming target.kind or target.name."""
    assert str(check_target("crew", "demo")) == "crew:demo"
    assert check_target("workflow", "w.1_x-" + "a" * 122) == TargetKey(
        "workflow", "w.1_x-" + "a" * 122
    )
    with pytest.raises(InvalidArgument, match=r"^target\.kind must be crew or workflow"):
        check_target("team", "demo")
    for name in ("", "-lead", "a b", "a" * 129, "crew/x"):
        with pytest.raises(InvalidArgument, match=r"^target\.name "):
            check_target("crew", name)


def nested(depth: int) -> object:
    """Objects and arrays alternating, `depth` deep."""
    value: object = "leaf"
    for level in range(depth):
        value = {"a": value} if level % 2 else [value]
    return value


def test_json_deeper_than_protobuf_can_carry_back_is_refused_P6():
    """P6: JSON at the depth limit survives a round trip through protobuf inside a
    response (as results and pages do); one level more is refused, naming the field."""
    deepest = nested(MAX_JSON_DEPTH)
    assert check_json_depth(deepest, "inputs") is deepest
    wrapped = struct_pb2.ListValue()
    wrapped.values.add().list_value.values.add().struct_value.update({"result": deepest})
    again = struct_pb2.ListValue.FromString(wrapped.SerializeToString())
    assert again.values[0].list_value.values[0].struct_value["result"] is not None
    with pytest.raises(InvalidArgument, match=rf"^inputs nests .* more than {MAX_JSON_DEPTH}"):
        check_json_depth(nested(MAX_JSON_DEPTH + 1), "inputs")
    with pytest.raises(InvalidArgument, match="parts"):
        check_json_depth(nested(100_000), "parts")  # no recursion to exhaust
    assert check_json_depth("scalar", "x") == "scalar"


def test_typed_clients_refuse_what_a_struct_would_round_or_not_carry_back_F3_P6():
    """F3 P6: a Struct holds numbers as doubles; the typed clients refuse an integer a
    double would round (instead of sending a different number) and JSON nested deeper
    than the services take, naming the field; what fits goes through unchanged."""
    with pytest.raises(ValueError, match=r"^inputs: 9007199254740993 is too large"):
        struct({"id": 2**53 + 1}, "inputs")
    with pytest.raises(ValueError, match="-18446744073709551616"):
        struct({"ids": [1, {"n": -(2**64)}]}, "inputs")
    with pytest.raises(InvalidArgument, match=r"^inputs nests"):
        struct({"v": nested(MAX_JSON_DEPTH)}, "inputs")
    fits = struct({"id": 2**53, "ok": True, "v": nested(MAX_JSON_DEPTH - 1)}, "inputs")
    assert fits is not None and fits["id"] == 2**53 and fits["ok"] is True
