"""compose.yaml and the shared Dockerfile (P5), checked without a Docker engine.

No engine runs here, so these tests read the files: every service is present, healthy
by a real check, built from the one Dockerfile, wired to its peers, and scalable on its
own; every gRPC hop runs mutual TLS with certificates the `certs` job makes (T5), and
the services' health check works over it; the Dockerfile installs the locked
dependencies before our packages.
"""

from __future__ import annotations

import asyncio
import pathlib
import re
import sys
import tomllib
from typing import Any

import pytest
import yaml

from agentworks.core.settings import Env
from agentworks.core.tls import Tls
from tests.fixtures.tls import Pki

ROOT = pathlib.Path(__file__).resolve().parents[1]
GRPC_SERVICES = {"messaging": 50051, "functions": 50052, "scheduler": 50053}
RUNTIMES = {"demo-runtime", "demo-functions"}
LONG_RUNNING = {*GRPC_SERVICES, "gateway", *RUNTIMES}
JOBS = {"bootstrap", "keys"}
# The one-shot job that sets up each service's database role (T9).
DB_ROLES = "db-roles"
SERVICES = {*GRPC_SERVICES, "gateway"}
# Whose signing key each process mounts (T1); the keys job makes them all.
SIGNERS = {
    "messaging": "keys-messaging",
    "functions": "keys-functions",
    "scheduler": "keys-scheduler",
    "gateway": "keys-gateway",
    "bootstrap": "keys-gateway",
}
# The demo runtimes hold no key: a runtime credential (T2) the bootstrap job writes.
CREDENTIAL_VOLUME = "runtime-credential"
CREDENTIAL_MOUNT = "/run/agentworks/runtime-credential"
SIGNING_MOUNT = "/run/agentworks/signing"
TRUSTED_MOUNT = "/run/agentworks/trusted"
# The one-shot job that makes the CA and every process's certificate (T5).
CERTS = "certs"
# Where each process finds its certificate, key and CA (its own volume, read-only).
TLS_DIR = "/etc/agentworks/tls"
PACKAGES = [
    "libs/agentworks-proto",
    "libs/agentworks-client",
    "libs/agentworks-server",
    "libs/agentworks-runtime",
    "libs/agentworks-agents",
    "libs/agentworks-runner",
    "services/messaging",
    "services/functions",
    "services/scheduler",
    "services/gateway",
    "tools/agentworks-cli",
    "tools/agentworks-dev",
]


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())


@pytest.fixture(scope="module")
def services(compose) -> dict:
    return compose["services"]


@pytest.fixture(scope="module")
def scripts() -> set[str]:
    """Every console script our packages install."""
    names: set[str] = set()
    for package in PACKAGES:
        project = tomllib.loads((ROOT / package / "pyproject.toml").read_text())["project"]
        names |= set(project.get("scripts", {}))
    return names


def test_compose_runs_postgres_and_every_service_p5(services):
    """P5/R2/T9: PostgreSQL, the four services, both demo runtimes, the bootstrap, keys and
    certificates jobs, and the job that sets up the services' database roles."""
    assert set(services) == {"postgres", *LONG_RUNNING, *JOBS, CERTS, DB_ROLES}
    assert services["postgres"]["image"].startswith("postgres:")


def test_every_long_running_service_has_a_real_healthcheck_p4_p5(services):
    """P4/P5: each service (and PostgreSQL) has a health check that probes something."""
    for name in {"postgres", *LONG_RUNNING}:
        check = services[name].get("healthcheck")
        assert check and not check.get("disable"), f"{name} has no healthcheck"
        assert check["test"][0] in ("CMD", "CMD-SHELL"), name
        assert len(check["test"]) > 1, name
    for name, port in GRPC_SERVICES.items():
        probe = " ".join(services[name]["healthcheck"]["test"])
        assert "grpc_health" in probe and f"127.0.0.1:{port}" in probe, name
        assert "secure_channel" in probe and f"{TLS_DIR}/" in probe, f"{name}: not over TLS"
        assert services[name]["environment"][f"{name.upper()}_LISTEN"] == f"0.0.0.0:{port}"
    assert "/healthz" in " ".join(services["gateway"]["healthcheck"]["test"])


