"""The banner `agentworks up` prints once the suite is up: where to start."""

from __future__ import annotations

import ipaddress
import os
import pathlib
import shlex
from collections.abc import Sequence

from agentworks.core.limits import MAX_WAIT_SECONDS
from agentworks_dev.specs import DEFAULT_HOME


def banner_text(
    *,
    home: pathlib.Path,
    gateway_url: str,
    token: str,
    preset_token: bool,
    embedded: bool,
    services: Sequence[str],
    database_port: int = 0,
    skipped: Sequence[str],
    host: str = "127.0.0.1",
    ignored_tls: Sequence[str] = (),
    metrics: Sequence[str] = (),
    agent: str = "",
) -> str:
    """The banner: MCP and console addresses, token, services, database and CLI commands.

    `services` are "<name> <addresses>" of the services started; `preset_token` says the
    token came from AGENTWORKS_DEV_TOKEN (then it is not shown); `database_port` is the
    embedded PostgreSQL's TCP port. gRPC runs without TLS (T5): the banner says so, and
    names the TLS settings in `ignored_tls` it did not use. `metrics` are the lines
    giving each process's metrics URL (`telemetry.metrics_lines`). `agent` says what
    answers the demo crew (the scripted demo or the reference LLM runtime,
    `agent.demo_agent_line`).
    """
    rel = os.path.relpath(home)
    shown_home = rel if not rel.startswith("..") else str(home)
    database = f"embedded PostgreSQL, data in {shown_home}/pg" if embedded else "DATABASE_URL"
    if embedded and database_port:
        database += (
            f", 127.0.0.1:{database_port}; a role per service, "
            f"passwords in {shown_home}/db/<service>.password"
        )
    # The CLI finds .agentworks/cli.json in the current directory or a parent, or
    # reads $AGENTWORKS_HOME/cli.json: another home must be exported to be used.
    default_home = (pathlib.Path.cwd() / DEFAULT_HOME).resolve()
    export = home != default_home
    if not token:
        shown = "(none: gateway tokens module missing)"
    elif preset_token:
        shown = "from AGENTWORKS_DEV_TOKEN (not shown)"
    else:
        shown = token
    saved = "" if preset_token or not token else f"saved in {shown_home}/dev-token; "
    lines = [
        "",
        "AgentWorks is up.",
        f"  MCP       {gateway_url}/mcp   (Authorization: Bearer <token>)",
        f"  console   {gateway_url}/   (sign in with the token below: user:dev, the operator,"
        " owns crew:demo)",
        f"  token     {shown}",
        f"            {saved}the CLI reads {shown_home}/cli.json",
        f"  services  {' | '.join(services)}",
        *metrics,
        f"  database  {database}",
        f"  TLS       {_transport(host)}",
    ]
    if ignored_tls:
        lines.append(f"            not used here: {', '.join(ignored_tls)}")
    if agent:
        lines.append(f"  agent     {agent}")
    if skipped:
        lines.append(f"  skipped   {', '.join(skipped)} (not built yet)")
    lines.append("Try the CLI:")
    if export:
        lines += [
            "  # this suite's home is not ./.agentworks: tell the CLI where it is first",
            f"  export AGENTWORKS_HOME={shlex.quote(str(home))}",
        ]
    lines += [
        '  agentworks messages send --crew demo "hello"   (or "remind me in 10 s")',
        f"  agentworks messages read --inbox <inbox_id from the receipt> --wait {MAX_WAIT_SECONDS}",
    ]
    if "functions" not in skipped:
        lines.append("  agentworks crews call demo hello -i name=Ada --wait")
    lines += ["  agentworks --help", "Ctrl-C stops everything.", ""]
    return "\n".join(lines) + "\n"


def _transport(host: str) -> str:
    """What the banner says of gRPC's transport on `host`."""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        loopback = False
    if loopback:
        return "off: gRPC in plain text on loopback only (TLS: docs/operations.md)"
    return (
        f"off: gRPC in plain text on {host}, readable on the network; use compose or "
        "Kubernetes for TLS (docs/operations.md)"
    )
