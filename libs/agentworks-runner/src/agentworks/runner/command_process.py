"""One declared command run to its end, in its sandbox, within its limits (R2, T6, T7).

The part the command runner's executions (`runner.CommandRunner`) and turns
(`turn_runner.TurnCommandRunner`) share: the sandbox made and checked, a command
started in it with its policy's limits watched, its stdout lines handed to a sink, its
whole sandbox ended on a cancel or past a limit, and how it ended read from the
sandbox's init. `runner.py`'s docstring says how each part works.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import itertools
import json
import os
import pathlib
import shutil
import signal
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from agentworks.runner import _watchdog, cgroups
from agentworks.runner.guard import _guard, reap_orphans
from agentworks.runner.limits import Policy
from agentworks.runner.line_reports import STDERR_TAIL_BYTES, _last_bytes, _tail, _text
from agentworks.runner.sandbox import WITHOUT_SANDBOX, Launch, Sandbox
from agentworks.runner.watch import TICK_SECONDS, Watch, runner_files_bytes
from agentworks.runtime import metrics

log = structlog.get_logger("agentworks.runner.runner")

# Where a sandboxed command finds its item's MCP socket (L2): short and the same for all.
SANDBOX_SOCKET = "/run/agentworks/mcp.sock"

# A failed command's stderr kept for its owner (L12): at most its last lines and bytes.
STDERR_EVENT_LINES = 40


class CommandFailed(Exception):
    """The command exited with a non-zero status or was killed by a signal. `summary`
    says so without the stderr tail the message may end with."""

    def __init__(self, message: str, *, summary: str = "") -> None:
        super().__init__(message)
        self.summary = summary or message


class Job(Protocol):
    """What a command runs for: an execution (`ExecutionContext`) or a turn (`TurnJob`)."""

    @property
    def root(self) -> pathlib.Path: ...

    @property
    def call_id(self) -> str: ...  # the item's id, in the runner's records

    @property
    def output_dir(self) -> pathlib.Path: ...  # its folder, the working directory

    @property
    def log(self) -> Any: ...


class Lines(Protocol):
    """Where a command's stdout goes (execution messages, or a turn's log)."""

    closed: asyncio.Event
    last_line: str

    async def read(self, stream: asyncio.StreamReader | None) -> None: ...

    async def flush_periodically(self) -> None: ...


@dataclass
class Prepared:
    """A command ready to start: what to run, with what, and whose its files are."""

    argv: Sequence[str]  # as configured, for messages
    program: Sequence[str]  # what is started (bubblewrap and its arguments, in a sandbox)
    env: dict[str, str]
    launch: Launch | None
    file_owner: int | None  # the uid the command's files have (None: this process's)
    sandboxed: bool
    started: bool = False  # its launch's descriptors and cgroups are start_and_run's now
    stderr_tail: str = ""  # once it has ended: the end of its stderr (`stderr_tail`)
    allowance: int = 0  # bytes of the runner's own files in the output folder at start


class ProcessRunner:
    """Runs commands in sandboxes (or without, when told) with per-target policies."""

    def __init__(
        self,
        *,
        env: Any = None,
        kill_grace_seconds: float = 5.0,
        sandbox: Sandbox | str = "bwrap",
        policy: Policy | None = None,
        targets: Any = None,
        hidden: Sequence[str] = (),
    ) -> None:
        self.env = dict(env or {})
        self.kill_grace_seconds = kill_grace_seconds
        self.policy = policy or Policy()
        self.targets = dict(targets or {})
        self.hidden = list(hidden)
        if sandbox == "none":
            self.sandbox: Sandbox | None = None
            self.sandbox_description = "none: " + WITHOUT_SANDBOX
            log.warning("sandbox.disabled", gives_up=WITHOUT_SANDBOX)
        else:
            self.sandbox = Sandbox() if sandbox == "bwrap" else sandbox  # type: ignore[assignment]
            if not isinstance(self.sandbox, Sandbox):
                raise ValueError(f"sandbox must be a Sandbox, 'bwrap' or 'none', got {sandbox!r}")
            self.sandbox_description = self.sandbox.check()
        self._swept: set[pathlib.Path] = set()
        self._sockets: pathlib.Path | None = None
        self._socket_numbers = itertools.count(1)

    def mcp_socket(self) -> tuple[pathlib.Path, str]:
        """A new MCP socket's place: on the host, in a folder of this runner's own
        (0700, short, so within a socket address's 107 bytes; no sandbox shows it), and
        where the command sees it (`SANDBOX_SOCKET` in a sandbox, bound there alone)."""
        if self._sockets is None:
            self._sockets = pathlib.Path(tempfile.mkdtemp(prefix="agentworks-mcp-"))
            atexit.register(shutil.rmtree, self._sockets, True)
        host = self._sockets / f"{next(self._socket_numbers)}.sock"
        return host, SANDBOX_SOCKET if self.sandbox is not None else str(host)

    def policy_for(self, target: str) -> Policy:
        """The limits, network and read-only paths of `target`'s commands."""
        return self.targets.get(target, self.policy)

    def reap_orphans(self, root: pathlib.Path | str) -> list[int]:
        """Kill the commands runners that died left running under `root`, once per root
        (`reap_orphans`); the process groups killed. Blocks up to the kill grace."""
        root = pathlib.Path(root).resolve()
        if root in self._swept:
            return []
        if not self._swept and self.sandbox is not None:
            cgroups.sweep()
        self._swept.add(root)
        return reap_orphans(root, grace=self.kill_grace_seconds)

    async def prepare(
        self,
        job: Job,
        argv: Sequence[str],
        env: dict[str, str],
        policy: Policy,
        name: str,
        socket: tuple[pathlib.Path, str] | None = None,
    ) -> Prepared:
        """The sandbox of one command made (its folder given to the sandbox's user);
        `socket`: its MCP socket (`mcp_socket`), shown to it alone."""
        if job.root.resolve() not in self._swept:
            await asyncio.to_thread(self.reap_orphans, job.root)
        if self.sandbox is None:
            return Prepared(argv, argv, env, None, None, False)
        launch = await asyncio.to_thread(
            metrics.counting_failure("prepare", self.sandbox.prepare),
            argv,
            root=job.root.resolve(),
            output_dir=job.output_dir.resolve(),
            policy=policy,
            env=env,
            name=name,
            hidden=self.hidden,
            binds=[] if socket is None else [(str(socket[0]), socket[1])],
        )
        return Prepared(argv, launch.argv, launch.env, launch, launch.file_owner, True)

    async def discard(self, prepared: Prepared) -> None:
        """Give up a prepared command that did not start (nothing when it did)."""
        launch = prepared.launch
        if launch is not None and not prepared.started:
            prepared.started = True
            for fd in (launch.status_fd, launch.status_read):
                with contextlib.suppress(OSError):
                    os.close(fd)
            if launch.cgroups is not None:
                await asyncio.to_thread(launch.cgroups.remove)

    async def start_and_run(
        self, job: Job, prepared: Prepared, policy: Policy, lines: Lines
    ) -> str:
        """Start the prepared command and run it to its end; its last stdout line.
        `CommandFailed` or `LimitExceeded` when it did not end well."""
        launch = prepared.launch
        prepared.started = True
        # The runner's own files are there already: they are not the command's output.
        prepared.allowance = await asyncio.to_thread(runner_files_bytes, job.output_dir)
        try:
            process = await asyncio.create_subprocess_exec(
                *prepared.program,
                cwd=job.output_dir,
                env=prepared.env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,  # its own process group, so a cancel stops it all
                pass_fds=() if launch is None else (launch.status_fd,),
            )
        except BaseException:
            metrics.SANDBOX_FAILURES.labels("spawn").inc()
            if launch is not None:
                os.close(launch.status_read)
                if launch.cgroups is not None:
                    await asyncio.to_thread(launch.cgroups.remove)
            raise
        finally:
            if launch is not None:
                os.close(launch.status_fd)
        metrics.SANDBOX_LAUNCHES.labels("none" if launch is None else "bwrap").inc()
        try:
            return await self._run(job, prepared, process, policy, lines)
        finally:
            if launch is not None and launch.cgroups is not None:
                await asyncio.to_thread(launch.cgroups.remove)

    async def _run(
        self,
        job: Job,
        prepared: Prepared,
        process: asyncio.subprocess.Process,
        policy: Policy,
        lines: Lines,
    ) -> str:
        argv, launch = prepared.argv, prepared.launch
        guard = _guard()
        guard.track(process.pid, job, argv, self.kill_grace_seconds)
        job.log.info("command.started", argv=list(argv), pid=process.pid, sandbox=bool(launch))
        watch = Watch(
            policy.limits,
            top=process.pid,
            output_dir=job.output_dir,
            cgroups=None if launch is None else launch.cgroups,
            overhead=0 if launch is None else 2,  # bubblewrap's init and _sandbox_init.py
            allowance=prepared.allowance,
        )
        stderr_tail = bytearray()
        ended = asyncio.Event()
        status: dict[str, Any] | None = None
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(lines.read(process.stdout))
                group.create_task(_tail(process.stderr, stderr_tail))
                group.create_task(lines.flush_periodically())
                group.create_task(self._watch(watch, process, ended, job))
                returncode = await process.wait()
                ended.set()
                lines.closed.set()
        except BaseExceptionGroup as failed:
            await self._terminate(process, job, watch if launch else None)
            raise failed.exceptions[0] from None  # the reason, not "unhandled errors in a..."
        except BaseException:
            await self._terminate(process, job, watch if launch else None)
            raise
        finally:
            guard.untrack(process.pid)  # the worker uploads what is left in the folder
            if launch is not None:
                status = _read_status(launch.status_read)
        job.log.info("command.exited", returncode=returncode, status=status)
        tail = _last_bytes(_text(bytes(stderr_tail)), STDERR_TAIL_BYTES).strip()
        prepared.stderr_tail = stderr_tail_text(tail)
        limit = await asyncio.to_thread(watch.final, status)
        if limit is not None:
            job.log.warning("command.limit_exceeded", limit=limit.limit, error=str(limit))
            raise limit
        if launch is not None:
            if status is None or "error" in status:
                metrics.SANDBOX_FAILURES.labels("sandbox" if status is None else "exec").inc()
            if status is None:
                summary = (
                    f"the sandbox did not run command {argv[0]} (bubblewrap exited with "
                    f"status {returncode})"
                )
                raise CommandFailed(summary + (f": {tail}" if tail else ""), summary=summary)
            if "error" in status:
                raise CommandFailed(f"command {argv[0]} could not start: {status['error']}")
            returncode = int(status.get("returncode", returncode))
        if returncode != 0:
            how = (
                f"was killed by signal {-returncode}"
                if returncode < 0
                else f"exited with status {returncode}"
            )
            summary = f"command {argv[0]} {how}"
            raise CommandFailed(summary + (f": {tail}" if tail else ""), summary=summary)
        return lines.last_line

    async def _watch(
        self,
        watch: Watch,
        process: asyncio.subprocess.Process,
        ended: asyncio.Event,
        job: Job,
    ) -> None:
        """Check the command's limits every tick; past one, end it at once (all of its
        sandbox): the command's end then says which (`Watch.final`)."""
        while not ended.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(ended.wait(), TICK_SECONDS)
                return
            if await asyncio.to_thread(watch.check) is not None:
                job.log.info("command.stopping", reason="limit", pid=process.pid)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                return

    async def _terminate(
        self, process: asyncio.subprocess.Process, job: Job, watch: Watch | None
    ) -> None:
        """Stop the command's whole process group: SIGTERM, then SIGKILL after the grace.

        In a sandbox (`watch` given), SIGTERM goes to every process of the sandbox (what
        left the group included), and after the grace SIGKILL to the group, which holds
        bubblewrap and the sandbox's init: the kernel then kills the rest.

        The leader may have exited already while a process it started runs on (holding
        its output open, so the command is not over): the group is signalled all the
        same. Its id cannot be another group's: Linux gives no pid out again while a
        process group of that id exists.
        """
        pgid = process.pid
        if process.returncode is not None and not _watchdog.group_running(pgid):
            return
        job.log.info("command.terminating", pid=pgid)
        if watch is not None:
            await self._terminate_sandbox(process, watch)
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.kill_grace_seconds
        try:
            await asyncio.wait_for(asyncio.shield(process.wait()), self.kill_grace_seconds)
            # The leader is gone; what it started has the rest of the grace to end.
            while loop.time() < deadline:
                if not _watchdog.group_running(pgid):
                    break
                await asyncio.sleep(0.05)
        except (TimeoutError, asyncio.CancelledError):
            pass
        if _watchdog.group_running(pgid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)

    async def _terminate_sandbox(self, process: asyncio.subprocess.Process, watch: Watch) -> None:
        for pid in await asyncio.to_thread(watch.members):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGTERM)
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(process.wait()), self.kill_grace_seconds)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)


def stderr_tail_text(text: str) -> str:
    """The end of a command's stderr as its owner reads it (L12): its last
    `STDERR_EVENT_LINES` lines of at most `STDERR_TAIL_BYTES`, as the command wrote them."""
    return "\n".join(text.splitlines()[-STDERR_EVENT_LINES:]).strip()


def _read_status(fd: int) -> dict[str, Any] | None:
    """What the sandbox's init reported (`_sandbox_init.py`), read once it has ended;
    None when it said nothing (it never ran, or was killed). Closes `fd`."""
    data = b""
    try:
        os.set_blocking(fd, False)
        while len(data) < 65536:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            data += chunk
    except OSError:  # BlockingIOError: something still holds it; what came is enough
        pass
    finally:
        os.close(fd)
    for line in reversed(data.splitlines()):
        with contextlib.suppress(ValueError):
            status = json.loads(line)
            if isinstance(status, dict):
                return status
    return None