def test_jobs_run_once_and_gate_the_runtimes_p5(services):
    """P5: the keys job completes before any other AgentWorks process starts, the
    bootstrap job (crew, functions, token) before the runtimes."""
    assert services["keys"]["restart"] == "on-failure"
    assert "agentworks keys init" in " ".join(services["keys"]["command"])
    for name in {*LONG_RUNNING, "bootstrap"}:
        depends = services[name]["depends_on"]
        assert depends["keys"]["condition"] == "service_completed_successfully", name
    assert services["bootstrap"]["restart"] == "on-failure"
    assert "--bootstrap-only" in services["bootstrap"]["command"]
    # It registers the crew with functions and declares the demo functions there.
    assert services["bootstrap"]["depends_on"]["functions"]["condition"] == "service_healthy"
    for name in RUNTIMES:
        depends = services[name]["depends_on"]
        assert depends["bootstrap"]["condition"] == "service_completed_successfully", name
    assert services["demo-runtime"]["depends_on"]["scheduler"]["condition"] == "service_healthy"
    assert services["demo-functions"]["depends_on"]["functions"]["condition"] == "service_healthy"


def test_every_agentworks_service_uses_the_shared_dockerfile_p5(services):
    """P5: one image recipe for every AgentWorks process."""
    for name in {*LONG_RUNNING, *JOBS, CERTS, DB_ROLES}:
        build = services[name]["build"]
        assert build["dockerfile"] == "Dockerfile", name
        assert (ROOT / build["context"] / build["dockerfile"]).resolve() == ROOT / "Dockerfile"


def test_commands_are_installed_console_scripts(services, scripts):
    """Each service's command is a console script one of our packages installs."""
    for name in LONG_RUNNING:
        command = services[name]["command"][0]
        assert command in scripts, f"{name}: {command} is not a console script"


def test_each_service_scales_on_its_own_p3_p5(services):
    """P3/P5: `deploy.replicas` comes from a per-service variable (default 1)."""
    seen = set()
    for name in LONG_RUNNING:
        replicas = str(services[name]["deploy"]["replicas"])
        match = re.fullmatch(r"\$\{(\w+)_REPLICAS:-1\}", replicas)
        assert match, f"{name}: replicas {replicas!r} is not ${{<NAME>_REPLICAS:-1}}"
        seen.add(match.group(1))
    assert len(seen) == len(LONG_RUNNING), "two services share a replicas variable"


def test_each_process_mounts_only_its_own_signers_key_a2_t1(services, compose):
    """A2 T1 T2: every service gets its own signer's private key (a volume each: a
    service its own, the gateway and the bootstrap job the gateway's) read-only at one
    path, and the trusted keys; the keys job alone sees them all; no shared secret signs
    identities any more. The demo runtimes get no key at all: the runtime credential the
    bootstrap job writes into a volume only it (read-write) and they (read-only) mount,
    and the gateway to exchange it at."""
    for name, volume in SIGNERS.items():
        service = services[name]
        env = service["environment"]
        assert env["AGENTWORKS_SIGNING_KEY"] == f"{SIGNING_MOUNT}/signing-key.pem", name
        assert env["AGENTWORKS_TRUSTED_KEYS"] == f"{TRUSTED_MOUNT}/trusted-keys.json", name
        assert "AGENTWORKS_INTERNAL_KEY" not in env, name
        mounts = [v for v in service["volumes"] if v.startswith(("keys-", "trusted-keys"))]
        assert sorted(mounts) == [
            f"{volume}:{SIGNING_MOUNT}:ro",
            f"trusted-keys:{TRUSTED_MOUNT}:ro",
        ], name
    made = sorted(v.split(":")[0] for v in services["keys"]["volumes"])
    assert made == sorted({*SIGNERS.values(), "keys-functions", "trusted-keys"})
    for name in RUNTIMES:
        env, volumes = services[name]["environment"], services[name]["volumes"]
        assert not any("SIGNING_KEY" in k or "TRUSTED_KEYS" in k for k in env), name
        assert not [v for v in volumes if v.startswith(("keys-", "trusted-keys"))], name
        assert f"{CREDENTIAL_VOLUME}:{CREDENTIAL_MOUNT}:ro" in volumes, name
        assert env["AGENTWORKS_RUNTIME_CREDENTIAL_FILE"].startswith(f"{CREDENTIAL_MOUNT}/")
        assert env["AGENTWORKS_GATEWAY_URL"] == "http://gateway:8080", name
    writers = [
        n
        for n, svc in services.items()
        if f"{CREDENTIAL_VOLUME}:{CREDENTIAL_MOUNT}" in svc.get("volumes", [])
    ]
    assert writers == ["bootstrap"]
    bootstrap = services["bootstrap"]["environment"]
    assert bootstrap["AGENTWORKS_RUNTIME_CREDENTIAL_DIR"] == CREDENTIAL_MOUNT
    assert set(made) <= set(compose["volumes"])
    scheduler = services["scheduler"]["environment"]
    assert scheduler["SCHEDULER_WEBHOOK_KEY"].startswith("${SCHEDULER_WEBHOOK_KEY:?")
    assert all("SCHEDULER_WEBHOOK_KEY" not in services[n]["environment"] for n in RUNTIMES)


