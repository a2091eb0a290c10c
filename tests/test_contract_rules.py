"""The proto is the contract (issue 36): field rules are `buf.validate` annotations in
proto/, checked by one validator in the server interceptor, with one refusal shape
(INVALID_ARGUMENT, reason FIELD_RULE, metadata naming the field, the rule and the limit);
`agentworks.core.limits` and docs/limits.md are generated from the same descriptors."""

from __future__ import annotations

import grpc
import psycopg
import pytest

from agentworks import proto_limits
from agentworks.client import MessagingClient, delivery_request
from agentworks.common.v1 import common_pb2
from agentworks.core import limits
from agentworks.core.errors import AgentWorksError, InvalidArgument, Reason
from agentworks.functions.v1 import functions_pb2
from agentworks.messaging.v1 import messaging_pb2 as pb
from agentworks.scheduler.v1 import scheduler_pb2
from agentworks.server.validation import field_rule_refusal


def _count(database_url: str, table: str) -> int:
    with psycopg.connect(database_url) as db:
        row = db.execute(f"SELECT count(*) FROM messaging.{table}").fetchone()
        assert row is not None
        return int(row[0])


@pytest.fixture
async def alice(messaging, identity):
    async with MessagingClient(messaging.address, identity=identity("user:alice")) as client:
        yield client


@pytest.fixture
async def demo(messaging, identity):
    async with MessagingClient(
        messaging.address, identity=identity("user:root", {"operator"})
    ) as operator:
        await operator.register_target("crew:demo", owner="user:owner")
    return "crew:demo"


