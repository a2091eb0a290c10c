"""Bounded cost in messaging (B8): oversized fields are refused from their sizes, before
anything walks, converts or serialises them; another tenant does not notice the attack."""

from __future__ import annotations

import asyncio
import time
import tracemalloc

import grpc
import pytest

from agentworks.client.identity import METADATA_KEY
from agentworks.common.v1 import common_pb2
from agentworks.messaging.v1 import messaging_pb2 as pb
from agentworks_messaging.sizes import MAX_PARTS, measure
from tests.fixtures.neighbours import Victim, assert_unharmed, attacking

CREW = common_pb2.TargetRef(kind=common_pb2.TARGET_KIND_CREW, name="demo")
# The Send: 1.5 M parts of 5 bytes each (7.5 MB, under gRPC's 8 MiB cap).
MANY_PARTS = 1_500_000


# One `parts` item on the wire: field 4, 3 bytes long, holding Part.text (field 1) "a".
ONE_PART = b"\x22\x03\x0a\x01a"


def _many_parts_request(destination: dict, parts: int = MANY_PARTS) -> bytes:
    """A SendRequest with `parts` parts of 5 bytes each, as the attacker's bytes."""
    assert pb.SendRequest(parts=[common_pb2.Part(text="a")]).SerializeToString() == ONE_PART
    return pb.SendRequest(text="hi", **destination).SerializeToString() + ONE_PART * parts


def test_a_request_of_many_parts_is_refused_by_its_count_without_reading_them_B8():
    """B8: the count of a repeated field is read from the container; 1.5 M parts are
    refused naming the field and the limit, in far less time than a walk would take and
    with no Python object made per part."""
    request = pb.SendRequest.FromString(_many_parts_request({"target": CREW}))
    tracemalloc.start()
    try:
        started = time.perf_counter()
        with pytest.raises(
            Exception, match=rf"parts has too many items: got 1500000; the limit is {MAX_PARTS}"
        ):
            measure(request)
        took = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert took < 0.01, took
    assert peak < 1024 * 1024, peak  # not 1.5 M dicts (the old walk: over 1 GiB of RSS)


def test_parts_under_the_count_but_over_the_size_are_refused_as_sent_B8():
    """B8: parts few enough to count but more than 256 KiB as sent are refused from
    their encoded size, before any of them is parsed as JSON."""
    request = pb.SendRequest(
        target=CREW,
        text="x",
        parts=[common_pb2.Part(data_json='{"k": "' + "v" * 100_000 + '"}') for _ in range(3)],
    )
    with pytest.raises(Exception, match=r"parts are \d+ bytes as sent; the limit is 262144"):
        measure(request)
    request = pb.ClaimTurnRequest(targets=[CREW] * 101)
    with pytest.raises(Exception, match="targets has too many items: got 101; the limit is 100"):
        measure(request)
    with pytest.raises(Exception, match=r"inbox_id is 5000 characters"):
        measure(pb.ReadRequest(inbox_id="x" * 5000))
    with pytest.raises(Exception, match=r"text is 70000 characters"):
        measure(pb.SendMessageRequest(inbox_id="i", text="y" * 70_000))


@pytest.mark.reliability(
    scenario="A Send of 1.5 M parts over gRPC (B5, B8)",
    action="a caller sends, again and again, SendRequests of 1.5 M five-byte parts (7.5 MB, "
    "under gRPC's 8 MiB cap) to a new conversation and into its own inbox, with its own "
    "identity, while another tenant sends and reads",
    check="each refused INVALID_ARGUMENT from its size as sent, before it is parsed (past "
    "the largest legal Send); "
    "the other tenant's p99 within 3x its calm p99, nothing over 1 s; Python memory "
    "allocated during the attack stays under 64 MiB (was 1.7 GiB of RSS)",
)
async def test_sends_of_a_million_parts_do_not_slow_another_tenant_B5_B8(
    messaging, clients, identity, demo
):
    """B5 B8: the issue's attack (a victim's max went 0.016 -> 11.8 s, RSS 490 -> 1,754
    MiB): refused from sizes, the neighbour unharmed."""
    alice = await clients("user:alice")
    first = await alice.send("hello", target=demo)
    mallory = await clients("user:mallory")
    own = await mallory.send("mine", target=demo)
    token = identity("user:mallory").token()
    bodies = [
        _many_parts_request({"target": CREW}),
        _many_parts_request({"inbox_id": own.inbox_id}),
    ]
    refusals: list[str] = []

    turn = 0

    async def victim_request() -> None:  # a send or a read, in turn
        nonlocal turn
        turn += 1
        if turn % 2:
            await alice.send("again", inbox_id=first.inbox_id)
        else:
            await alice.read(first.inbox_id)

    # The attacker's client in threads of its own (a blocking channel): its side of the
    # 7.5 MB sends is not on the event loop the in-process service and victim share.
    channel = grpc.insecure_channel(
        messaging.address, options=[("grpc.max_send_message_length", 8 * 1024 * 1024)]
    )
    send = channel.unary_unary(
        "/agentworks.messaging.v1.MessagingService/Send",
        request_serializer=lambda b: b,
        response_deserializer=lambda b: b,
    )
    n = 0

    def attack_sync(body: bytes) -> None:
        try:
            send(body, metadata=((METADATA_KEY, token),), timeout=10)
        except grpc.RpcError as exc:
            refusals.append(f"{exc.code().name}: {exc.details()}")
            raise

    async def attack_once() -> None:
        nonlocal n
        n += 1
        await asyncio.to_thread(attack_sync, bodies[n % 2])

    victim = Victim(victim_request)
    tracemalloc.start()  # for both measures: tracing slows every allocation alike
    try:
        calm = await victim.measure(seconds=1.5)
        tracemalloc.reset_peak()
        async with attacking(attack_once, concurrency=1) as stats:
            loud = await victim.measure(seconds=2.5)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        channel.close()
    assert stats.requests >= 4, stats
    assert refusals and all(
        r.startswith("INVALID_ARGUMENT") and "Send's request is 7500" in r for r in refusals
    ), refusals[:3]
    assert_unharmed(calm, loud, "sends of 1.5 M parts")
    assert peak < 64 * 1024 * 1024, f"{peak / 2**20:.0f} MiB allocated during the attack"
