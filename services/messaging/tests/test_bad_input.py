"""Every messaging RPC refuses bad input with a clear INVALID_ARGUMENT (or NOT_FOUND for
things that are not there), names what was wrong, and stores nothing (P6, C7)."""

from __future__ import annotations

import json
from typing import Any

import grpc
import pytest

from agentworks.common.v1 import common_pb2
from agentworks.core.errors import from_trailers
from agentworks.core.identity import METADATA_KEY
from agentworks.messaging.v1 import messaging_pb2 as pb
from agentworks.messaging.v1 import messaging_pb2_grpc
from agentworks.server.testing import database_snapshot

CREW = common_pb2.TargetRef(kind=common_pb2.TARGET_KIND_CREW, name="demo")
NO_KIND = common_pb2.TargetRef(name="demo")
BAD_NAME = common_pb2.TargetRef(kind=common_pb2.TARGET_KIND_CREW, name="../etc")
UNKNOWN_UUID = "00000000-0000-0000-0000-000000000000"
_deep: dict = {"leaf": 1}
for _ in range(25):  # 27 deep as stored ([part, data, ...]): parses, but too deep to keep
    _deep = {"a": _deep}
DEEP_PART = common_pb2.Part(data_json=json.dumps(_deep))


def field_rule(field: str, rule: str) -> dict[str, str]:
    """The ErrorInfo metadata a refusal by a field's proto rule names: the rule's numbers
    and wording are the validator's (agentworks.server.validation), not this table's."""
    return {"field": field, "rule": rule}


