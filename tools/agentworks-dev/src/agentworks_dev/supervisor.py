"""The supervisor: child processes, prefixed logs, restarts with backoff, stop."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import structlog

from agentworks.client.keys import KeyDirectory
from agentworks.client.trust import GATEWAY as GATEWAY_SIGNER
from agentworks.client.trust import RUNTIME as RUNTIME_SIGNER
from agentworks_dev.agent import LLM_KEY, demo_agent_command, demo_agent_line
from agentworks_dev.banner import banner_text
from agentworks_dev.bootstrap import (
    ensure_dev_token,
    ensure_runtime_credential,
    register_demo_crew,
    signing_keys,
    webhook_key,
    write_cli_config,
)
from agentworks_dev.database import SuiteDatabase, start_database, without_database
from agentworks_dev.home import lock_home
from agentworks_dev.options import Options, tls_variables
from agentworks_dev.parent import die_with_parent
from agentworks_dev.probes import (
    grpc_health_answers,
    grpc_health_serving,
    http_answers,
    http_healthy,
    other_ports,
    port_is_free,
)
from agentworks_dev.specs import (
    DEMO_FUNCTIONS,
    DEMO_PRINCIPAL,
    DEMO_PROJECT,
    DEMO_RUNTIME,
    DEMO_TARGET,
    GATEWAY,
    GRPC_SERVICES,
    HEALTHY_UPTIME_SECONDS,
    LIVENESS_FAILURES,
    LIVENESS_PERIOD_SECONDS,
    LIVENESS_TIMEOUT_SECONDS,
    LOCAL_TICK_SECONDS,
    NAME_WIDTH,
    OUTPUT_LINE_LIMIT,
    RESTART_BACKOFF_MAX,
    SECOND_SIGNAL_AFTER_SECONDS,
    StartupError,
    has_main,
)
from agentworks_dev.telemetry import (
    METRICS_TOKEN_FILE,
    METRICS_TOKEN_VARIABLE,
    child_telemetry,
    metrics_lines,
    metrics_ports,
    metrics_token,
)

log = structlog.get_logger("agentworks.up")


@dataclass
class Child:
    """One supervised child process and what the supervisor knows about it."""

    name: str
    argv: list[str]
    env: dict[str, str]
    process: asyncio.subprocess.Process | None = None
    started_at: float = 0.0
    restarts: int = 0
    tail: collections.deque[str] = field(default_factory=lambda: collections.deque(maxlen=20))
    watcher: asyncio.Task[None] | None = None
    # Its liveness check (B3): whether it answers its health within the timeout given;
    # None: only its exit is watched (the demo runtimes).
    alive: Callable[[float], Awaitable[bool]] | None = None
    # Times it was killed because its health stopped answering; whether the process
    # running now has answered its liveness check yet.
    unresponsive: int = 0
    answered: bool = False

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None


class Supervisor:
    """Starts, watches, restarts and stops the suite's processes."""

    def __init__(self, options: Options, environ: dict[str, str] | None = None) -> None:
        self.options = options
        self.environ = dict(os.environ if environ is None else environ)
        # The suite runs gRPC in plain text (T5: loopback needs no TLS): TLS settings
        # exported for another deployment are not handed to the children.
        self.ignored_tls = tls_variables(self.environ)
        for name in self.ignored_tls:
            del self.environ[name]
        self.home = options.home.resolve()
        self.children: list[Child] = []
        self._stopping = asyncio.Event()
        self._out = sys.stdout
        self.database_url = ""
        # Where each service's database is (the embedded server: a role per service).
        self.database = SuiteDatabase()
        # Made under <home>/keys on start: each child gets its own signer's key only.
        self.keys: KeyDirectory | None = None
        # The demo runtimes' runtime credential (T2), made at start (bootstrap).
        self.runtime_credential = ""
        self.webhook_key = ""
        self.embedded = False
        # The home's lock, held until the process ends (never closed on purpose).
        self.lock_fd: int | None = None
        self.metrics: dict[str, int] = {}  # each child's metrics port (start)
        # The bearer token the services' /metrics ask for (`<home>/metrics-token`).
        self.metrics_token = ""
        # B3: how each service's liveness is checked once it is up (specs.py).
        self.liveness_period = LIVENESS_PERIOD_SECONDS
        self.liveness_timeout = LIVENESS_TIMEOUT_SECONDS
        self.liveness_failures = LIVENESS_FAILURES

    # ------------------------------------------------------------------ plan

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
        key; only without a gateway (none installed) the `runtime` key instead."""
        credential = self.runtime_credential
        env = self._child_env(None if credential else RUNTIME_SIGNER, **extra)
        without_database(env)
        env.pop(METRICS_TOKEN_VARIABLE, None)  # nor to its commands
        env.pop("AGENTWORKS_RUNTIME_CREDENTIAL_FILE", None)
        if credential:
            env["AGENTWORKS_RUNTIME_CREDENTIAL"] = credential
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

    def plan(self) -> tuple[list[tuple[Child, Callable[[float], Awaitable[None]]]], list[str]]:
        """The service children to start with their readiness checks; skipped services."""
        messaging = ",".join(self.addresses(0))
        functions = ",".join(self.addresses(1))
        scheduler = ",".join(self.addresses(2))
        planned: list[tuple[Child, Callable[[float], Awaitable[None]]]] = []
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
        turns (the LLM agent with LLM settings, else the scripted demo) and executions."""
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

    # ------------------------------------------------------------------- run

    async def run(self) -> int:
        """Bring the suite up, wait for Ctrl-C/SIGTERM, bring it down; the exit code."""
        loop = asyncio.get_running_loop()
        main = asyncio.current_task()
        assert main is not None
        started = asyncio.Event()

        first_signal: list[float] = []

        def on_signal(signame: str) -> None:
            log.info("signal.received", signal=signame)
            now = time.monotonic()
            # A second Ctrl-C: do not wait for the grace period. One signal to the
            # process group (`kill -- -PGID`, make's own forwarding) arrives twice
            # within milliseconds: that is still the first.
            if first_signal and now - first_signal[0] >= SECOND_SIGNAL_AFTER_SECONDS:
                self._kill_all()
            first_signal[:1] = first_signal[:1] or [now]
            self._stopping.set()
            if not started.is_set():
                main.cancel()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal, sig.name)
        try:
            await self.start()
            started.set()
            await self._stopping.wait()
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
            self._launch(child)
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
                self._launch(child)
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

    async def _wait_ready(
        self, planned: list[tuple[Child, Callable[[float], Awaitable[None]]]], deadline: float
    ) -> None:
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

    # -------------------------------------------------------------- children

    def _launch(self, child: Child) -> None:
        self.children.append(child)
        child.watcher = asyncio.create_task(self._watch(child), name=f"watch-{child.name}")

    async def _spawn(self, child: Child) -> asyncio.subprocess.Process:
        process = await asyncio.create_subprocess_exec(
            *child.argv,
            env=child.env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            limit=OUTPUT_LINE_LIMIT,
            # Own process group: the terminal's Ctrl-C reaches only the supervisor,
            # which then stops the children in order.
            process_group=0,
            # And SIGTERM from the kernel if the supervisor dies (even by SIGKILL).
            preexec_fn=functools.partial(die_with_parent, os.getpid()),
        )
        child.process = process
        child.started_at = time.monotonic()
        log.info("child.started", child=child.name, pid=process.pid)
        return process

    async def _pump(self, child: Child, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        prefix = f"{child.name:<{NAME_WIDTH}}| "
        while True:
            try:
                raw = await process.stdout.readline()
            except ValueError:  # a line longer than the limit: drop the rest of it
                continue
            if not raw:
                return
            line = raw.decode("utf-8", errors="replace").rstrip("\n")
            child.tail.append(line)
            self._out.write(prefix + line + "\n")
            self._out.flush()

    async def _watch(self, child: Child) -> None:
        backoff = 1.0
        while not self._stopping.is_set():
            process = await self._spawn(child)
            pump = asyncio.create_task(self._pump(child, process))
            liveness = asyncio.create_task(self._liveness(child, process))
            code = await process.wait()
            liveness.cancel()
            await pump
            if self._stopping.is_set():
                return
            uptime = time.monotonic() - child.started_at
            if uptime > HEALTHY_UPTIME_SECONDS:
                backoff = 1.0
            log.error(
                "child.exited",
                child=child.name,
                code=code,
                uptime=round(uptime, 1),
                restart_in=backoff,
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), backoff)
            backoff = min(backoff * 2, RESTART_BACKOFF_MAX)
            child.restarts += 1

    async def _liveness(self, child: Child, process: asyncio.subprocess.Process) -> None:
        """Kill `child` when its health stops answering (B3): a service whose loop is
        stuck is a live process that serves nothing, and used to be left so. Checked
        every `liveness_period` once it has answered; `liveness_failures` failures in a
        row (no answer within `liveness_timeout`, or NOT_SERVING) and it is killed
        (SIGKILL: a stuck loop cannot drain), then restarted as after any exit."""
        if child.alive is None:
            return
        child.answered, failures = False, 0
        while process.returncode is None and not self._stopping.is_set():
            await asyncio.sleep(self.liveness_period)
            if await child.alive(self.liveness_timeout):
                child.answered, failures = True, 0
                continue
            if self._stopping.is_set() or process.returncode is not None:
                return  # ending anyway
            starting = time.monotonic() - child.started_at < self.options.ready_timeout
            if not child.answered and starting:
                continue  # still starting: it has until the ready timeout to answer
            failures += 1
            if failures < self.liveness_failures:
                continue
            log.error(
                "child.unresponsive",
                child=child.name,
                failures=failures,
                every=self.liveness_period,
                action="killing it, to be restarted",
            )
            child.unresponsive += 1
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            return

    async def shutdown(self) -> None:
        """Stop the runtime, then the gateway, then the services; SIGKILL stragglers."""
        self._stopping.set()
        order: list[tuple[str, ...]] = [
            (DEMO_RUNTIME, DEMO_FUNCTIONS),
            ("gateway-",),
            ("scheduler-",),
            ("functions-",),
            ("messaging-",),
        ]
        for prefixes in order:
            group = [c for c in self.children if c.name.startswith(prefixes)]
            await self._stop_children(group)
        await self._stop_children(self.children)  # anything not matched above
        for child in self.children:
            if child.watcher is not None:
                child.watcher.cancel()
                await asyncio.wait({child.watcher})
        if self.children:
            log.info("stopped", children=len(self.children))
        await asyncio.to_thread(self.database.stop)

    async def _stop_children(self, group: list[Child]) -> None:
        running = [(c, c.process) for c in group if c.process and c.process.returncode is None]
        if not running:
            return
        for _, process in running:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        waits = {asyncio.ensure_future(p.wait()): (c, p) for c, p in running}
        _, pending = await asyncio.wait(waits, timeout=self.options.stop_timeout)
        for future in pending:
            child, process = waits[future]
            log.warning("child.killed", child=child.name, after=self.options.stop_timeout)
            with contextlib.suppress(ProcessLookupError):
                process.kill()
        if pending:
            await asyncio.wait(pending)
        for child, process in running:
            log.info("child.stopped", child=child.name, code=process.returncode)

    def _kill_all(self) -> None:
        for child in self.children:
            if child.process and child.process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    child.process.kill()

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
