"""T9 on the embedded PostgreSQL that `agentworks up` (`make run`) makes: a role and a
password per service, no superuser service, no connection without a password.

Each suite is a real `agentworks up` in a temporary directory (as the end-to-end test
runs it): one on a new home, one on a data directory made the way `up` made them
before the roles (trust, every schema the superuser's), still running when `up` starts.
"""

from __future__ import annotations

import getpass
import pathlib
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import psutil
import psycopg
import pytest
from psycopg import errors as pg_errors

from agentworks.server.db import migrate
from agentworks.server.testing import _START_EMBEDDED, free_port_block
from tests.test_end_to_end import Up

pytestmark = pytest.mark.timeout(180)

SERVICES = ("messaging", "functions", "scheduler", "gateway")
SUPERUSER = "postgres"


@dataclass
class Suite:
    """A running `agentworks up`, its home and how to reach its PostgreSQL."""

    up: Up
    home: pathlib.Path
    port: int
    socket_dir: pathlib.Path

    def password(self, service: str) -> str:
        return (self.home / "db" / f"{service}.password").read_text().strip()

    def tcp(self, user: str, password: str | None = None) -> str:
        return psycopg.conninfo.make_conninfo(
            host="127.0.0.1", port=self.port, user=user, dbname="postgres",
            password=password, connect_timeout=10,
        )  # fmt: skip

    def socket(self, user: str, password: str | None = None) -> str:
        return psycopg.conninfo.make_conninfo(
            host=str(self.socket_dir), port=self.port, user=user, dbname="postgres",
            password=password, connect_timeout=10,
        )  # fmt: skip

    def connect(self, service: str) -> psycopg.Connection:
        return psycopg.connect(self.tcp(service, self.password(service)), autocommit=True)


def _start(cwd: pathlib.Path) -> Iterator[Suite]:
    base_port = free_port_block(5)
    up = Up(cwd, base_port, base_port + 4)
    try:
        up.wait_ready()
        home = cwd / ".agentworks"
        lines = (home / "pg" / "postmaster.pid").read_text().splitlines()
        yield Suite(up, home, int(lines[3]), pathlib.Path(lines[4]))
    finally:
        assert up.stop() == 0, up.output


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Iterator[Suite]:
    """`agentworks up` on a new home."""
    yield from _start(tmp_path_factory.mktemp("t9-new"))


def _refused(conninfo: str) -> str:
    """Connect; the refusal's text (fails the test if the connection was accepted)."""
    try:
        psycopg.connect(conninfo).close()
    except psycopg.OperationalError as exc:
        return str(exc)
    raise AssertionError(f"a connection was accepted: {conninfo.split('password')[0]}")


def test_each_service_role_reads_and_writes_only_its_own_schema_T9(suite):
    """T9: each service's role (its password from <home>/db) uses its own schema; it
    cannot read another service's tables, create a schema or create in `public`."""
    for service in SERVICES:
        with suite.connect(service) as conn:
            versions = conn.execute(f"SELECT count(*) FROM {service}.schema_migrations")
            assert versions.fetchone()[0] >= 1, service  # type: ignore[index]
            conn.execute(f"CREATE TABLE {service}.t9_probe (x int)")
            conn.execute(f"DROP TABLE {service}.t9_probe")
            for other in SERVICES:
                if other == service:
                    continue
                with pytest.raises(pg_errors.InsufficientPrivilege):
                    conn.execute(f"SELECT * FROM {other}.schema_migrations")
            with pytest.raises(pg_errors.InsufficientPrivilege):
                conn.execute("CREATE SCHEMA t9_elsewhere")
            with pytest.raises(pg_errors.InsufficientPrivilege):
                conn.execute("CREATE TABLE public.t9_elsewhere (x int)")
            owners = conn.execute(
                "SELECT count(*) FROM pg_class WHERE relnamespace = %s::regnamespace"
                " AND relowner <> %s::regrole",
                (service, service),
            ).fetchone()
            assert owners == (0,), f"{service}'s schema holds objects of another role"


