"""Bounded cost in the shared server library: identity before the body (B8), each
principal's share of open requests (B7), and liveness that sees a stuck loop (B3).

The B3 and B8 tests run `probe_service.py` (a small service on the same `GrpcServer`) as
its own process, to read its memory and to let its loop be stuck for real.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pathlib
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import grpc
import psutil
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from agentworks.core import errors
from agentworks.core.identity import METADATA_KEY, mint
from agentworks.core.keys import KeyDirectory
from agentworks.server import shares
from agentworks.server.liveness import STUCK_EXIT
from agentworks.server.rpc import GrpcServer
from agentworks.server.testing import scrape, until_sync

PROBE = pathlib.Path(__file__).with_name("probe_service.py")
PARSE = "/agentworks.test.Probe/Parse"
BLOCK = "/agentworks.test.Probe/Block"
# A ListValue of 2,000,000 nulls: 8,000,000 bytes, under gRPC's 8 MiB cap, and costly to
# parse (each value an object).
WIDE = b"\x0a\x02\x08\x00" * 2_000_000


class Probe:
    """probe_service.py as a process: its gRPC and metrics ports."""

    def __init__(self, keys: KeyDirectory, **env: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(PROBE)],
            env={
                **os.environ,
                **keys.env("gateway"),
                "PROBE_LISTEN": "127.0.0.1:0",
                "PROBE_METRICS_LISTEN": "127.0.0.1:0",
                "LOG_LEVEL": "warning",
                **env,
            },
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        line = ""
        while not line.startswith("port="):  # log lines may come first
            line = self.process.stdout.readline()
            assert line, "probe_service.py ended before it served"
        fields = dict(pair.split("=") for pair in line.split())
        self.port, self.metrics_port = int(fields["port"]), int(fields["metrics"])
        self.address = f"127.0.0.1:{self.port}"

    def rss(self) -> int:
        return int(psutil.Process(self.process.pid).memory_info().rss)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(10)
        if self.process.stdout is not None:
            self.process.stdout.close()


@pytest.fixture
def probe(signing_keys: KeyDirectory) -> Iterator[type[Probe]]:
    started: list[Probe] = []

    def start(**env: str) -> Probe:
        made = Probe(signing_keys, **env)
        started.append(made)
        return made

    yield start  # type: ignore[misc]
    for made in started:
        made.stop()


def _signed(keys: KeyDirectory, principal: str = "user:alice") -> tuple[tuple[str, str], ...]:
    return ((METADATA_KEY, mint(principal, keys.ensure("gateway")[0])),)


@pytest.mark.alone
@pytest.mark.reliability(
    scenario="six threads send 8 MB requests with no identity",
    action="the identity is checked from the metadata before the body is read",
    check="every request refused UNAUTHENTICATED, none parsed, the RSS grows under 64 MiB",
)
def test_requests_without_identity_are_refused_before_their_body_is_parsed_B8(probe, signing_keys):
    """B8: 8 MB requests with no identity (six threads, four each) are refused
    UNAUTHENTICATED without being parsed: the service's RSS grows by less than 64 MiB.
    The identity used to be checked inside the handler, after gRPC had read and parsed
    the body (functions went from 291 to 1,122 MiB under this attack)."""
    service = probe()
    with grpc.insecure_channel(
        service.address, options=[("grpc.max_send_message_length", 16 << 20)]
    ) as channel:
        parse = channel.unary_unary(PARSE)
        parse(b"", metadata=_signed(signing_keys), timeout=10)  # warm: the handler is built
        before = service.rss()
        codes: list[grpc.StatusCode] = []

        def attack() -> None:
            for _ in range(4):
                try:
                    parse(WIDE, timeout=20)
                except grpc.RpcError as exc:
                    codes.append(exc.code())  # type: ignore[attr-defined]

        threads = [threading.Thread(target=attack) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        grown = service.rss() - before
    assert codes == [grpc.StatusCode.UNAUTHENTICATED] * 24
    assert grown < 64 << 20, f"RSS grew by {grown >> 20} MiB"


# ------------------------------------------------------------------------- B7 shares

ECHO = "agentworks.test.Held"
HOLD = f"/{ECHO}/Hold"


@pytest.fixture
async def held(signing_keys):
    """A service whose `Hold` waits until the test releases it."""
    release = asyncio.Event()
    entered = asyncio.Queue[None]()

    async def hold(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        entered.put_nowait(None)
        await release.wait()
        return b"done"

    def register(server: grpc.aio.Server) -> None:
        handler = grpc.unary_unary_rpc_method_handler(hold)
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(ECHO, {"Hold": handler}),)
        )

    shares.configure(shares.Shares(own={"user:alice": shares.Share(requests=2)}))
    server = GrpcServer(
        name="held",
        listen="127.0.0.1:0",
        trusted_keys=signing_keys.trusted(),
        register=register,
        service_names=[ECHO],
    )
    port = await server.start()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield channel.unary_unary(HOLD), entered, release
    release.set()
    await server.stop(0)
    shares.configure(None)


@pytest.mark.alone
@pytest.mark.reliability(
    scenario="one principal holds more requests open than its share",
    action="the interceptor holds one of the principal's open requests per RPC",
    check="past the share RESOURCE_EXHAUSTED with a retry delay; another principal served",
)
async def test_a_principal_past_its_share_is_refused_with_a_retry_delay_B7(held, signing_keys):
    """B7: with a share of two open requests, alice's third is refused at once,
    RESOURCE_EXHAUSTED, reason PRINCIPAL_SHARE, with a retry delay (RetryInfo), while bob
    and a service are served; once one of alice's ends, she is served again."""
    hold, entered, release = held
    alice = _signed(signing_keys, "user:alice")
    open_calls = [asyncio.ensure_future(hold(b"", metadata=alice)) for _ in range(2)]
    for _ in open_calls:
        await asyncio.wait_for(entered.get(), 5)

    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await hold(b"", metadata=alice, timeout=5)
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    trailers = refused.value.trailing_metadata()
    assert errors.reason_of(trailers) == errors.Reason.PRINCIPAL_SHARE
    assert errors.retry_after_of(trailers) == pytest.approx(1.0)
    assert "user:alice" in (refused.value.details() or "")

    others = [
        asyncio.ensure_future(hold(b"", metadata=_signed(signing_keys, who)))
        for who in ("user:bob", "user:bob", "user:bob")
    ]
    for _ in others:
        await asyncio.wait_for(entered.get(), 5)  # bob's three are all being served
    release.set()
    assert await asyncio.gather(*open_calls, *others) == [b"done"] * 5
    assert await hold(b"", metadata=alice, timeout=5) == b"done"  # given back