async def test_a_field_past_its_proto_rule_is_refused_naming_rule_and_limit_storing_nothing_P6_B8(
    alice, demo, database_url
):
    """P6 B8: a Send whose text is past the proto's `string.max_bytes` is refused over real
    gRPC, INVALID_ARGUMENT with the reason FIELD_RULE, metadata naming the field, the rule
    and the limit (bytes of UTF-8, é is two), and a message naming both; nothing stored."""
    limit = limits.MAX_TEXT_BYTES
    text = "é" * (limit // 2 + 1)
    with pytest.raises(InvalidArgument) as refused:
        await alice.send(text, target=demo)
    assert refused.value.reason == Reason.FIELD_RULE
    assert refused.value.metadata == {
        "field": "text",
        "rule": "string.max_bytes",
        "limit": str(limit),
    }
    assert refused.value.message == f"text is {limit + 2} bytes; the limit is {limit} bytes"
    assert _count(database_url, "messages") == 0
    assert _count(database_url, "conversations") == 0
    # A range: 0 is the default, past the top is refused in the same shape.
    receipt = await alice.send("hi", target=demo)
    with pytest.raises(InvalidArgument) as refused:
        await alice.read(receipt.inbox_id, limit=limits.MAX_INBOX_PAGE + 1)
    assert refused.value.metadata["rule"] == "int32.gte_lte"
    assert refused.value.metadata["field"] == "limit"
    assert "limit must be between 1 and 100" in refused.value.message


async def test_a_batch_item_past_its_rule_is_refused_alone_S6_P6(
    messaging, identity, alice, demo, database_url
):
    """S6 P6: in EnqueueDeliveries each item keeps its own rules: one whose key is past the
    proto's 200 characters gets its own refusal (its ItemError carries the reason and
    metadata EnqueueDelivery's ErrorInfo would) and stores nothing; the others are
    delivered."""
    conversation = (await alice.send("hi", target=demo)).conversation_id
    before = _count(database_url, "deliveries")
    async with MessagingClient(
        messaging.address, identity=identity("service:functions")
    ) as functions:
        key = "k" * (limits.MAX_IDEMPOTENCY_KEY + 1)
        outcomes = await functions.enqueue_deliveries(
            [
                delivery_request(conversation, kind=pb.DELIVERY_KIND_WAKE_UP, idempotency_key="a"),
                delivery_request(conversation, kind=pb.DELIVERY_KIND_WAKE_UP, idempotency_key=key),
            ]
        )
    assert not isinstance(outcomes[0], AgentWorksError) and outcomes[0].created
    assert isinstance(outcomes[1], InvalidArgument)  # an item's outcome: code and message
    assert outcomes[1].message == (
        f"idempotency_key is {len(key)} characters; the limit is {len(key) - 1} characters"
    )
    assert outcomes[1].reason == Reason.FIELD_RULE
    assert outcomes[1].metadata == {
        "field": "idempotency_key",
        "rule": "string.max_len",
        "limit": str(limits.MAX_IDEMPOTENCY_KEY),
    }
    assert _count(database_url, "deliveries") == before + 1


async def test_a_target_name_keeps_the_target_ref_pattern_in_every_request_C1_P6(alice, demo):
    """C1 P6: a target's name is 1-128 letters, digits, '.', '_' or '-', a letter or digit
    first: TargetRef.name's proto rule, so every request naming a target (a Send here,
    over real gRPC) is refused FIELD_RULE naming the field and the rule."""
    with pytest.raises(InvalidArgument) as refused:
        await alice.send("hi", target="crew:-lead")
    assert refused.value.reason == Reason.FIELD_RULE
    assert refused.value.metadata == {"field": "target.name", "rule": "string.pattern"}
    assert refused.value.message.startswith("target.name '-lead' does not match the pattern ")
    good = ("demo", "w.1_x-" + "a" * 122, "Legacy")  # stored names keep their case (B10)
    bad = ("", "-lead", "a b", "a" * 129, "crew/x")
    for name in good + bad:
        ref = common_pb2.TargetRef(kind=common_pb2.TARGET_KIND_CREW, name=name)
        for request in (
            pb.SendRequest(target=ref),
            pb.ClaimTurnRequest(targets=[ref]),
            functions_pb2.CallRequest(target=ref),
        ):
            refused_now = field_rule_refusal(request)
            assert (refused_now is not None) == (name in bad), (request, refused_now)


def test_limits_read_by_code_are_the_protos_own_numbers_P6():
    """P6: the limits code reads are the generated numbers of the proto's rules, and a rule
    stated on several fields (a text's bytes, a retry key's characters, a long-poll's
    wait) states the same number on each."""
    generated = {n: v for n, v in vars(proto_limits).items() if n.isupper()}
    groups: dict[int, str | tuple[str, ...]] = {
        limits.MAX_TEXT_BYTES: "_TEXT_MAX_BYTES",
        limits.MAX_SUBMISSION_ID: ("_SUBMISSION_ID_MAX_LEN", "_IDEMPOTENCY_KEY_MAX_LEN"),
        limits.MAX_WAIT_SECONDS: "_WAIT_SECONDS_LTE",
    }
    for value, suffixes in groups.items():
        named = [n for n in generated if n.endswith(suffixes)]
        assert named, suffixes
        assert {generated[n] for n in named} == {value}, named


def test_every_retry_key_field_holds_200_characters_not_bytes_C4_P6():
    """C4 P6: every retry key a caller chooses (submission_id, idempotency_key) in every
    service's requests has one rule: at most MAX_SUBMISSION_ID characters, so 200
    two-byte characters pass and 201 are refused naming the field, count and limit."""
    keys = []
    for module in (pb, functions_pb2, scheduler_pb2):
        for message in module.DESCRIPTOR.message_types_by_name.values():
            for field in message.fields:
                if field.name in ("submission_id", "idempotency_key"):
                    keys.append((getattr(module, message.name), field.name))
    assert len(keys) >= 8, keys  # Send, SendMessage, SendFromTurn, deliveries, Call, ...
    limit = limits.MAX_SUBMISSION_ID
    for request, name in keys:
        refused = field_rule_refusal(request(**{name: "é" * limit}))
        assert refused is None or refused.metadata["field"] != name, (request, refused)
        refused = field_rule_refusal(request(**{name: "k" * (limit + 1)}))
        assert refused is not None, request
        assert refused.message == (
            f"{name} is {limit + 1} characters; the limit is {limit} characters"
        )
        assert refused.metadata == {"field": name, "rule": "string.max_len", "limit": str(limit)}


async def test_the_identity_is_checked_before_the_field_rules_B8(messaging, database_url):
    """B8: a request without a valid identity is refused UNAUTHENTICATED before its body
    is parsed, so before its fields are checked: a Send past the text rule, unsigned,
    is not told about its text."""
    request = pb.SendRequest(inbox_id="x", text="x" * (limits.MAX_TEXT_BYTES + 1))
    async with grpc.aio.insecure_channel(messaging.address) as channel:
        send = channel.unary_unary(
            "/agentworks.messaging.v1.MessagingService/Send",
            request_serializer=pb.SendRequest.SerializeToString,
            response_deserializer=pb.SendReceipt.FromString,
        )
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await send(request, timeout=10)
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "text" not in (refused.value.details() or "")
    assert _count(database_url, "messages") == 0


async def test_a_request_past_its_size_as_sent_is_refused_before_it_is_parsed_B8(
    alice, database_url
):
    """B8: messaging refuses a Send larger than its largest legal one from its size as
    sent, before parsing it (so before any field rule), with the reason REQUEST_LIMIT and
    the limit in metadata; nothing stored."""
    parts = [common_pb2.Part(text="x" * 1000) for _ in range(400)]  # ~400 KB of parts
    with pytest.raises(InvalidArgument) as refused:
        await alice._unary("Send", pb.SendRequest(inbox_id="x", parts=parts))
    assert refused.value.reason == Reason.REQUEST_LIMIT
    assert refused.value.message.startswith("Send's request is ")
    assert int(refused.value.metadata["limit"]) < 400_000
    assert _count(database_url, "messages") == 0