def test_services_are_wired_to_their_peers_a2(services):
    """A2: clients get peer addresses. (The database URLs, services' only:
    test_each_service_logs_in_as_its_own_role_T9.)"""
    gateway = services["gateway"]["environment"]
    for name, port in GRPC_SERVICES.items():
        assert gateway[f"GATEWAY_{name.upper()}_ADDRESS"] == f"{name}:{port}"
    runtime = services["demo-runtime"]["environment"]
    assert runtime["AGENTWORKS_MESSAGING_ADDRESS"] == "messaging:50051"
    assert runtime["AGENTWORKS_SCHEDULER_ADDRESS"] == "scheduler:50053"
    assert runtime["AGENTWORKS_RUNTIME_TARGETS"] == "crew:demo"
    executions = services["demo-functions"]["environment"]
    assert executions["AGENTWORKS_FUNCTIONS_ADDRESS"] == "functions:50052"
    assert executions["AGENTWORKS_RUNTIME_TARGETS"] == "crew:demo"


def test_demo_runtimes_build_their_config_and_commands_r1_r2_s1(services, tmp_path, pki):
    """R1/R2/S1: each demo runtime's command and env parse into a runnable configuration:
    turns with a scheduler for wake-ups, and function executions in a writable root."""
    from agentworks.runner.cli import _parser
    from agentworks.runtime.config import RuntimeConfig

    key = _credential_stand_in(tmp_path)
    configs = {}
    for name, command in {"demo-runtime": "demo", "demo-functions": "functions-demo"}.items():
        argv = services[name]["command"][1:]
        assert argv == [command] and _parser().parse_args(argv).command == command, name
        # As compose passes it: `${VAR:-default}` becomes the default (LOG_LEVEL is checked).
        config = RuntimeConfig.from_env({**_environment(services[name], pki), **key})
        assert config.principal == "agent:demo/demo-bot" and config.targets == ("crew:demo",)
        assert config.health_file.startswith("/tmp/"), name
        assert config.unknown_settings == (), name
        configs[name] = config
    assert configs["demo-runtime"].scheduler_address == "scheduler:50053"
    assert configs["demo-functions"].root.startswith("/tmp/"), "calls need a writable root"
    tick = services["scheduler"]["environment"]["SCHEDULER_TICK_SECONDS"]
    assert re.fullmatch(r"\$\{SCHEDULER_TICK_SECONDS:-60\}", tick), "S2: default tick 60 s"


def test_dockerfile_installs_the_lock_then_every_package():
    """P5: python:3.11-slim, requirements.lock first, then each of our packages."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim\b", dockerfile, re.M)
    lock = dockerfile.index("pip install -r requirements.lock")
    assert dockerfile.index("COPY requirements.lock") < lock
    for package in PACKAGES:
        assert dockerfile.index(f"./{package}") > lock, f"{package} is not installed"
    assert re.search(r"^USER (?!root)", dockerfile, re.M), "the image runs as root"


def test_dockerignore_keeps_local_state_out_of_the_image():
    """Local state (venv, embedded PostgreSQL data, keys) never enters the build context."""
    ignored = set((ROOT / ".dockerignore").read_text().split())
    assert {".venv", ".agentworks", ".git"} <= ignored


def _credential_stand_in(tmp_path: pathlib.Path) -> dict[str, str]:
    """The bootstrap job's runtime credential, where this machine has it instead of the
    mount (a fresh one: the format is what the runtime checks)."""
    from agentworks_gateway.tokens import new_runtime_credential

    path = tmp_path / "runtime-credential"
    path.write_text(new_runtime_credential())
    return {"AGENTWORKS_RUNTIME_CREDENTIAL_FILE": str(path)}


def _environment(service: dict, pki) -> dict[str, str]:
    """The service's environment as compose passes it (`${VAR:-default}` becomes the
    default), with the files of its TLS volume, mounted at TLS_DIR, taken from `pki`
    (tests.fixtures.tls): the certs job's names, tls.crt, tls.key and ca.crt."""
    environment = {
        variable: re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", str(value))
        for variable, value in service["environment"].items()
    }
    cert, _ = pki.files("client")
    bundle = str(pathlib.Path(cert).parent)
    return {
        variable: value.replace(TLS_DIR, bundle) if value.startswith(f"{TLS_DIR}/") else value
        for variable, value in environment.items()
    }


