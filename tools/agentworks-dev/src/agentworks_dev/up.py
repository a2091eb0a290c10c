"""`agentworks up`: run the whole suite locally as separate processes (`make run`, P2, R2).

With no `DATABASE_URL` it starts the embedded PostgreSQL (data in `.agentworks/pg`,
kept across restarts). It keeps an internal key in `.agentworks/internal.key`, starts
messaging, functions, scheduler and the gateway (`--replicas N` of each, on consecutive
ports) as child processes, waits until each answers its health check, registers the demo
crew with messaging and functions, declares its functions as the owner (`user:dev`),
issues a dev token (`.agentworks/dev-token`), writes `.agentworks/cli.json` for the CLI,
starts the demo runtimes (`demo-runtime` serves turns and asks the scheduler for
wake-ups; `demo-funcs` serves function calls in `.agentworks/demo-project/.calls/`),
and prints where to start. The scheduler ticks every `SCHEDULER_TICK_SECONDS` (5 s here
unless set), so the demo's reminders arrive promptly.

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

import argparse
import asyncio
import collections
import contextlib
import fcntl
import importlib.util
import json
import os
import pathlib
import secrets
import shlex
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import grpc
import structlog
from grpc_health.v1 import health_pb2, health_pb2_grpc

from agentworks.client import FunctionsClient, MessagingClient, errors
from agentworks.client.identity import OPERATOR, Minter
from agentworks.client.logging import configure_logging

log = structlog.get_logger("agentworks.up")

DEMO_TARGET = "crew:demo"
DEMO_OWNER = "user:dev"
DEMO_PRINCIPAL = "agent:demo/demo-bot"
DEV_PRINCIPAL = "user:dev"
SUPERVISOR_PRINCIPAL = "service:agentworks-up"
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
NAME_WIDTH = 12
OUTPUT_LINE_LIMIT = 1 << 20
RESTART_BACKOFF_MAX = 30.0
# A child that stayed up this long has its restart backoff reset.
HEALTHY_UPTIME_SECONDS = 30.0
# Fast reconnects, so readiness is seen soon after a server starts listening.
_HEALTH_CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 500),
]


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


def port_is_free(host: str, port: int) -> bool:
    """Whether nothing listens on host:port (so a child can bind it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def write_secret(path: pathlib.Path, value: str) -> None:
    """Write `value` to a new 0600 file (replacing any previous one atomically)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(value + "\n")
    os.replace(tmp, path)


def load_or_create_secret(path: pathlib.Path, make: Callable[[], str]) -> tuple[str, bool]:
    """The secret kept in `path`, created with `make()` if absent; (value, created)."""
    if path.exists():
        value = path.read_text(encoding="utf-8").strip()
        if value:
            if path.stat().st_mode & 0o077:
                path.chmod(0o600)
            return value, False
    value = make()
    write_secret(path, value)
    return value, True


async def grpc_health_serving(address: str, deadline: float) -> None:
    """Wait until `address` answers gRPC health SERVING, or raise TimeoutError."""
    async with grpc.aio.insecure_channel(address, options=_HEALTH_CHANNEL_OPTIONS) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{address} did not answer gRPC health SERVING")
            try:
                response = await stub.Check(
                    health_pb2.HealthCheckRequest(service=""),
                    timeout=min(remaining, 2.0),
                    wait_for_ready=True,
                )
            except grpc.aio.AioRpcError:
                continue
            if response.status == health_pb2.HealthCheckResponse.SERVING:
                return
            await asyncio.sleep(min(0.2, max(0.0, deadline - time.monotonic())))


async def http_healthy(url: str, deadline: float) -> None:
    """Wait until GET `url` answers 200, or raise TimeoutError."""
    import httpx

    async with httpx.AsyncClient(timeout=2.0) as client:
        while True:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{url} did not answer 200")
            try:
                response = await client.get(url)
                if response.status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.2)


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

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None


@dataclass
class Options:
    """The parsed command line of `agentworks up`."""

    home: pathlib.Path
    replicas: int
    host: str
    base_port: int
    http_port: int
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
    return Options(
        home=pathlib.Path(args.home),
        replicas=args.replicas,
        host=args.host,
        base_port=args.base_port,
        http_port=args.http_port,
        database_url=args.database_url,
        ready_timeout=args.ready_timeout,
        stop_timeout=args.stop_timeout,
        runtime=not args.no_runtime,
        bootstrap_only=args.bootstrap_only,
    )


def operator_identity(key: str) -> Minter:
    """The supervisor's own identity: an operator, minted with the internal key."""
    return Minter(SUPERVISOR_PRINCIPAL, key, roles={OPERATOR})


async def _retry_unavailable(make: Callable[[], Awaitable[object]], deadline: float) -> None:
    """Await `make()`, retrying while the service answers UNAVAILABLE until `deadline`."""
    while True:
        try:
            await make()
            return
        except errors.Unavailable:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)