# (method, principal, request, expected code, words the message must contain or, for a
# field's proto rule, the field_rule its ErrorInfo names with the reason FIELD_RULE)
CASES: list[tuple[str, str, Any, str, str | dict[str, str]]] = [
    (
        "Send",
        "user:alice",
        pb.SendRequest(text="hi"),
        "INVALID_ARGUMENT",
        "destination is missing: give a target (crew or workflow) to start a new "
        "conversation, or an inbox_id to continue one",
    ),
    (
        "Send",
        "user:alice",
        pb.SendRequest(target=CREW, text="a\x00b"),
        "INVALID_ARGUMENT",
        "text contains a NUL character (\\u0000), which cannot be stored; remove it",
    ),
    (
        "Send",
        "user:alice",
        pb.SendRequest(
            target=CREW, text="x", parts=[common_pb2.Part(data_json='{"k": ["ok", "\\u0000"]}')]
        ),
        "INVALID_ARGUMENT",
        "parts[0].data.k[1] contains a NUL character (\\u0000), which cannot be stored; remove it",
    ),
    (
        "Send",
        "user:alice",
        pb.SendRequest(target=CREW, text="x", parts=[common_pb2.Part(data_json='{"\\u0000": 1}')]),
        "INVALID_ARGUMENT",
        "parts[0].data['\\x00'] contains a NUL character",
    ),
    (
        "Send",
        "user:alice",
        pb.SendRequest(target=CREW, text="x", parts=[common_pb2.Part(text="\x00")]),
        "INVALID_ARGUMENT",
        "parts[0].text contains a NUL character (\\u0000), which cannot be stored; remove it",
    ),
    (
        "Send",
        "user:alice",
        pb.SendRequest(inbox_id="x\x00", text="x"),
        "INVALID_ARGUMENT",
        "inbox_id contains a NUL character",
    ),
    ("Send", "user:alice", pb.SendRequest(target=CREW), "INVALID_ARGUMENT", "text is empty"),
    ("Send", "user:alice", pb.SendRequest(target=CREW, text="  "), "INVALID_ARGUMENT", "text"),
    ("Send", "user:alice", pb.SendRequest(target=NO_KIND, text="x"), "INVALID_ARGUMENT", "kind"),
    ("Send", "user:alice", pb.SendRequest(target=BAD_NAME, text="x"), "INVALID_ARGUMENT", "name"),
    (
        "Send",
        "user:alice",
        pb.SendRequest(target=CREW, text="x" * 70_000),
        "INVALID_ARGUMENT",
        "65536 bytes",
    ),
    (
        "Send",
        "user:alice",
        pb.SendRequest(target=CREW, text="x", submission_id="s" * 300),
        "INVALID_ARGUMENT",
        "submission_id",
    ),
    (
        "Send",
        "user:alice",
        pb.SendRequest(target=CREW, parts=[common_pb2.Part()]),
        "INVALID_ARGUMENT",
        "parts[0] is empty",
    ),
    (
        "Send",
        "user:alice",
        pb.SendRequest(
            target=CREW, text="x", parts=[common_pb2.Part(text="ok"), common_pb2.Part(text=" ")]
        ),
        "INVALID_ARGUMENT",
        "parts[1] is empty",
    ),
    (
        "Send",
        "user:alice",
        pb.SendRequest(target=CREW, text="x", parts=[DEEP_PART]),
        "INVALID_ARGUMENT",
        "parts nests objects and arrays more than 24 deep",
    ),
    (
        "Send",
        "user:alice",
        pb.SendRequest(target=CREW, text="x", parts=[common_pb2.Part(data_json="[1]")]),
        "INVALID_ARGUMENT",
        "parts[0].data must be a JSON object, got array",
    ),
    (
        "Send",
        "user:alice",
        pb.SendRequest(target=CREW, text="x", parts=[common_pb2.Part(data_json='{"n": NaN}')]),
        "INVALID_ARGUMENT",
        "parts[0].data.n: NaN is not a finite number",
    ),
    (
        "Send",
        "user:alice",
        pb.SendRequest(target=CREW, text="x", channel=99),  # type: ignore[arg-type]
        "INVALID_ARGUMENT",
        "channel 99",
    ),
    ("Send", "user:alice", pb.SendRequest(inbox_id="not-a-uuid", text="x"), "NOT_FOUND", "inbox"),
    ("Send", "user:alice", pb.SendRequest(inbox_id=UNKNOWN_UUID, text="x"), "NOT_FOUND", "inbox"),
    (
        "Read",
        "user:alice",
        pb.ReadRequest(),
        "INVALID_ARGUMENT",
        field_rule("inbox_id", "string.min_len"),
    ),
    (
        "Read",
        "user:alice",
        pb.ReadRequest(inbox_id="x\x00"),
        "INVALID_ARGUMENT",
        "inbox_id contains a NUL character",
    ),
    ("Read", "user:alice", pb.ReadRequest(inbox_id=UNKNOWN_UUID), "NOT_FOUND", "inbox"),
    ("Read", "user:alice", pb.ReadRequest(inbox_id="x", after="%%%"), "INVALID_ARGUMENT", "cursor"),
    (
        "Read",
        "user:alice",
        pb.ReadRequest(inbox_id="x", limit=1000),
        "INVALID_ARGUMENT",
        field_rule("limit", "int32.gte_lte"),
    ),
    (
        "Read",
        "user:alice",
        pb.ReadRequest(inbox_id="x", wait_seconds=60),
        "INVALID_ARGUMENT",
        field_rule("wait_seconds", "int32.gte_lte"),
    ),
    (
        "GetTranscript",
        "user:alice",
        pb.GetTranscriptRequest(conversation_id="nope"),
        "NOT_FOUND",
        "conversation",
    ),
    (
        "GetTranscript",
        "user:alice",
        pb.GetTranscriptRequest(conversation_id=UNKNOWN_UUID, limit=500),
        "INVALID_ARGUMENT",
        field_rule("limit", "int32.gte_lte"),
    ),
    (
        "ClaimTurn",
        "agent:demo/bot",
        pb.ClaimTurnRequest(),
        "INVALID_ARGUMENT",
        field_rule("targets", "repeated.min_items"),
    ),
    (
        "ClaimTurn",
        "agent:demo/bot",
        pb.ClaimTurnRequest(targets=[CREW], lease_seconds=1),
        "INVALID_ARGUMENT",
        field_rule("lease_seconds", "int32.gte_lte"),
    ),
    (
        "ClaimTurn",
        "agent:demo/bot",
        pb.ClaimTurnRequest(targets=[CREW], wait_seconds=-1),
        "INVALID_ARGUMENT",
        field_rule("wait_seconds", "int32.gte_lte"),
    ),
    (
        "ClaimTurn",
        "agent:demo/bot",
        pb.ClaimTurnRequest(targets=[NO_KIND]),
        "INVALID_ARGUMENT",
        "kind",
    ),
    ("HeartbeatTurn", "agent:demo/bot", pb.HeartbeatTurnRequest(turn_id="x"), "NOT_FOUND", "turn"),
    (
        "HeartbeatTurn",
        "agent:demo/bot",
        pb.HeartbeatTurnRequest(turn_id=UNKNOWN_UUID, lease_seconds=100_000),
        "INVALID_ARGUMENT",
        field_rule("lease_seconds", "int32.gte_lte"),
    ),
    ("CompleteTurn", "agent:demo/bot", pb.CompleteTurnRequest(turn_id="x"), "NOT_FOUND", "turn"),
    (
        "SendMessage",
        "agent:demo/bot",
        pb.SendMessageRequest(inbox_id=UNKNOWN_UUID, text="x"),
        "NOT_FOUND",
        "inbox",
    ),
    (
        "SendMessage",
        "agent:demo/bot",
        pb.SendMessageRequest(inbox_id="x\x00", text="x"),
        "INVALID_ARGUMENT",
        "inbox_id contains a NUL character",
    ),
    (
        "SendMessage",
        "agent:demo/bot",
        pb.SendMessageRequest(inbox_id=UNKNOWN_UUID),
        "INVALID_ARGUMENT",
        "text is empty",
    ),
    (
        "EnqueueDelivery",
        "service:scheduler",
        pb.EnqueueDeliveryRequest(conversation_id=UNKNOWN_UUID, idempotency_key="k"),
        "INVALID_ARGUMENT",
        "kind",
    ),
    (
        "EnqueueDelivery",
        "service:scheduler",
        pb.EnqueueDeliveryRequest(
            conversation_id=UNKNOWN_UUID,
            kind=pb.DELIVERY_KIND_WAKE_UP,
            idempotency_key="k",
            attributes_json='{"a": 1',
        ),
        "INVALID_ARGUMENT",
        "attributes is not valid JSON",
    ),
    (
        "EnqueueDelivery",
        "service:scheduler",
        pb.EnqueueDeliveryRequest(
            conversation_id=UNKNOWN_UUID, kind=pb.DELIVERY_KIND_WAKE_UP, idempotency_key="k" * 300
        ),
        "INVALID_ARGUMENT",
        field_rule("idempotency_key", "string.max_len"),
    ),
    (
        "EnqueueDelivery",
        "service:scheduler",
        pb.EnqueueDeliveryRequest(
            conversation_id=UNKNOWN_UUID,
            kind=pb.DELIVERY_KIND_WEBHOOK,
            idempotency_key="k",
            payload=b"x" * (1024 * 1024 + 1),
        ),
        "INVALID_ARGUMENT",
        field_rule("payload", "bytes.max_len"),
    ),
    (
        "RegisterTarget",
        "user:ops",
        pb.RegisterTargetRequest(ref=CREW, owner="nobody"),
        "INVALID_ARGUMENT",
        "owner",
    ),
    (
        "RegisterTarget",
        "user:ops",
        pb.RegisterTargetRequest(ref=BAD_NAME, owner="user:x"),
        "INVALID_ARGUMENT",
        field_rule("ref.name", "string.pattern"),
    ),
    ("GetTarget", "user:alice", pb.GetTargetRequest(ref=NO_KIND), "INVALID_ARGUMENT", "kind"),
    (
        "UpdateTarget",
        "user:owner",
        pb.UpdateTargetRequest(
            ref=common_pb2.TargetRef(kind=common_pb2.TARGET_KIND_CREW, name="ghost")
        ),
        "NOT_FOUND",
        "not registered",
    ),
]


