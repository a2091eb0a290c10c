"""End to end: `agentworks up` as `make run` starts it, then the real CLI against it.

One test, because bringing the suite up (embedded PostgreSQL, every service as its own
process, the demo runtimes) is the expensive part. It checks P2 (embedded PostgreSQL),
P4 (gRPC health), R2 (the demo crew used by `make run`: turns and functions),
C2/C6/C7 through the CLI (G3), F2/F4/F9/F10 (a demo function called as its owner runs in
its own folder and completes with its answer and result), S1/S2/C10 ("remind me": the
demo asks for a wake-up, the scheduler fires it, the follow-up arrives), A2 (unsigned
and forged identities are refused) and a clean Ctrl-C.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import grpc
import httpx
import psutil
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from agentworks.client import FunctionsClient, SchedulerClient
from agentworks.client.functions import call_result, state_name
from agentworks.core.identity import METADATA_KEY, Minter, mint
from agentworks.core.keys import KeyDirectory, SigningKey
from agentworks.core.trust import STANDARD_SIGNERS
from agentworks.messaging.v1 import messaging_pb2, messaging_pb2_grpc
from agentworks.scheduler.v1 import scheduler_pb2
from agentworks.server.testing import free_port_block
from agentworks_dev.up import GRPC_SERVICES, has_main

pytestmark = pytest.mark.timeout(120)

BIN = pathlib.Path(sys.executable).parent
AGENTWORKS = str(BIN / "agentworks")
READY_SECONDS = 60
READY_LINE = "AgentWorks is up."
CLI_SECONDS = 30
# A function call, claimed by the demo-funcs runtime, run, and finished (slack for load).
CALL_SECONDS = 45


class Up:
    """`agentworks up` running in a temporary working directory, its output collected."""

    def __init__(
        self,
        cwd: pathlib.Path,
        base_port: int,
        http_port: int,
        *args: str,
        environ: dict[str, str] | None = None,
        **extra_env: str,
    ) -> None:
        """`args`: more `agentworks up` flags; `environ` and `extra_env`: variables to add
        for it. Without
        `--metrics-port` in `args` the processes serve metrics on free ports of their own
        (the default, 9464 and up, would be shared by suites started at once)."""
        if "--metrics-port" not in args:
            args = (*args, "--metrics-port", str(free_port_block(12)))
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.endswith(("DATABASE_URL", "_SIGNING_KEY", "_TRUSTED_KEYS"))
            and not k.startswith(("AGENTWORKS_LLM_", "OPENAI_"))
        }
        env.update(environ or {})
        env.update(extra_env)
        env["PYTHONUNBUFFERED"] = "1"
        # The supervisor passes its environment on: the scheduler ticks every second.
        env["SCHEDULER_TICK_SECONDS"] = "1"
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
                *args,
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

    def grep(self, fragment: str, last: int = 60) -> str:
        """The last output lines that contain `fragment`."""
        return "\n".join([line for line in list(self.lines) if fragment in line][-last:])

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


def read_texts(cwd: pathlib.Path, inbox_id: str, count: int, after: str = "") -> list[str]:
    """Long-poll the inbox through the CLI until `count` messages arrived after `after`."""
    deadline = time.monotonic() + CLI_SECONDS
    texts: list[str] = []
    while len(texts) < count:
        assert time.monotonic() < deadline, f"only {texts} arrived"
        args = ["messages", "read", "--inbox", inbox_id, "--wait", "10"]
        page = cli(cwd, *args, *(["--after", after] if after else []))
        texts += [m["text"] for m in page["messages"]]
        after = page["next_cursor"] or after
    return texts


async def call_word_count(functions: str, key: SigningKey) -> tuple[list[str], Any]:
    """As the demo crew's owner (user:dev): list the functions and call word_count."""
    async with FunctionsClient(functions, identity=Minter("user:dev", key)) as owner:
        names = [fn.name for fn in await owner.list_functions("crew:demo")]
        receipt = await owner.call("crew:demo", "word_count", {"text": "to be or not to be"})
        status = await owner.wait(receipt.call_id, timeout=CALL_SECONDS)
        words = await owner.read_file_bytes(receipt.call_id, "words.txt")
    return names, (receipt, status, words)