async def register_demo_crew(key: str, messaging: str, functions: str | None) -> None:
    """Register `crew:demo` (owner `user:dev`) with messaging and functions, and declare
    the demo functions as the owner (`demo_functions.declare_demo_functions`)."""
    deadline = time.monotonic() + REGISTER_SECONDS
    async with MessagingClient(messaging, identity=operator_identity(key)) as client:
        await _retry_unavailable(
            lambda: client.register_target(DEMO_TARGET, owner=DEMO_OWNER), deadline
        )
    log.info("target.registered", target=DEMO_TARGET, owner=DEMO_OWNER, registry="messaging")
    if not functions:
        return
    async with FunctionsClient(functions, identity=operator_identity(key)) as client:
        await _retry_unavailable(
            lambda: client.register_target(DEMO_TARGET, owner=DEMO_OWNER), deadline
        )
    log.info("target.registered", target=DEMO_TARGET, owner=DEMO_OWNER, registry="functions")
    try:
        from agentworks.runtime import demo_functions
    except ImportError:
        log.warning("functions.not_declared", reason="agentworks-runtime is not installed")
        return
    # Declaring is the owner's right (F1): act as user:dev, minted with the internal key.
    async with FunctionsClient(functions, identity=Minter(DEMO_OWNER, key)) as owner:
        declared = []

        async def declare() -> None:
            declared[:] = await demo_functions.declare_demo_functions(owner, DEMO_TARGET)

        await _retry_unavailable(declare, deadline)
    log.info("functions.declared", target=DEMO_TARGET, functions=",".join(f.name for f in declared))


async def ensure_dev_token(home: pathlib.Path, database_url: str, environ: dict[str, str]) -> str:
    """The dev token (operator, `user:dev`), kept in `home/dev-token` and stored hashed."""
    try:
        from agentworks_gateway import tokens
    except ImportError:
        log.warning("dev_token.skipped", reason="agentworks_gateway.tokens is not available")
        return ""
    path = home / "dev-token"
    preset = environ.get("AGENTWORKS_DEV_TOKEN", "")
    if preset:
        token = preset
    else:
        token, _ = load_or_create_secret(path, tokens.new_token)

    async def store(value: str) -> None:
        label = "dev (agentworks up)"
        await asyncio.to_thread(
            tokens.ensure_token, database_url, value, DEV_PRINCIPAL, {OPERATOR}, label
        )

    try:
        await store(token)
    except errors.PreconditionFailed:
        if preset:
            raise
        # The saved token was revoked; a revoked token stays revoked, so mint another.
        log.warning("dev_token.revoked", path=str(path), action="issuing a new one")
        token = tokens.new_token()
        write_secret(path, token)
        await store(token)
    return token


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def lock_home(home: pathlib.Path, info: dict[str, object]) -> int:
    """Take `home/up.lock` for this process's lifetime and write `info` into it; the fd.

    fcntl.flock: the kernel drops the lock when the process ends, however it ends (no
    stale pid file after kill -9). Another `up` holding it is a StartupError that says
    which pid and ports, and how to run a second suite.
    """
    path = home / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder: dict[str, object] = {}
        for _ in range(10):  # the holder writes right after locking: give it a moment
            with contextlib.suppress(OSError, ValueError):
                read = json.loads(os.pread(fd, 1 << 16, 0) or b"{}")
                holder = read if isinstance(read, dict) else {}
            if holder:
                break
            time.sleep(0.05)
        os.close(fd)
        raise StartupError(_refusal(home, holder)) from None
    except BaseException:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
    return fd