def snapshot(database_url: str) -> dict[str, str]:
    """A digest of the content of every table of the messaging schema."""
    return database_snapshot(database_url, ["messaging"])


@pytest.mark.parametrize(
    ("method", "principal", "request_", "code", "words"),
    CASES,
    ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)],
)
async def test_bad_input_is_refused_clearly_and_stores_nothing_P6(
    messaging, identity, demo, database_url, method, principal, request_, code, words
):
    """P6 C7: a clear error naming the field; the database is unchanged (checked)."""
    before = snapshot(database_url)
    roles = {"operator"} if principal == "user:ops" else set()
    token = identity(principal, roles).token()
    async with grpc.aio.insecure_channel(messaging.address) as channel:
        stub = messaging_pb2_grpc.MessagingServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await getattr(stub, method)(request_, metadata=((METADATA_KEY, token),))
    assert err.value.code().name == code, err.value.details()
    refusal = from_trailers(err.value.code(), err.value.details(), err.value.trailing_metadata())
    if isinstance(words, dict):
        assert refusal.reason == "FIELD_RULE", refusal
        assert words.items() <= refusal.metadata.items(), refusal.metadata
    else:
        assert words in refusal.message
    assert snapshot(database_url) == before


# Row for docs/reliability.md (see tests/conftest.py).
RELIABILITY = {
    "test": "test_bad_input_is_refused_clearly_and_stores_nothing_P6",
    "scenario": "Bad input, messaging service (P6, C7)",
    "action": f"{len(CASES)} cases over every RPC: missing destinations and fields, empty "
    "and oversized text, NUL characters in text, parts (by path) and ids, empty parts, "
    "unknown channels, bad target kinds and names, "
    "malformed and out-of-range cursors, limits, waits and leases, unknown ids, oversized "
    "payloads and keys",
    "check": "the expected status code with a message naming the field; every table of "
    "the messaging schema unchanged (content digest)",
}
