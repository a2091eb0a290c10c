"""Starting and stopping one service process: the same steps for every service.

A service that cannot start says why in one `service.start_failed` event on stderr
(JSON unless `LOG_JSON` is off), naming the setting to fix where one is at fault, and
exits without a traceback: status 2 when a setting is wrong, 1 for any other failure
(database unreachable, port taken). Everything that can be checked before serving is:
settings are read and range-checked first, then the keys, the database URL
and the listen address, then metrics are served, then the database is migrated; only
then is `service.ready` logged and "<name> listening on <address>" printed on stdout.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn, TypeVar

import psycopg
import structlog

from agentworks.core.errors import Unauthenticated
from agentworks.core.identity import Minter
from agentworks.core.keys import SIGNING_KEY_VARIABLE, TRUSTED_KEYS_VARIABLE
from agentworks.core.logging import configure_logging
from agentworks.core.settings import FALSE_WORDS, ConfigError, check_address
from agentworks.core.tracing import TracingUnavailable
from agentworks.server import shares
from agentworks.server.config import ServiceConfig
from agentworks.server.db import Database, describe_database, libpq_url, migrate
from agentworks.server.liveness import watch_loop
from agentworks.server.metrics import serve_metrics, watch_database
from agentworks.server.rpc import GrpcServer
from agentworks.server.tracing import configure_tracing, trace_database

log = structlog.get_logger("agentworks.service")

C = TypeVar("C")

# Exit statuses of a start that failed.
CONFIG_ERROR = 2
START_ERROR = 1


class StartFailed(SystemExit):
    """A service cannot start. `message` says why and names the setting to fix where
    one is at fault; `status` is the exit status (2: a setting, 1: anything else);
    `fields` are logged with it (e.g. `database`).

    A SystemExit, so that a caller that does not report it (`main_for` does) still ends
    the process with the message and no traceback.
    """

    def __init__(
        self, message: str, *, status: int = START_ERROR, traceback: bool = False, **fields: Any
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        # An unexpected failure: its traceback is logged too (as a field).
        self.traceback = traceback
        self.fields = fields


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def report_start_failure(name: str, failure: StartFailed) -> NoReturn:
    """Log `service.start_failed` (one line) and exit with the failure's status."""
    cause = failure.__cause__ if failure.traceback else None
    log.error(
        "service.start_failed",
        service=name,
        error=failure.message,
        exit_status=failure.status,
        **failure.fields,
        **({"exc_info": cause} if cause is not None else {}),
    )
    raise SystemExit(failure.status)


def read_config(name: str, read: Callable[[], C]) -> C:
    """`read()` (a service's `Config.from_env`); when a setting is unusable, one
    `service.start_failed` line naming it, and exit status 2."""
    try:
        return read()
    except ValueError as exc:  # ConfigError, or a check of the service's own
        # The settings could not be read, the log ones included: JSON unless LOG_JSON
        # (or <NAME>_LOG_JSON) clearly says otherwise.
        value = os.environ.get(f"{name.upper()}_LOG_JSON") or os.environ.get("LOG_JSON", "")
        configure_logging(name, json=value.strip().lower() not in FALSE_WORDS)
        report_start_failure(name, StartFailed(_one_line(exc), status=CONFIG_ERROR))


@dataclass
class Running:
    """A started service: its gRPC server, its database and its background tasks."""

    name: str
    server: GrpcServer
    database: Database
    background: list[asyncio.Task[None]] = field(default_factory=list)
    on_stop: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    stopped: bool = False

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def address(self) -> str:
        """Where a client on this host reaches it (tests); `bound_address` is what the
        service reports."""
        return f"127.0.0.1:{self.server.port}"

    async def stop(self, grace: float = 5.0) -> None:
        """Drain and stop; calling it again does nothing."""
        if self.stopped:
            return
        self.stopped = True
        await self.server.stop(grace)
        for task in self.background:
            task.cancel()
        for task in self.background:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for hook in self.on_stop:
            await hook()
        await self.database.close()


def bound_address(listen: str, port: int) -> str:
    """The listen address with the port actually bound (`0.0.0.0:0` -> `0.0.0.0:50051`)."""
    host = listen.strip().rpartition(":")[0]
    return f"{host}:{port}"


