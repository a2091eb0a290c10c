"""`agentworks up`'s command line and settings (flags, then AGENTWORKS_* variables)."""

from __future__ import annotations

import argparse
import pathlib
from collections.abc import Sequence
from dataclasses import dataclass

from agentworks.core.tls import SETTINGS as TLS_SETTINGS
from agentworks_dev.specs import DEFAULT_HOME, DEFAULT_METRICS_PORT, GATEWAY, GRPC_SERVICES

_TLS_SUFFIXES = tuple(f"_{name}" for name in TLS_SETTINGS)


def tls_variables(environ: dict[str, str]) -> list[str]:
    """The TLS settings (`AGENTWORKS_TLS_*`, `<SERVICE>_TLS_*`) set in `environ`."""
    prefixes = ("AGENTWORKS", GATEWAY.prefix, *(spec.prefix for spec in GRPC_SERVICES))
    return sorted(
        name
        for name in environ
        if name.endswith(_TLS_SUFFIXES) and name.rpartition("_TLS_")[0] in prefixes
    )


@dataclass
class Options:
    """The parsed command line of `agentworks up`."""

    home: pathlib.Path
    replicas: int
    host: str
    base_port: int
    http_port: int
    # The first metrics port (each process takes the next); 0: no metrics.
    metrics_port: int
    database_url: str
    ready_timeout: float
    stop_timeout: float
    runtime: bool
    bootstrap_only: bool


def _env_int(
    parser: argparse.ArgumentParser, environ: dict[str, str], name: str, default: int
) -> int:
    value = environ.get(name) or ""
    if not value:
        return default
    try:
        return int(value)
    except ValueError:
        parser.error(f"{name}={value!r} is not a whole number")


PORTS_EPILOG = (
    "Ports in use (another suite, or something else on 8080/50051)? Choose others with "
    "--base-port/--http-port, or through make: "
    "make run AGENTWORKS_BASE_PORT=7800 AGENTWORKS_HTTP_PORT=7880. A second suite also "
    "needs its own home (--home DIR, or AGENTWORKS_HOME=DIR); then point the CLI at it "
    "with export AGENTWORKS_HOME=DIR."
)


def parse_args(argv: Sequence[str], environ: dict[str, str]) -> Options:
    """Parse `agentworks up` arguments; every flag has an environment fallback."""
    parser = argparse.ArgumentParser(
        prog="agentworks up",
        description="Run the whole AgentWorks suite locally (embedded PostgreSQL by default).",
        epilog=PORTS_EPILOG,
    )
    parser.add_argument(
        "--replicas",
        type=int,
        default=_env_int(parser, environ, "AGENTWORKS_REPLICAS", 1),
        help="processes per service (env AGENTWORKS_REPLICAS, default 1)",
    )
    parser.add_argument(
        "--base-port",
        type=int,
        default=_env_int(parser, environ, "AGENTWORKS_BASE_PORT", 50051),
        help="first gRPC port; services take consecutive ports "
        "(env AGENTWORKS_BASE_PORT, default 50051)",
    )
    parser.add_argument(
        "--http-port",
        type=int,
        default=_env_int(parser, environ, "AGENTWORKS_HTTP_PORT", 8080),
        help="first gateway HTTP port (env AGENTWORKS_HTTP_PORT, default 8080)",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=_env_int(parser, environ, "AGENTWORKS_METRICS_PORT", DEFAULT_METRICS_PORT),
        help="first /metrics port; every process (each replica, each runtime) takes the "
        f"next one (env AGENTWORKS_METRICS_PORT, default {DEFAULT_METRICS_PORT}; 0: no "
        "metrics)",
    )
    parser.add_argument(
        "--host",
        default=environ.get("AGENTWORKS_HOST") or "127.0.0.1",
        help="listen address (env AGENTWORKS_HOST, default 127.0.0.1)",
    )
    parser.add_argument(
        "--home",
        default=environ.get("AGENTWORKS_HOME") or DEFAULT_HOME,
        help="state directory: pg data, keys, cli.json; one running suite per home "
        f"(env AGENTWORKS_HOME, default {DEFAULT_HOME})",
    )
    parser.add_argument(
        "--database-url",
        default=environ.get("DATABASE_URL", ""),
        help="use this PostgreSQL instead of the embedded one (env DATABASE_URL)",
    )
    parser.add_argument("--ready-timeout", type=float, default=60.0, help="seconds (default 60)")
    parser.add_argument(
        "--stop-timeout", type=float, default=15.0, help="grace before SIGKILL (default 15)"
    )
    parser.add_argument("--no-runtime", action="store_true", help="do not start the demo runtimes")
    parser.add_argument(
        "--bootstrap-only",
        action="store_true",
        help="start nothing: register the demo crew and the dev token with running services",
    )
    args = parser.parse_args(list(argv))
    if args.replicas < 1:
        parser.error("--replicas must be at least 1")
    if not 0 <= args.metrics_port <= 65535:
        parser.error("--metrics-port must be 0 (no metrics) to 65535")
    return Options(
        home=pathlib.Path(args.home),
        replicas=args.replicas,
        host=args.host,
        base_port=args.base_port,
        http_port=args.http_port,
        metrics_port=args.metrics_port,
        database_url=args.database_url,
        ready_timeout=args.ready_timeout,
        stop_timeout=args.stop_timeout,
        runtime=not args.no_runtime,
        bootstrap_only=args.bootstrap_only,
    )
