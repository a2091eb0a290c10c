"""Signing keys where they belong, bounded lifetimes (T1, T4, A2), against a real
service process over real gRPC: `python -m agentworks_messaging`, started from the
settings a deployment gives it (its own private key, the trusted-keys file).

The access matrix (test_access_matrix.py) checks every operation of every service
against these identities in-process; here the process reads its keys from files, reads
the trusted keys again when they change, and refuses in words that say why.
"""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest

from agentworks.core.identity import METADATA_KEY, mint
from agentworks.core.keys import KeyDirectory, SigningKey, add_trusted_key, write_trusted_keys
from agentworks.messaging.v1 import messaging_pb2 as pb
from agentworks.messaging.v1 import messaging_pb2_grpc
from agentworks.server.testing import ServiceProcess

pytestmark = pytest.mark.timeout(120)

PAST_THE_CHECK = grpc.StatusCode.NOT_FOUND  # the inbox does not exist: the identity passed


async def read_as(address: str, token: str) -> tuple[grpc.StatusCode, str]:
    """Read a missing inbox with this identity: NOT_FOUND once the identity passes."""
    async with grpc.aio.insecure_channel(address) as channel:
        stub = messaging_pb2_grpc.MessagingServiceStub(channel)
        try:
            await stub.Read(
                pb.ReadRequest(inbox_id="in_none"), metadata=((METADATA_KEY, token),), timeout=10
            )
        except grpc.aio.AioRpcError as exc:
            return exc.code(), exc.details() or ""
    return grpc.StatusCode.OK, ""


@pytest.fixture
def messaging_process(database_url, signing_keys):
    """`messaging_process(keys)` -> messaging as its own process, given `keys`' messaging
    key and trusted keys (the session's unless given)."""
    started: list[ServiceProcess] = []

    def make(keys: KeyDirectory = signing_keys) -> ServiceProcess:
        process = ServiceProcess(
            "agentworks_messaging", "MESSAGING", database_url, keys, **keys.env("service:messaging")
        )
        started.append(process)
        process.start()
        return process

    yield make
    for process in started:
        process.kill()


async def test_a_service_process_refuses_identities_their_signer_may_not_vouch_for_T1_A2(
    messaging_process, signing_keys
):
    """T1 A2: a runtime service's key signing for user:bob or giving the operator role, a
    service key signing for another service, and the gateway signing for a service are
    refused UNAUTHENTICATED naming the signer and what it vouches for; what each may sign
    passes."""
    messaging = await asyncio.to_thread(messaging_process)
    runtime = signing_keys.ensure("service:runner")[0]
    scheduler = signing_keys.ensure("service:scheduler")[0]
    gateway = signing_keys.ensure("gateway")[0]
    refused = [
        (mint("user:bob", runtime), "signer service:runner may not vouch for user:bob"),
        (
            mint("service:runner", runtime, roles={"operator"}),
            "signer service:runner may not give service:runner the role(s) operator",
        ),
        (mint("service:functions", scheduler), "signer service:scheduler may not vouch for"),
        (mint("service:scheduler", gateway), "signer gateway may not vouch for service:"),
    ]
    for token, says in refused:
        code, details = await read_as(messaging.address, token)
        assert code == grpc.StatusCode.UNAUTHENTICATED, details
        assert details.startswith("identity refused: ") and says in details, details
    for token in (
        mint("agent:demo/bot", gateway),
        mint("workflow:wf-1", gateway),
        mint("service:runner", runtime, roles={"runtime"}),
        mint("user:bob", gateway, roles={"operator"}),
        mint("service:scheduler", scheduler),
    ):
        assert (await read_as(messaging.address, token))[0] == PAST_THE_CHECK


async def test_a_service_process_refuses_over_long_future_and_foreign_identities_T4_T1(
    messaging_process, signing_keys
):
    """T4 T1: an identity living longer than 300 s (a ten-year one too), one issued more
    than the 30 s skew in the future, one naming a kid the trusted keys do not hold, and
    one signed by a stranger's key under a trusted kid are refused, each saying why."""
    messaging = await asyncio.to_thread(messaging_process)
    gateway = signing_keys.ensure("gateway")[0]
    stranger = SigningKey.generate("gateway")
    cases = [
        (mint("user:bob", gateway, ttl_seconds=301), "lifetime is 301 s, over the maximum of 300"),
        (
            mint("user:bob", gateway, roles={"operator"}, ttl_seconds=10 * 365 * 86400),
            "over the maximum of 300 s",
        ),
        (mint("user:bob", gateway, now=time.time() + 600), "s in the future (more than the 30 s"),
        (mint("user:bob", stranger), f"key '{stranger.kid}' is not a trusted key"),
        (
            mint("user:bob", SigningKey(gateway.kid, "gateway", stranger.private_key)),
            f"the signature is not by key '{gateway.kid}' (gateway)",
        ),
    ]
    for token, says in cases:
        code, details = await read_as(messaging.address, token)
        assert code == grpc.StatusCode.UNAUTHENTICATED, details
        assert says in details, details
    within_skew = mint("user:bob", gateway, now=time.time() + 20)
    assert (await read_as(messaging.address, within_skew))[0] == PAST_THE_CHECK


async def test_rotating_a_signers_key_in_a_running_process_T1(messaging_process, tmp_path):
    """T1 rotation without a restart (docs/operations.md): add the new public key (both
    keys pass), switch the signer to it, remove the old one (its identities stop passing,
    the new one's still do)."""
    keys = KeyDirectory(tmp_path / "keys")
    old, _ = keys.ensure("gateway")
    messaging = await asyncio.to_thread(messaging_process, keys)
    new = SigningKey.generate("gateway", "gateway-next")
    assert (await read_as(messaging.address, mint("user:bob", new)))[0] == (
        grpc.StatusCode.UNAUTHENTICATED
    )

    add_trusted_key(keys.trusted_path, new.trusted)
    for key in (old, new):
        assert (await read_as(messaging.address, mint("user:bob", key)))[0] == PAST_THE_CHECK

    write_trusted_keys(keys.trusted_path, [k for k in keys.trusted() if k.kid != old.kid])
    # The process looks at the file every 5 s, and at once for a kid it does not know:
    # an unknown kid now, so that the test need not wait.
    stranger = mint("user:bob", SigningKey.generate("gateway"))
    assert (await read_as(messaging.address, stranger))[0] == grpc.StatusCode.UNAUTHENTICATED
    code, details = await read_as(messaging.address, mint("user:bob", old))
    assert code == grpc.StatusCode.UNAUTHENTICATED, details
    assert f"key '{old.kid}' is not a trusted key" in details
    assert (await read_as(messaging.address, mint("user:bob", new)))[0] == PAST_THE_CHECK