def stop_requested() -> asyncio.Event:
    """An event set when the process receives SIGTERM or SIGINT (from now on)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def wait_for_signal() -> None:
    """Return when the process receives SIGTERM or SIGINT."""
    await stop_requested().wait()


def check_database_url(config: ServiceConfig) -> None:
    """A database URL is set and can be parsed (status 2 otherwise)."""
    variable = config.variable("DATABASE_URL", shared=True)
    if not config.database_url:
        raise StartFailed(
            f"no database configured; set {config.name.upper()}_DATABASE_URL or DATABASE_URL "
            "(`agentworks up` starts an embedded one)",
            status=CONFIG_ERROR,
        )
    try:
        psycopg.conninfo.conninfo_to_dict(libpq_url(config.database_url))
    except psycopg.ProgrammingError:
        # Not quoted: the value may hold a password.
        raise StartFailed(
            f"{variable} is not a PostgreSQL URL (postgresql://user:password@host:port/"
            "database) or connection string",
            status=CONFIG_ERROR,
        ) from None


def prepare_database(config: ServiceConfig, schema: str, migrations: str) -> None:
    """Apply this service's migrations (serialized across replicas by an advisory lock).

    Raises `StartFailed` naming the database (never its password) and the reason when
    it is unreachable (a host that does not answer fails after 10 s) or a migration
    fails."""
    check_database_url(config)
    database = describe_database(config.database_url)
    try:
        migrate(config.database_url, schema, migrations)
    except psycopg.OperationalError as exc:
        raise StartFailed(
            f"cannot connect to the database {database}: {_one_line(exc)}", database=database
        ) from None
    except (psycopg.Error, RuntimeError) as exc:
        raise StartFailed(
            f"migrating schema {schema} in {database} failed: {_one_line(exc)}",
            database=database,
        ) from None


def check_listen(config: ServiceConfig) -> None:
    """Refuse, before anything starts, a `<NAME>_LISTEN` (or `<NAME>_HEALTH_LISTEN`)
    address gRPC could not bind: one that is not host:port (status 2), a host that does
    not resolve, or a port in use (status 1). gRPC's own error would not name the setting."""
    _check_bindable(config.variable("LISTEN"), config.listen)
    if config.health_listen:
        _check_bindable(config.variable("HEALTH_LISTEN"), config.health_listen)


def _check_bindable(variable: str, listen: str) -> None:
    host, port = check_address(variable, listen)
    if ":" in host and not listen.strip().startswith("["):
        raise StartFailed(
            f"{variable} must write an IPv6 host in brackets ([{host}]:{port}), got {listen!r}",
            status=CONFIG_ERROR,
        )
    failing = f"cannot listen on {listen} ({variable})"
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise StartFailed(f"{failing}: host {host!r} does not resolve ({exc.strerror})") from None
    if port == 0:
        return
    problems = []
    for family, kind, proto, _, address in found:
        try:
            with socket.socket(family, kind, proto) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                probe.bind(address)
            return  # gRPC binds every address it can, and needs one
        except OSError as exc:
            problems.append(exc.strerror or str(exc))
    raise StartFailed(f"{failing}: {problems[0] if problems else 'no address'}")


def check_keys(config: ServiceConfig) -> None:
    """The service has the trusted keys and its own signing key, whose signer is its own
    (`service:<name>`, the gateway's `gateway`); status 2 otherwise (T1)."""
    if config.trusted_keys is None:
        raise StartFailed(
            f"no trusted keys: set {TRUSTED_KEYS_VARIABLE} (or "
            f"{config.variable('TRUSTED_KEYS')}) to the JSON file of the signers' public "
            "keys, the same for every process of the suite",
            status=CONFIG_ERROR,
        )
    if config.signing_key is None:
        raise StartFailed(
            f"no signing key: set {SIGNING_KEY_VARIABLE} (or "
            f"{config.variable('SIGNING_KEY')}) to {config.signer}'s private key (PEM), "
            "never another signer's (`agentworks keys new` makes one)",
            status=CONFIG_ERROR,
        )
    if config.signing_key.signer != config.signer:
        raise StartFailed(
            f"the signing key {config.signing_key.kid!r} belongs to signer "
            f"{config.signing_key.signer} in the trusted keys; {config.name} signs as "
            f"{config.signer}: give it {config.signer}'s key",
            status=CONFIG_ERROR,
        )


def service_minter(config: ServiceConfig, principal: str, variable: str = "") -> Minter:
    """The identity this service calls others with; StartFailed (status 2, naming
    `variable` when the principal is a setting) if its signer may not vouch for it."""
    try:
        return Minter(principal, config.signing_key)
    except Unauthenticated as exc:
        named = f"{variable}={principal}: " if variable else ""
        raise StartFailed(f"{named}{exc.message}", status=CONFIG_ERROR) from None


def check_startable(config: ServiceConfig) -> None:
    """What a start needs and can be checked without serving anything."""
    check_keys(config)
    check_database_url(config)
    check_listen(config)
    read_shares()