async def wake_ups(scheduler: str, key: SigningKey, conversation_id: str) -> list:
    """The conversation's wake-ups, finished ones included, as an operator sees them."""
    operator = Minter("user:dev", key, roles={"operator"})
    async with SchedulerClient(scheduler, identity=operator) as client:
        page = await client.list_wake_ups(conversation_id=conversation_id, include_finished=True)
    return list(page.wake_ups)


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


def test_make_run_suite_serves_the_demo_crew_and_stops_cleanly_p2_p4_r2_c6_c7_a2_g3_t1(
    tmp_path: pathlib.Path,
):
    """P2/P4/R2/C2/C6/C7/A2/G3, F2/F4/F9/F10, S1/S2/C10, T1, T2: `agentworks up` (each
    service given its own signer's key only, the demo runtimes a runtime credential and no
    key), CLI send+read,
    a demo function call, a "remind me" wake-up, health, auth, the console's address
    (V3), Ctrl-C."""
    base_port = free_port_block(len(GRPC_SERVICES) + 1)
    http_port = base_port + len(GRPC_SERVICES)
    up = Up(tmp_path, base_port, http_port)
    try:
        up.wait_ready()
        home = tmp_path / ".agentworks"
        config = json.loads((home / "cli.json").read_text())
        assert config["url"] == f"http://127.0.0.1:{http_port}"
        assert config["token"] == (home / "dev-token").read_text().strip()
        keys = KeyDirectory(home / "keys")
        private = [keys.key_path(signer).relative_to(home) for signer in STANDARD_SIGNERS]
        kept = ("webhook.key", "dev-token", "cli.json", "runtime-credential")
        secrets: list[pathlib.Path | str] = [*private, *kept]
        for secret in secrets:
            assert (home / secret).stat().st_mode & 0o077 == 0, f"{secret} is readable by others"
        # T1: each service was given its own signer's key only; T2: the demo runtimes no
        # key at all, but the runtime credential and the gateway to exchange it at.
        credential = (home / "runtime-credential").read_text().strip()
        for runtime_name in ("demo-runtime", "demo-funcs"):  # they exchanged it and run
            up.wait_for(runtime_name, "worker.started")
        given, runtimes = {}, []
        for child in psutil.Process(up.process.pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                environ = child.environ()
                command = " ".join(child.cmdline()[1:])
                if "agentworks.runtime" in command:
                    runtimes.append(environ)
                if "AGENTWORKS_SIGNING_KEY" in environ:
                    given[command] = environ["AGENTWORKS_SIGNING_KEY"]
        expected = {
            "-m agentworks_messaging": "service:messaging",
            "-m agentworks_functions": "service:functions",
            "-m agentworks_scheduler": "service:scheduler",
            "-m agentworks_gateway": "gateway",
        }
        for command, signer in expected.items():
            assert given.get(command) == str(keys.key_path(signer)), (command, given)
        assert not [c for c in given if "agentworks.runtime" in c], given
        assert len(runtimes) == 2, up.output
        for environ in runtimes:
            assert not [k for k in environ if k.endswith(("_SIGNING_KEY", "_TRUSTED_KEYS"))]
            assert environ["AGENTWORKS_RUNTIME_CREDENTIAL"] == credential
            assert environ["AGENTWORKS_GATEWAY_URL"] == f"http://127.0.0.1:{http_port}"

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
        # V3: the banner names the console; it answers at / with its sign-in page.
        assert up.count(f"console   {config['url']}/") == 1
        console = httpx.get(f"{config['url']}/", timeout=5, follow_redirects=True)
        # Signed out, it redirects to its sign-in page (V7: a page, not a 401).
        assert console.status_code == 200 and "API token" in console.text
        assert console.url.path == "/console/sign-in"

        # C2/C6/C7/R2 through the CLI: the demo runtime replies explicitly to the inbox.
        receipt = cli(tmp_path, "messages", "send", "--crew", "demo", "hello")
        assert receipt["accepted"] is True
        page = cli(tmp_path, "messages", "read", "--inbox", receipt["inbox_id"], "--wait", "10")
        assert [m["text"] for m in page["messages"]] == ["demo heard: hello"]
        assert page["messages"][0]["sender"] == "agent:demo/demo-bot"
        assert up.count("agentworks crews call demo hello -i name=Ada --wait") == 1

        # F2/F4/F9/F10/R2: the owner calls a declared demo function; the demo-funcs
        # runtime runs it in its own folder; it completes with its answer and result.
        key = keys.load("gateway")
        try:
            names, (call, status, words) = asyncio.run(call_word_count(addresses["functions"], key))
        except Exception as exc:
            raise AssertionError(f"{exc!r}; function side:\n{up.grep('func')}") from exc
        assert sorted(names) == ["confirm", "hello", "word_count"]
        assert state_name(status.status) == "completed", status
        assert status.answer == "6 words, 18 characters"
        assert call_result(status) == {
            "words": 6,
            "characters": 18,
            "top": ["to", "be", "or", "not"],
        }
        assert {f.name for f in status.files} == {"result.json", "words.txt"}
        assert words == b"to\nbe\nor\nnot\nto\nbe\n"
        folder = home / "demo-project" / ".calls" / call.call_id
        assert (folder / "words.txt").read_bytes() == words

        # S1/S2/C6/C10: "remind me" -> the demo says it will check back and asks the
        # scheduler for a wake-up; the tick delivers it; the follow-up reaches the inbox.
        ask = "remind me in 1 s to stretch"
        reminder = cli(tmp_path, "messages", "send", "--crew", "demo", ask)
        assert read_texts(tmp_path, reminder["inbox_id"], 2) == [
            f"demo heard: {ask}. I will check back in 1 s.",
            f"demo checking back: {ask}",
        ]
        [wake_up] = asyncio.run(wake_ups(addresses["scheduler"], key, reminder["conversation_id"]))
        assert wake_up.status == scheduler_pb2.WAKE_UP_STATUS_FIRED
        assert wake_up.created_by == "agent:demo/demo-bot" and wake_up.product == "crew:demo"

        # A2: a direct call without a signed identity, or with a forged one, is refused.
        messaging = addresses["messaging"]
        assert get_target_code(messaging, ()) == grpc.StatusCode.UNAUTHENTICATED
        forged = mint("user:dev", SigningKey.generate("gateway"), roles={"operator"})
        assert (
            get_target_code(messaging, ((METADATA_KEY, forged),)) == grpc.StatusCode.UNAUTHENTICATED
        )

        # A child that dies is reported and restarted: the demo answers again afterwards.
        up.wait_for("demo-runtime", "worker.started")
        children = psutil.Process(up.process.pid).children(recursive=True)
        runtime = next(c for c in children if c.cmdline()[-2:] == ["agentworks.runtime", "demo"])
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
        shown = {line.split("|", 1)[0].strip() for line in up.lines if "|" in line}
        assert {"messaging-1", "functions-1", "scheduler-1", "gateway-1"} <= shown
        assert {"demo-runtime", "demo-funcs"} <= shown
        postmaster = int((home / "pg" / "postmaster.pid").read_text().split()[0])
    finally:
        code = up.stop()

    # Ctrl-C stopped every child and the embedded PostgreSQL.
    assert code == 0, up.output
    left = [c.pid for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
    assert left == [], f"children still running: {left}"
    with contextlib.suppress(psutil.NoSuchProcess):
        psutil.Process(postmaster).wait(timeout=10)  # TimeoutExpired: PostgreSQL left running
