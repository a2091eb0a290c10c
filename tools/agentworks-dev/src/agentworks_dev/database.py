"""The suite's database: DATABASE_URL when given, else the embedded PostgreSQL with a
role and a password per service (T9)."""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import secrets
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import psutil
import psycopg
import structlog

from agentworks_dev.dbroles import SERVICES, RolesError, ServiceRole, ensure_service_roles
from agentworks_dev.home import load_or_create_secret
from agentworks_dev.pgguard import release, start_guard
from agentworks_dev.pgserver import (
    EmbeddedServer,
    ServerError,
    free_port,
    running_pid,
    serve,
    start_server,
    superuser,
)
from agentworks_dev.specs import StartupError

log = structlog.get_logger("agentworks.up")

# `<home>/db/<service>.password` (0600, in a 0700 directory): each service's role's.
PASSWORDS_DIR = "db"

# Every variable that names a service's own database.
SERVICE_URL_VARIABLES = tuple(f"{s.upper()}_DATABASE_URL" for s in SERVICES)


# How often `up` looks whether the embedded server still runs (and restarts it if not).
WATCH_SECONDS = 2.0


@dataclass
class SuiteDatabase:
    """Where each service's database is: one shared URL, or a URL per service."""

    # DATABASE_URL as given ("" for the embedded server: no URL is shared).
    shared_url: str = ""
    # `<PREFIX>` -> that service's own URL (the embedded server: its role and password).
    service_urls: Mapping[str, str] = field(default_factory=dict)
    server: EmbeddedServer | None = None
    # Set by `stop()`: the watcher (`keep_running`) restarts nothing from then on.
    stopping: threading.Event = field(default_factory=threading.Event)
    watcher: asyncio.Task[None] | None = None
    # Stops the embedded server if `up` dies without stopping it (pgguard.py).
    guard: subprocess.Popen[bytes] | None = None

    def url_for(self, prefix: str, environ: Mapping[str, str]) -> str:
        """The service's URL: `<PREFIX>_DATABASE_URL` of `up`'s own environment, else its
        own role's (embedded), else the shared one."""
        return (
            environ.get(f"{prefix}_DATABASE_URL")
            or self.service_urls.get(prefix, "")
            or self.shared_url
        )

    def service_env(self, env: dict[str, str], prefix: str, environ: Mapping[str, str]) -> None:
        """Leave in `env` (a child's) only the URLs of service `prefix`'s database: its
        own, and DATABASE_URL when one is shared; never another service's."""
        own = environ.get(f"{prefix}_DATABASE_URL") or self.service_urls.get(prefix, "")
        without_database(env)
        if self.shared_url:
            env["DATABASE_URL"] = self.shared_url
        if own:
            env[f"{prefix}_DATABASE_URL"] = own

    def stop(self) -> None:
        """Stop the embedded server, if this is one."""
        self.stopping.set()
        if self.server is not None:
            self.server.stop()
            log.info("database.stopped", kind="embedded")
        release(self.guard)


def without_database(env: dict[str, str]) -> None:
    """Remove every database URL from `env` (a runtime's)."""
    for variable in ("DATABASE_URL", *SERVICE_URL_VARIABLES):
        env.pop(variable, None)


def service_passwords(home: pathlib.Path) -> dict[str, str]:
    """Each service's role's password, kept in `<home>/db/<service>.password` (0600)."""
    folder = home / PASSWORDS_DIR
    folder.mkdir(mode=0o700, exist_ok=True)
    folder.chmod(0o700)
    return {
        s: load_or_create_secret(folder / f"{s}.password", lambda: secrets.token_urlsafe(32))[0]
        for s in SERVICES
    }


