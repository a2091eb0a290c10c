"""What `agentworks up` runs: the services, the demo crew, and its fixed settings."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

DEMO_TARGET = "crew:demo"

DEMO_OWNER = "user:dev"

DEMO_PRINCIPAL = "agent:demo/demo-bot"

DEV_PRINCIPAL = "user:dev"

# Under the home: a key per signer and the trusted-keys file; the webhook key.
KEYS_DIR = "keys"

WEBHOOK_KEY_FILE = "webhook.key"

# A second SIGINT/SIGTERM this long after the first stops the children at once.
SECOND_SIGNAL_AFTER_SECONDS = 1.0

DEMO_RUNTIME = "demo-runtime"

DEMO_FUNCTIONS = "demo-funcs"

# The demo functions' project root, under the state directory: calls run in .calls/<id>/.
DEMO_PROJECT = "demo-project"

# Local default tick: reminders of the demo crew arrive within seconds (service default 60).
LOCAL_TICK_SECONDS = "5"

REGISTER_SECONDS = 30.0

# Held (flock) by the running `agentworks up` of a home; it says who holds it.
LOCK_FILE = "up.lock"

DEFAULT_HOME = ".agentworks"

# The first process's /metrics port (OpenTelemetry's Prometheus exporter's port); the
# others take the next ones (telemetry.py).
DEFAULT_METRICS_PORT = 9464

NAME_WIDTH = 12

OUTPUT_LINE_LIMIT = 1 << 20

RESTART_BACKOFF_MAX = 30.0

# A child that stayed up this long has its restart backoff reset.
HEALTHY_UPTIME_SECONDS = 30.0

# B3: once ready, each service is asked its health this often, with this timeout; after
# this many failures in a row (no answer, or NOT_SERVING) it is killed and restarted:
# a stuck loop is restarted within about 5 x 3 + 3 = 18 s (its own watchdog ends it at
# 30 s, `<NAME>_LOOP_STUCK_SECONDS`, whichever comes first).
LIVENESS_PERIOD_SECONDS = 5.0
LIVENESS_TIMEOUT_SECONDS = 3.0
LIVENESS_FAILURES = 3


class StartupError(Exception):
    """The suite could not be brought up; the message says what to do."""


@dataclass(frozen=True)
class ServiceSpec:
    """One kind of service process: its package, env prefix and port family."""

    name: str
    package: str
    prefix: str
    http: bool = False


GRPC_SERVICES = (
    ServiceSpec("messaging", "agentworks_messaging", "MESSAGING"),
    ServiceSpec("functions", "agentworks_functions", "FUNCTIONS"),
    ServiceSpec("scheduler", "agentworks_scheduler", "SCHEDULER"),
)

GATEWAY = ServiceSpec("gateway", "agentworks_gateway", "GATEWAY", http=True)


def has_main(package: str) -> bool:
    """Whether `python -m <package>` can start it (its `__main__` is installed)."""
    try:
        return importlib.util.find_spec(f"{package}.__main__") is not None
    except ModuleNotFoundError:
        return False
