"""What `agentworks up` starts: the suite's addresses, and each child's command and
environment (the services with their readiness checks, the demo runtimes)."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Awaitable, Callable, Sequence

from agentworks.core.keys import KeyDirectory
from agentworks.core.trust import GATEWAY as GATEWAY_SIGNER
from agentworks_dev.agent import LLM_KEY, demo_agent_command
from agentworks_dev.children import Child
from agentworks_dev.database import SuiteDatabase, without_database
from agentworks_dev.options import Options, tls_variables
from agentworks_dev.probes import (
    grpc_health_answers,
    grpc_health_serving,
    http_answers,
    http_healthy,
)
from agentworks_dev.specs import (
    DEMO_FUNCTIONS,
    DEMO_PRINCIPAL,
    DEMO_PROJECT,
    DEMO_RUNTIME,
    DEMO_TARGET,
    GATEWAY,
    GRPC_SERVICES,
    LOCAL_TICK_SECONDS,
    has_main,
)
from agentworks_dev.telemetry import METRICS_TOKEN_VARIABLE, child_telemetry

# A service child with its readiness check (awaited with a deadline, TimeoutError after).
Planned = tuple[Child, Callable[[float], Awaitable[None]]]


class SuitePlan:
    """The suite's settings and secrets, and the children they make."""

    def __init__(self, options: Options, environ: dict[str, str] | None = None) -> None:
        self.options = options
        self.environ = dict(os.environ if environ is None else environ)
        # The suite runs gRPC in plain text (T5: loopback needs no TLS): TLS settings
        # exported for another deployment are not handed to the children.
        self.ignored_tls = tls_variables(self.environ)
        for name in self.ignored_tls:
            del self.environ[name]
        self.home = options.home.resolve()
        self.database_url = ""
        # Where each service's database is (the embedded server: a role per service).
        self.database = SuiteDatabase()
        # Made under <home>/keys on start: each child gets its own signer's key only.
        self.keys: KeyDirectory | None = None
        # The demo runtimes' runtime credential (T2), made at start (bootstrap).
        self.runtime_credential = ""
        self.webhook_key = ""
        self.metrics: dict[str, int] = {}  # each child's metrics port (start)
        # The bearer token the services' /metrics ask for (`<home>/metrics-token`).
        self.metrics_token = ""

    def addresses(self, index: int) -> list[str]:
        """The gRPC addresses of the index-th service family (messaging=0, ...)."""
        first = self.options.base_port + index * self.options.replicas
        return [f"{self.options.host}:{first + r}" for r in range(self.options.replicas)]

    def gateway_ports(self) -> list[int]:
        return [self.options.http_port + r for r in range(self.options.replicas)]

    @property
    def gateway_url(self) -> str:
        return f"http://{self.options.host}:{self.options.http_port}"

    def grpc_ports(self) -> list[int]:
        return [
            int(a.rsplit(":", 1)[1]) for i in range(len(GRPC_SERVICES)) for a in self.addresses(i)
        ]

    def _child_env(self, signer: str | None, **extra: str) -> dict[str, str]:
        """A child's environment: the database, and of the keys only `signer`'s signing
        key (AGENTWORKS_SIGNING_KEY) besides the trusted keys everyone has (T1), none
        without a signer; the webhook key only the scheduler gets (plan)."""
        env = {
            k: v
            for k, v in self.environ.items()
            if not k.endswith(("_SIGNING_KEY", "_TRUSTED_KEYS")) and k != "SCHEDULER_WEBHOOK_KEY"
        }
        env.update(
            DATABASE_URL=self.database_url,
            PYTHONUNBUFFERED="1",
            LOG_JSON=self.environ.get("LOG_JSON", "false"),
        )
        if self.keys is not None and signer is not None:
            env.update(self.keys.env(signer))
        env.update(extra)
        return env

    def _telemetry(self, child: Child, variable: str) -> Child:
        """`child` with its own metrics port in `variable`, its name in telemetry."""
        child_telemetry(child.env, child.name, variable, self.options.host, self.metrics)
        return child

    def _runtime_env(self, **extra: str) -> dict[str, str]:
        """A runtime's environment: it talks to the services only, so the database
        address (and its password) is not given to it, nor to the commands it runs. It
        holds the demo runtime credential (T2), exchanged at the gateway, and no signing
        key."""
        env = self._child_env(None, **extra)
        without_database(env)
        env.pop(METRICS_TOKEN_VARIABLE, None)  # nor to its commands
        env.pop("AGENTWORKS_RUNTIME_CREDENTIAL_FILE", None)
        env["AGENTWORKS_RUNTIME_CREDENTIAL"] = self.runtime_credential
        env["AGENTWORKS_GATEWAY_URL"] = self.gateway_url
        return env

    def _service_env(self, signer: str, prefix: str, **extra: str) -> dict[str, str]:
        """A service's environment: its own database URL only (T9), no model key (agent.py)."""
        env = self._child_env(signer, **extra)
        env.pop(LLM_KEY, None)
        if self.metrics_token:
            env[METRICS_TOKEN_VARIABLE] = self.metrics_token
        database = self.database
        if database.server is None:  # DATABASE_URL (or none yet): the services share it
            database = SuiteDatabase(shared_url=self.database_url)
        database.service_env(env, prefix, self.environ)
        return env

    def plan(self) -> tuple[list[Planned], list[str]]:
        """The service children to start with their readiness checks; skipped services."""
        messaging = ",".join(self.addresses(0))
        functions = ",".join(self.addresses(1))
        scheduler = ",".join(self.addresses(2))
        planned: list[Planned] = []
        skipped: list[str] = []
        for index, spec in enumerate(GRPC_SERVICES):
            if not has_main(spec.package):
                skipped.append(spec.name)
                continue
            for replica, address in enumerate(self.addresses(index), start=1):
                # Functions and the scheduler call messaging; nothing else is called.
                env = self._service_env(
                    f"service:{spec.name}", spec.prefix, **{f"{spec.prefix}_LISTEN": address}
                )
                if spec.name != "messaging":
                    env[f"{spec.prefix}_MESSAGING_ADDRESS"] = messaging
                if spec.name == "scheduler":
                    env.setdefault("SCHEDULER_TICK_SECONDS", LOCAL_TICK_SECONDS)
                    env["SCHEDULER_WEBHOOK_KEY"] = self.webhook_key
                child = Child(f"{spec.name}-{replica}", [sys.executable, "-m", spec.package], env)
                child.alive = functools.partial(grpc_health_answers, address)
                self._telemetry(child, f"{spec.prefix}_METRICS_LISTEN")
                planned.append((child, functools.partial(grpc_health_serving, address)))
        if has_main(GATEWAY.package):
            for replica, port in enumerate(self.gateway_ports(), start=1):
                env = self._service_env(
                    GATEWAY_SIGNER,
                    GATEWAY.prefix,
                    GATEWAY_LISTEN=f"{self.options.host}:{port}",
                    GATEWAY_MESSAGING_ADDRESS=messaging,
                    GATEWAY_FUNCTIONS_ADDRESS=functions,
                    GATEWAY_SCHEDULER_ADDRESS=scheduler,
                )
                child = Child(f"gateway-{replica}", [sys.executable, "-m", GATEWAY.package], env)
                self._telemetry(child, "GATEWAY_METRICS_LISTEN")
                url = f"http://{self.options.host}:{port}/healthz"
                child.alive = functools.partial(http_answers, url)
                planned.append((child, functools.partial(http_healthy, url)))
        else:
            skipped.append(GATEWAY.name)
        return planned, skipped

    def runtime_children(self, skipped: Sequence[str] = ()) -> list[Child]:
        """The demo runtimes (agent:demo/demo-bot), each restarted on its own: crew:demo's
        turns (the LLM agent with LLM settings, else the scripted demo) and executions.
        None without the demo runtime credential (no gateway): a runtime's identity comes
        from the gateway (T2)."""
        if not self.runtime_credential:
            return []
        common = {"AGENTWORKS_RUNTIME_PRINCIPAL": DEMO_PRINCIPAL}
        common["AGENTWORKS_RUNTIME_TARGETS"] = DEMO_TARGET
        messaging = ",".join(self.addresses(0))
        turns_env = self._runtime_env(AGENTWORKS_MESSAGING_ADDRESS=messaging, **common)
        if "scheduler" not in skipped:
            turns_env["AGENTWORKS_SCHEDULER_ADDRESS"] = ",".join(self.addresses(2))
        # B9: a demo crew's turn is ended after 120 s (the runtime's default is 600 s) and
        # up to 4 conversations' turns run at once (the default); the environment may say
        # otherwise (AGENTWORKS_RUNTIME_TURN_SECONDS, AGENTWORKS_RUNTIME_CONCURRENCY).
        turns_env.setdefault("AGENTWORKS_RUNTIME_TURN_SECONDS", "120")
        functions = ",".join(self.addresses(1))
        functions_env = self._runtime_env(AGENTWORKS_FUNCTIONS_ADDRESS=functions, **common)
        runtime = [sys.executable, "-m", "agentworks.runtime"]
        agent = demo_agent_command(self.environ)  # the LLM agent when its settings are given
        children = [Child(DEMO_RUNTIME, [*runtime, *agent], turns_env)]
        if "functions" not in skipped:
            turns_env["AGENTWORKS_FUNCTIONS_ADDRESS"] = functions  # for its function calls
            root = str(self.home / DEMO_PROJECT)
            children.append(
                Child(DEMO_FUNCTIONS, [*runtime, "functions-demo", "--root", root], functions_env)
            )
        return [self._telemetry(c, "AGENTWORKS_RUNTIME_METRICS_LISTEN") for c in children]