def _tls_volume(service: dict) -> str:
    """The volume the service mounts read-only at TLS_DIR."""
    (volume,) = [v.split(":")[0] for v in service.get("volumes", []) if f":{TLS_DIR}" in v]
    assert any(v == f"{volume}:{TLS_DIR}:ro" for v in service["volumes"]), "not read-only"
    return volume


def test_every_grpc_hop_runs_mutual_tls_with_certificates_from_the_certs_job_T5(
    compose, services, pki, tmp_path
):
    """T5: the certs job makes one certificate per process into that process's own
    volume (the CA's key into one only it mounts); every process mounts its own volume
    read-only, waits for the job, and its environment builds a config that serves and
    calls with mutual TLS; the certificates name the hosts the peers are called by."""
    from agentworks.runtime.config import RuntimeConfig
    from agentworks_dev.certs import parse_args
    from agentworks_functions.config import Config as FunctionsConfig
    from agentworks_gateway.config import Config as GatewayConfig
    from agentworks_messaging.config import Config as MessagingConfig
    from agentworks_scheduler.config import Config as SchedulerConfig

    job = services[CERTS]
    assert job["restart"] == "on-failure"
    assert job["command"][:3] == ["python", "-m", "agentworks_dev.certs"]
    args = parse_args(job["command"][3:], {})
    uid = re.search(r"--uid (\d+)", (ROOT / "Dockerfile").read_text())
    assert uid is not None and args.owner.split(":")[0] == uid[1]
    processes = {*GRPC_SERVICES, "gateway", *(JOBS - {"keys"}), *RUNTIMES}
    assert set(args.names) == processes, "one certificate per process, by its compose name"
    mounts = dict(reversed(v.split(":")) for v in job["volumes"])
    assert set(mounts) == {f"{args.out}/{n}" for n in [*processes, "ca"]}
    assert set(compose["volumes"]) >= set(mounts.values())
    ca_volume = mounts[f"{args.out}/ca"]
    for name in processes:
        service = services[name]
        assert _tls_volume(service) == mounts[f"{args.out}/{name}"], name
        assert service["depends_on"][CERTS]["condition"] == "service_completed_successfully"
        assert not any(v.startswith(f"{ca_volume}:") for v in service["volumes"]), name
    readers: dict[str, Any] = {
        "messaging": MessagingConfig,
        "functions": FunctionsConfig,
        "scheduler": SchedulerConfig,
    }
    from agentworks.core.keys import KeyDirectory

    keys = KeyDirectory(tmp_path / "keys")
    for name, reader in readers.items():
        key = keys.env(f"service:{name}")
        config = reader.from_env({**_environment(services[name], pki), **key})
        assert config.service.tls.describe(server=True) == "mutual TLS", name
        assert config.service.tls.describe(server=False) == "mutual TLS", name
    gateway = GatewayConfig.from_env(
        {**_environment(services["gateway"], pki), **keys.env("gateway")}
    )
    assert gateway.service.tls.describe(server=False) == "mutual TLS"
    for name in RUNTIMES:
        runtime = RuntimeConfig.from_env(
            {**_environment(services[name], pki), **_credential_stand_in(tmp_path)}
        )
        assert runtime.tls.describe(server=False) == "mutual TLS", name
    bootstrap = Env("AGENTWORKS", _environment(services["bootstrap"], pki))
    assert Tls.from_env(bootstrap, server=False).describe(server=False) == "mutual TLS"
    # Peers are called by compose name, which their certificates carry.
    for name in processes:
        for variable, value in services[name]["environment"].items():
            if variable.endswith("_ADDRESS"):
                host = str(value).rpartition(":")[0]
                assert host in args.names, f"{name}: {variable} {value}"


async def test_the_services_health_check_answers_over_mutual_tls_T5_P4(
    services, start_messaging, pki, foreign_pki
):
    """T5/P4: the compose health check of a gRPC service, run as written (its files and
    port pointed at a messaging that requires mutual TLS), says SERVING; with files from
    another CA it fails."""
    messaging = await start_messaging(**pki.server_env("MESSAGING", "messaging"))
    command = services["messaging"]["healthcheck"]["test"]
    assert command[:3] == ["CMD", "python", "-c"]
    code = command[3].replace("127.0.0.1:50051", messaging.address)

    async def check(ca: Pki) -> int:
        bundle = pathlib.Path(ca.files("messaging")[0]).parent
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", code.replace(f"{TLS_DIR}/", f"{bundle}/"),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        async with asyncio.timeout(30):
            return await process.wait()

    assert await check(pki) == 0
    assert await check(foreign_pki) != 0


