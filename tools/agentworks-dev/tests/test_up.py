"""`agentworks up` as real processes: one suite per home, the banner's CLI hint, and what
`--bootstrap-only` prints (P2).

The suites here run on the test's database (`--database-url`) without the demo
runtimes: the embedded PostgreSQL and the demo are the end-to-end test's business.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from pathlib import Path

import psutil
import pytest

from agentworks.core.keys import KeyDirectory
from agentworks.server.testing import free_port_block

pytestmark = pytest.mark.timeout(240)

AGENTWORKS = str(Path(sys.executable).with_name("agentworks"))
READY_LINE = "AgentWorks is up."
READY_SECONDS = 90


def up_env(**extra: str) -> dict[str, str]:
    """The environment of an `agentworks up`: none of the caller's AgentWorks settings."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("AGENTWORKS_") and not k.endswith("DATABASE_URL")
    }
    env.update(PYTHONUNBUFFERED="1", LOG_JSON="false", **extra)
    return env


class Up:
    """One `agentworks up` process, its output (stdout and stderr together) collected."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.lines: list[str] = []
        self.reader = asyncio.create_task(self._read())
        self.descendants: list[psutil.Process] = []

    @classmethod
    async def start(cls, cwd: Path, home: str, base_port: int, http_port: int, db: str) -> Up:
        process = await asyncio.create_subprocess_exec(
            AGENTWORKS, "up", "--home", home, "--base-port", str(base_port),
            "--http-port", str(http_port), "--database-url", db, "--no-runtime",
            "--ready-timeout", str(READY_SECONDS - 10), "--stop-timeout", "10",
            cwd=cwd, env=up_env(), stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        return cls(process)

    async def _read(self) -> None:
        assert self.process.stdout is not None
        async for raw in self.process.stdout:
            self.lines.append(raw.decode(errors="replace").rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    async def ready(self) -> None:
        """Wait for the banner; remember the children (to kill if the test kills `up`)."""
        async with asyncio.timeout(READY_SECONDS):
            while READY_LINE not in self.lines:
                assert self.process.returncode is None, f"up exited:\n{self.output}"
                await asyncio.sleep(0.2)
        await asyncio.sleep(0.5)  # the rest of the banner
        self.descendants = psutil.Process(self.process.pid).children(recursive=True)

    async def exited(self, timeout: float = 30) -> int:
        async with asyncio.timeout(timeout):
            code = await self.process.wait()
            await self.reader
        return code

    async def close(self) -> None:
        """Stop it (Ctrl-C) if it runs; SIGKILL whatever is left of it or its children."""
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGINT)
            with contextlib.suppress(TimeoutError):
                await self.exited()
        if self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        for child in self.descendants:
            with contextlib.suppress(psutil.NoSuchProcess):
                child.kill()
        psutil.wait_procs(self.descendants, timeout=10)
        self.reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.reader


async def test_a_second_up_on_the_same_home_is_refused_until_the_first_is_gone_P2(
    tmp_path, database_url
):
    """P2: while one `agentworks up` runs on a home, another on that home (other ports) is
    refused at once, naming the first one's pid and ports and how to run a second suite;
    it starts nothing and leaves cli.json alone. The lock dies with its process: after a
    kill -9 of the first, a new `up` on the home starts. A home that is not ./.agentworks
    gets an `export AGENTWORKS_HOME=...` line before the CLI examples; the default not.
    Two SIGTERMs at once (a signal to the process group) still stop it gracefully."""
    home = tmp_path / ".agentworks"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    base = free_port_block(8)
    first_ports, second_ports = (base, base + 3), (base + 4, base + 7)
    suites: list[Up] = []
    try:
        # From another directory, so the home is not the CLI's default there.
        first = await Up.start(elsewhere, str(home), *first_ports, database_url)
        suites.append(first)
        await first.ready()
        written = (home / "cli.json").read_text()
        assert json.loads(written)["url"] == f"http://127.0.0.1:{base + 3}"
        banner = first.output[first.output.index(READY_LINE) :]
        export = f"export AGENTWORKS_HOME={home.resolve()}"
        assert export in banner, banner
        assert banner.index(export) < banner.index("agentworks messages send"), banner

        second = await Up.start(tmp_path, ".agentworks", *second_ports, database_url)
        suites.append(second)
        assert await second.exited() == 1, second.output
        refusal = second.output
        assert "another `agentworks up`" in refusal and f"pid {first.process.pid}" in refusal
        assert f"gateway http://127.0.0.1:{base + 3}" in refusal
        assert f"gRPC ports {base}-{base + 2}" in refusal
        assert "--home" in refusal and "--base-port" in refusal and "Traceback" not in refusal
        assert "child.started" not in refusal, "the refused up started children"
        assert (home / "cli.json").read_text() == written
        assert first.process.returncode is None

        # kill -9: no cleanup runs, yet the kernel released the lock.
        first.process.kill()
        await first.exited()
        await first.close()  # its orphaned children too
        third = await Up.start(tmp_path, ".agentworks", *second_ports, database_url)
        suites.append(third)
        await third.ready()
        assert json.loads((home / "cli.json").read_text())["url"] == (
            f"http://127.0.0.1:{base + 7}"
        )
        banner = third.output[third.output.index(READY_LINE) :]
        assert "export AGENTWORKS_HOME" not in banner, banner
        # One SIGTERM to the process group reaches `up` twice at once (its own and make's
        # forwarding): still a graceful stop, not the second Ctrl-C's kill.
        third.process.send_signal(signal.SIGTERM)
        third.process.send_signal(signal.SIGTERM)
        assert await third.exited() == 0, third.output
        stopped = [line for line in third.lines if "child.stopped" in line]
        assert stopped and not any("code=-9" in line for line in stopped), stopped
    finally:
        for suite in suites:
            await suite.close()


async def test_bootstrap_prints_the_dev_token_only_when_it_made_it_P2(
    tmp_path, database_url, signing_keys, messaging
):
    """P2: `up --bootstrap-only` (compose, the Kubernetes Job) prints a token it made
    itself (and keeps it in <home>/dev-token); a token from AGENTWORKS_DEV_TOKEN (a
    Secret) is named, never printed: a Job's log is readable more widely than a Secret."""

    async def bootstrap(home: Path, **extra: str) -> tuple[int | None, str]:
        env = up_env(
            **signing_keys.env("gateway"),
            AGENTWORKS_MESSAGING_ADDRESS=messaging.address,
            DATABASE_URL=database_url,
            **extra,
        )
        process = await asyncio.create_subprocess_exec(
            AGENTWORKS, "up", "--bootstrap-only", "--home", str(home), "--ready-timeout", "30",
            env=env, cwd=tmp_path, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        async with asyncio.timeout(60):
            out, _ = await process.communicate()
        return process.returncode, out.decode()

    code, out = await bootstrap(tmp_path / "made")
    assert code == 0, out
    made = (tmp_path / "made" / "dev-token").read_text().strip()
    assert made.startswith("aw_") and f"demo crew registered; dev token: {made}" in out

    secret = "aw_" + "s" * 43
    code, out = await bootstrap(tmp_path / "preset", AGENTWORKS_DEV_TOKEN=secret)
    assert code == 0, out
    assert "dev token: from AGENTWORKS_DEV_TOKEN (not printed)" in out
    assert secret not in out and "s" * 20 not in out


def test_the_demo_runtimes_get_the_services_addresses_and_never_the_database_url_A3_P2_T1(
    tmp_path,
):
    """A3 P2 T1: the demo runtimes `up` starts talk to the services only: their environment
    holds their runtime credential and the services' addresses, but not
    the database's address (with its password), whether `up` made it or it was given, nor
    the webhook key; each service gets its own signer's key only, and a signing key in
    `up`'s own environment reaches no child."""
    from agentworks_dev.up import Supervisor, parse_args

    given = "postgresql://aw:s3cret@db.example:5432/agentworks"
    supervisor = Supervisor(
        parse_args(["--home", str(tmp_path)], {}),
        {
            "DATABASE_URL": given,
            "PATH": os.environ["PATH"],
            "MESSAGING_SIGNING_KEY": "/elsewhere/key.pem",
            "SCHEDULER_WEBHOOK_KEY": "whk",
        },
    )
    keys = KeyDirectory(tmp_path / "keys")
    supervisor.database_url, supervisor.keys, supervisor.webhook_key = given, keys, "whk"
    supervisor.runtime_credential = "awr_" + "c" * 43
    children = supervisor.runtime_children()
    assert [c.name for c in children] == ["demo-runtime", "demo-funcs"]
    for child in children:
        assert "DATABASE_URL" not in child.env and "s3cret" not in json.dumps(child.env)
        assert "whk" not in json.dumps(child.env)
        assert "AGENTWORKS_SIGNING_KEY" not in child.env
    services = [c for c, _ in supervisor.plan()[0]]
    assert services and all(c.env["DATABASE_URL"] == given for c in services)
    for child in services:
        name = child.name.rsplit("-", 1)[0]
        signer = "gateway" if name == "gateway" else f"service:{name}"
        assert child.env["AGENTWORKS_SIGNING_KEY"] == str(keys.key_path(signer)), child.name
        assert "/elsewhere/key.pem" not in json.dumps(child.env), child.name
        assert ("whk" in json.dumps(child.env)) == (name == "scheduler"), child.name


def test_with_a_runtime_credential_the_demo_runtimes_get_it_and_no_signing_key_T2(tmp_path):
    """T2: once `up` holds the demo runtime credential, the demo runtimes' environment has
    it and the gateway's URL, and no signing key or trusted keys at all (not even one set
    in `up`'s own environment or a credential file given there)."""
    from agentworks_dev.up import Supervisor, parse_args

    supervisor = Supervisor(
        parse_args(["--home", str(tmp_path)], {}),
        {
            "PATH": os.environ["PATH"],
            "AGENTWORKS_SIGNING_KEY": "/elsewhere/key.pem",
            "AGENTWORKS_RUNTIME_CREDENTIAL_FILE": "/elsewhere/credential",
        },
    )
    supervisor.database_url, supervisor.webhook_key = "postgresql://localhost/x", "whk"
    supervisor.keys = KeyDirectory(tmp_path / "keys")
    supervisor.runtime_credential = "awr_" + "c" * 43
    for child in supervisor.runtime_children():
        assert not [k for k in child.env if k.endswith(("_SIGNING_KEY", "_TRUSTED_KEYS"))]
        assert child.env["AGENTWORKS_RUNTIME_CREDENTIAL"] == supervisor.runtime_credential
        assert child.env["AGENTWORKS_GATEWAY_URL"] == supervisor.gateway_url
        assert "AGENTWORKS_RUNTIME_CREDENTIAL_FILE" not in child.env
    # Without a gateway there is no credential, and no key to fall back on (T1, T2).
    supervisor.runtime_credential = ""
    assert supervisor.runtime_children() == []


def test_up_runs_grpc_in_plain_text_on_loopback_and_says_so_T5(tmp_path):
    """T5: `agentworks up` serves gRPC without TLS (on loopback by default): its children
    get none of the TLS settings exported for another deployment, and the banner says that
    it runs without TLS, where, and which settings it did not use."""
    from agentworks_dev.up import Supervisor, parse_args

    exported = {
        "AGENTWORKS_TLS_CA_FILE": "/etc/agentworks/tls/ca.crt",
        "MESSAGING_TLS_CERT_FILE": "/etc/agentworks/tls/tls.crt",
        "GATEWAY_TLS_KEY_FILE": "/etc/agentworks/tls/tls.key",
    }
    supervisor = Supervisor(
        parse_args(["--home", str(tmp_path)], {}), {"PATH": os.environ["PATH"], **exported}
    )
    supervisor.database_url = "postgresql://localhost/x"
    supervisor.keys, supervisor.webhook_key = KeyDirectory(tmp_path / "keys"), "whk"
    children = [c for c, _ in supervisor.plan()[0]] + supervisor.runtime_children()
    assert children
    for child in children:
        assert not any("_TLS_" in name for name in child.env), child.name
    lines: list[str] = []
    supervisor._out = type("Out", (), {"write": lines.append, "flush": lambda self: None})()
    supervisor._banner("aw_token", [])
    banner = "".join(lines)
    assert "TLS       off: gRPC in plain text on loopback only" in banner, banner
    assert f"not used here: {', '.join(sorted(exported))}" in banner, banner

    wide = Supervisor(parse_args(["--home", str(tmp_path), "--host", "0.0.0.0"], {}), {})
    lines.clear()
    wide._out = supervisor._out
    wide._banner("aw_token", [])
    assert "plain text on 0.0.0.0, readable on the network" in "".join(lines)


def test_every_child_gets_its_own_metrics_port_and_name_never_a_shared_one_P3_P4(tmp_path):
    """P3 P4: with --replicas 2 each child (every replica, each gateway, each demo
    runtime) is given its own metrics port, from --metrics-port on in a fixed order, and
    its name as service.instance.id; a <SERVICE>_METRICS_LISTEN exported for `up` (one
    port for every replica) reaches no child, and ports that would overlap the suite's
    gRPC or HTTP ports are refused, naming the setting."""
    from agentworks_dev.specs import StartupError
    from agentworks_dev.telemetry import metrics_lines, metrics_ports
    from agentworks_dev.up import Supervisor, parse_args

    options = parse_args(["--home", str(tmp_path), "--replicas", "2", "--metrics-port", "9600"], {})
    supervisor = Supervisor(
        options,
        {
            "PATH": os.environ["PATH"],
            "MESSAGING_METRICS_LISTEN": "0.0.0.0:9100",
            "OTEL_RESOURCE_ATTRIBUTES": "team=ops",
        },
    )
    supervisor.metrics = metrics_ports(9600, 2)
    supervisor.keys = KeyDirectory(tmp_path / "keys")
    supervisor.runtime_credential = "awr_" + "c" * 43
    children = [c for c, _ in supervisor.plan()[0]] + supervisor.runtime_children()
    listen = {}
    for child in children:
        variable = (
            "AGENTWORKS_RUNTIME_METRICS_LISTEN"
            if child.name.startswith("demo-")
            else f"{child.name.rsplit('-', 1)[0].upper()}_METRICS_LISTEN"
        )
        listen[child.name] = child.env[variable]
        assert child.env["OTEL_RESOURCE_ATTRIBUTES"] == f"team=ops,service.instance.id={child.name}"
        others = [k for k in child.env if k.endswith("METRICS_LISTEN") and k != variable]
        assert not others, (child.name, others)
    assert listen["messaging-1"] == "127.0.0.1:9600"
    assert listen["messaging-2"] == "127.0.0.1:9601"
    assert listen["demo-funcs"] == "127.0.0.1:9609"
    assert len(set(listen.values())) == len(children) == 10
    lines = "\n".join(metrics_lines("127.0.0.1", supervisor.metrics, [c.name for c in children]))
    assert "gateway-2 http://127.0.0.1:9607/metrics" in lines
    assert metrics_lines("127.0.0.1", metrics_ports(0, 2), ["messaging-1"]) == [
        "  metrics   off (--metrics-port 0)"
    ]
    with pytest.raises(
        StartupError,
        match="port 50051 is also a gRPC or HTTP port; choose another first port with --metr",
    ):
        metrics_ports(50050, 1, [50051, 50052, 50053, 8080])


def test_the_demo_crew_gets_the_llm_agent_only_with_llm_settings_and_the_banner_says_so_L4(
    tmp_path,
):
    """L4: without AGENTWORKS_LLM_MODEL the demo crew's turns run the scripted demo; with
    it (and OPENAI_BASE_URL) the reference LLM runtime, given the functions address for
    its call_function, and the model's key, which no service gets; the banner names
    which. Unusable LLM settings stop `up` before it starts anything, naming the
    variable."""
    from agentworks_dev.agent import demo_agent_command, demo_agent_line
    from agentworks_dev.banner import banner_text
    from agentworks_dev.specs import StartupError
    from agentworks_dev.up import Supervisor, parse_args

    def demo_runtime(environ: dict[str, str]) -> list[str]:
        supervisor = Supervisor(parse_args(["--home", str(tmp_path)], {}), environ)
        supervisor.database_url = "postgresql://localhost/x"
        supervisor.keys, supervisor.webhook_key = KeyDirectory(tmp_path / "keys"), "whk"
        supervisor.runtime_credential = "awr_" + "c" * 43
        [turns, _] = supervisor.runtime_children()
        assert turns.env["AGENTWORKS_FUNCTIONS_ADDRESS"] == ",".join(supervisor.addresses(1))
        # The model's key goes to the runtime, never to a service.
        assert turns.env.get("OPENAI_API_KEY") == environ.get("OPENAI_API_KEY")
        for service, _ in supervisor.plan()[0]:
            assert "OPENAI_API_KEY" not in service.env, service.name
        return turns.argv[-3:]

    plain = {"PATH": os.environ["PATH"]}
    llm = {**plain, "AGENTWORKS_LLM_MODEL": "llama3.2"}
    llm["OPENAI_BASE_URL"] = "http://localhost:11434/v1"
    llm["OPENAI_API_KEY"] = "sk-test"
    assert demo_runtime(plain)[-1] == "demo"
    assert demo_runtime(llm) == ["llm", "--serve", "turns"]
    assert demo_agent_line(plain).startswith("scripted demo")
    line = demo_agent_line(llm)
    assert line == "reference LLM runtime: model llama3.2 at http://localhost:11434/v1"
    kwargs = dict(home=tmp_path, gateway_url="http://x", token="t", preset_token=False)
    banner = banner_text(**kwargs, embedded=False, services=[], skipped=[], agent=line)
    assert f"  agent     {line}" in banner.splitlines()
    with pytest.raises(StartupError, match="OPENAI_BASE_URL must be an http"):
        demo_agent_command({**llm, "OPENAI_BASE_URL": "localhost:11434"})
