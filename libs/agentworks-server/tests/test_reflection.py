"""gRPC reflection answers in both versions, v1 (which grpcurl asks first) and v1alpha
(G1, issue 26), on a real service over a socket, without an identity."""

from __future__ import annotations

import grpc
import pytest
from grpc_reflection.v1alpha import reflection_pb2 as r

MESSAGING = "agentworks.messaging.v1.MessagingService"


@pytest.mark.parametrize("version", ["v1", "v1alpha"])
async def test_reflection_lists_and_describes_the_services_in_v1_and_v1alpha_G1(
    start_messaging, version
):
    """G1: ServerReflectionInfo lists the service, health and both reflection services,
    and returns the file that declares the messaging service, in either version."""
    service = await start_messaging()
    method = f"/grpc.reflection.{version}.ServerReflection/ServerReflectionInfo"
    async with grpc.aio.insecure_channel(service.address) as channel:
        call = channel.stream_stream(
            method,
            request_serializer=r.ServerReflectionRequest.SerializeToString,
            response_deserializer=r.ServerReflectionResponse.FromString,
        )
        requests = [
            r.ServerReflectionRequest(list_services=""),
            r.ServerReflectionRequest(file_containing_symbol=MESSAGING),
        ]
        answers = [answer async for answer in call(iter(requests), timeout=10)]
    listed = {s.name for s in answers[0].list_services_response.service}
    assert {
        MESSAGING,
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
        "grpc.reflection.v1alpha.ServerReflection",
    } <= listed
    files = answers[1].file_descriptor_response.file_descriptor_proto
    assert files and any(b"MessagingService" in f for f in files)


async def test_a_dev_identity_from_the_suites_gateway_key_opens_the_services_to_grpc_tools_G1(
    start_messaging, signing_keys, tmp_path
):
    """G1: `python -m agentworks_dev.identity --home <suite home>` prints an identity
    signed with that home's gateway key, which a service accepts (as grpcurl would send it
    in `x-agentworks-identity`); without the key it says what to do and exits 2."""
    import asyncio
    import shutil
    import subprocess
    import sys

    from agentworks.core.identity import METADATA_KEY
    from agentworks.messaging.v1 import messaging_pb2 as m

    home = tmp_path / "home"
    shutil.copytree(signing_keys.directory, home / "keys")
    command = [sys.executable, "-m", "agentworks_dev.identity", "--home", str(home)]
    made = await asyncio.to_thread(
        subprocess.run, command, check=True, capture_output=True, text=True
    )
    token = made.stdout.strip()
    service = await start_messaging()
    async with grpc.aio.insecure_channel(service.address) as channel:
        get_target = channel.unary_unary(
            "/agentworks.messaging.v1.MessagingService/GetTarget",
            request_serializer=m.GetTargetRequest.SerializeToString,
            response_deserializer=m.Target.FromString,
        )
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await get_target(
                m.GetTargetRequest(ref={"kind": 1, "name": "nope"}),
                metadata=((METADATA_KEY, token),),
                timeout=10,
            )
    # Signed in: only the target is missing.
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    missing = await asyncio.to_thread(
        subprocess.run,
        [*command[:3], "--home", str(tmp_path / "none")],
        capture_output=True,
        text=True,
    )
    assert missing.returncode == 2 and "no gateway key at" in missing.stderr
