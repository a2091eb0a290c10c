"""pytest plugin shared by every package's tests (loaded with `-p agentworks.server.testing`).

PostgreSQL comes from `AGENTWORKS_TEST_DATABASE_URL`, else testcontainers when a Docker
engine answers, else the embedded server. Each test gets its own database, cloned from a
template on which every service's migrations ran once per session.

The one home of the tests' helpers, imported from here: `until` / `until_sync` (wait for a
condition with a deadline, `waiting.py`), `free_port` / `free_port_block` (`ports.py`),
`scrape` / `scrape_until` (a process's /metrics, `scrape.py`), `served_requests` (the
requests an in-process service started, from this process's registry), the service environment
(`env.py`) and processes to crash and restart (`processes.py`). `tests/test_test_helpers.py`
fails when a test file writes its own.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import tempfile
import uuid
from collections.abc import Callable, Iterable, Iterator

import psycopg
import pytest

from agentworks.core.identity import Minter
from agentworks.core.keys import KeyDirectory
from agentworks.core.trust import STANDARD_SIGNERS
from agentworks.server.db import libpq_url, migrate, with_database

from .env import TEST_WEBHOOK_KEY, service_env, signer_for, signer_of
from .ports import free_port, free_port_block
from .processes import _START_EMBEDDED, DisposablePostgres, ServiceProcess, failed_start
from .scrape import Scrape, scrape, scrape_until, served_requests
from .waiting import read_until, until, until_sync

__all__ = [
    "TEST_WEBHOOK_KEY",
    "_START_EMBEDDED",
    "DisposablePostgres",
    "Scrape",
    "ServiceProcess",
    "database_snapshot",
    "failed_start",
    "free_port",
    "free_port_block",
    "read_until",
    "scrape",
    "scrape_until",
    "served_requests",
    "service_env",
    "signer_for",
    "signer_of",
    "until",
    "until_sync",
]

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
ALONE_MARKER = (
    "alone: the test times a victim, kills processes or bounds a wall time, so `make test` "
    "runs it by itself after the parallel pass"
)


def pytest_configure(config: pytest.Config) -> None:
    # Registered here, so every package's tests may carry the mark, run alone or not.
    config.addinivalue_line("markers", RELIABILITY_MARKER)
    config.addinivalue_line("markers", ALONE_MARKER)


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
def identity(signing_keys: KeyDirectory) -> Callable[..., Minter]:
    """`identity("user:alice", roles={"operator"})` -> a Minter for that principal, signed
    by the signer that may vouch for it (`signer_for`), or by `signer=` when given."""

    def make(
        principal: str, roles: frozenset[str] | set[str] = frozenset(), *, signer: str = ""
    ) -> Minter:
        key, _ = signing_keys.ensure(signer or signer_for(principal))
        return Minter(principal, key, roles=roles)

    return make


# ------------------------------------------------------------------ fault injection


@pytest.fixture
def fault_postgres() -> Iterator[DisposablePostgres]:
    """A migrated PostgreSQL that only this test uses, so it may stop and restart it."""
    pg = DisposablePostgres()
    for schema, package in SERVICE_SCHEMAS:
        if _has_migrations(package):
            migrate(pg.url, schema, package)
    yield pg
    pg.close()


@pytest.fixture
def service_process(signing_keys: KeyDirectory) -> Iterator[Callable[..., ServiceProcess]]:
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
