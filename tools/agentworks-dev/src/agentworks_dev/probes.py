"""Is it up? Ports, gRPC health and the gateway's /healthz."""

from __future__ import annotations

import asyncio
import os
import pathlib
import socket
import time

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from agentworks.client.rpc import open_channel
from agentworks.core.tls import Tls
from agentworks_dev.specs import LOCK_FILE

# Fast reconnects, so readiness is seen soon after a server starts listening.
_HEALTH_CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 500),
]


def port_is_free(host: str, port: int) -> bool:
    """Whether nothing listens on host:port (so a child can bind it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


async def grpc_health_serving(address: str, deadline: float, tls: Tls | None = None) -> None:
    """Wait until `address` answers gRPC health SERVING (over TLS when `tls` trusts a CA),
    or raise TimeoutError."""
    async with open_channel(address, tls, options=_HEALTH_CHANNEL_OPTIONS) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{address} did not answer gRPC health SERVING")
            try:
                response = await stub.Check(
                    health_pb2.HealthCheckRequest(service=""),
                    timeout=min(remaining, 2.0),
                    wait_for_ready=True,
                )
            except grpc.aio.AioRpcError:
                continue
            if response.status == health_pb2.HealthCheckResponse.SERVING:
                return
            await asyncio.sleep(min(0.2, max(0.0, deadline - time.monotonic())))


async def http_healthy(url: str, deadline: float) -> None:
    """Wait until GET `url` answers 200, or raise TimeoutError."""
    import httpx

    async with httpx.AsyncClient(timeout=2.0) as client:
        while True:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{url} did not answer 200")
            try:
                response = await client.get(url)
                if response.status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.2)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def other_ports(base_port: int, http_port: int, home: str = "", *, metrics: int = 0) -> str:
    """How to start beside those ports (100 up, in another home if given): the flags, or
    the `make run` settings; the metrics ports too when they are on (`metrics`)."""
    base, http = base_port + 100, http_port + 100
    flags, settings = f"--base-port {base} --http-port {http}", ""
    if metrics:
        flags += f" --metrics-port {metrics + 100}"
    if home:
        flags, settings = f"--home {home} {flags}", f"AGENTWORKS_HOME={home} "
    settings += f"AGENTWORKS_BASE_PORT={base} AGENTWORKS_HTTP_PORT={http}"
    if metrics:
        settings += f" AGENTWORKS_METRICS_PORT={metrics + 100}"
    return f"agentworks up {flags}, or make run {settings}"


def _refusal(home: pathlib.Path, holder: dict[str, object]) -> str:
    pid = holder.get("pid")
    who = f"pid {pid}" if isinstance(pid, int) and _alive(pid) else "pid unknown"
    ports = ""
    if holder.get("gateway_url"):
        ports = f", gateway {holder['gateway_url']}, gRPC ports {holder.get('grpc_ports', '?')}"
    base, http = holder.get("base_port"), holder.get("http_port")
    if not (isinstance(base, int) and isinstance(http, int)):
        base, http = 50051, 8080
    first_metrics = holder.get("metrics_port")
    metrics = first_metrics if isinstance(first_metrics, int) else 0
    kill = f", or kill {pid}" if who != "pid unknown" else ""
    other = "/tmp/agentworks-2"
    return (
        f"another `agentworks up` ({who}{ports}) is already running on the home {home} "
        f"(it holds {home / LOCK_FILE}). Use that suite (its CLI reads {home / 'cli.json'}), "
        f"or stop it first (Ctrl-C in its terminal{kill}). To run a second suite beside "
        f"it, give it its own home and ports: {other_ports(base, http, other, metrics=metrics)}; "
        f"then point its CLI at it with export AGENTWORKS_HOME={other}."
    )


async def grpc_health_answers(address: str, timeout: float) -> bool:
    """Whether `address` answers gRPC health SERVING within `timeout` (B3: a stuck loop
    answers nothing, a lagging one NOT_SERVING)."""
    async with open_channel(address, None) as channel:
        try:
            response = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=timeout
            )
        except grpc.aio.AioRpcError:
            return False
    return bool(response.status == health_pb2.HealthCheckResponse.SERVING)


async def http_answers(url: str, timeout: float) -> bool:
    """Whether GET `url` answers 200 within `timeout`."""
    import httpx

    async with httpx.AsyncClient(timeout=timeout) as client:
        try:
            return (await client.get(url)).status_code == 200
        except httpx.HTTPError:
            return False
