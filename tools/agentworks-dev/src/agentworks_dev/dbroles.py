"""A PostgreSQL role per service (T9), owning its own schema and nothing else.

`ensure_service_roles` creates each service's role (LOGIN, no other attribute) or
brings an existing one back to that, sets its password (sent as a SCRAM-SHA-256
verifier, never in clear), and makes it the owner of its schema and of every object in
it, creating the schema when it is missing: a schema made before the roles existed (by
the superuser, say) is handed over. Other service roles lose any privilege on it, and
PUBLIC may neither connect to the database nor create in `public`. It is idempotent: run
it again to rotate a password or after adding a role.

`agentworks up` runs it on its embedded PostgreSQL. For another server (compose's job,
a Kubernetes Job, by hand):

    AGENTWORKS_ADMIN_DATABASE_URL=postgresql://admin:...@db:5432/agentworks \\
    MESSAGING_DATABASE_URL=postgresql://messaging:...@db:5432/agentworks \\
    FUNCTIONS_DATABASE_URL=... SCHEDULER_DATABASE_URL=... GATEWAY_DATABASE_URL=... \\
    agentworks-db-roles        # or: python -m agentworks_dev.dbroles

Each service's role and password are read from its own URL, so the URLs the services
get are the only place the passwords are written down.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import psycopg
from psycopg import sql

from agentworks.server.db import libpq_url

# The services that own a schema, each named after its service.
SERVICES = ("messaging", "functions", "scheduler", "gateway")

ADMIN_URL_VARIABLE = "AGENTWORKS_ADMIN_DATABASE_URL"

# Each service's own URL: its role and password.
URL_VARIABLES = {
    "messaging": "MESSAGING_DATABASE_URL",
    "functions": "FUNCTIONS_DATABASE_URL",
    "scheduler": "SCHEDULER_DATABASE_URL",
    "gateway": "GATEWAY_DATABASE_URL",
}

# Role attributes a service's role must not have.
ATTRIBUTES = {
    "rolsuper": "NOSUPERUSER",
    "rolcreatedb": "NOCREATEDB",
    "rolcreaterole": "NOCREATEROLE",
    "rolreplication": "NOREPLICATION",
    "rolbypassrls": "NOBYPASSRLS",
}

# pg_class kinds handed over one by one (indexes, TOAST tables and the sequences of
# serial or identity columns follow their table).
RELATION_KINDS = {
    "r": "TABLE",
    "p": "TABLE",
    "v": "VIEW",
    "m": "MATERIALIZED VIEW",
    "f": "FOREIGN TABLE",
    "S": "SEQUENCE",
    "c": "TYPE",
}


class RolesError(Exception):
    """The roles cannot be set up as asked; the message says why."""


@dataclass(frozen=True)
class ServiceRole:
    """A service's schema, the role that owns it, and that role's password."""

    schema: str
    role: str
    password: str = ""
    # The database the schema lives in ("": the admin connection's).
    database: str = ""
    host: str = ""
    port: str = ""

    @classmethod
    def from_url(cls, schema: str, url: str, *, password: bool = True) -> ServiceRole:
        """The role, password, database and server a URL names (`password`: required)."""
        try:
            params = psycopg.conninfo.conninfo_to_dict(libpq_url(url))
        except psycopg.ProgrammingError:
            raise RolesError(f"the {schema} database URL is not a PostgreSQL URL") from None
        role = str(params.get("user") or "")
        secret = str(params.get("password") or "")
        if not role or (password and not secret):
            raise RolesError(f"the {schema} database URL must name its role and password")
        return cls(
            schema=schema,
            role=role,
            password=secret,
            database=str(params.get("dbname") or role),
            host=str(params.get("host") or ""),
            port=str(params.get("port") or ""),
        )


def check_roles(roles: Sequence[ServiceRole], admin: str = "") -> None:
    """One role per schema, none shared, none the admin's: else `RolesError`."""
    names = [r.role for r in roles]
    shared = sorted({n for n in names if names.count(n) > 1})
    if shared:
        raise RolesError(f"each service needs its own role; shared: {', '.join(shared)}")
    if admin and admin in names:
        raise RolesError(f"the admin role {admin} must not be a service's role")


