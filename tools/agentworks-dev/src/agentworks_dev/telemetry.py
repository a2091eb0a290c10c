"""Each process's own metrics endpoint, and its name in telemetry (P4).

Every child of `agentworks up` (each replica of each service, the gateways, the demo
runtimes) serves /metrics on a port of its own: the first at `--metrics-port`
(AGENTWORKS_METRICS_PORT, default 9464), then one
each in a fixed order (messaging-1..N, functions-1..N, scheduler-1..N, gateway-1..N,
demo-runtime, demo-funcs), so a port always belongs to the same child. Each child is
also named in `OTEL_RESOURCE_ATTRIBUTES` (`service.instance.id=<child>`), which its
`agentworks_build_info` and its trace spans carry.
"""

from __future__ import annotations

import pathlib
import secrets
from collections.abc import Mapping, Sequence

from agentworks.core.metrics import INSTANCE_ATTRIBUTE, METRICS_TOKEN_VARIABLE
from agentworks_dev.home import load_or_create_secret
from agentworks_dev.specs import (
    DEMO_FUNCTIONS,
    DEMO_RUNTIME,
    GATEWAY,
    GRPC_SERVICES,
    StartupError,
)

# The services' /metrics ask for this bearer token: an execution with network access runs
# on this host and could otherwise read them. Kept in `<home>/metrics-token` (0600), for
# a Prometheus `authorization: {credentials_file: ...}`; AGENTWORKS_METRICS_TOKEN
# (METRICS_TOKEN_VARIABLE), when set, is used instead. (The demo runtimes' own /metrics
# take no token yet.)
METRICS_TOKEN_FILE = "metrics-token"


def metrics_token(home: pathlib.Path, environ: Mapping[str, str]) -> str:
    """The services' metrics token: AGENTWORKS_METRICS_TOKEN, else the home's (made once)."""
    given = environ.get(METRICS_TOKEN_VARIABLE, "").strip()
    if given:
        return given
    path = home / METRICS_TOKEN_FILE
    return load_or_create_secret(path, lambda: secrets.token_urlsafe(32))[0]


def child_names(replicas: int) -> list[str]:
    """Every child `up` may start, in the order the metrics ports are given out."""
    names = [
        f"{spec.name}-{replica}"
        for spec in (*GRPC_SERVICES, GATEWAY)
        for replica in range(1, replicas + 1)
    ]
    return [*names, DEMO_RUNTIME, DEMO_FUNCTIONS]


def metrics_ports(first: int, replicas: int, others: Sequence[int] = ()) -> dict[str, int]:
    """Each child's metrics port; none when `first` is 0 (metrics off). A
    `StartupError` when they would overlap `others` (the suite's gRPC and HTTP ports)."""
    if not first:
        return {}
    ports = {name: first + index for index, name in enumerate(child_names(replicas))}
    clash = sorted(set(ports.values()) & set(others))
    if clash or max(ports.values()) > 65535:
        what = f"port {clash[0]} is also a gRPC or HTTP port" if clash else "past 65535"
        raise StartupError(
            f"the metrics ports {first}-{max(ports.values())} ({len(ports)} processes) "
            f"do not fit: {what}; choose another first port with --metrics-port "
            "(AGENTWORKS_METRICS_PORT), or 0 for no metrics"
        )
    return ports


def with_instance(env: dict[str, str], child: str) -> None:
    """Name the child in OTEL_RESOURCE_ATTRIBUTES (kept: attributes set there already)."""
    attributes = env.get("OTEL_RESOURCE_ATTRIBUTES", "")
    pairs = [p for p in attributes.split(",") if p.strip()]
    if not any(p.partition("=")[0].strip() == INSTANCE_ATTRIBUTE for p in pairs):
        pairs.append(f"{INSTANCE_ATTRIBUTE}={child}")
    env["OTEL_RESOURCE_ATTRIBUTES"] = ",".join(pairs)


def child_telemetry(
    env: dict[str, str], child: str, variable: str, host: str, ports: dict[str, int]
) -> None:
    """Give a child its own metrics port in `variable` (unset when metrics are off: never
    one port exported for all; no other process's variable either) and its name in
    telemetry."""
    for name in [k for k in env if k.endswith("_METRICS_LISTEN")]:
        del env[name]
    if child in ports:
        env[variable] = f"{host}:{ports[child]}"
    with_instance(env, child)


def metrics_lines(host: str, ports: dict[str, int], started: Sequence[str]) -> list[str]:
    """The banner's lines: each started child's metrics URL, a few to a line."""
    shown = host if ":" not in host else f"[{host}]"
    urls = [f"{name} http://{shown}:{ports[name]}/metrics" for name in started if name in ports]
    if not urls:
        return ["  metrics   off (--metrics-port 0)"]
    lines = []
    for start in range(0, len(urls), 2):
        label = "  metrics   " if start == 0 else "            "
        lines.append(label + " | ".join(urls[start : start + 2]))
    return lines