def other_ports(base_port: int, http_port: int, home: str = "") -> str:
    """How to start beside those ports (100 up, in another home if given): the flags, or
    the `make run` settings."""
    base, http = base_port + 100, http_port + 100
    flags, settings = f"--base-port {base} --http-port {http}", ""
    if home:
        flags, settings = f"--home {home} {flags}", f"AGENTWORKS_HOME={home} "
    settings += f"AGENTWORKS_BASE_PORT={base} AGENTWORKS_HTTP_PORT={http}"
    return f"agentworks up {flags}, or make run {settings}"


def _refusal(home: pathlib.Path, holder: dict[str, object]) -> str:
    pid = holder.get("pid")
    who = f"pid {pid}" if isinstance(pid, int) and _alive(pid) else "pid unknown"
    ports = ""
    if holder.get("gateway_url"):
        ports = f", gateway {holder['gateway_url']}, gRPC ports {holder.get('grpc_ports', '?')}"
    base, http = holder.get("base_port"), holder.get("http_port")
    if not (isinstance(base, int) and isinstance(http, int)):
        base, http = 50051, 8080
    kill = f", or kill {pid}" if who != "pid unknown" else ""
    other = "/tmp/agentworks-2"
    return (
        f"another `agentworks up` ({who}{ports}) is already running on the home {home} "
        f"(it holds {home / LOCK_FILE}). Use that suite (its CLI reads {home / 'cli.json'}), "
        f"or stop it first (Ctrl-C in its terminal{kill}). To run a second suite beside "
        f"it, give it its own home and ports: {other_ports(base, http, other)}; "
        f"then point its CLI at it with export AGENTWORKS_HOME={other}."
    )


