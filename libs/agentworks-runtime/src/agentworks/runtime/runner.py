"""The command runner: each call runs a declared command in `.calls/<call_id>/` (R2).

Configuration is a mapping from function name to a command: an argv list, run as it is
(no shell), or a string, run by `/bin/sh -c` (pipes, `;`, `&&`, `$VAR` and the exit
status of the whole line, as in a terminal). The call's inputs never become part of the
command line; they arrive in the environment (below), so a string stays the operator's:

    {"word_count": ["python", "-m", "tools.word_count"],
     "hello": "echo hello from $AGENTWORKS_CALL_ID; exit 3"}

or that mapping under `commands`, beside limits, network and read-only paths for all
targets and per target (`command_config`, `limits`: T7).

Every command runs in a sandbox of its own (`sandbox.Sandbox`, bubblewrap: T6) with the
limits of its target, which the runner watches (`watch.Watch`); past one, the whole
sandbox is ended at once and the execution fails with `LimitExceeded`, naming it. A
runner without a working sandbox refuses to start (`sandbox.SandboxUnavailable`) unless
given `sandbox="none"` (`--sandbox none`), which `sandbox.WITHOUT_SANDBOX` says what it
gives up.

For each execution the runner starts the function's command with:

- working directory `<root>/.calls/<call_id>/` (created; the call's private output folder)
- `FUNCTION_RESULT_FILE`: absolute path of `result.json` in that folder (F10)
- `AGENTWORKS_CALL_ID`, `AGENTWORKS_FUNCTION`, `AGENTWORKS_TARGET`, `AGENTWORKS_CALLER`
- `AGENTWORKS_INPUTS`: the checked inputs as JSON
- `AGENTWORKS_OUTPUT_FOLDER`: the folder's absolute path, `AGENTWORKS_PROJECT_ROOT`: root
- `AGENTWORKS_CORRECTION_PROMPT`: only in the one correction turn (F10), which runs the
  command again in the same folder
- `AGENTWORKS_CAPABILITY`: the execution's capability (T3), an identity that allows this
  call's own operations (report, upload, ask, finish, heartbeat) and nothing else, and
  `AGENTWORKS_CAPABILITY_FILE`: the file in the folder (mode 0600) that holds the current
  one, rewritten at each heartbeat as the lease renews and removed when the command ends
  (`agentworks.client.capability_identity.CapabilityIdentity` reads it). Set only when
  the service issued one (the runtime is an agent or workflow).

The command never gets the runner's own credentials: its signing key, runtime
credential, API token and TLS private key are not in its environment (`is_secret`).

Each stdout line becomes an execution message (role `stdout`, batched); the last
non-empty stdout line is the final message. A line longer than `MAX_LINE_BYTES` is cut
(with a note saying so), and NUL characters, which the service cannot store, become
U+FFFD, in stdout lines and the stderr tail alike. Every regular file left in the folder is
uploaded when the command ends (successful or not), `result.json` first, by the
`ExecutionWorker` as for any handler (`executions.upload_folder`); a file the service
refuses (a name with a backslash or a control character, too big, past the call's
`MAX_FILES_PER_CALL`) is skipped, logged and named in one message (role `runner`) on
the call. Exit status 0 finishes the execution; any other status (or a
signal) fails it with the status and the tail of stderr. A cancel (F15) or a lost lease
terminates the command's process group (SIGTERM, then SIGKILL); in a sandbox every
process of it gets the SIGTERM, whatever its group.

A command never outlives its runner for long while it runs, even when the runner is
killed with SIGKILL or crashes (its execution is then `interrupted`, F12, and nobody
wants the work). In a sandbox, nothing of an execution outlives it: when the command's
first process has ended (and nothing it started holds its output open), the sandbox
ends, and the kernel kills every process left in its PID namespace, `setsid` and double
forks included; bubblewrap's `--die-with-parent` ends it with its runner too. Without a
sandbox, processes a command leaves running after it has ended (`nohup x >log 2>&1 &`,
its output redirected) are not tracked. Either way the mechanisms below hold:

- The runner's watchdog (`_watchdog.py`), a small process of its own started with the
  first command, is told each command's process group when it starts and ends. It
  learns of the runner's death, however it happens, from end of file on the pipe only
  the runner writes to (the kernel closes it; a child the runner forks, multiprocessing
  included, closes its copy at once), and kills the groups still running.
- Each running command also has a record in `<root>/.calls/.runner/` (outside every
  call's folder, so never uploaded), removed when the command ends. A runner starting
  on a root (the `run-commands` CLI at once, a `CommandRunner` at its first call there)
  kills the groups in records whose runner is gone: the backstop when the watchdog died
  with its runner (`kill -9` of both, the OOM killer).
- A group is killed only while it is provably the recorded one: its leader's start time
  (from /proc/<pid>/stat) is recorded with it, so a pid the system has given out again
  is left alone. A record of a runner that is still alive (another runner on the same
  root) is left alone too. Pids and start times mean something only within one boot
  and one pid namespace, both recorded too: a record from another boot (a reboot, a
  restarted container with the root on a volume) is just removed, and one from another
  pid namespace (a runner in another container on the same root) is left alone.

Why not PR_SET_PDEATHSIG: it reaches only the direct child, not what a shell script
started; setting it between fork and exec needs `preexec_fn`, which is unsafe in a
process with threads (grpc has them); and it fires when the *thread* that started the
child ends, not the process. A pipe's end of file has none of these problems. The
watchdog runs in its own session, so a signal to the runner's process group (a
terminal's Ctrl-C, `kill -9 -PGID`) leaves it alive to clean up. Without a sandbox,
what a command moves out of its process group (`setsid`, a double fork into a new
session) is beyond reach, as for a cancel; and the record-less instant between a
command's start and its record (microseconds) is not covered. Linux only: elsewhere
the watchdog trusts its own tracking and the startup sweep does nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pathlib
import signal
from collections.abc import Mapping, Sequence
from typing import Any

import structlog

from agentworks.client.capability import CAPABILITY_FILE_VARIABLE, CAPABILITY_VARIABLE
from agentworks.runtime import _watchdog, capability_file, cgroups, metrics
from agentworks.runtime.command_config import (
    SHELL,
    RunnerConfig,
    load_commands,
    load_runner_config,
    parse_commands,
    parse_runner_config,
)
from agentworks.runtime.executions import ExecutionContext
from agentworks.runtime.guard import RECORDS_FOLDER, _guard, reap_orphans
from agentworks.runtime.limits import LimitExceeded, Policy
from agentworks.runtime.line_reports import (
    FLUSH_SECONDS,
    MAX_LINE_BYTES,
    MAX_LINES_PER_REPORT,
    MAX_REPORTED_LINES,
    STDERR_TAIL_BYTES,
    _last_bytes,
    _LineReporter,
    _tail,
    _text,
)
from agentworks.runtime.sandbox import WITHOUT_SANDBOX, Launch, Sandbox
from agentworks.runtime.watch import TICK_SECONDS, Watch

log = structlog.get_logger("agentworks.runtime.runner")

# The runner's own secrets, never handed to a command: where its signing key is (whoever
# reads the key can act as any agent, T1), its runtime credential (T2), API tokens, the
# webhook key and database addresses (with passwords). A command's stdout becomes
# messages its caller reads, so what it can see it can tell. It gets the execution's
# capability instead (T3).
SECRET_VARIABLES = frozenset(
    {"AGENTWORKS_SIGNING_KEY", "AGENTWORKS_RUNTIME_CREDENTIAL", "AGENTWORKS_TOKEN"}
    | {"AGENTWORKS_RUNTIME_CREDENTIAL_FILE", "SCHEDULER_WEBHOOK_KEY", "DATABASE_URL"}
)

# The runner's TLS private key (T5) is its own too: a command has no business with it.
SECRET_SUFFIXES = (
    "_SIGNING_KEY",
    "_SIGNING_KEY_FILE",
    "_RUNTIME_CREDENTIAL",
    "_RUNTIME_CREDENTIAL_FILE",
    "_WEBHOOK_KEY",
    "_DATABASE_URL",
    "_TLS_KEY_FILE",
)


def is_secret(name: str) -> bool:
    """Whether the runner's variable `name` is kept from its commands."""
    return name in SECRET_VARIABLES or name.endswith(SECRET_SUFFIXES)