def _verifier(conn: psycopg.Connection, role: ServiceRole) -> str:
    """The SCRAM-SHA-256 verifier of the role's password, made here (libpq)."""
    made = conn.pgconn.encrypt_password(
        role.password.encode(), role.role.encode(), b"scram-sha-256"
    )
    return made.decode()


def _ensure_role(conn: psycopg.Connection, role: ServiceRole) -> None:
    ident = sql.Identifier(role.role)
    found = conn.execute(
        "SELECT rolsuper, rolcreatedb, rolcreaterole, rolreplication, rolbypassrls"
        " FROM pg_roles WHERE rolname = %s",
        (role.role,),
    ).fetchone()
    password = sql.Literal(_verifier(conn, role)) if role.password else sql.SQL("NULL")
    if found is None:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(ident, password))
        return
    conn.execute(sql.SQL("ALTER ROLE {} LOGIN PASSWORD {}").format(ident, password))
    # Named only when wrong: a non-superuser admin may not even mention SUPERUSER.
    wrong = [word for value, word in zip(found, ATTRIBUTES.values(), strict=True) if value]
    if wrong:
        conn.execute(sql.SQL(f"ALTER ROLE {{}} {' '.join(wrong)}").format(ident))
    for (granted,) in conn.execute(
        "SELECT roleid::regrole::text FROM pg_auth_members WHERE member = %s::regrole",
        (role.role,),
    ).fetchall():
        # A member of another role would get its privileges.
        conn.execute(sql.SQL("REVOKE {} FROM {}").format(sql.Identifier(granted), ident))


def _hand_over(conn: psycopg.Connection, schema: str, role: str) -> None:
    """Make `role` the owner of `schema` and of every object in it."""
    owner = sql.Identifier(role)
    conn.execute(sql.SQL("ALTER SCHEMA {} OWNER TO {}").format(sql.Identifier(schema), owner))
    relations = conn.execute(
        "SELECT c.oid::regclass::text, c.relkind FROM pg_class c"
        " WHERE c.relnamespace = %s::regnamespace AND c.relowner <> %s::regrole"
        " AND c.relkind = ANY(%s) AND NOT EXISTS (SELECT 1 FROM pg_depend d"
        "  WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid"
        "  AND d.refclassid = 'pg_class'::regclass AND d.deptype IN ('a', 'i'))"
        " ORDER BY c.relkind <> 'c', c.oid",
        (schema, role, list(RELATION_KINDS)),
    ).fetchall()
    for name, kind in relations:
        conn.execute(sql.SQL(f"ALTER {RELATION_KINDS[kind]} {name} OWNER TO {{}}").format(owner))
    types = conn.execute(
        "SELECT t.oid::regtype::text FROM pg_type t WHERE t.typnamespace = %s::regnamespace"
        " AND t.typowner <> %s::regrole AND t.typtype IN ('e', 'd', 'r')"
        " AND t.typcategory <> 'A'",
        (schema, role),
    ).fetchall()
    for (name,) in types:
        conn.execute(sql.SQL(f"ALTER TYPE {name} OWNER TO {{}}").format(owner))
    routines = conn.execute(
        "SELECT p.oid::regprocedure::text, p.prokind FROM pg_proc p"
        " WHERE p.pronamespace = %s::regnamespace AND p.proowner <> %s::regrole",
        (schema, role),
    ).fetchall()
    for name, kind in routines:
        what = "AGGREGATE" if kind == "a" else "ROUTINE"
        conn.execute(sql.SQL(f"ALTER {what} {name} OWNER TO {{}}").format(owner))


