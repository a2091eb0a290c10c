"""The supervisor: brings the suite up (database, keys, services, registration, dev
token, demo runtimes, banner), keeps it running, brings it down in order."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable

import structlog

from agentworks.core.trust import GATEWAY as GATEWAY_SIGNER
from agentworks_dev.agent import demo_agent_command, demo_agent_line
from agentworks_dev.banner import banner_text
from agentworks_dev.bootstrap import (
    ensure_dev_token,
    ensure_runtime_credential,
    register_demo_crew,
    signing_keys,
    webhook_key,
    write_cli_config,
)
from agentworks_dev.children import Child, Children
from agentworks_dev.database import start_database
from agentworks_dev.home import lock_home
from agentworks_dev.options import Options
from agentworks_dev.plan import Planned, SuitePlan
from agentworks_dev.probes import other_ports, port_is_free
from agentworks_dev.specs import (
    DEMO_FUNCTIONS,
    DEMO_RUNTIME,
    GATEWAY,
    GRPC_SERVICES,
    SECOND_SIGNAL_AFTER_SECONDS,
    StartupError,
)
from agentworks_dev.telemetry import (
    METRICS_TOKEN_FILE,
    METRICS_TOKEN_VARIABLE,
    metrics_lines,
    metrics_ports,
    metrics_token,
)

log = structlog.get_logger("agentworks.up")

# The order the children are stopped in (by name prefix): the runtimes first, the
# gateway, then the services, messaging (which the others call) last.
STOP_ORDER: list[tuple[str, ...]] = [
    (DEMO_RUNTIME, DEMO_FUNCTIONS),
    ("gateway-",),
    ("scheduler-",),
    ("functions-",),
    ("messaging-",),
]


class Supervisor(SuitePlan):
    """Starts, watches, restarts and stops the suite's processes."""

    def __init__(self, options: Options, environ: dict[str, str] | None = None) -> None:
        super().__init__(options, environ)
        self._out = sys.stdout
        self.children = Children(options.ready_timeout, options.stop_timeout, self._out)
        self.embedded = False
        # The home's lock, held until the process ends (never closed on purpose).
        self.lock_fd: int | None = None

    def lock_info(self) -> dict[str, object]:
        """Who runs this home: written into its lock file, quoted by a refused `up`."""
        ports = self.grpc_ports()
        return {
            "pid": os.getpid(),
            "gateway_url": self.gateway_url,
            "grpc_ports": f"{min(ports)}-{max(ports)}",
            "base_port": self.options.base_port,
            "http_port": self.options.http_port,
            "metrics_port": self.options.metrics_port,
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }

    async def run(self) -> int:
        """Bring the suite up, wait for Ctrl-C/SIGTERM, bring it down; the exit code."""
        loop = asyncio.get_running_loop()
        main = asyncio.current_task()
        assert main is not None
        started = asyncio.Event()
        stopping = self.children.stopping

        first_signal: list[float] = []

        def on_signal(signame: str) -> None:
            log.info("signal.received", signal=signame)
            now = time.monotonic()
            # A second Ctrl-C: do not wait for the grace period. One signal to the
            # process group (`kill -- -PGID`, make's own forwarding) arrives twice
            # within milliseconds: that is still the first.
            if first_signal and now - first_signal[0] >= SECOND_SIGNAL_AFTER_SECONDS:
                self.children.kill_all()
            first_signal[:1] = first_signal[:1] or [now]
            stopping.set()
            if not started.is_set():
                main.cancel()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal, sig.name)
        try:
            await self.start()
            started.set()
            await stopping.wait()
            return 0
        except asyncio.CancelledError:
            main.uncancel()
            return 130
        except StartupError as exc:
            print(f"agentworks up: {exc}", file=sys.stderr, flush=True)
            return 1
        finally:
            await self.shutdown()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)

    async def start(self) -> None:
        """Database, keys, services, registration, dev token, runtime, banner."""
        self.home.mkdir(parents=True, exist_ok=True)
        self.lock_fd = lock_home(self.home, self.lock_info())
        ports = [*self.grpc_ports(), *self.gateway_ports()]
        self.metrics = metrics_ports(self.options.metrics_port, self.options.replicas, ports)
        if self.metrics:
            self.metrics_token = metrics_token(self.home, self.environ)
        if self.options.runtime:
            demo_agent_command(self.environ)  # unusable LLM settings: stop before starting
        self._check_ports()
        self.database = await start_database(self.options.database_url, self.home)
        self.database_url = self.database.shared_url
        self.embedded = self.database.server is not None
        self.keys = signing_keys(self.home)
        self.webhook_key = webhook_key(self.home, self.environ)
        planned, skipped = self.plan()
        for name in skipped:
            log.warning("service.skipped", child=name, reason=f"{name} has no __main__ yet")
        if not any(c.name.startswith("messaging-") for c, _ in planned):
            raise StartupError("the messaging service is not installed (agentworks_messaging)")
        for child, _ in planned:
            self.children.launch(child)
        deadline = time.monotonic() + self.options.ready_timeout
        await self._wait_ready(planned, deadline)

        functions = ",".join(self.addresses(1)) if "functions" not in skipped else None
        gateway_key, _ = self.keys.ensure(GATEWAY_SIGNER)
        await register_demo_crew(gateway_key, ",".join(self.addresses(0)), functions)
        gateway_db = self.database.url_for(GATEWAY.prefix, self.environ)
        token = await ensure_dev_token(self.home, gateway_db, self.environ)
        if self.options.runtime and "gateway" not in skipped:
            self.runtime_credential = await ensure_runtime_credential(self.home, gateway_db)
        if self.options.runtime:
            for child in self.runtime_children(skipped):
                self.children.launch(child)
        if token and "gateway" not in skipped:
            write_cli_config(self.home, self.gateway_url, token)
        self._banner(token, skipped)

    def _check_ports(self) -> None:
        ports = [*self.grpc_ports(), *self.gateway_ports(), *self.metrics.values()]
        taken = [
            f"{self.options.host}:{port}"
            for port in ports
            if not port_is_free(self.options.host, port)
        ]
        if taken:
            options = self.options
            others = other_ports(options.base_port, options.http_port, metrics=options.metrics_port)
            raise StartupError(
                f"port(s) already in use: {', '.join(taken)}. Is another `agentworks up` "
                f"running? Stop it, or choose other ports, e.g. {others} (a second "
                "suite also needs its own --home, AGENTWORKS_HOME)."
            )

    async def _wait_ready(self, planned: list[Planned], deadline: float) -> None:
        async def one(child: Child, check: Callable[[float], Awaitable[None]]) -> str | None:
            try:
                await check(deadline)
            except TimeoutError:
                return child.name
            log.info("service.ready", child=child.name)
            return None

        late = [n for n in await asyncio.gather(*(one(c, k) for c, k in planned)) if n]
        if late:
            details = []
            for child, _ in planned:
                if child.name in late:
                    tail = "\n    ".join(child.tail) or "(no output)"
                    details.append(f"  {child.name} (last output):\n    {tail}")
            raise StartupError(
                f"not ready after {self.options.ready_timeout:.0f}s: {', '.join(late)}\n"
                + "\n".join(details)
            )

    async def shutdown(self) -> None:
        """Stop the runtime, then the gateway, then the services; SIGKILL stragglers."""
        await self.children.stop(STOP_ORDER)
        await asyncio.to_thread(self.database.stop)

    def _metrics_token_line(self) -> list[str]:
        if not self.metrics_token:
            return []
        given = self.environ.get(METRICS_TOKEN_VARIABLE, "").strip()
        where = METRICS_TOKEN_VARIABLE if given else self.home / METRICS_TOKEN_FILE
        return [f"            the services' /metrics need Authorization: Bearer <{where}>"]

    def _banner(self, token: str, skipped: list[str]) -> None:
        services = [
            f"{spec.name} {','.join(self.addresses(i))}"
            for i, spec in enumerate(GRPC_SERVICES)
            if spec.name not in skipped
        ]
        text = banner_text(
            home=self.home,
            gateway_url=self.gateway_url,
            token=token,
            preset_token=bool(self.environ.get("AGENTWORKS_DEV_TOKEN")),
            embedded=self.embedded,
            services=services,
            database_port=self.database.server.port if self.database.server else 0,
            skipped=skipped,
            host=self.options.host,
            ignored_tls=self.ignored_tls,
            metrics=metrics_lines(self.options.host, self.metrics, [c.name for c in self.children])
            + self._metrics_token_line(),
            agent=demo_agent_line(self.environ) if self.options.runtime else "",
        )
        self._out.write(text)
        self._out.flush()