def secret_files(environ: Mapping[str, str]) -> list[str]:
    """The files the secret variables of `environ` name (a signing key, a runtime
    credential, a TLS key): the sandbox hides them where it would show them."""
    found = []
    for name, value in environ.items():
        if is_secret(name) and value:
            with contextlib.suppress(OSError, ValueError):
                if os.path.exists(value):
                    found.append(os.path.abspath(value))
    return found


class CommandFailed(Exception):
    """The command exited with a non-zero status or was killed by a signal."""


class CommandRunner:
    """An execution handler that runs the declared command for each call."""

    def __init__(
        self,
        commands: Mapping[str, Sequence[str]],
        *,
        env: Mapping[str, str] | None = None,
        kill_grace_seconds: float = 5.0,
        sandbox: Sandbox | str = "bwrap",
        policy: Policy | None = None,
        targets: Mapping[str, Policy] | None = None,
        hidden: Sequence[str] | None = None,
    ) -> None:
        """`sandbox`: a `Sandbox`, "bwrap" (the default one) or "none" (no sandbox:
        `WITHOUT_SANDBOX` says what that gives up). A sandbox is checked here: without
        a working one, `SandboxUnavailable`. `policy`: limits, network and read-only
        paths of every target, `targets`: of some (`limits`). `hidden`: files the sandbox
        must not show (default: those the runner's secret variables name)."""
        self.commands = parse_commands(dict(commands))
        self.env = dict(env or {})
        self.kill_grace_seconds = kill_grace_seconds
        self.policy = policy or Policy()
        self.targets = dict(targets or {})
        self.hidden = list(secret_files(os.environ) if hidden is None else hidden)
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

    @classmethod
    def from_config(cls, config: RunnerConfig, **kwargs: Any) -> CommandRunner:
        """A runner for a `RunnerConfig` (`load_runner_config`)."""
        return cls(config.commands, policy=config.policy, targets=config.targets, **kwargs)

    def policy_for(self, target: str) -> Policy:
        """The limits, network and read-only paths of `target`'s executions."""
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

    def environment(self, ctx: ExecutionContext) -> dict[str, str]:
        """The command's environment for one execution: the runner's own, without its
        secrets (`is_secret`), then the configured `env`, then the call's variables."""
        env = {name: value for name, value in os.environ.items() if not is_secret(name)}
        env.update(self.env)
        env.update(
            FUNCTION_RESULT_FILE=str(ctx.result_file),
            AGENTWORKS_CALL_ID=ctx.call_id,
            AGENTWORKS_FUNCTION=ctx.function,
            AGENTWORKS_TARGET=ctx.target,
            AGENTWORKS_CALLER=ctx.caller,
            AGENTWORKS_INPUTS=json.dumps(ctx.inputs),
            AGENTWORKS_OUTPUT_FOLDER=str(ctx.output_dir),
            AGENTWORKS_PROJECT_ROOT=str(ctx.root),
        )
        env.pop("AGENTWORKS_CORRECTION_PROMPT", None)
        if ctx.correction_prompt:
            env["AGENTWORKS_CORRECTION_PROMPT"] = ctx.correction_prompt
        env.pop(CAPABILITY_VARIABLE, None)
        env.pop(CAPABILITY_FILE_VARIABLE, None)
        if ctx.capability:
            env[CAPABILITY_VARIABLE] = ctx.capability
            env[CAPABILITY_FILE_VARIABLE] = str(ctx.output_dir / capability_file.FILE_NAME)
        return env

    async def __call__(self, ctx: ExecutionContext) -> str:
        argv = self.commands.get(ctx.function)
        if argv is None:
            raise CommandFailed(
                f"no command is configured for function {ctx.function!r}; configured: "
                f"{sorted(self.commands)}"
            )
        if ctx.root.resolve() not in self._swept:
            await asyncio.to_thread(self.reap_orphans, ctx.root)
        if ctx.capability:  # written once the sandbox says whose it must be (_launch)
            ctx.capability_file = ctx.output_dir / capability_file.FILE_NAME
        try:
            return await self._launch(ctx, argv)
        finally:
            if ctx.capability_file is not None:
                capability_file.remove(ctx.capability_file)
                ctx.capability_file = None

    async def _launch(self, ctx: ExecutionContext, argv: Sequence[str]) -> str:
        policy = self.policy_for(ctx.target)
        ctx.upload_limit_bytes = policy.limits.output_bytes
        env = self.environment(ctx)
        launch: Launch | None = None
        program: Sequence[str] = argv
        if self.sandbox is not None:
            launch = await asyncio.to_thread(
                metrics.counting_failure("prepare", self.sandbox.prepare),
                argv,
                root=ctx.root.resolve(),
                output_dir=ctx.output_dir.resolve(),
                policy=policy,
                env=env,
                name=f"{os.getpid()}-{ctx.call_id}-{ctx._round}",
                hidden=self.hidden,
            )
            ctx.file_owner = launch.file_owner
            program, env = launch.argv, launch.env
        if ctx.capability_file is not None:
            capability_file.write(ctx.capability_file, ctx.capability, owner=ctx.file_owner)
        try:
            process = await asyncio.create_subprocess_exec(
                *program,
                cwd=ctx.output_dir,
                env=env,
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
            return await self._run(ctx, argv, process, policy, launch)
        finally:
            if launch is not None and launch.cgroups is not None:
                await asyncio.to_thread(launch.cgroups.remove)

    async def _run(
        self,
        ctx: ExecutionContext,
        argv: Sequence[str],
        process: asyncio.subprocess.Process,
        policy: Policy,
        launch: Launch | None,
    ) -> str:
        guard = _guard()
        guard.track(process.pid, ctx, argv, self.kill_grace_seconds)
        ctx.log.info("command.started", argv=list(argv), pid=process.pid, sandbox=bool(launch))
        watch = Watch(
            policy.limits,
            top=process.pid,
            output_dir=ctx.output_dir,
            cgroups=None if launch is None else launch.cgroups,
            overhead=0 if launch is None else 2,  # bubblewrap's init and _sandbox_init.py
        )
        lines = _LineReporter(ctx)
        stderr_tail = bytearray()
        ended = asyncio.Event()
        status: dict[str, Any] | None = None
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(lines.read(process.stdout))
                group.create_task(_tail(process.stderr, stderr_tail))
                group.create_task(lines.flush_periodically())
                group.create_task(self._watch(watch, process, ended, ctx))
                returncode = await process.wait()
                ended.set()
                lines.closed.set()
        except BaseExceptionGroup as failed:
            await self._terminate(process, ctx, watch if launch else None)
            raise failed.exceptions[0] from None  # the reason, not "unhandled errors in a..."
        except BaseException:
            await self._terminate(process, ctx, watch if launch else None)
            raise
        finally:
            guard.untrack(process.pid)  # the worker uploads what is left in the folder
            if launch is not None:
                status = _read_status(launch.status_read)
        ctx.log.info("command.exited", returncode=returncode, status=status)
        tail = _last_bytes(_text(bytes(stderr_tail)), STDERR_TAIL_BYTES).strip()
        limit = await asyncio.to_thread(watch.final, status)
        if limit is not None:
            ctx.log.warning("command.limit_exceeded", limit=limit.limit, error=str(limit))
            raise limit
        if launch is not None:
            if status is None or "error" in status:
                metrics.SANDBOX_FAILURES.labels("sandbox" if status is None else "exec").inc()
            if status is None:
                raise CommandFailed(
                    f"the sandbox did not run command {argv[0]} (bubblewrap exited with "
                    f"status {returncode})" + (f": {tail}" if tail else "")
                )
            if "error" in status:
                raise CommandFailed(f"command {argv[0]} could not start: {status['error']}")
            returncode = int(status.get("returncode", returncode))
        if returncode != 0:
            how = (
                f"was killed by signal {-returncode}"
                if returncode < 0
                else f"exited with status {returncode}"
            )
            raise CommandFailed(f"command {argv[0]} {how}" + (f": {tail}" if tail else ""))
        return lines.last_line

    async def _watch(
        self,
        watch: Watch,
        process: asyncio.subprocess.Process,
        ended: asyncio.Event,
        ctx: ExecutionContext,
    ) -> None:
        """Check the execution's limits every tick; past one, end it at once (all of its
        sandbox): the command's end then says which (`Watch.final`)."""
        while not ended.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(ended.wait(), TICK_SECONDS)
                return
            if await asyncio.to_thread(watch.check) is not None:
                ctx.log.info("command.stopping", reason="limit", pid=process.pid)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                return

    async def _terminate(
        self, process: asyncio.subprocess.Process, ctx: ExecutionContext, watch: Watch | None
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
        ctx.log.info("command.terminating", pid=pgid)
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


__all__ = [
    "FLUSH_SECONDS",
    "MAX_LINES_PER_REPORT",
    "MAX_LINE_BYTES",
    "MAX_REPORTED_LINES",
    "RECORDS_FOLDER",
    "SHELL",
    "CommandFailed",
    "CommandRunner",
    "LimitExceeded",
    "RunnerConfig",
    "load_commands",
    "load_runner_config",
    "parse_commands",
    "parse_runner_config",
    "reap_orphans",
]