def read_shares() -> None:
    """Read the per-principal shares (B7, AGENTWORKS_PRINCIPAL_SHARES) once, at start: a
    value that cannot be used is refused naming the variable (status 2)."""
    try:
        shares.configure(shares.Shares.from_env())
    except ValueError as exc:
        raise StartFailed(_one_line(exc), status=CONFIG_ERROR) from None


def start_metrics(config: ServiceConfig) -> int:
    """Serve /metrics on `<NAME>_METRICS_LISTEN` (behind `<NAME>_METRICS_TOKEN` when set);
    the port, 0 when off. Called in the service's event loop, it also starts watching
    that loop (B3, `agentworks.server.liveness`): its lag is a metric, a lag over
    `<NAME>_LOOP_LAG_LIMIT_SECONDS` makes health NOT_SERVING, and a loop stuck for
    `<NAME>_LOOP_STUCK_SECONDS` ends the process (status 3) to be restarted."""
    with contextlib.suppress(RuntimeError):  # no running loop: nothing to watch
        asyncio.get_running_loop()
        watch_loop(
            config.name, lag_limit=config.lag_limit_seconds, stuck_seconds=config.stuck_seconds
        )
    if not config.metrics_listen:
        return 0
    variable = config.variable("METRICS_LISTEN")
    try:
        port = serve_metrics(config.metrics_listen, variable=variable, token=config.metrics_token)
    except OSError as exc:
        raise StartFailed(
            f"cannot serve metrics on {config.metrics_listen} ({variable}): "
            f"{exc.strerror or _one_line(exc)}"
        ) from None
    if not config.metrics_token:  # said once the port is served (a failed start says one thing)
        log.warning(
            "metrics.open",
            service=config.name,
            listen=config.metrics_listen,
            fix=f"set {config.variable('METRICS_TOKEN')} or AGENTWORKS_METRICS_TOKEN",
        )
    return port


def warn_unknown_settings(config: ServiceConfig) -> None:
    """Log each of the service's variables that no setting read (a typo, or a removed
    setting), so that an operator learns it had no effect."""
    for problem in config.env.unknown() if config.env else ():
        log.warning("config.unknown_setting", service=config.name, problem=problem)


async def _started(config: ServiceConfig, start: Callable[[], Awaitable[Running]]) -> Running:
    """`start()`, its failures as `StartFailed`."""
    try:
        return await start()
    except StartFailed:
        raise
    except ConfigError as exc:
        raise StartFailed(str(exc), status=CONFIG_ERROR) from None
    except Exception as exc:
        for name, listen in (("LISTEN", config.listen), ("HEALTH_LISTEN", config.health_listen)):
            if listen and isinstance(exc, RuntimeError | OSError) and listen in str(exc):
                # gRPC could not bind after all (`check_listen` passed a moment before).
                variable = config.variable(name)
                raise StartFailed(
                    f"cannot listen on {listen} ({variable}): {_one_line(exc)}"
                ) from None
        # Unexpected: the traceback is logged with it, as a field.
        raise StartFailed(f"{type(exc).__name__}: {_one_line(exc)}", traceback=True) from exc


def main_for(config: ServiceConfig, start: Callable[[], Awaitable[Running]]) -> None:
    """Run a service until SIGTERM/SIGINT, then drain and stop; a start that fails is
    one `service.start_failed` line and exit status 2 (a setting) or 1."""
    configure_logging(config.name, level=config.log_level, json=config.log_json)
    warn_unknown_settings(config)

    async def run(tracing: bool) -> None:
        # Before the rest, so that a taken metrics port fails the start, not later.
        metrics_port = start_metrics(config)
        running = await _started(config, start)
        if tracing:
            trace_database(running.database)
        watch_database(config.name, running.database)
        # Before announcing readiness: a SIGTERM right after it drains, not kills.
        stop = stop_requested()
        address = bound_address(config.listen, running.port)
        log.info(
            "service.ready",
            address=address,
            port=running.port,
            metrics_port=metrics_port or None,
            transport=running.server.transport,
            health_port=running.server.health_port or None,
        )
        print(f"{config.name} listening on {address}", flush=True)
        await stop.wait()
        log.info("service.draining", service=config.name, grace=config.drain_seconds)
        await running.stop(config.drain_seconds)

    try:
        check_startable(config)
        try:
            tracing = configure_tracing(config.name)
        except TracingUnavailable as exc:  # a setting: an unknown OTLP protocol
            raise StartFailed(str(exc), status=CONFIG_ERROR) from None
        except Exception as exc:  # e.g. an exporter that cannot be set up
            raise StartFailed(f"tracing: {_one_line(exc)}", traceback=True) from exc
        asyncio.run(run(tracing))
    except StartFailed as failure:
        report_start_failure(config.name, failure)
    except ConfigError as exc:
        report_start_failure(config.name, StartFailed(str(exc), status=CONFIG_ERROR))
