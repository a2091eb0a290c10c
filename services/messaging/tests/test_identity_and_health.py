"""Signed identity on every call (A2), health and reflection (P4), schema drift (P1)."""

from __future__ import annotations

import time

import grpc
import psycopg
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from agentworks.core.identity import METADATA_KEY, mint
from agentworks.core.keys import KeyDirectory, SigningKey, add_trusted_key, write_trusted_keys
from agentworks.messaging.v1 import messaging_pb2 as pb
from agentworks.messaging.v1 import messaging_pb2_grpc


@pytest.fixture
async def stub(messaging):
    async with grpc.aio.insecure_channel(messaging.address) as channel:
        yield messaging_pb2_grpc.MessagingServiceStub(channel)


@pytest.mark.parametrize(
    ("case", "make_token"),
    [
        ("missing", lambda key: None),
        ("forged", lambda key: mint("user:alice", SigningKey.generate("gateway"))),
        ("expired", lambda key: mint("user:alice", key, ttl_seconds=60, now=time.time() - 120)),
        ("garbage", lambda key: "not.a.token"),
    ],
)
async def test_missing_forged_or_expired_identity_is_unauthenticated_A2(
    stub, signing_keys, case, make_token
):
    """A2: a call without a valid signed identity gets UNAUTHENTICATED."""
    token = make_token(signing_keys.ensure("gateway")[0])
    metadata = ((METADATA_KEY, token),) if token else ()
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.Read(pb.ReadRequest(inbox_id="x"), metadata=metadata)
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "identity" in err.value.details()


async def test_unsigned_principal_metadata_is_not_trusted_A2(stub):
    """A2: naming a principal in plain metadata grants nothing."""
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.Send(
            pb.SendRequest(text="hi"), metadata=(("x-agentworks-principal", "user:ops"),)
        )
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_a_valid_identity_is_served_A1_A2(stub, signing_keys):
    """A1 A2: a properly signed identity reaches the service."""
    token = mint("user:alice", signing_keys.ensure("gateway")[0])
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.Read(pb.ReadRequest(inbox_id="nope"), metadata=((METADATA_KEY, token),))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND


async def test_key_rotation_accepts_both_keys_of_a_signer_then_only_the_new_one_A2_T1(
    start_messaging, tmp_path
):
    """A2 T1: rotating the gateway's key without a restart: once the trusted keys list
    the new key beside the old one, identities of both pass; once the old one is
    removed, its identities are refused and the new one's still pass; a key never
    listed is refused throughout."""
    keys = KeyDirectory(tmp_path / "keys")
    old, _ = keys.ensure("gateway")
    running = await start_messaging(**keys.env("service:messaging"))
    new = SigningKey.generate("gateway")
    stranger = SigningKey.generate("gateway")

    async def read_as(key: SigningKey) -> grpc.StatusCode:
        metadata = ((METADATA_KEY, mint("user:alice", key)),)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await reader.Read(pb.ReadRequest(inbox_id="nope"), metadata=metadata)
        return err.value.code()

    async with grpc.aio.insecure_channel(running.address) as channel:
        reader = messaging_pb2_grpc.MessagingServiceStub(channel)
        past = grpc.StatusCode.NOT_FOUND  # the identity check passed
        assert (await read_as(old), await read_as(new)) == (past, grpc.StatusCode.UNAUTHENTICATED)
        add_trusted_key(keys.trusted_path, new.trusted)
        assert (await read_as(new), await read_as(old)) == (past, past)
        write_trusted_keys(keys.trusted_path, [k for k in keys.trusted() if k.kid != old.kid])
        # An unknown kid makes the service read the file again at once.
        assert await read_as(stranger) == grpc.StatusCode.UNAUTHENTICATED
        assert (await read_as(old), await read_as(new)) == (grpc.StatusCode.UNAUTHENTICATED, past)


async def test_health_is_serving_and_reflection_lists_the_service_P4(messaging):
    """P4: standard gRPC health checking and reflection answer without identity."""
    async with grpc.aio.insecure_channel(messaging.address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", "agentworks.messaging.v1.MessagingService"):
            reply = await health.Check(health_pb2.HealthCheckRequest(service=service))
            assert reply.status == health_pb2.HealthCheckResponse.SERVING

        reflection = reflection_pb2_grpc.ServerReflectionStub(channel)
        responses = reflection.ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")])
        )
        async for response in responses:
            names = {s.name for s in response.list_services_response.service}
            assert "agentworks.messaging.v1.MessagingService" in names
            break


async def test_drain_turns_health_to_not_serving_P4(start_messaging):
    """P4: on stop the service first reports NOT_SERVING, then drains."""
    running = await start_messaging()
    async with grpc.aio.insecure_channel(running.address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        await running.server.health.enter_graceful_shutdown()
        reply = await health.Check(health_pb2.HealthCheckRequest(service=""))
        assert reply.status == health_pb2.HealthCheckResponse.NOT_SERVING


def test_tables_match_the_migrated_schema_P1(database_url):
    """P1: tables.py and migrations/ describe the same messaging schema."""
    from agentworks_messaging.tables import metadata

    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = 'messaging' AND table_name <> 'schema_migrations'"
        ).fetchall()
    migrated = {(t, c) for t, c in rows}
    declared = {(table.name, col.name) for table in metadata.tables.values() for col in table.c}
    assert migrated == declared