def start_embedded_with_roles(home: pathlib.Path, port: int | None = None) -> SuiteDatabase:
    """Start the embedded PostgreSQL on `home/pg` and set up a role per service (blocking).

    A data directory from before the roles (trust, everything the superuser's) is
    brought to the same state: the roles are created and handed their schemas.
    """
    passwords = service_passwords(home)
    leftover = running_pid(home / "pg")
    if leftover is not None:  # an `up` that ended without stopping it (and its guard)
        log.warning("database.leftover_stopped", data=str(home / "pg"), pid=leftover)
    server = start_server(home / "pg", port=port)
    try:
        with superuser(server) as conn:
            ensure_service_roles(conn, [ServiceRole(s, s, passwords[s]) for s in SERVICES])
            serve(server, conn)
    except BaseException:
        server.stop()
        raise
    urls = {s.upper(): server.url(s, passwords[s]) for s in SERVICES}
    return SuiteDatabase(service_urls=urls, server=server)


async def start_database(database_url: str, home: pathlib.Path) -> SuiteDatabase:
    """The suite's database: `database_url` as it is when set; otherwise the embedded
    PostgreSQL with its data in `home/pg` (kept across restarts) and a role per service."""
    if database_url:
        log.info("database.configured", source="DATABASE_URL")
        return SuiteDatabase(shared_url=database_url)
    data = home / "pg"
    log.info("database.starting", kind="embedded", data=str(data))
    try:
        database = await asyncio.to_thread(start_embedded_with_roles, home)
    except (ServerError, RolesError, psycopg.Error, OSError) as exc:
        raise StartupError(
            f"could not start the embedded PostgreSQL in {data}: {exc}. "
            "Set DATABASE_URL to use another server."
        ) from exc
    assert database.server is not None
    database.guard = start_guard(database.server.data)
    database.watcher = asyncio.create_task(keep_running(database, home), name="database-watch")
    log.info(
        "database.ready",
        kind="embedded",
        data=str(data),
        port=database.server.port,
        roles=",".join(SERVICES),
        passwords=str(home / PASSWORDS_DIR),
    )
    return database


async def keep_running(database: SuiteDatabase, home: pathlib.Path) -> None:
    """Restart the embedded server when it dies (issue 26): on the same data and port, so
    every service reconnects by itself (they ride out a database away, P3); logged as
    `database.died` then `database.restarted`. It used to go unnoticed, and the suite
    answered UNAVAILABLE until restarted by hand."""
    while not database.stopping.is_set():
        await asyncio.sleep(WATCH_SECONDS)
        server = database.server
        if server is None or database.stopping.is_set():
            return
        if await asyncio.to_thread(running_pid, server.data) is not None:
            continue
        log.warning("database.died", data=str(server.data), action="restarting it")
        await asyncio.to_thread(_end_leftovers, server)
        try:
            restarted = await asyncio.to_thread(start_embedded_with_roles, home, server.port)
        except (ServerError, RolesError, psycopg.Error, OSError) as exc:
            log.error("database.restart_failed", error=str(exc), retry_in=WATCH_SECONDS)
            continue
        if database.stopping.is_set():  # stopped meanwhile: do not leave it running
            await asyncio.to_thread(restarted.stop)
            return
        database.server = restarted.server
        port = restarted.server.port if restarted.server else 0
        if port != server.port:  # the services' URLs name the old one
            log.error("database.port_changed", was=server.port, now=port, fix="restart make run")
        log.warning("database.restarted", port=port)


def _end_leftovers(server: EmbeddedServer, timeout: float = 10.0) -> None:
    """End what a killed postmaster left: its backends (their working directory is the
    data directory) hold its listening socket, so its port would not be free again."""
    data = str(server.data)
    leftovers = []
    for process in psutil.process_iter(["name", "cwd"]):
        if process.info["name"] == "postgres" and process.info["cwd"] == data:
            leftovers.append(process)
            with contextlib.suppress(psutil.Error):
                process.kill()
    psutil.wait_procs(leftovers, timeout=timeout)
    deadline = time.monotonic() + timeout
    while free_port(server.port) != server.port and time.monotonic() < deadline:
        time.sleep(0.1)
