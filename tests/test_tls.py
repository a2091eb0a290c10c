"""TLS and mutual TLS on every gRPC hop (T5), with throwaway CAs (tests.fixtures.tls).

The services run in-process on real sockets (tests.fixtures.services); the clients are
the typed clients, the runtime SDK's workers, the gateway and `agentworks up
--bootstrap-only`, each given TLS settings the way its process reads them.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from agentworks.client import FunctionsClient, MessagingClient
from agentworks.core import errors
from agentworks.core.settings import ConfigError, Env
from agentworks.core.tls import Tls
from agentworks.messaging.v1 import messaging_pb2 as m
from agentworks.messaging.v1 import messaging_pb2_grpc
from agentworks.runtime.config import RuntimeConfig
from agentworks.runtime.executions import ExecutionWorker
from agentworks.runtime.turns import TurnWorker
from agentworks_dev.demo_functions import HANDLERS, declare_demo_functions
from agentworks_gateway.app import start as start_gateway
from agentworks_gateway.config import Config as GatewayConfig
from agentworks_messaging.config import Config as MessagingConfig
from tests.fixtures.gateway import gateway_env

OPERATOR = frozenset({"operator"})
DEMO = "crew:demo"
BOT = "agent:demo/demo-bot"
AGENTWORKS = str(Path(sys.executable).with_name("agentworks"))


async def _register(client: MessagingClient, target: str = "crew:tls") -> None:
    """One call that needs the service's answer, not just a connection."""
    registered = await client.register_target(target, owner="user:owner")
    assert registered.owner == "user:owner"


async def test_a_client_trusting_the_ca_talks_tls_and_a_plain_text_client_is_refused_T5(
    start_messaging, identity, pki, foreign_pki
):
    """T5: with a certificate (and no client CA) messaging serves TLS: a client trusting
    its CA is answered; a plain-text client, and one trusting another CA, are refused
    before any request reaches the service."""
    messaging = await start_messaging(**pki.server_env("MESSAGING", mutual=False))
    assert messaging.server.transport == "TLS"
    ops = identity("user:ops", OPERATOR)
    trusting = pki.client(certificate=False)
    async with MessagingClient(messaging.address, identity=ops, tls=trusting) as client:
        await _register(client)

    async with MessagingClient(messaging.address, identity=ops) as plain:
        with pytest.raises(errors.Unavailable):
            await _register(plain, "crew:plain")
    wrong_ca = pki.client(certificate=False, ca=foreign_pki.ca_file)
    async with MessagingClient(messaging.address, identity=ops, tls=wrong_ca) as doubting:
        with pytest.raises(errors.Unavailable) as refused:
            await _register(doubting, "crew:doubt")
    # The refusal says it is TLS, not an outage to wait out.
    assert "TLS" in refused.value.message and "retry shortly" not in refused.value.message


async def test_with_mutual_tls_only_a_client_certificate_from_the_ca_is_let_in_T5(
    start_messaging, identity, pki, foreign_pki
):
    """T5: with a client CA messaging requires mutual TLS: a client without a
    certificate, with one from another CA, or in plain text is refused; a client with a
    certificate the CA signed is answered."""
    messaging = await start_messaging(**pki.server_env("MESSAGING"))
    assert messaging.server.transport == "mutual TLS"
    ops = identity("user:ops", OPERATOR)
    refused = {
        "no certificate": pki.client(certificate=False),
        "another CA's certificate": foreign_pki.client(ca=pki.ca_file),
        "plain text": None,
    }
    for why, tls in refused.items():
        async with MessagingClient(messaging.address, identity=ops, tls=tls) as client:
            with pytest.raises(errors.Unavailable):
                await _register(client, "crew:refused")
                pytest.fail(f"a client with {why} was answered")
    async with MessagingClient(messaging.address, identity=ops, tls=pki.client()) as client:
        await _register(client)
    # A list of replicas (round robin) checks their certificates against the first host.
    second = await start_messaging(**pki.server_env("MESSAGING"))
    replicas = f"{messaging.address},{second.address}"
    async with MessagingClient(replicas, identity=ops, tls=pki.client()) as client:
        for n in range(4):
            await _register(client, f"crew:replica-{n}")
    # Refused at the handshake: nothing of the refused clients reached the service.
    async with MessagingClient(messaging.address, identity=ops, tls=pki.client()) as client:
        with pytest.raises(errors.NotFound):
            await client.update_target("crew:refused", free_text_ask=True)