def test_an_unusable_share_setting_is_refused_naming_the_variable_B7(monkeypatch):
    """B7: AGENTWORKS_PRINCIPAL_SHARES is read once at start; a value that cannot be used
    stops the start (status 2) naming the variable."""
    from agentworks.server.service import CONFIG_ERROR, StartFailed, read_shares

    monkeypatch.setenv(shares.ENV, '{"user:etl": {"requests": -1}}')
    with pytest.raises(StartFailed) as failed:
        read_shares()
    assert failed.value.status == CONFIG_ERROR
    assert shares.ENV in failed.value.message
    shares.configure(None)


# ------------------------------------------------------------------------- B3 liveness


def _health(address: str, timeout: float) -> int | None:
    """The health status, or None when it does not answer in time."""
    with grpc.insecure_channel(address) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=timeout
            )
        except grpc.RpcError:
            return None
    return int(reply.status)


def _block(address: str, keys: KeyDirectory, seconds: float) -> threading.Thread:
    def call() -> None:
        with grpc.insecure_channel(address) as channel, contextlib.suppress(grpc.RpcError):
            channel.unary_unary(BLOCK)(
                str(seconds).encode(), metadata=_signed(keys), timeout=seconds + 10
            )

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    return thread


@pytest.mark.alone
@pytest.mark.reliability(
    scenario="a request holds a service's event loop (blocking code)",
    action="loop lag measured, shown as a metric; health NOT_SERVING past the limit",
    check="lag metric grows while stuck; health NOT_SERVING after, SERVING once recovered",
)
def test_a_lagging_loop_shows_in_its_metric_and_its_health_B3(probe, signing_keys):
    """B3: while a request blocks the loop for 3 s, the lag metric (served from a thread
    of its own) grows past 1 s; when the loop runs again, health answers NOT_SERVING (the
    lag was over PROBE_LOOP_LAG_LIMIT_SECONDS=1), and SERVING again a limit later."""
    service = probe(PROBE_LOOP_LAG_LIMIT_SECONDS="1", PROBE_LOOP_STUCK_SECONDS="0")
    assert _health(service.address, 5) == health_pb2.HealthCheckResponse.SERVING
    blocker = _block(service.address, signing_keys, 3.0)

    def lagging() -> bool:
        lag = scrape(service.metrics_port).value(
            "agentworks_event_loop_lag_seconds", service="probe"
        )
        return lag is not None and lag > 1.0

    until_sync(lagging, 10, every=0.1, what="the loop lag is over 1 s")
    blocker.join()
    assert _health(service.address, 5) == health_pb2.HealthCheckResponse.NOT_SERVING
    serving = health_pb2.HealthCheckResponse.SERVING
    until_sync(lambda: _health(service.address, 5) == serving, 10, every=0.1)


@pytest.mark.alone
@pytest.mark.reliability(
    scenario="a request holds a service's event loop for good",
    action="a watchdog thread ends the process when the loop has not run for the limit",
    check="the process exits with status 3 within the limit, to be restarted",
)
def test_a_stuck_loop_ends_the_process_to_be_restarted_B3(probe, signing_keys):
    """B3: a loop stuck past PROBE_LOOP_STUCK_SECONDS (1 s here, 30 s by default) ends the
    process with status 3 (`service.loop_stuck`), so that the supervisor or Kubernetes
    restarts it; it used to stay up, answering nothing, and was never healed."""
    service = probe(PROBE_LOOP_STUCK_SECONDS="1")
    started = time.monotonic()
    _block(service.address, signing_keys, 60.0)
    assert service.process.wait(15) == STUCK_EXIT
    assert time.monotonic() - started < 10


def test_metrics_need_the_bearer_token_when_one_is_set_B3(probe):
    """/metrics with AGENTWORKS_METRICS_TOKEN set answers 401 without the token (an
    execution with network access could otherwise read it) and the metrics with it."""
    service = probe(AGENTWORKS_METRICS_TOKEN="s3cret")
    with pytest.raises(urllib.error.HTTPError) as refused:
        scrape(service.metrics_port)
    refused.value.close()
    assert refused.value.code == 401
    with pytest.raises(urllib.error.HTTPError) as wrong:
        scrape(service.metrics_port, token="wrong")
    wrong.value.close()
    lag = scrape(service.metrics_port, token="s3cret").value(
        "agentworks_event_loop_lag_seconds", service="probe"
    )
    assert lag is not None