def test_no_role_but_the_set_up_superuser_is_a_superuser_and_it_cannot_log_in_T9(suite):
    """T9: the services' roles have no attribute beyond LOGIN and are members of no
    role; the bootstrap superuser is the only superuser, and it cannot log in once the
    roles are set up: not by socket, not by TCP, with no password or any on disk."""
    with suite.connect("messaging") as conn:
        powerful = conn.execute(
            "SELECT rolname FROM pg_roles WHERE rolsuper OR rolcreaterole OR rolcreatedb"
            " OR rolreplication OR rolbypassrls ORDER BY 1"
        ).fetchall()
        assert powerful == [(SUPERUSER,)]
        members = conn.execute(
            "SELECT count(*) FROM pg_auth_members WHERE member::regrole::text = ANY(%s)",
            (list(SERVICES),),
        ).fetchone()
        assert members == (0,)
        logins = conn.execute(
            "SELECT rolname FROM pg_roles WHERE rolcanlogin ORDER BY 1"
        ).fetchall()
        assert sorted(r for (r,) in logins) == sorted([SUPERUSER, *SERVICES])
    for password in [None, *(suite.password(s) for s in SERVICES)]:
        assert "rejects connection" in _refused(suite.socket(SUPERUSER, password))
        assert "rejects connection" in _refused(suite.tcp(SUPERUSER, password))


def _hba_rules(home: pathlib.Path) -> list[list[str]]:
    """The rules of the server's pg_hba.conf (no comments), each checked for weak methods."""
    hba = (home / "pg" / "pg_hba.conf").read_text()
    rules = [line.split() for line in hba.splitlines() if line.strip() and line[0] != "#"]
    weak = {"trust", "peer", "ident", "md5", "password"}
    assert not any(word in weak for rule in rules for word in rule), hba
    return rules


def test_a_connection_without_a_password_is_refused_by_socket_and_by_tcp_T9(suite):
    """T9: no `trust` anywhere in pg_hba.conf; every user, with no password, is refused
    over the socket and over TCP; the socket's directory is the server's alone."""
    rules = _hba_rules(suite.home)
    assert rules and all(r[-1] in ("scram-sha-256", "reject") for r in rules), rules
    assert suite.socket_dir.stat().st_mode & 0o077 == 0
    assert (suite.socket_dir / f".s.PGSQL.{suite.port}").stat().st_mode & 0o077 == 0
    users = {SUPERUSER, *SERVICES, getpass.getuser(), "embedded_postgres", "root"}
    for user in sorted(users):
        _refused(suite.socket(user))
        _refused(suite.tcp(user))


def _secrets_on_disk(home: pathlib.Path) -> set[str]:
    """Every line and every whole file of the home outside the database's own folders
    (the internal and signing keys, the dev token, cli.json, ...)."""
    found: set[str] = set()
    for path in home.rglob("*"):
        relative = path.relative_to(home).parts
        if not path.is_file() or relative[0] in ("pg", "db", "demo-project"):
            continue
        text = path.read_text(errors="replace")
        found |= {text.strip(), *(line.strip() for line in text.splitlines())}
        if path.suffix == ".json":
            import json

            with_values = json.loads(text)
            if isinstance(with_values, dict):
                found |= {str(v) for v in with_values.values()}
    return {s for s in found if s and len(s) < 1000}


def test_the_dev_token_and_keys_on_disk_give_no_database_access_T9(suite):
    """T9: what an agent could find in the suite's home beside the database's own files
    (the dev token, cli.json, the keys) is no password of any role, by socket or TCP;
    and no service's password is written anywhere else in the home."""
    found = _secrets_on_disk(suite.home)
    token = (suite.home / "dev-token").read_text().strip()
    assert token in found and len(found) >= 3, found
    passwords = {suite.password(s) for s in SERVICES}
    assert not passwords & found
    for path in suite.home.rglob("*"):
        if path.is_file() and path.relative_to(suite.home).parts[0] not in ("db", "pg"):
            text = path.read_text(errors="replace")
            assert not any(p in text for p in passwords), f"a password is in {path}"
    for user in (SUPERUSER, *SERVICES):
        for secret in sorted(found):
            _refused(suite.tcp(user, secret))
            _refused(suite.socket(user, secret))