async def test_the_plain_text_health_port_answers_health_checks_only_T5(
    start_messaging, identity, pki
):
    """T5 (P4): probes that cannot speak TLS (the kubelet's) ask MESSAGING_HEALTH_LISTEN,
    a plain-text port that serves gRPC health checking and nothing else."""
    messaging = await start_messaging(
        MESSAGING_HEALTH_LISTEN="127.0.0.1:0", **pki.server_env("MESSAGING")
    )
    health = f"127.0.0.1:{messaging.server.health_port}"
    async with grpc.aio.insecure_channel(health) as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=5
        )
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        stub = messaging_pb2_grpc.MessagingServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as answer:
            await stub.RegisterTarget(
                m.RegisterTargetRequest(owner="user:owner"),
                metadata=identity("user:ops", OPERATOR).metadata(),
                timeout=5,
            )
        assert answer.value.code() == grpc.StatusCode.UNIMPLEMENTED


async def test_every_hop_runs_over_mutual_tls_T5(
    start_messaging,
    start_functions,
    start_scheduler,
    database_url,
    signing_keys,
    make_token,
    identity,
    pki,
    tmp_path,
):
    """T5: with mutual TLS on all three services, each hop works with its own certificate:
    gateway -> messaging and functions (register, send), runtime SDK -> messaging
    (turns), -> scheduler (a wake-up; scheduler -> messaging checks and delivers it),
    -> functions (a call and its execution; functions -> messaging sends the notice)."""
    messaging = await start_messaging(**pki.server_env("MESSAGING", "messaging"))
    functions = await start_functions(
        FUNCTIONS_MESSAGING_ADDRESS=messaging.address, **pki.server_env("FUNCTIONS", "functions")
    )
    scheduler = await start_scheduler(
        SCHEDULER_MESSAGING_ADDRESS=messaging.address, **pki.server_env("SCHEDULER", "scheduler")
    )
    for service in (messaging, functions, scheduler):
        assert service.server.transport == "mutual TLS"
    env = gateway_env(
        database_url, signing_keys, messaging.address, functions.address, scheduler.address
    )
    gateway = await start_gateway(
        GatewayConfig.from_env({**env, **pki.client_env("GATEWAY", "gateway")})
    )
    runtime_tls = pki.client("runtime")
    seen: set[int] = set()
    done = asyncio.Event()

    async def on_turn(ctx) -> None:
        kinds = {d.kind for d in ctx.deliveries}
        seen.update(kinds)
        if m.DELIVERY_KIND_MESSAGE in kinds:
            await ctx.wake_me(after_seconds=1, note="wake up")
            await ctx.call_function(DEMO, "hello", {"name": "TLS"})
        if {m.DELIVERY_KIND_WAKE_UP, m.DELIVERY_KIND_FUNCTION_COMPLETED} <= seen:
            done.set()

    turns = TurnWorker(
        messaging.address,
        identity(BOT),
        [DEMO],
        on_turn,
        scheduler_address=scheduler.address,
        functions_address=functions.address,
        wait_seconds=2,
        lease_seconds=10,
        tls=runtime_tls,
    )
    executions = ExecutionWorker(
        functions.address,
        identity(BOT),
        [DEMO],
        HANDLERS,
        root=tmp_path,
        wait_seconds=2,
        concurrency=1,
        tls=runtime_tls,
    )
    workers = []
    try:
        operator, alice = (
            await make_token("user:ops", operator=True),
            await make_token("user:alice"),
        )
        async with httpx.AsyncClient(base_url=gateway.url, timeout=60) as http:
            registered = await http.post(
                "/api/v1/tools/targets",
                json={"action": "register", "target": DEMO, "owner": "user:owner"},
                headers={"Authorization": f"Bearer {operator}"},
            )
            assert registered.status_code == 200, registered.text
            owner = identity("user:owner")
            async with FunctionsClient(functions.address, identity=owner, tls=runtime_tls) as fc:
                await declare_demo_functions(fc, DEMO)
            workers = [asyncio.create_task(w.run()) for w in (turns, executions)]
            sent = await http.post(
                "/api/v1/tools/messages",
                json={"action": "send", "crew": "demo", "message": "hello"},
                headers={"Authorization": f"Bearer {alice}"},
            )
            assert sent.status_code == 200, sent.text
        async with asyncio.timeout(60):
            await done.wait()
    finally:
        turns.stop()
        executions.stop()
        for task in workers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(task, 30)
        await gateway.stop(0)