def _ensure_schema(conn: psycopg.Connection, role: ServiceRole, others: Sequence[str]) -> None:
    schema, owner = sql.Identifier(role.schema), sql.Identifier(role.role)
    found = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (role.schema,)).fetchone()
    if found is None:
        conn.execute(sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(schema, owner))
    else:
        _hand_over(conn, role.schema, role.role)
    conn.execute(sql.SQL("REVOKE ALL ON SCHEMA {} FROM PUBLIC").format(schema))
    for other in others:
        other_role = sql.Identifier(other)
        for statement in (
            "REVOKE ALL ON SCHEMA {} FROM {}",
            "REVOKE ALL ON ALL TABLES IN SCHEMA {} FROM {}",
            "REVOKE ALL ON ALL SEQUENCES IN SCHEMA {} FROM {}",
            "REVOKE ALL ON ALL ROUTINES IN SCHEMA {} FROM {}",
        ):
            conn.execute(sql.SQL(statement).format(schema, other_role))


def ensure_service_roles(conn: psycopg.Connection, roles: Sequence[ServiceRole]) -> None:
    """Set up `roles` in the database `conn` is connected to, in one transaction.

    `conn` is an autocommit connection of a superuser (or of a role that may create
    roles and act as each of them, on a managed server).
    """
    check_roles(roles, str(conn.info.user))
    database = sql.Identifier(str(conn.info.dbname))
    names = [r.role for r in roles]
    with conn.transaction():
        # Two set-ups at once (replicas of a job) take turns.
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('agentworks:roles'))")
        for role in roles:
            _ensure_role(conn, role)
        conn.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(database))
        conn.execute(sql.SQL("REVOKE CREATE ON SCHEMA public FROM PUBLIC"))
        for role in roles:
            conn.execute(
                sql.SQL("GRANT CONNECT, TEMPORARY ON DATABASE {} TO {}").format(
                    database, sql.Identifier(role.role)
                )
            )
            _ensure_schema(conn, role, [n for n in names if n != role.role])


def roles_from_env(environ: Mapping[str, str]) -> tuple[str, list[ServiceRole]]:
    """(the admin URL, each service's role) from `AGENTWORKS_ADMIN_DATABASE_URL` and
    `<SERVICE>_DATABASE_URL`; `RolesError` names what is missing."""
    admin = environ.get(ADMIN_URL_VARIABLE, "")
    missing = [ADMIN_URL_VARIABLE] if not admin else []
    missing += [URL_VARIABLES[s] for s in SERVICES if not environ.get(URL_VARIABLES[s])]
    if missing:
        raise RolesError(f"set {', '.join(missing)}")
    roles = [ServiceRole.from_url(s, environ[URL_VARIABLES[s]]) for s in SERVICES]
    return admin, roles


def _by_database(admin_url: str, roles: Sequence[ServiceRole]) -> dict[str, list[ServiceRole]]:
    """The roles grouped by the database of their schema, all on the admin's server."""
    admin = ServiceRole.from_url("admin", admin_url, password=False)
    groups: dict[str, list[ServiceRole]] = {}
    for role in roles:
        if (role.host, role.port) != (admin.host, admin.port):
            raise RolesError(
                f"the {role.schema} database is on another server than "
                f"{ADMIN_URL_VARIABLE}: run this once per server with that server's URLs"
            )
        groups.setdefault(role.database, []).append(role)
    return groups


def main(argv: Sequence[str] = (), environ: Mapping[str, str] | None = None) -> int:
    """`agentworks-db-roles` (`python -m agentworks_dev.dbroles`): set up every service's
    role; the exit status."""
    from agentworks.server.db import with_database

    environ = os.environ if environ is None else environ
    try:
        admin_url, roles = roles_from_env(environ)
        check_roles(roles, ServiceRole.from_url("admin", admin_url, password=False).role)
        groups = _by_database(admin_url, roles)
    except RolesError as exc:
        print(f"dbroles: {exc}", file=sys.stderr)
        return 2
    try:
        for database, group in groups.items():
            url = libpq_url(with_database(admin_url, database))
            with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
                ensure_service_roles(conn, group)
    except (psycopg.Error, RolesError) as exc:
        print(f"dbroles: {type(exc).__name__}: {exc}".strip(), file=sys.stderr)
        return 1
    for role in roles:
        print(f"role {role.role} owns schema {role.schema} in database {role.database}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
