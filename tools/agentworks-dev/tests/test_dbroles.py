"""`agentworks_dev.dbroles` on the tests' PostgreSQL: a role per service, each owning its
schema and what is in it, set up again idempotently (T9).

The tests' server may let anyone in without a password, so these tests check what the
roles may do once connected and what is stored (SCRAM verifiers); that a password is
required is checked on the server `agentworks up` makes (tests/test_database_roles.py).
Role names carry a random prefix: roles belong to the whole server, not to one database.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import errors as pg_errors

from agentworks.server.db import migrate
from agentworks_dev.dbroles import (
    SERVICES,
    RolesError,
    ServiceRole,
    ensure_service_roles,
    main,
)


@pytest.fixture
def roles(pg_server_url: str, database_url: str) -> Iterator[list[ServiceRole]]:
    """A role per service with a unique name (not created yet); dropped afterwards."""
    prefix = f"t9_{uuid.uuid4().hex[:8]}"
    made = [ServiceRole(s, f"{prefix}_{s}", f"pw-{s}-1") for s in SERVICES]
    yield made
    name = psycopg.conninfo.conninfo_to_dict(database_url)["dbname"]
    with psycopg.connect(pg_server_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        for role in made:
            with contextlib.suppress(psycopg.Error):
                conn.execute(f'DROP ROLE IF EXISTS "{role.role}"')


def _as_url(database_url: str, role: ServiceRole) -> str:
    """`database_url` acting as `role` from the start (the tests' server may not check
    passwords, so the session's role is set instead of logging in as it)."""
    return psycopg.conninfo.make_conninfo(database_url, options=f"-c role={role.role}")


def _as(database_url: str, role: ServiceRole) -> psycopg.Connection:
    return psycopg.connect(_as_url(database_url, role), autocommit=True)


def _verifier(database_url: str, role: str) -> str:
    with psycopg.connect(database_url) as conn:
        row = conn.execute("SELECT rolpassword FROM pg_authid WHERE rolname = %s", (role,))
        return str(row.fetchone()[0])  # type: ignore[index]


def test_each_role_owns_its_schema_made_by_another_and_reads_no_other_T9(database_url, roles):
    """T9: schemas migrated by the superuser (as the tests' template is) are handed to
    their service's role with every table, sequence and function in them; each role
    then migrates, writes and reads its own schema, and is refused every other schema,
    `CREATE SCHEMA` and `public`. The password is stored as a SCRAM-SHA-256 verifier."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        ensure_service_roles(conn, roles)
    for role in roles:
        assert _verifier(database_url, role.role).startswith("SCRAM-SHA-256$")
        with _as(database_url, role) as conn:
            strangers = conn.execute(
                "SELECT c.relname FROM pg_class c WHERE c.relnamespace = %s::regnamespace"
                " AND c.relowner <> %s::regrole UNION ALL SELECT p.proname FROM pg_proc p"
                " WHERE p.pronamespace = %s::regnamespace AND p.proowner <> %s::regrole",
                (role.schema, role.role, role.schema, role.role),
            ).fetchall()
            assert strangers == [], (role.schema, strangers)
            conn.execute(f"CREATE TABLE {role.schema}.t9_probe (id serial, x int)")
            conn.execute(f"INSERT INTO {role.schema}.t9_probe (x) VALUES (1)")
            conn.execute(f"DROP TABLE {role.schema}.t9_probe")
            for other in SERVICES:
                if other != role.schema:
                    with pytest.raises(pg_errors.InsufficientPrivilege):
                        conn.execute(f"SELECT * FROM {other}.schema_migrations")
            with pytest.raises(pg_errors.InsufficientPrivilege):
                conn.execute("CREATE SCHEMA t9_elsewhere")
            with pytest.raises(pg_errors.InsufficientPrivilege):
                conn.execute("CREATE TABLE public.t9_elsewhere (x int)")
    # The services' own start: their migrations run as their role (nothing pending).
    for role in roles:
        as_role = _as_url(database_url, role)
        assert migrate(as_role, role.schema, f"agentworks_{role.schema}.migrations") == []


def test_setting_up_again_rotates_passwords_and_takes_back_what_was_given_T9(database_url, roles):
    """T9: a second run changes the password (a new verifier), and a role given too
    much meanwhile (CREATEDB, CREATEROLE, membership of another service's role, a grant
    on another schema) is brought back to LOGIN only, owning only its own schema."""
    messaging, functions = roles[0], roles[1]
    with psycopg.connect(database_url, autocommit=True) as conn:
        ensure_service_roles(conn, roles)
        before = _verifier(database_url, messaging.role)
        conn.execute(f'ALTER ROLE "{messaging.role}" CREATEDB CREATEROLE')
        conn.execute(f'GRANT "{functions.role}" TO "{messaging.role}"')
        conn.execute(f'GRANT USAGE ON SCHEMA functions TO "{messaging.role}"')
        conn.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA functions TO "{messaging.role}"')
        rotated = [ServiceRole(r.schema, r.role, r.password + "-2") for r in roles]
        ensure_service_roles(conn, rotated)
        attributes = conn.execute(
            "SELECT rolsuper, rolcreatedb, rolcreaterole, rolreplication, rolbypassrls,"
            " rolcanlogin FROM pg_roles WHERE rolname = %s",
            (messaging.role,),
        ).fetchone()
        assert attributes == (False, False, False, False, False, True)
        memberships = conn.execute(
            "SELECT count(*) FROM pg_auth_members WHERE member = %s::regrole", (messaging.role,)
        ).fetchone()
        assert memberships == (0,)
    after = _verifier(database_url, messaging.role)
    assert after.startswith("SCRAM-SHA-256$") and after != before
    with _as(database_url, messaging) as conn, pytest.raises(pg_errors.InsufficientPrivilege):
        conn.execute("SELECT * FROM functions.schema_migrations")


def test_the_command_reads_each_service_url_and_refuses_shared_roles_T9(
    database_url, roles, capsys
):
    """T9: `python -m agentworks_dev.dbroles` takes the admin URL and each service's
    URL (role and password from the URL); it refuses a missing URL, a URL without a
    password and two services sharing a role, saying which, before connecting."""

    def url(role: ServiceRole) -> str:
        params = psycopg.conninfo.conninfo_to_dict(database_url)
        params.update(user=role.role, password=role.password)
        # conninfo given ("", its default): else mypy reads **params as filling it too
        return psycopg.conninfo.make_conninfo("", **params)

    environ = {"AGENTWORKS_ADMIN_DATABASE_URL": database_url}
    environ |= {f"{r.schema.upper()}_DATABASE_URL": url(r) for r in roles}
    assert main([], environ) == 0
    out = capsys.readouterr().out
    assert all(f"role {r.role} owns schema {r.schema}" in out for r in roles), out
    assert not any(r.password in out for r in roles)
    assert _verifier(database_url, roles[2].role).startswith("SCRAM-SHA-256$")

    missing = {k: v for k, v in environ.items() if k != "GATEWAY_DATABASE_URL"}
    assert main([], missing) == 2
    assert "GATEWAY_DATABASE_URL" in capsys.readouterr().err
    shared = environ | {"SCHEDULER_DATABASE_URL": environ["FUNCTIONS_DATABASE_URL"]}
    assert main([], shared) == 2
    assert f"shared: {roles[1].role}" in capsys.readouterr().err
    no_password = environ | {"MESSAGING_DATABASE_URL": "postgresql://messaging@127.0.0.1/x"}
    assert main([], no_password) == 2
    assert "messaging database URL must name its role and password" in capsys.readouterr().err
    with pytest.raises(RolesError, match="admin role"):
        admin = psycopg.conninfo.conninfo_to_dict(database_url)["user"]
        with psycopg.connect(database_url, autocommit=True) as conn:
            ensure_service_roles(conn, [ServiceRole("messaging", str(admin), "x")])


def test_no_child_of_up_gets_another_services_database_url_T9(tmp_path):
    """T9: whatever `<NAME>_DATABASE_URL`s `up`'s own environment holds, each service
    process gets only its own (and DATABASE_URL when one is shared); a runtime none. On
    the embedded server each gets its own role's URL and no DATABASE_URL at all."""
    import os

    from agentworks_dev.database import SuiteDatabase
    from agentworks_dev.pgserver import EmbeddedServer
    from agentworks_dev.up import Supervisor, parse_args

    given = {f"{s.upper()}_DATABASE_URL": f"postgresql://{s}:pw-{s}@db/x" for s in SERVICES}
    environ = {"PATH": os.environ["PATH"], "DATABASE_URL": "postgresql://all:pw-all@db/x"}
    for preset in ({}, given):
        supervisor = Supervisor(parse_args(["--home", str(tmp_path)], {}), environ | preset)
        supervisor.database_url = environ["DATABASE_URL"]
        services = [c for c, _ in supervisor.plan()[0]]
        assert len(services) == len(SERVICES)
        for child in services:
            prefix = child.name.split("-")[0].upper()
            urls = {k: v for k, v in child.env.items() if "DATABASE_URL" in k}
            expected = {"DATABASE_URL": environ["DATABASE_URL"]}
            if preset:
                expected[f"{prefix}_DATABASE_URL"] = preset[f"{prefix}_DATABASE_URL"]
            assert urls == expected, child.name
        for child in supervisor.runtime_children():
            assert not any("DATABASE_URL" in k or "pw-" in v for k, v in child.env.items())

    embedded = {s.upper(): f"postgresql://{s}:own-{s}@127.0.0.1:5/postgres" for s in SERVICES}
    supervisor = Supervisor(parse_args(["--home", str(tmp_path)], {}), {"PATH": os.environ["PATH"]})
    server = EmbeddedServer(tmp_path, tmp_path, 5, None)
    supervisor.database = SuiteDatabase(service_urls=embedded, server=server)
    for child, _ in supervisor.plan()[0]:
        prefix = child.name.split("-")[0].upper()
        urls = {k: v for k, v in child.env.items() if "DATABASE_URL" in k}
        assert urls == {f"{prefix}_DATABASE_URL": embedded[prefix]}, child.name
