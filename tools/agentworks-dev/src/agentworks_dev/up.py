"""`agentworks up`: run the whole suite locally as separate processes (`make run`, P2, R2).

With no `DATABASE_URL` it starts the embedded PostgreSQL (data in `.agentworks/pg`,
kept across restarts) with a role per service, each with its own password (kept in
`.agentworks/db/`) and owning only its own schema, and passes each service only its
own `<NAME>_DATABASE_URL` (T9). It keeps a signing key per signer in
`.agentworks/keys/` (and the webhook key in `.agentworks/webhook.key`), gives each
child its own signer's key only (the demo runtimes none: a runtime credential), starts messaging,
functions, scheduler and the gateway (`--replicas N` of each, on consecutive
ports) as child processes, waits until each answers its health check, registers the demo
crew with messaging and functions, declares its functions as the owner (`user:dev`),
issues a dev token (`.agentworks/dev-token`), writes `.agentworks/cli.json` for the CLI,
starts the demo runtimes (`demo-runtime` serves turns and asks the scheduler for
wake-ups; `demo-funcs` serves function calls in `.agentworks/demo-project/.calls/`),
and prints where to start, each process's metrics URL included (every child serves
/metrics on its own port from `--metrics-port`, 9464 by default, and is named in
`OTEL_RESOURCE_ATTRIBUTES`: `telemetry.py`). The scheduler ticks every
`SCHEDULER_TICK_SECONDS` (5 s here unless set), so the demo's reminders arrive promptly.

One suite per home: `up` holds an exclusive lock on `<home>/up.lock` (fcntl.flock, released
by the kernel when the process ends, even by kill -9) and refuses to start while another
`up` holds it, naming its pid and ports.

Each child's output is prefixed with its name. A child that dies is reported and
restarted with backoff. Ctrl-C or SIGTERM stops every child (SIGTERM, a grace period,
then SIGKILL) and then the embedded PostgreSQL.

`--bootstrap-only` starts nothing: it waits for running services (addresses from the
environment), registers the demo crew, declares its functions and ensures the dev token.
compose.yaml uses it.
"""

from __future__ import annotations

import asyncio
import os
import sys

import structlog

from agentworks.core.logging import configure_logging
from agentworks_dev.bootstrap import bootstrap
from agentworks_dev.options import parse_args
from agentworks_dev.specs import GRPC_SERVICES, has_main
from agentworks_dev.supervisor import Supervisor

log = structlog.get_logger("agentworks.up")


def main(argv: list[str]) -> int:
    """Entry point of `agentworks up` (and `python -m agentworks_dev.up`)."""
    environ = dict(os.environ)
    options = parse_args(argv, environ)
    configure_logging(
        "up",
        level=environ.get("LOG_LEVEL", "info"),
        json=environ.get("LOG_JSON", "false").lower() in ("1", "true", "yes", "on"),
    )
    if options.bootstrap_only:
        return asyncio.run(bootstrap(options, environ))
    return asyncio.run(Supervisor(options, environ).run())


__all__ = ["GRPC_SERVICES", "has_main", "main", "parse_args"]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