def test_each_process_gets_only_its_own_database_url_T9(suite):
    """T9: each service process's environment holds its own `<NAME>_DATABASE_URL`, as
    its own role, and no other database URL or password; the runtimes hold none."""
    passwords = {s: suite.password(s) for s in SERVICES}
    children = psutil.Process(suite.up.process.pid).children()
    seen = set()
    for child in children:
        env = child.environ()
        command = " ".join(child.cmdline())
        urls = {k: v for k, v in env.items() if "DATABASE_URL" in k}
        service = next((s for s in SERVICES if f"agentworks_{s}" in command), None)
        if "agentworks_dev.pgguard" in command:  # stops the database when `up` dies
            assert urls == {}, command
            assert not any(p in " ".join(env.values()) for p in passwords.values()), command
            seen.add("guard")
            continue
        if service is None:
            assert "agentworks.runtime" in command, command
            assert urls == {}, command
            assert not any(p in " ".join(env.values()) for p in passwords.values()), command
            seen.add("runtime")
            continue
        seen.add(service)
        url = urls.pop(f"{service.upper()}_DATABASE_URL")
        assert urls == {}, (service, sorted(urls))
        params = psycopg.conninfo.conninfo_to_dict(url)
        assert params["user"] == service and params["password"] == passwords[service]
        others = [p for s, p in passwords.items() if s != service]
        assert not any(p in " ".join(env.values()) for p in others), service
    assert seen == {*SERVICES, "runtime", "guard"}


@pytest.fixture(scope="module")
def suite_from_before(tmp_path_factory) -> Iterator[Suite]:
    """`agentworks up` on a data directory from before the roles, left running: made by
    the embedded-postgres library (trust, superuser `postgres`), every service's schema
    migrated by the superuser, as `up` used to do it."""
    cwd = tmp_path_factory.mktemp("t9-before")
    data = cwd / ".agentworks" / "pg"
    data.parent.mkdir()
    subprocess.run([sys.executable, "-c", _START_EMBEDDED, str(data)], check=True, timeout=120)
    url = f"postgresql://{SUPERUSER}@/postgres?host={data}"
    for service in SERVICES:
        migrate(url, service, f"agentworks_{service}.migrations")
    with psycopg.connect(url, autocommit=True) as conn:
        owners = conn.execute(
            "SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = ANY(%s)",
            (list(SERVICES),),
        ).fetchall()
    assert owners == [(SUPERUSER,)]
    yield from _start(cwd)


def test_a_data_directory_from_before_the_roles_is_handed_to_them_T9(suite_from_before):
    """T9: `up` on a data directory from before stops the server it finds running,
    replaces the trust rules, creates the roles and hands each its schema and every
    object in it (the services then start and migrate as their roles); the migrations
    applied before are still there, and nothing logs in without a password."""
    suite = suite_from_before
    rules = _hba_rules(suite.home)
    assert rules and all(r[-1] in ("scram-sha-256", "reject") for r in rules), rules
    for service in SERVICES:
        with suite.connect(service) as conn:
            applied = conn.execute(f"SELECT min(applied_at) FROM {service}.schema_migrations")
            assert applied.fetchone()[0] is not None, service  # type: ignore[index]
            strangers = conn.execute(
                "SELECT c.relname FROM pg_class c WHERE c.relnamespace = %s::regnamespace"
                " AND c.relowner <> %s::regrole UNION ALL SELECT p.proname FROM pg_proc p"
                " WHERE p.pronamespace = %s::regnamespace AND p.proowner <> %s::regrole",
                (service, service, service, service),
            ).fetchall()
            assert strangers == [], (service, strangers)
        _refused(suite.socket(service))
        _refused(suite.tcp(service))
    _refused(suite.socket(SUPERUSER))
