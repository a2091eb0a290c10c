"""End to end: `agentworks up` as `make run` starts it, then the real CLI against it.

One test, because bringing the suite up (embedded PostgreSQL, every service as its own
process, the demo runtime) is the expensive part. It checks P2 (embedded PostgreSQL),
P4 (gRPC health), R2 (the demo crew used by `make run`), C2/C6/C7 through the CLI (G3),
A2 (unsigned and forged identities are refused) and a clean Ctrl-C.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import random
import secrets
import signal
import socket
import subprocess
import sys
import threading

import grpc
import httpx
import psutil
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from agentworks.core.identity import METADATA_KEY, mint
from agentworks.messaging.v1 import messaging_pb2, messaging_pb2_grpc
from agentworks_gateway.up import GRPC_SERVICES, has_main

pytestmark = pytest.mark.timeout(120)

BIN = pathlib.Path(sys.executable).parent
AGENTWORKS = str(BIN / "agentworks")
READY_SECONDS = 60
READY_LINE = "AgentWorks is up."
CLI_SECONDS = 30


def free_port_block(count: int) -> int:
    """The first of `count` consecutive free TCP ports on 127.0.0.1."""
    for _ in range(200):
        base = random.randint(20000, 60000 - count)
        sockets = []
        try:
            for port in range(base, base + count):
                sock = socket.socket()
                sockets.append(sock)
                sock.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
    raise RuntimeError("no block of free ports found")


class Up:
    """`agentworks up` running in a temporary working directory, its output collected."""

    def __init__(self, cwd: pathlib.Path, base_port: int, http_port: int) -> None:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.endswith("DATABASE_URL") and k != "AGENTWORKS_INTERNAL_KEY"
        }
        env["PYTHONUNBUFFERED"] = "1"
        self.process = subprocess.Popen(
            [
                AGENTWORKS,
                "up",
                "--base-port",
                str(base_port),
                "--http-port",
                str(http_port),
                "--ready-timeout",
                str(READY_SECONDS - 10),
                "--stop-timeout",
                "10",
            ],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self.changed = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self.changed:
                self.lines.append(line.rstrip("\n"))
                self.changed.notify_all()
        with self.changed:
            self.changed.notify_all()

    def count(self, *fragments: str) -> int:
        """How many output lines so far contain every fragment."""
        return sum(all(f in line for f in fragments) for line in list(self.lines))

    def wait_for(self, *fragments: str, times: int = 1, timeout: float = 30) -> None:
        """Wait until `times` output lines contain every fragment (or fail with the output)."""
        with self.changed:
            ok = self.changed.wait_for(
                lambda: self.count(*fragments) >= times or self.process.poll() is not None,
                timeout,
            )
        assert ok and self.count(*fragments) >= times, (
            f"no {fragments} (x{times}) in the output:\n{self.output}"
        )

    @property
    def output(self) -> str:
        return "\n".join(self.lines[-80:])

    def wait_ready(self) -> None:
        self.wait_for(READY_LINE, timeout=READY_SECONDS)
        assert self.process.poll() is None, f"agentworks up exited:\n{self.output}"

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            code = self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait(10)
        self.reader.join(10)
        if self.process.stdout is not None:
            self.process.stdout.close()
        return code


def cli(cwd: pathlib.Path, *args: str) -> dict:
    """Run the `agentworks` CLI with `--json` in `cwd` and return its parsed output."""
    done = subprocess.run(
        [AGENTWORKS, *args, "--json"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=CLI_SECONDS,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, f"agentworks {' '.join(args)}: {done.stderr}{done.stdout}"
    return json.loads(done.stdout)


def health_status(address: str) -> int:
    with grpc.insecure_channel(address) as channel:
        response = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=""), timeout=5
        )
    return response.status


def get_target_code(address: str, metadata: tuple[tuple[str, str], ...]) -> grpc.StatusCode:
    with grpc.insecure_channel(address) as channel:
        stub = messaging_pb2_grpc.MessagingServiceStub(channel)
        try:
            stub.GetTarget(messaging_pb2.GetTargetRequest(), metadata=metadata, timeout=5)
        except grpc.RpcError as exc:
            return exc.code()
    return grpc.StatusCode.OK


def test_make_run_suite_serves_the_demo_crew_and_stops_cleanly_p2_p4_r2_c6_c7_a2_g3(
    tmp_path: pathlib.Path,
):
    """P2/P4/R2/C2/C6/C7/A2/G3: `agentworks up`, CLI send+read, health, auth, Ctrl-C."""
    base_port = free_port_block(len(GRPC_SERVICES) + 1)
    http_port = base_port + len(GRPC_SERVICES)
    up = Up(tmp_path, base_port, http_port)
    try:
        up.wait_ready()
        home = tmp_path / ".agentworks"
        config = json.loads((home / "cli.json").read_text())
        assert config["url"] == f"http://127.0.0.1:{http_port}"
        assert config["token"] == (home / "dev-token").read_text().strip()
        for secret in ("internal.key", "dev-token", "cli.json"):
            assert (home / secret).stat().st_mode & 0o077 == 0, f"{secret} is readable by others"

        # P4: every started service answers health checks.
        addresses = {
            spec.name: f"127.0.0.1:{base_port + index}"
            for index, spec in enumerate(GRPC_SERVICES)
            if has_main(spec.package)
        }
        assert "messaging" in addresses
        for name, address in addresses.items():
            assert health_status(address) == health_pb2.HealthCheckResponse.SERVING, name
        assert httpx.get(f"{config['url']}/healthz", timeout=5).status_code == 200

        # C2/C6/C7/R2 through the CLI: the demo runtime replies explicitly to the inbox.
        receipt = cli(tmp_path, "messages", "send", "--crew", "demo", "hello")
        assert receipt["accepted"] is True
        page = cli(tmp_path, "messages", "read", "--inbox", receipt["inbox_id"], "--wait", "10")
        assert [m["text"] for m in page["messages"]] == ["demo heard: hello"]
        assert page["messages"][0]["sender"] == "agent:demo/demo-bot"

        # A2: a direct call without a signed identity, or with a forged one, is refused.
        messaging = addresses["messaging"]
        assert get_target_code(messaging, ()) == grpc.StatusCode.UNAUTHENTICATED
        forged = mint("user:dev", secrets.token_urlsafe(32), roles={"operator"})
        assert (
            get_target_code(messaging, ((METADATA_KEY, forged),)) == grpc.StatusCode.UNAUTHENTICATED
        )

        # A child that dies is reported and restarted: the demo answers again afterwards.
        up.wait_for("demo-runtime", "worker.started")
        children = psutil.Process(up.process.pid).children(recursive=True)
        runtime = next(c for c in children if "agentworks.runtime" in " ".join(c.cmdline()))
        runtime.kill()
        up.wait_for("child.exited", "child=demo-runtime")
        up.wait_for("demo-runtime", "worker.started", times=2)
        again = cli(tmp_path, "messages", "send", "--inbox", receipt["inbox_id"], "again")
        assert again["conversation_id"] == receipt["conversation_id"]
        page = cli(
            tmp_path,
            "messages",
            "read",
            "--inbox",
            receipt["inbox_id"],
            "--after",
            page["next_cursor"],
            "--wait",
            "15",
        )
        assert [m["text"] for m in page["messages"]] == ["demo heard: again"]

        children = psutil.Process(up.process.pid).children(recursive=True)
        names = {line.split("|", 1)[0].strip() for line in up.lines if "|" in line}
        assert {"messaging-1", "gateway-1", "demo-runtime"} <= names
        postmaster = int((home / "pg" / "postmaster.pid").read_text().split()[0])
    finally:
        code = up.stop()

    # Ctrl-C stopped every child and the embedded PostgreSQL.
    assert code == 0, up.output
    left = [c.pid for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
    assert left == [], f"children still running: {left}"
    with contextlib.suppress(psutil.NoSuchProcess):
        psutil.Process(postmaster).wait(timeout=10)  # TimeoutExpired: PostgreSQL left running