def _substituted(value: str) -> str:
    """A compose value as compose passes it: `${VAR:-default}` is the default and a
    required `${VAR:?message}` becomes `<VAR>` (so that each shows where it went)."""
    value = re.sub(r"\$\{(\w+):\?[^}]*\}", r"<\1>", value)
    return re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", value)


def _database_urls(service: dict) -> dict[str, str]:
    return {k: v for k, v in service["environment"].items() if "DATABASE_URL" in k}


def test_each_service_logs_in_as_its_own_role_T9(services):
    """T9: each service gets one database URL, its own `<NAME>_DATABASE_URL`, as a role
    named after it with a required password of its own (no default): never the
    superuser's, never a shared DATABASE_URL. The bootstrap job writes as the gateway."""
    import psycopg

    superuser = services["postgres"]["environment"]["POSTGRES_USER"]
    passwords = set()
    for name in SERVICES:
        urls = _database_urls(services[name])
        assert set(urls) == {f"{name.upper()}_DATABASE_URL"}, name
        raw = urls[f"{name.upper()}_DATABASE_URL"]
        assert f"${{{name.upper()}_DB_PASSWORD:?" in raw, f"{name}: the password has a default"
        params = psycopg.conninfo.conninfo_to_dict(_substituted(raw))
        assert params["user"] == name != superuser, name
        assert params["password"] == f"<{name.upper()}_DB_PASSWORD>", name
        assert (params["host"], params["port"]) == ("postgres", "5432"), name
        passwords.add(params["password"])
    assert len(passwords) == len(SERVICES)
    gateway = _database_urls(services["gateway"])
    assert _database_urls(services["bootstrap"]) == gateway
    postgres = services["postgres"]["environment"]
    assert postgres["POSTGRES_PASSWORD"].startswith("${POSTGRES_PASSWORD:?")
    assert postgres["POSTGRES_HOST_AUTH_METHOD"] == "scram-sha-256"
    assert "--auth-local=scram-sha-256" in postgres["POSTGRES_INITDB_ARGS"].split()
    assert "--auth-host=scram-sha-256" in postgres["POSTGRES_INITDB_ARGS"].split()


def test_the_roles_job_sets_up_every_services_role_before_they_start_T9(services, scripts):
    """T9: the db-roles job runs `agentworks-db-roles` (a console script) as the superuser with
    exactly the URLs the services get (parsed by the job's own code into four distinct
    roles); every service and the bootstrap job wait until it completed."""
    from agentworks_dev.dbroles import SERVICES as ROLE_ORDER
    from agentworks_dev.dbroles import roles_from_env

    job = services[DB_ROLES]
    assert "agentworks-db-roles" in scripts
    assert job["command"] == ["agentworks-db-roles"]
    assert job["restart"] == "on-failure"
    assert job["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    env = {k: _substituted(str(v)) for k, v in job["environment"].items()}
    admin, roles = roles_from_env(env)
    superuser = services["postgres"]["environment"]["POSTGRES_USER"]
    assert admin == f"postgresql://{superuser}:<POSTGRES_PASSWORD>@postgres:5432/agentworks"
    assert [(r.schema, r.role) for r in roles] == [(n, n) for n in ROLE_ORDER]
    for name in SERVICES:
        variable = f"{name.upper()}_DATABASE_URL"
        assert job["environment"][variable] == services[name]["environment"][variable], name
    for name in {*SERVICES, "bootstrap"}:
        depends = services[name]["depends_on"]
        if name != "bootstrap":
            assert depends["db-roles"]["condition"] == "service_completed_successfully", name
        else:  # through the services it waits for
            assert {"messaging", "functions", "gateway"} <= set(depends)


def test_runtimes_are_kept_off_the_database_network_T9(compose, services):
    """T9: PostgreSQL is only on `database`, an internal network; the services and the
    jobs are on it, the runtimes are not (they reach the services on `default`), and
    the runtimes get no database URL or password variable."""
    networks = compose["networks"]
    assert services["postgres"]["networks"] == ["database"]
    assert networks["database"]["internal"] is True
    for name in {*SERVICES, "bootstrap", DB_ROLES}:
        assert "database" in services[name]["networks"], name
    for name in RUNTIMES:
        assert services[name]["networks"] == ["default"], name
        env = services[name]["environment"]
        assert not any("DATABASE" in k or "PASSWORD" in k for k in env), name
    for name in SERVICES:
        assert "default" in services[name]["networks"], f"runtimes cannot reach {name}"
