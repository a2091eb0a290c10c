"""What every AgentWorks process serves on /metrics, services and runtimes alike: its
`agentworks_build_info` and the HTTP endpoint itself (`serve_metrics`).

A process's metrics are its own (one endpoint per process, P4): with several replicas
each serves on its own port, and `agentworks_build_info` names the process in its
`service_instance_id` label, the OpenTelemetry `service.instance.id` resource attribute
(from `OTEL_RESOURCE_ATTRIBUTES`; `agentworks up` sets it to the child's name, such as
`messaging-2`), else `<host>:<pid>`.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import socket
from collections.abc import Mapping

from prometheus_client import Gauge, disable_created_metrics, start_http_server

from agentworks.client.settings import check_address

BUILD_INFO = Gauge(
    "agentworks_build_info",
    "Always 1: the process's service, AgentWorks version, Python version and instance.",
    ["service", "version", "python", "service_instance_id"],
)

INSTANCE_ATTRIBUTE = "service.instance.id"


def instance_id(environ: Mapping[str, str] | None = None) -> str:
    """This process's `service.instance.id` (OTEL_RESOURCE_ATTRIBUTES), else host:pid."""
    env = os.environ if environ is None else environ
    for pair in env.get("OTEL_RESOURCE_ATTRIBUTES", "").split(","):
        key, sep, value = pair.partition("=")
        if sep and key.strip() == INSTANCE_ATTRIBUTE and value.strip():
            return value.strip()
    return f"{socket.gethostname()}:{os.getpid()}"


def version(distribution: str) -> str:
    """The installed version of one of our distributions ("unknown" when not installed)."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def report_build(service: str, distribution: str) -> None:
    """Publish `agentworks_build_info` for this process (`service`: messaging, runtime...)."""
    BUILD_INFO.labels(service, version(distribution), platform.python_version(), instance_id()).set(
        1
    )


def serve_metrics(listen: str, *, variable: str = "METRICS_LISTEN") -> int:
    """Serve /metrics on `host:port` (port 0 picks one; no host: 127.0.0.1); returns the
    port, 0 when off. An address that is not host:port is a `ConfigError` naming
    `variable`; one that cannot be bound (taken, unknown host) an `OSError`.

    Counters are exposed as `<name>_total` only: the `<name>_created` series the client
    library would add beside each are turned off (no convention asks for them, and they
    double the series)."""
    if not listen:
        return 0
    host, port = check_address(variable, listen, empty_host=True)
    disable_created_metrics()
    server, _thread = start_http_server(port, addr=host or "127.0.0.1")
    return server.server_port