class Supervisor:
    """Starts, watches, restarts and stops the suite's processes."""

    def __init__(self, options: Options, environ: dict[str, str] | None = None) -> None:
        self.options = options
        self.environ = dict(os.environ if environ is None else environ)
        self.home = options.home.resolve()
        self.children: list[Child] = []
        self._stopping = asyncio.Event()
        self._out = sys.stdout
        self.database_url = ""
        self.key = ""
        self.embedded = False
        # The home's lock, held until the process ends (never closed on purpose).
        self.lock_fd: int | None = None

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

    def lock_info(self) -> dict[str, object]:
        """Who runs this home: written into its lock file, quoted by a refused `up`."""
        ports = [
            int(a.rsplit(":", 1)[1]) for i in range(len(GRPC_SERVICES)) for a in self.addresses(i)
        ]
        return {
            "pid": os.getpid(),
            "gateway_url": self.gateway_url,
            "grpc_ports": f"{min(ports)}-{max(ports)}",
            "base_port": self.options.base_port,
            "http_port": self.options.http_port,
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }

    def _child_env(self, **extra: str) -> dict[str, str]:
        env = dict(self.environ)
        env.update(
            DATABASE_URL=self.database_url,
            AGENTWORKS_INTERNAL_KEY=self.key,
            PYTHONUNBUFFERED="1",
            LOG_JSON=self.environ.get("LOG_JSON", "false"),
        )
        env.update(extra)
        return env

    def _runtime_env(self, **extra: str) -> dict[str, str]:
        """A runtime's environment: it talks to the services only, so the database
        address (and its password) is not given to it, nor to the commands it runs."""
        env = self._child_env(**extra)
        env.pop("DATABASE_URL", None)
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
                env = self._child_env(**{f"{spec.prefix}_LISTEN": address})
                if spec.name != "messaging":
                    env[f"{spec.prefix}_MESSAGING_ADDRESS"] = messaging
                if spec.name == "scheduler":
                    env.setdefault("SCHEDULER_TICK_SECONDS", LOCAL_TICK_SECONDS)
                child = Child(f"{spec.name}-{replica}", [sys.executable, "-m", spec.package], env)
                planned.append((child, lambda d, a=address: grpc_health_serving(a, d)))
        if has_main(GATEWAY.package):
            for replica, port in enumerate(self.gateway_ports(), start=1):
                env = self._child_env(
                    GATEWAY_LISTEN=f"{self.options.host}:{port}",
                    GATEWAY_MESSAGING_ADDRESS=messaging,
                    GATEWAY_FUNCTIONS_ADDRESS=functions,
                    GATEWAY_SCHEDULER_ADDRESS=scheduler,
                )
                child = Child(f"gateway-{replica}", [sys.executable, "-m", GATEWAY.package], env)
                url = f"http://{self.options.host}:{port}/healthz"
                planned.append((child, lambda d, u=url: http_healthy(u, d)))
        else:
            skipped.append(GATEWAY.name)
        return planned, skipped

    def runtime_children(self, skipped: Sequence[str] = ()) -> list[Child]:
        """The demo runtimes: turns of crew:demo, and (with functions) its executions.

        Separate processes, each restarted on its own; both act as agent:demo/demo-bot.
        """
        common = {
            "AGENTWORKS_RUNTIME_PRINCIPAL": DEMO_PRINCIPAL,
            "AGENTWORKS_RUNTIME_TARGETS": DEMO_TARGET,
        }
        turns_env = self._runtime_env(
            AGENTWORKS_MESSAGING_ADDRESS=",".join(self.addresses(0)),
            **common,
        )
        if "scheduler" not in skipped:
            turns_env["AGENTWORKS_SCHEDULER_ADDRESS"] = ",".join(self.addresses(2))
        functions_env = self._runtime_env(
            AGENTWORKS_FUNCTIONS_ADDRESS=",".join(self.addresses(1)), **common
        )
        runtime = [sys.executable, "-m", "agentworks.runtime"]
        children = [Child(DEMO_RUNTIME, [*runtime, "demo"], turns_env)]
        if "functions" not in skipped:
            root = str(self.home / DEMO_PROJECT)
            children.append(
                Child(DEMO_FUNCTIONS, [*runtime, "functions-demo", "--root", root], functions_env)
            )
        return children

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
        """Database, key, services, registration, dev token, runtime, banner."""
        self.home.mkdir(parents=True, exist_ok=True)
        self.lock_fd = lock_home(self.home, self.lock_info())
        self._check_ports()
        await self._database()
        self.key = self._internal_key()
        planned, skipped = self.plan()
        for name in skipped:
            log.warning("service.skipped", child=name, reason=f"{name} has no server.main yet")
        if not any(c.name.startswith("messaging-") for c, _ in planned):
            raise StartupError("the messaging service is not installed (agentworks_messaging)")
        for child, _ in planned:
            self._launch(child)
        deadline = time.monotonic() + self.options.ready_timeout
        await self._wait_ready(planned, deadline)

        functions = ",".join(self.addresses(1)) if "functions" not in skipped else None
        await register_demo_crew(self.key, ",".join(self.addresses(0)), functions)
        gateway_db = self.environ.get("GATEWAY_DATABASE_URL") or self.database_url
        token = await ensure_dev_token(self.home, gateway_db, self.environ)
        if self.options.runtime:
            for child in self.runtime_children(skipped):
                self._launch(child)
        if token and "gateway" not in skipped:
            self._write_cli_config(token)
        self._banner(token, skipped)

    def _check_ports(self) -> None:
        taken = [
            address
            for index in range(len(GRPC_SERVICES))
            for address in self.addresses(index)
            if not port_is_free(self.options.host, int(address.rsplit(":", 1)[1]))
        ]
        taken += [
            f"{self.options.host}:{port}"
            for port in self.gateway_ports()
            if not port_is_free(self.options.host, port)
        ]
        if taken:
            raise StartupError(
                f"port(s) already in use: {', '.join(taken)}. Is another `agentworks up` "
                "running? Stop it, or choose other ports, e.g. "
                f"{other_ports(self.options.base_port, self.options.http_port)} (a second "
                "suite also needs its own --home, AGENTWORKS_HOME)."
            )

    async def _database(self) -> None:
        if self.options.database_url:
            self.database_url = self.options.database_url
            log.info("database.configured", source="DATABASE_URL")
            return
        from agentworks.server.embedded import start_embedded

        data = self.home / "pg"
        log.info("database.starting", kind="embedded", data=str(data))
        try:
            self.database_url = await asyncio.to_thread(start_embedded, data)
        except Exception as exc:
            raise StartupError(
                f"could not start the embedded PostgreSQL in {data}: {exc}. "
                "Set DATABASE_URL to use another server."
            ) from exc
        self.embedded = True
        log.info("database.ready", kind="embedded", data=str(data))

    def _internal_key(self) -> str:
        preset = self.environ.get("AGENTWORKS_INTERNAL_KEY", "")
        if preset:
            return preset
        path = self.home / "internal.key"
        key, created = load_or_create_secret(path, lambda: secrets.token_urlsafe(32))
        log.info("internal_key.created" if created else "internal_key.loaded", path=str(path))
        return key

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
            code = await process.wait()
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

    # --------------------------------------------------------------- output

    def _write_cli_config(self, token: str) -> None:
        path = self.home / "cli.json"
        tmp = path.with_name(".cli.json.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump({"url": self.gateway_url, "token": token}, handle, indent=2)
            handle.write("\n")
        os.replace(tmp, path)

    def _banner(self, token: str, skipped: list[str]) -> None:
        rel = os.path.relpath(self.home)
        home = rel if not rel.startswith("..") else str(self.home)
        database = f"embedded PostgreSQL, data in {home}/pg" if self.embedded else "DATABASE_URL"
        # The CLI finds .agentworks/cli.json in the current directory or a parent, or
        # reads $AGENTWORKS_HOME/cli.json: another home must be exported to be used.
        default_home = (pathlib.Path.cwd() / DEFAULT_HOME).resolve()
        export = self.home != default_home
        preset = bool(self.environ.get("AGENTWORKS_DEV_TOKEN"))
        if not token:
            shown = "(none: gateway tokens module missing)"
        elif preset:
            shown = "from AGENTWORKS_DEV_TOKEN (not shown)"
        else:
            shown = token
        saved = "" if preset or not token else f"saved in {home}/dev-token; "
        services = [
            f"{spec.name} {','.join(self.addresses(i))}"
            for i, spec in enumerate(GRPC_SERVICES)
            if spec.name not in skipped
        ]
        lines = [
            "",
            "AgentWorks is up.",
            f"  MCP       {self.gateway_url}/mcp   (Authorization: Bearer <token>)",
            f"  token     {shown}",
            f"            {saved}the CLI reads {home}/cli.json",
            f"  services  {' | '.join(services)}",
            f"  database  {database}",
        ]
        if skipped:
            lines.append(f"  skipped   {', '.join(skipped)} (not built yet)")
        lines.append("Try the CLI:")
        if export:
            lines += [
                "  # this suite's home is not ./.agentworks: tell the CLI where it is first",
                f"  export AGENTWORKS_HOME={shlex.quote(str(self.home))}",
            ]
        lines += [
            '  agentworks messages send --crew demo "hello"   (or "remind me in 10 s")',
            "  agentworks messages read --inbox <inbox_id from the receipt> --wait 20",
        ]
        if "functions" not in skipped:
            lines.append("  agentworks crews call demo hello -i name=Ada --wait")
        lines += ["  agentworks --help", "Ctrl-C stops everything.", ""]
        self._out.write("\n".join(lines) + "\n")
        self._out.flush()


async def bootstrap(options: Options, environ: dict[str, str]) -> int:
    """Register the demo crew and the dev token with already running services."""
    key = environ.get("AGENTWORKS_INTERNAL_KEY", "")
    database_url = environ.get("GATEWAY_DATABASE_URL") or options.database_url
    messaging = environ.get("AGENTWORKS_MESSAGING_ADDRESS") or environ.get(
        "GATEWAY_MESSAGING_ADDRESS", "127.0.0.1:50051"
    )
    functions = environ.get("AGENTWORKS_FUNCTIONS_ADDRESS") or environ.get(
        "GATEWAY_FUNCTIONS_ADDRESS", ""
    )
    if not key or not database_url:
        print(
            "agentworks up --bootstrap-only: set AGENTWORKS_INTERNAL_KEY and DATABASE_URL",
            file=sys.stderr,
        )
        return 2
    deadline = time.monotonic() + options.ready_timeout
    try:
        await grpc_health_serving(messaging.split(",")[0], deadline)
        if functions and has_main("agentworks_functions"):
            await grpc_health_serving(functions.split(",")[0], deadline)
        else:
            functions = ""
        await register_demo_crew(key, messaging, functions or None)
        options.home.mkdir(parents=True, exist_ok=True)
        token = await ensure_dev_token(options.home, database_url, environ)
    except (TimeoutError, errors.AgentWorksError) as exc:
        print(f"agentworks up --bootstrap-only: {exc}", file=sys.stderr)
        return 1
    if not token:
        said = "(none)"
    elif environ.get("AGENTWORKS_DEV_TOKEN"):
        # Set from a Secret: a Job's log is readable more widely than the Secret.
        said = "from AGENTWORKS_DEV_TOKEN (not printed)"
    else:
        said = token  # generated here (and kept in <home>/dev-token)
    print(f"demo crew registered; dev token: {said}", flush=True)
    return 0


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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
