"""`agentworks up` restarts a service whose health stops answering (B3)."""

from __future__ import annotations

import asyncio
import functools
import os
import pathlib
import sys
import time

import grpc
import pytest

from agentworks.core.identity import METADATA_KEY, mint
from agentworks.server.testing import free_port
from agentworks_dev.children import Child
from agentworks_dev.options import parse_args
from agentworks_dev.probes import grpc_health_answers, grpc_health_serving
from agentworks_dev.supervisor import Supervisor

PROBE = pathlib.Path(__file__).parents[3] / "libs/agentworks-server/tests/probe_service.py"


@pytest.mark.alone
@pytest.mark.reliability(
    scenario="a service's event loop is stuck (a request blocks it) under `agentworks up`",
    action="the supervisor asks each service's health; failures in a row kill and restart it",
    check="the stuck service is killed (child.unresponsive) and serves again after a restart",
)
async def test_up_restarts_a_service_whose_health_stops_answering_B3(tmp_path, signing_keys):
    """B3: a child whose loop is stuck (its own watchdog turned off here) stops answering
    its health; after `liveness_failures` failed checks the supervisor kills it and
    restarts it, and it answers SERVING again. The supervisor used to see a live process
    and do nothing (only kill -9 brought a restart)."""
    supervisor = Supervisor(parse_args(["--home", str(tmp_path)], {}), {})
    children = supervisor.children
    children.liveness_period, children.liveness_timeout, children.liveness_failures = 0.3, 0.5, 2
    address = f"127.0.0.1:{free_port()}"
    env = {
        **os.environ,
        **signing_keys.env("gateway"),
        "PROBE_LISTEN": address,
        "PROBE_LOOP_STUCK_SECONDS": "0",  # only the supervisor can heal it
        "LOG_LEVEL": "warning",
    }
    child = Child("probe-1", [sys.executable, str(PROBE)], env)
    child.alive = functools.partial(grpc_health_answers, address)
    children.launch(child)
    try:
        await grpc_health_serving(address, time.monotonic() + 20)
        deadline = time.monotonic() + 10
        # The supervisor's own liveness check has seen it up (another process's state:
        # no event to wait on).
        while not child.answered and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        first = child.process
        signed = ((METADATA_KEY, mint("user:alice", signing_keys.ensure("gateway")[0])),)
        channel = grpc.aio.insecure_channel(address)
        block = asyncio.ensure_future(
            channel.unary_unary("/agentworks.test.Probe/Block")(b"60", metadata=signed)
        )
        deadline = time.monotonic() + 15
        while child.unresponsive == 0 or child.process is first:
            assert time.monotonic() < deadline, "the stuck child was not restarted"
            await asyncio.sleep(0.1)
        await grpc_health_serving(address, time.monotonic() + 20)
        assert child.unresponsive == 1 and child.restarts >= 1
        with pytest.raises(grpc.aio.AioRpcError):  # it died with the process it stuck
            await block
        await channel.close()
    finally:
        await supervisor.shutdown()
