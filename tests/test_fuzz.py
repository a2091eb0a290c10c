"""A short fuzz run against the gRPC APIs of messaging, functions and scheduler (P6).

Requests are built from the proto descriptors by hypothesis: random strings (NUL and
other control characters included), ints at and past their ranges, unknown enum values,
random Structs (NaN and Infinity included), invalid Timestamps, random oneof choices —
mixed with real ids and names so that many requests get past the first checks. Every
request must end with a status code within its deadline: never INTERNAL or UNKNOWN (an
unhandled error), never DEADLINE_EXCEEDED (a hang). Long-poll waits are drawn from values
that do not wait, so the run stays short. Deterministic (`derandomize=True`);
`AGENTWORKS_FUZZ_EXAMPLES` sets the examples per service (default 120).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
from typing import Any

import grpc
import pytest
from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor, ServiceDescriptor
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentworks.client import FunctionsClient, MessagingClient, SchedulerClient
from agentworks.common.v1 import common_pb2
from agentworks.core.identity import METADATA_KEY
from agentworks.functions.v1 import functions_pb2, functions_pb2_grpc
from agentworks.messaging.v1 import messaging_pb2, messaging_pb2_grpc
from agentworks.scheduler.v1 import scheduler_pb2, scheduler_pb2_grpc

EXAMPLES = int(os.environ.get("AGENTWORKS_FUZZ_EXAMPLES", "120"))
FORBIDDEN = {"INTERNAL", "UNKNOWN", "DEADLINE_EXCEEDED"}
# Fields whose values would make a long-poll wait: only values that return at once.
NO_WAIT = {"wait_seconds": [-1, 0, 26, 2**31 - 1]}
PRINCIPALS = [
    ("user:ops", {"operator"}),
    ("user:owner", set()),
    ("user:alice", set()),
    ("agent:demo/bot", set()),
    ("service:gateway", set()),
    ("service:runner", {"runtime"}),
]

FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)

pytestmark = pytest.mark.reliability(
    scenario="Fuzzing the gRPC APIs (P6)",
    action=f"{EXAMPLES} hypothesis-generated requests per service (derandomized) built from "
    "the proto descriptors: random and control-character strings, ints past their range, "
    "unknown enum values, JSON text with NaN/Infinity, invalid Timestamps, mixed with real ids",
    check="every request answers with a status code within 10 s; never INTERNAL, UNKNOWN or "
    "DEADLINE_EXCEEDED",
)

_INT_RANGES = {
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SINT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
}

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(2**60), 2**60).map(float),
    st.text(max_size=20),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def _weighted(*choices: tuple[int, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """One of the strategies, picked with these relative weights."""
    indexes = [i for i, (weight, _) in enumerate(choices) for _ in range(weight)]
    return st.sampled_from(indexes).flatmap(lambda i: choices[i][1])


def _ints(lo: int, hi: int) -> st.SearchStrategy[int]:
    return st.one_of(st.integers(-3, 300), st.sampled_from([lo, hi, -1, 0, 2**31 - 1]))


def message_strategy(
    descriptor: Descriptor, pool: list[str], depth: int = 0
) -> st.SearchStrategy[Any]:
    """Random messages of this type (recursive to a small depth)."""
    cls = message_factory.GetMessageClass(descriptor)
    name = descriptor.full_name
    if name == "google.protobuf.Timestamp":
        return st.builds(
            cls,
            seconds=st.one_of(
                st.integers(1_600_000_000, 2_000_000_000), st.sampled_from([2**62, -(2**62)])
            ),
            nanos=st.sampled_from([0, 5, -1, 2 * 10**9]),
        )
    if depth > 3:
        return st.just(cls())

    fields = []
    for field in descriptor.fields:
        fields.append((field, _field_strategy(field, pool, depth)))

    @st.composite
    def build(draw: Any) -> Any:
        message = cls()
        chosen_oneofs: set[str] = set()
        for field, strategy in fields:
            oneof = field.containing_oneof
            if oneof is not None:
                if oneof.name in chosen_oneofs or not draw(st.booleans()):
                    continue
                chosen_oneofs.add(oneof.name)
            elif not draw(st.integers(0, 3)):  # leave about a quarter of the fields unset
                continue
            _set(message, field, draw(strategy))
        return message

    return build()


def _scalar(field: FieldDescriptor, pool: list[str]) -> st.SearchStrategy[Any]:
    if field.name in NO_WAIT:
        return st.sampled_from(NO_WAIT[field.name])
    kind = field.type
    if kind == FieldDescriptor.TYPE_STRING:
        # Mostly real ids and names, so that requests get past the first checks.
        return _weighted(
            (4, st.sampled_from(pool)),
            (1, st.text(max_size=30)),
            (1, st.text(st.characters(codec="utf-8", max_codepoint=0x20), max_size=5)),
            (1, st.sampled_from(["", "x" * 70_000, "../../etc/passwd", "a\x00b", "é" * 9000])),
        )
    if kind == FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=64)
    if kind == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if kind in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return st.floats(allow_nan=True, allow_infinity=True, width=32)
    if kind == FieldDescriptor.TYPE_ENUM:
        valid = [v.number for v in field.enum_type.values if v.number]
        return _weighted((4, st.sampled_from(valid)), (1, st.sampled_from([0, 99, -5])))
    if kind in _INT_RANGES:
        return _ints(*_INT_RANGES[kind])
    raise NotImplementedError(field.full_name)


def _field_strategy(field: FieldDescriptor, pool: list[str], depth: int) -> st.SearchStrategy:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        if field.message_type.GetOptions().map_entry:
            key = _scalar(field.message_type.fields_by_name["key"], pool)
            value_field = field.message_type.fields_by_name["value"]
            value = (
                message_strategy(value_field.message_type, pool, depth + 1)
                if value_field.type == FieldDescriptor.TYPE_MESSAGE
                else _scalar(value_field, pool)
            )
            return st.dictionaries(key, value, max_size=3)
        one = message_strategy(field.message_type, pool, depth + 1)
    elif field.name.endswith("_json"):  # JSON text: valid documents, and text that is not
        one = st.one_of(
            st.dictionaries(st.text(max_size=8), json_values, max_size=4).map(json.dumps),
            json_values.map(json.dumps),
            _scalar(field, pool),
        )
    else:
        one = _scalar(field, pool)
    if field.is_repeated:
        return st.lists(one, max_size=3)
    return one


def _set(message: Any, field: FieldDescriptor, value: Any) -> None:
    target = getattr(message, field.name)
    if field.type == FieldDescriptor.TYPE_MESSAGE and field.message_type.GetOptions().map_entry:
        scalar_values = field.message_type.fields_by_name["value"].type != (
            FieldDescriptor.TYPE_MESSAGE
        )
        for key, item in value.items():
            if scalar_values:
                target[key] = item
            else:
                target[key].CopyFrom(item)
    elif field.is_repeated:
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            for item in value:
                target.add().CopyFrom(item)
        else:
            target.extend(value)
    elif field.type == FieldDescriptor.TYPE_MESSAGE:
        target.CopyFrom(value)
    else:
        setattr(message, field.name, value)


# ------------------------------------------------------------------------------ the run


class Fuzzer:
    """Sends generated requests to one service and records forbidden outcomes."""

    def __init__(self, service: ServiceDescriptor, address: str, identity, pool: list[str]):
        self.service = service
        self.address = address
        self.identity = identity
        self.methods = list(service.methods)
        self.strategies = {m.name: message_strategy(m.input_type, pool) for m in self.methods}
        self.channel = grpc.aio.insecure_channel(address)
        self.seen: dict[str, set[str]] = {}

    async def send(self, method_name: str, request: Any, principal: tuple[str, set]) -> str:
        method = self.service.methods_by_name[method_name]
        path = f"/{self.service.full_name}/{method.name}"
        token = self.identity(principal[0], principal[1]).token()
        metadata = ((METADATA_KEY, token),)
        request_cls = message_factory.GetMessageClass(method.input_type)
        serialize = request_cls.SerializeToString
        reply_cls = message_factory.GetMessageClass(method.output_type)
        try:
            if method.client_streaming:
                call = self.channel.stream_unary(
                    path, request_serializer=serialize, response_deserializer=reply_cls.FromString
                )

                async def chunks():
                    for chunk in request:
                        yield chunk

                await call(chunks(), metadata=metadata, timeout=10)
            elif method.server_streaming:
                # A stream (N1) stays open: its first event, or a stream still open after a
                # second, is the answer; its refusal comes before any event.
                stream = self.channel.unary_stream(
                    path, request_serializer=serialize, response_deserializer=reply_cls.FromString
                )(request, metadata=metadata)
                try:
                    async with asyncio.timeout(1):
                        async for _ in stream:
                            break
                except TimeoutError:
                    pass
                finally:
                    stream.cancel()
            else:
                call = self.channel.unary_unary(
                    path, request_serializer=serialize, response_deserializer=reply_cls.FromString
                )
                await call(request, metadata=metadata, timeout=10)
            code = "OK"
        except grpc.aio.AioRpcError as exc:
            code = exc.code().name
            if code in FORBIDDEN or (exc.details() or "").startswith("Stream removed"):
                raise AssertionError(
                    f"{method_name} as {principal[0]} -> {code}: {exc.details()}\n{request!r}"
                ) from None
        self.seen.setdefault(method_name, set()).add(code)
        return code

    def request(self, data: Any, method_name: str) -> Any:
        method = self.service.methods_by_name[method_name]
        strategy = self.strategies[method_name]
        if method.client_streaming:
            return data.draw(st.lists(strategy, max_size=3))
        return data.draw(strategy)

    async def close(self) -> None:
        await self.channel.close()


async def run_fuzz(fuzzer: Fuzzer, data: Any) -> None:
    method = data.draw(st.sampled_from([m.name for m in fuzzer.methods]))
    principal = data.draw(st.sampled_from(PRINCIPALS))
    await fuzzer.send(method, fuzzer.request(data, method), principal)


@pytest.fixture
async def world(start_messaging, start_functions, start_scheduler, identity):
    """All three services with a target, a call, a conversation and timers to aim at."""
    messaging = await start_messaging()
    functions = await start_functions()
    scheduler = await start_scheduler(SCHEDULER_MESSAGING_ADDRESS=messaging.address)
    ops_m = MessagingClient(messaging.address, identity=identity("user:ops", {"operator"}))
    ops_f = FunctionsClient(functions.address, identity=identity("user:ops", {"operator"}))
    owner = FunctionsClient(functions.address, identity=identity("user:owner"))
    alice_m = MessagingClient(messaging.address, identity=identity("user:alice"))
    alice_f = FunctionsClient(functions.address, identity=identity("user:alice"))
    bot_f = FunctionsClient(functions.address, identity=identity("agent:demo/bot"))
    bot_s = SchedulerClient(scheduler.address, identity=identity("agent:demo/bot"))
    clients = [ops_m, ops_f, owner, alice_m, alice_f, bot_f, bot_s]
    await ops_m.register_target("crew:demo", owner="user:owner")
    await ops_f.register_target("crew:demo", owner="user:owner")
    await owner.declare_function(
        "crew:demo",
        "echo",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
        allowed_callers=["*"],
    )
    receipt = await alice_m.send("hello", target="crew:demo")
    call = await alice_f.call("crew:demo", "echo", {"text": "x"})
    await bot_f.claim_execution(["crew:demo"], lease_seconds=300)
    wake_up = await bot_s.create_wake_up(receipt.conversation_id, delay_seconds=3600)
    schedule = await bot_s.create_schedule(receipt.conversation_id, "p", interval_seconds=3600)
    hook = await bot_s.create_webhook(receipt.conversation_id, name="h")
    pool = [
        "demo",
        "echo",
        "crew:demo",
        "user:owner",
        "result.json",
        "0 9 * * *",
        "Europe/Berlin",
        receipt.inbox_id,
        receipt.conversation_id,
        receipt.message_id,
        call.call_id,
        wake_up.wake_up_id,
        schedule.schedule_id,
        hook.webhook_id,
    ]
    yield {
        "messaging": messaging,
        "functions": functions,
        "scheduler": scheduler,
        "pool": pool,
        "inbox_id": receipt.inbox_id,
        "conversation_id": receipt.conversation_id,
    }
    for client in clients:
        await client.close()


@pytest.fixture
async def fuzzers(world, identity):
    made = {
        name: Fuzzer(descriptor, world[name].address, identity, world["pool"])
        for name, descriptor in (
            ("messaging", messaging_pb2.DESCRIPTOR.services_by_name["MessagingService"]),
            ("functions", functions_pb2.DESCRIPTOR.services_by_name["FunctionsService"]),
            ("scheduler", scheduler_pb2.DESCRIPTOR.services_by_name["SchedulerService"]),
        )
    }
    yield made
    for name, fuzzer in made.items():
        if os.environ.get("AGENTWORKS_FUZZ_VERBOSE"):
            print(name, {m: sorted(codes) for m, codes in sorted(fuzzer.seen.items())})
        await fuzzer.close()


@pytest.mark.parametrize("service", ["messaging", "functions", "scheduler"])
@FUZZ
@given(data=st.data())
async def test_fuzzed_requests_never_fail_internally_P6(fuzzers, service, data):
    """P6: random requests to this service end with a status code, never INTERNAL."""
    await run_fuzz(fuzzers[service], data)


# ------------------------------------------------------------ what the fuzzing found

CREW = common_pb2.TargetRef(kind=common_pb2.TARGET_KIND_CREW, name="demo")
HUGE_NAME = common_pb2.TargetRef(kind=common_pb2.TARGET_KIND_CREW, name="n" * 70_000)


def _cursor(raw: str) -> str:
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _nan_part() -> common_pb2.Part:
    return common_pb2.Part(data_json=json.dumps({"x": float("nan")}))


def _attributes(value: dict[str, Any]) -> str:
    return json.dumps(value)


# (service, method, principal, request from the world's ids, code, words). Each of these
# once ended INTERNAL, or RESOURCE_EXHAUSTED "Stream removed" because the error message
# quoted the whole input; the bad-input tables of functions and scheduler hold theirs.
FOUND = [
    (
        "messaging",
        "Send",
        "user:alice",
        lambda w: messaging_pb2.SendRequest(target=CREW, text="a\x00b"),
        "INVALID_ARGUMENT",
        "text contains a NUL",
    ),
    (
        "messaging",
        "Send",
        "user:alice",
        lambda w: messaging_pb2.SendRequest(target=CREW, text="x", submission_id="s\x00"),
        "INVALID_ARGUMENT",
        "submission_id",
    ),
    (
        "messaging",
        "Send",
        "user:alice",
        lambda w: messaging_pb2.SendRequest(target=CREW, parts=[_nan_part()]),
        "INVALID_ARGUMENT",
        "parts[0]",
    ),
    (
        "functions",
        "Call",
        "user:alice",
        lambda w: functions_pb2.CallRequest(
            target=CREW, function="echo", inputs_json="[" * 100_000 + "]" * 100_000
        ),
        "INVALID_ARGUMENT",
        "nests objects and arrays too deep",
    ),
    (
        "messaging",
        "Send",
        "user:alice",
        lambda w: messaging_pb2.SendRequest(target=HUGE_NAME, text="x"),
        "INVALID_ARGUMENT",
        # Refused from its size before it is read (B8), so it no longer quotes the name.
        "target.name is 70000 bytes",
    ),
    (
        "messaging",
        "Read",
        "user:alice",
        lambda w: messaging_pb2.ReadRequest(
            inbox_id=w["inbox_id"], after=_cursor("p1:" + "9" * 25)
        ),
        "INVALID_ARGUMENT",
        "not a cursor",
    ),
    (
        "messaging",
        "SendMessage",
        "agent:demo/bot",
        lambda w: messaging_pb2.SendMessageRequest(inbox_id=w["inbox_id"], text="\x00"),
        "INVALID_ARGUMENT",
        "text",
    ),
    (
        "messaging",
        "EnqueueDelivery",
        "service:scheduler",
        lambda w: messaging_pb2.EnqueueDeliveryRequest(
            conversation_id=w["conversation_id"],
            kind=messaging_pb2.DELIVERY_KIND_WAKE_UP,
            idempotency_key="k",
            attributes_json=_attributes({"x": float("inf")}),
        ),
        "INVALID_ARGUMENT",
        "attributes",
    ),
    (
        "messaging",
        "EnqueueDelivery",
        "service:scheduler",
        lambda w: messaging_pb2.EnqueueDeliveryRequest(
            conversation_id=w["conversation_id"],
            kind=messaging_pb2.DELIVERY_KIND_WAKE_UP,
            idempotency_key="k",
            attributes_json=_attributes({"k\x00": 1}),
        ),
        "INVALID_ARGUMENT",
        "attributes",
    ),
    (
        "messaging",
        "EnqueueDelivery",
        "service:scheduler",
        lambda w: messaging_pb2.EnqueueDeliveryRequest(
            conversation_id=w["conversation_id"],
            kind=messaging_pb2.DELIVERY_KIND_WAKE_UP,
            idempotency_key="k\x00",
        ),
        "INVALID_ARGUMENT",
        "idempotency_key",
    ),
    (
        "functions",
        "GetTarget",
        "user:alice",
        lambda w: functions_pb2.GetTargetRequest(ref=HUGE_NAME),
        "INVALID_ARGUMENT",
        # The proto's pattern refuses it; a value that long is sized, not quoted.
        "ref.name is 70000 bytes",
    ),
    (
        "scheduler",
        "ListSchedules",
        "user:alice",
        lambda w: scheduler_pb2.ListSchedulesRequest(conversation_id="é" * 9000),
        "NOT_FOUND",
        "message truncated",
    ),
]


@pytest.mark.reliability(
    scenario="What the fuzzing found, kept fixed (P6)",
    action="requests that once failed INTERNAL or lost their status: NUL characters in "
    "text, keys and JSON, NaN/Infinity in JSON, cursors past int64, error messages that "
    "quoted a 70 KB input",
    check="a clear INVALID_ARGUMENT / NOT_FOUND naming the field; long messages truncated so "
    "the status arrives",
)
@pytest.mark.parametrize(
    ("service", "method", "principal", "build", "code", "words"),
    FOUND,
    ids=[f"{f[0]}-{f[1]}-{i}" for i, f in enumerate(FOUND)],
)
async def test_what_fuzzing_found_stays_fixed_P6(
    world, identity, service, method, principal, build, code, words
):
    """P6: inputs that once failed internally now get a clear refusal."""
    roles = {"runtime"} if principal == "service:runner" else set()
    request = build(world)
    async with grpc.aio.insecure_channel(world[service].address) as channel:
        stub = STUBS[service](channel)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await getattr(stub, method)(
                request, metadata=((METADATA_KEY, identity(principal, roles).token()),), timeout=10
            )
    assert err.value.code().name == code, err.value.details()
    assert words in (err.value.details() or "")


STUBS = {
    "messaging": messaging_pb2_grpc.MessagingServiceStub,
    "functions": functions_pb2_grpc.FunctionsServiceStub,
    "scheduler": scheduler_pb2_grpc.SchedulerServiceStub,
}


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field, hand-encoded."""

    def varint(n: int) -> bytes:
        out = b""
        while n > 0x7F:
            out += bytes([n & 0x7F | 0x80])
            n >>= 7
        return out + bytes([n])

    return varint(number << 3 | 2) + varint(len(payload)) + payload


