"""What every AgentWorks process serves on /metrics, services and runtimes alike: its
`agentworks_build_info` and the HTTP endpoint itself (`serve_metrics`).

A process's metrics are its own (one endpoint per process, P4): with several replicas
each serves on its own port, and `agentworks_build_info` names the process in its
`service_instance_id` label, the OpenTelemetry `service.instance.id` resource attribute
(from `OTEL_RESOURCE_ATTRIBUTES`; `agentworks up` sets it to the child's name, such as
`messaging-2`), else `<host>:<pid>`.
"""

from __future__ import annotations

import hmac
import importlib.metadata
import os
import platform
import socket
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from prometheus_client import REGISTRY, Gauge, disable_created_metrics, make_wsgi_app

from agentworks.core.settings import check_address

BUILD_INFO = Gauge(
    "agentworks_build_info",
    "Always 1: the process's service, AgentWorks version, Python version and instance.",
    ["service", "version", "python", "service_instance_id"],
)

INSTANCE_ATTRIBUTE = "service.instance.id"
# The bearer token every process's /metrics may ask for (a service's `<NAME>_METRICS_TOKEN`
# first; `serve_metrics(token=...)`).
METRICS_TOKEN_VARIABLE = "AGENTWORKS_METRICS_TOKEN"


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


def _bearer_only(app: Callable[..., Iterable[bytes]], token: str) -> Callable[..., Iterable[bytes]]:
    """`app`, answering 401 to a request without `Authorization: Bearer <token>`."""
    expected = f"Bearer {token}".encode()

    def guarded(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        given = environ.get("HTTP_AUTHORIZATION", "").encode("latin-1", "replace")
        if not hmac.compare_digest(given, expected):
            start_response(
                "401 Unauthorized",
                [("Content-Type", "text/plain"), ("WWW-Authenticate", 'Bearer realm="metrics"')],
            )
            return [f"metrics need the bearer token ({METRICS_TOKEN_VARIABLE})\n".encode()]
        return app(environ, start_response)

    return guarded


def serve_metrics(listen: str, *, variable: str = "METRICS_LISTEN", token: str = "") -> int:
    """Serve /metrics on `host:port` (port 0 picks one; no host: 127.0.0.1) in a thread
    of its own; returns the port, 0 when off. With `token`, only a request carrying
    `Authorization: Bearer <token>` is answered (401 otherwise): an execution with
    network access can reach a port on its host, and the metrics name principals and
    targets. An address that is not host:port is a `ConfigError` naming `variable`; one
    that cannot be bound (taken, unknown host) an `OSError`.

    Counters are exposed as `<name>_total` only: the `<name>_created` series the client
    library would add beside each are turned off (no convention asks for them, and they
    double the series)."""
    if not listen:
        return 0
    from wsgiref.simple_server import make_server

    # prometheus_client's start_http_server, but for the token's wrapper around the app.
    from prometheus_client.exposition import (
        ThreadingWSGIServer,
        _get_best_family,
        _SilentHandler,
    )

    host, port = check_address(variable, listen, empty_host=True)
    disable_created_metrics()

    class Server(ThreadingWSGIServer):
        pass

    Server.address_family, addr = _get_best_family(host or "127.0.0.1", port)
    app = make_wsgi_app(REGISTRY)
    httpd = make_server(
        addr, port, _bearer_only(app, token) if token else app, Server, handler_class=_SilentHandler
    )
    threading.Thread(target=httpd.serve_forever, name="metrics", daemon=True).start()
    return int(httpd.server_port)