async def test_bootstrap_only_reaches_the_services_over_mutual_tls_T5(
    start_messaging, start_functions, database_url, signing_keys, pki, tmp_path
):
    """T5 (P5) T2: `agentworks up --bootstrap-only` (compose's and Kubernetes' bootstrap
    job) waits for the services' health and registers the demo crew over mutual TLS with
    AGENTWORKS_TLS_*; without them it cannot get in. With AGENTWORKS_RUNTIME_CREDENTIAL_DIR
    it also keeps the demo runtimes' runtime credential there (0600)."""
    messaging = await start_messaging(**pki.server_env("MESSAGING", "messaging"))
    functions = await start_functions(
        FUNCTIONS_MESSAGING_ADDRESS=messaging.address, **pki.server_env("FUNCTIONS", "functions")
    )

    async def bootstrap(timeout: str, **tls: str) -> tuple[int, str]:
        env = {
            "PATH": "/usr/bin:/bin",
            **signing_keys.env("gateway"),
            "AGENTWORKS_MESSAGING_ADDRESS": messaging.address,
            "AGENTWORKS_FUNCTIONS_ADDRESS": functions.address,
            "DATABASE_URL": database_url,
            "LOG_JSON": "false",
            **tls,
        }
        process = await asyncio.create_subprocess_exec(
            AGENTWORKS, "up", "--bootstrap-only", "--home", str(tmp_path / "home"),
            "--ready-timeout", timeout, env=env, cwd=tmp_path,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        async with asyncio.timeout(90):
            out, _ = await process.communicate()
        return process.returncode or 0, out.decode()

    code, out = await bootstrap("3")
    assert code == 1 and "did not answer gRPC health SERVING" in out, out
    credentials = tmp_path / "runtime-credential"
    code, out = await bootstrap(
        "30",
        **pki.client_env("AGENTWORKS", "client"),
        AGENTWORKS_RUNTIME_CREDENTIAL_DIR=str(credentials),
    )
    assert code == 0 and "demo crew registered" in out, out
    # T2: compose's demo runtimes get their runtime credential from here (no key).
    kept = credentials / "runtime-credential"
    assert kept.read_text().startswith("awr_") and kept.stat().st_mode & 0o077 == 0


def test_tls_settings_are_read_once_and_refused_when_unusable_T5(tmp_path, pki, signing_keys):
    """T5: a missing file, half of a certificate/key pair, a key of another certificate,
    a file that is not PEM, or a client CA without the server's certificate stop the
    start with a ConfigError naming the variable; `<SERVICE>_TLS_*` wins over
    `AGENTWORKS_TLS_*`, which runtimes read too."""
    cert, key = pki.files("messaging")
    _, other_key = pki.files("client")
    base = {
        "MESSAGING_DATABASE_URL": "postgresql://localhost/x",
        **signing_keys.env("service:messaging"),
    }
    refused = {
        "MESSAGING_TLS_CERT_FILE": {"MESSAGING_TLS_CERT_FILE": str(tmp_path / "missing.pem")},
        "MESSAGING_TLS_KEY_FILE (or AGENTWORKS_TLS_KEY_FILE) is not": {
            "MESSAGING_TLS_CERT_FILE": cert
        },
        "AGENTWORKS_TLS_CERT_FILE) is not": {"AGENTWORKS_TLS_KEY_FILE": key},
        "is not the private key": {
            "AGENTWORKS_TLS_CERT_FILE": cert,
            "AGENTWORKS_TLS_KEY_FILE": other_key,
        },
        "holds no PEM CA certificate": {"AGENTWORKS_TLS_CA_FILE": key},
        "MESSAGING_TLS_CLIENT_CA_FILE turns on mutual TLS": {
            "MESSAGING_TLS_CLIENT_CA_FILE": pki.ca_file
        },
    }
    for words, env in refused.items():
        with pytest.raises(ConfigError, match=words.replace("(", r"\(").replace(")", r"\)")):
            MessagingConfig.from_env({**base, **env})
    shared = {
        "AGENTWORKS_TLS_CERT_FILE": str(tmp_path / "missing.pem"),
        "AGENTWORKS_TLS_KEY_FILE": key,
        "MESSAGING_TLS_CERT_FILE": cert,
        "MESSAGING_TLS_KEY_FILE": key,
        "AGENTWORKS_TLS_CLIENT_CA_FILE": pki.ca_file,
    }
    tls = MessagingConfig.from_env({**base, **shared}).service.tls
    assert tls.describe(server=True) == "mutual TLS"
    assert tls.describe(server=False) == "plain text"  # no CA to trust: calls stay plain
    assert Tls().describe(server=True) == "plain text"
    runtime = RuntimeConfig.from_env(
        {
            **signing_keys.env("gateway"),
            "AGENTWORKS_RUNTIME_PRINCIPAL": BOT,
            "AGENTWORKS_RUNTIME_TARGETS": DEMO,
            **pki.client_env("AGENTWORKS", "runtime"),
        }
    )
    assert runtime.tls.describe(server=False) == "mutual TLS"
    assert runtime.tls == Tls.from_env(Env("AGENTWORKS", pki.client_env("AGENTWORKS", "runtime")))