def _truncated_call() -> bytes:
    """A CallRequest whose inputs_json (field 9) says 50 bytes and brings 5."""
    target = _field(1, b"\x08\x01" + _field(2, b"demo")) + _field(2, b"echo")
    return target + b"\x4a\x32" + b'{"a":'


UNPARSABLE = [
    (
        "functions",
        "/agentworks.functions.v1.FunctionsService/Call",
        False,
        _truncated_call(),
    ),
    ("messaging", "/agentworks.messaging.v1.MessagingService/Send", False, b"\xff\xff\xff\xff"),
    ("scheduler", "/agentworks.scheduler.v1.SchedulerService/GetWakeUp", False, b"\x0a\x05ab"),
    ("functions", "/agentworks.functions.v1.FunctionsService/UploadFile", True, b"\x1a\x99"),
]


@pytest.mark.reliability(
    scenario="Requests protobuf cannot parse (P6)",
    action="raw bytes no Python client can build: truncated and invalid wire data, on "
    "unary and client-streaming methods",
    check="INVALID_ARGUMENT saying the request could not be parsed (was UNKNOWN, naming an "
    "internal exception)",
)
@pytest.mark.parametrize(
    ("service", "path", "streaming", "payload"), UNPARSABLE, ids=[u[1] for u in UNPARSABLE]
)
async def test_unparsable_requests_are_refused_P6(
    world, identity, service, path, streaming, payload
):
    """P6: a request that cannot be parsed is INVALID_ARGUMENT, not UNKNOWN."""
    token = identity("user:alice").token()
    async with grpc.aio.insecure_channel(world[service].address) as channel:
        raw = {"request_serializer": bytes, "response_deserializer": bytes}
        with pytest.raises(grpc.aio.AioRpcError) as err:
            if streaming:

                async def chunks():
                    yield payload

                await channel.stream_unary(path, **raw)(
                    chunks(), metadata=((METADATA_KEY, token),), timeout=10
                )
            else:
                await channel.unary_unary(path, **raw)(
                    payload, metadata=((METADATA_KEY, token),), timeout=10
                )
    assert err.value.code().name == "INVALID_ARGUMENT", err.value.details()
    assert "could not be parsed" in (err.value.details() or "")
