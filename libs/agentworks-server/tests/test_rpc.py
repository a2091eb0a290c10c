"""The server interceptor every service runs (A2, P4), over a real gRPC socket.

A small generic service on the shared `GrpcServer` answers by the request's bytes:
fine, a refusal (`AgentWorksError`), or an unexpected exception. Each case is called
twice, because the interceptor builds a method's wrapped handler on its first request
and reuses it after.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
import structlog
from prometheus_client import REGISTRY

from agentworks.client import MessagingClient
from agentworks.core import errors
from agentworks.core.identity import METADATA_KEY, Minter, current_identity, mint
from agentworks.core.keys import KeyDirectory, SigningKey
from agentworks.core.wire import REQUEST_ID_KEY
from agentworks.server.rpc import GrpcServer
from agentworks.server.testing import free_port

SERVICE = "agentworks.test.Echo"
METHOD = f"/{SERVICE}/Echo"


async def _echo(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    if request == b"refuse":
        raise errors.NotFound("nothing called that here")
    if request == b"break":
        raise RuntimeError("a bug")
    if request == b"cancelled":
        raise errors.PreconditionFailed("call c1 has ended", reason=errors.Reason.CALL_CANCELLED)
    if request == b"long":  # a refusal that quotes a long input, with reason and metadata
        raise errors.InvalidArgument(
            "inputs for crew:x f are not valid: " + "; ".join(["at /xs/0: -1 is not one of"] * 800),
            reason=errors.Reason.FIELD_RULE,
            metadata={"field": "inputs", "limit": "2"},
        )
    context_vars = structlog.contextvars.get_contextvars()
    caller = current_identity.get()
    assert caller is not None
    return f"{caller.principal} {context_vars['request_id']}".encode()


def _register(server: grpc.aio.Server) -> None:
    handler = grpc.unary_unary_rpc_method_handler(_echo)
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(SERVICE, {"Echo": handler}),)
    )


def gateway_key(keys: KeyDirectory) -> SigningKey:
    return keys.ensure("gateway")[0]


@pytest.fixture
async def echo(signing_keys):
    server = GrpcServer(
        name="echo",
        listen="127.0.0.1:0",
        trusted_keys=signing_keys.trusted(),
        register=_register,
        service_names=[SERVICE],
    )
    port = await server.start()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield channel
    await server.stop(0)


def _count(code: str) -> float:
    from agentworks.server.metrics import GRPC_CODES

    labels = {
        "grpc_type": "unary",
        "grpc_service": METHOD.strip("/").rpartition("/")[0],
        "grpc_method": "Echo",
        "grpc_code": GRPC_CODES[code],
    }
    return REGISTRY.get_sample_value("grpc_server_handled_total", labels) or 0.0


async def test_every_request_is_checked_counted_and_mapped_A2_P4(echo, signing_keys):
    """A2 P4: on every request, not only a method's first: the identity is checked, the
    request id given is bound for logs (and answered in an internal error), refusals map
    to their status code, and each outcome is counted by method and code."""
    call = echo.unary_unary(METHOD)
    signed = ((METADATA_KEY, mint("user:alice", gateway_key(signing_keys))),)
    before = {code: _count(code) for code in ("OK", "NOT_FOUND", "INTERNAL", "UNAUTHENTICATED")}

    for n in range(2):
        request_id = f"req-{n}"
        answer = await call(b"hello", metadata=(*signed, (REQUEST_ID_KEY, request_id)))
        assert answer == f"user:alice {request_id}".encode()

        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await call(b"refuse", metadata=signed)
        assert refused.value.code() == grpc.StatusCode.NOT_FOUND
        assert refused.value.details() == "nothing called that here"

        with pytest.raises(grpc.aio.AioRpcError) as broken:
            await call(b"break", metadata=(*signed, (REQUEST_ID_KEY, request_id)))
        assert broken.value.code() == grpc.StatusCode.INTERNAL
        assert broken.value.details() == f"internal error (request_id={request_id})"

        with pytest.raises(grpc.aio.AioRpcError) as stranger:
            await call(
                b"hello",
                metadata=((METADATA_KEY, mint("user:alice", SigningKey.generate("gateway"))),),
            )
        assert stranger.value.code() == grpc.StatusCode.UNAUTHENTICATED

    for code, value in before.items():
        assert _count(code) == value + 2, code


async def test_a_request_without_a_request_id_gets_its_own_P4(echo, signing_keys):
    """P4: a request that brings no request id is given a fresh one for its logs."""
    call = echo.unary_unary(METHOD)
    signed = ((METADATA_KEY, mint("user:bob", gateway_key(signing_keys))),)
    first, second = [(await call(b"hello", metadata=signed)).decode().split() for _ in "ab"]
    assert first[0] == second[0] == "user:bob"
    assert len(first[1]) == 32 and first[1] != second[1]


async def test_an_unknown_method_is_unimplemented_every_time_P4(echo, signing_keys):
    """P4: a method the service does not have is UNIMPLEMENTED, however often it is asked."""
    signed = ((METADATA_KEY, mint("user:alice", gateway_key(signing_keys))),)
    for _ in range(2):
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await echo.unary_unary(f"/{SERVICE}/Nope")(b"", metadata=signed)
        assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED


@contextlib.asynccontextmanager
async def messaging_stand_in(signing_keys: KeyDirectory, **methods: Any) -> AsyncIterator[int]:
    """A server on the shared stack answering the named MessagingService methods with
    the given raw-bytes handlers; yields its port."""

    def register(server: grpc.aio.Server) -> None:
        handlers = {name: grpc.unary_unary_rpc_method_handler(h) for name, h in methods.items()}
        server.add_generic_rpc_handlers(
            (
                grpc.method_handlers_generic_handler(
                    "agentworks.messaging.v1.MessagingService", handlers
                ),
            )
        )

    server = GrpcServer(
        name="stand-in",
        listen="127.0.0.1:0",
        trusted_keys=signing_keys.trusted(),
        register=register,
        service_names=[],
    )
    port = await server.start()
    try:
        yield port
    finally:
        await server.stop(0)


async def test_a_typed_client_says_which_service_failed_to_answer_P4(signing_keys):
    """P4: when the channel gives up (nothing listening, or no answer before the
    deadline) the typed client's error names the service and the remedy, not only
    gRPC's own words."""

    async def hang(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        await asyncio.sleep(30)  # a service that never answers in time: what is tested
        return b""

    identity = Minter("user:alice", gateway_key(signing_keys))
    async with (
        messaging_stand_in(signing_keys, Send=hang) as port,
        MessagingClient(f"127.0.0.1:{port}", identity=identity, timeout=0.3) as c,
    ):
        with pytest.raises(errors.DeadlineExceeded) as late:
            await c.send("hi", target="crew:demo")
    assert late.value.message.startswith("the messaging service did not answer Send within")
    assert late.value.message.endswith("; retry shortly")

    closed = free_port()  # a port nobody listens on
    async with MessagingClient(f"127.0.0.1:{closed}", identity=identity, timeout=5) as c:
        with pytest.raises(errors.Unavailable) as down:
            await c.send("hi", target="crew:demo")
    assert down.value.message.startswith("the messaging service is unavailable (")


async def test_a_service_refusal_reaches_the_client_in_the_services_own_words_P4(signing_keys):
    """P4 S5: when a service answers DEADLINE_EXCEEDED or UNAVAILABLE itself (its own call
    to another service timed out or failed), the typed client passes its message on
    unchanged: no "did not answer within <this client's deadline>" wrapped around it, no
    second "retry shortly" (the 504 of an inbound webhook while messaging hangs)."""
    late = "the messaging service did not answer EnqueueDelivery within 10 s (x); retry shortly"
    down = "the messaging service is unavailable (x); retry shortly"

    async def refuse_late(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        raise errors.DeadlineExceeded(late)

    async def refuse_down(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        raise errors.Unavailable(down)

    identity = Minter("user:alice", gateway_key(signing_keys))
    async with (
        messaging_stand_in(signing_keys, Send=refuse_late, GetTranscript=refuse_down) as port,
        MessagingClient(f"127.0.0.1:{port}", identity=identity, timeout=30) as c,
    ):
        with pytest.raises(errors.DeadlineExceeded) as timed_out:
            await c.send("hi", target="crew:demo")
        with pytest.raises(errors.Unavailable) as unavailable:
            await c.get_transcript("00000000-0000-0000-0000-000000000000", limit=1)
    assert timed_out.value.message == late
    assert unavailable.value.message == down


async def test_a_refusal_carries_its_machine_readable_reason_to_the_client_F15_F12(
    echo, signing_keys
):
    """F15, F12: a refusal with a reason reaches the client as a google.rpc.ErrorInfo in
    the status details, and the typed client's error carries it, so the runtime tells a
    cancel from a lost lease without reading the message."""
    from agentworks.client.rpc import ServiceClient

    class Echo(ServiceClient):
        class stub_class:
            def __init__(self, channel):
                self.Echo = channel.unary_unary(METHOD)

    client = Echo(channel=echo, identity=Minter("user:alice", gateway_key(signing_keys)))
    with pytest.raises(errors.PreconditionFailed) as cancelled:
        await client._unary("Echo", b"cancelled")
    assert cancelled.value.reason == errors.Reason.CALL_CANCELLED
    assert cancelled.value.message == "call c1 has ended"
    with pytest.raises(errors.NotFound) as refused:
        await client._unary("Echo", b"refuse")
    assert refused.value.reason == errors.Reason.NOT_FOUND  # every NotFound names it


async def test_a_long_refusal_with_its_reason_arrives_whole_P6_B1(echo, signing_keys):
    """P6, B1: a refusal whose message quotes a long input and that carries a reason and
    metadata arrives as itself, message cut, reason and metadata intact; its message
    travels twice (grpc-message and the status details), and together they once passed
    the client's 8 KiB trailer limit, which turned it into RESOURCE_EXHAUSTED "Stream
    removed" (the schema-bomb neighbour test's victim saw it)."""
    from agentworks.client.rpc import ServiceClient

    class Echo(ServiceClient):
        class stub_class:
            def __init__(self, channel):
                self.Echo = channel.unary_unary(METHOD)

    client = Echo(channel=echo, identity=Minter("user:alice", gateway_key(signing_keys)))
    for _ in range(20):  # the 8 KiB soft limit refuses at random: try it often
        with pytest.raises(errors.InvalidArgument) as refused:
            await client._unary("Echo", b"long")
        assert refused.value.reason == errors.Reason.FIELD_RULE
        assert refused.value.metadata == {"field": "inputs", "limit": "2"}
        assert refused.value.message.startswith("inputs for crew:x f are not valid: at /xs/0")
        assert refused.value.message.endswith("(message truncated)")
