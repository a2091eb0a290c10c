"""The command runner: each call runs a declared command in `.calls/<call_id>/` (R2).

Configuration is a mapping from function name to a command: an argv list, run as it is
(no shell), or a string, run by `/bin/sh -c` (pipes, `;`, `&&`, `$VAR` and the exit
status of the whole line, as in a terminal). The call's inputs never become part of the
command line; they arrive in the environment (below), so a string stays the operator's:

    {"word_count": ["python", "-m", "tools.word_count"],
     "hello": "echo hello from $AGENTWORKS_CALL_ID; exit 3"}

For each execution the runner starts the function's command with:

- working directory `<root>/.calls/<call_id>/` (created; the call's private output folder)
- `FUNCTION_RESULT_FILE`: absolute path of `result.json` in that folder (F10)
- `AGENTWORKS_CALL_ID`, `AGENTWORKS_FUNCTION`, `AGENTWORKS_TARGET`, `AGENTWORKS_CALLER`
- `AGENTWORKS_INPUTS`: the checked inputs as JSON
- `AGENTWORKS_OUTPUT_FOLDER`: the folder's absolute path, `AGENTWORKS_PROJECT_ROOT`: root
- `AGENTWORKS_CORRECTION_PROMPT`: only in the one correction turn (F10), which runs the
  command again in the same folder

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
terminates the command's process group (SIGTERM, then SIGKILL).

A command never outlives its runner for long while it runs, even when the runner is
killed with SIGKILL or crashes (its execution is then `interrupted`, F12, and nobody
wants the work). This covers the command while it runs: processes a command leaves
running after it has ended (`nohup x >log 2>&1 &`, its output redirected) are not
tracked; a function that starts work may do that on purpose (F9).

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
terminal's Ctrl-C, `kill -9 -PGID`) leaves it alive to clean up. What a command moves
out of its process group (`setsid`, a double fork into a new session) is beyond reach,
as for a cancel; and the record-less instant between a command's start and its record
(microseconds) is not covered. Linux only: elsewhere the watchdog trusts its own
tracking and the startup sweep does nothing.
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

from agentworks.runtime import _watchdog
from agentworks.runtime.executions import (
    ExecutionContext,
)
from agentworks.runtime.guard import RECORDS_FOLDER, _guard, reap_orphans
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

log = structlog.get_logger("agentworks.runtime.runner")

# Runs a command given as a string (the shell form).
SHELL = "/bin/sh"

# The runner's own secrets, never handed to a command: where its signing key is (whoever
# reads the key can act as any agent, T1), its runtime credential (T2), API tokens, the
# webhook key and database addresses (with passwords). A command's stdout becomes
# messages its caller reads, so what it can see it can tell.
SECRET_VARIABLES = frozenset(
    {
        "AGENTWORKS_SIGNING_KEY",
        "AGENTWORKS_RUNTIME_CREDENTIAL",
        "AGENTWORKS_RUNTIME_CREDENTIAL_FILE",
        "AGENTWORKS_TOKEN",
        "SCHEDULER_WEBHOOK_KEY",
        "DATABASE_URL",
    }
)

# The runner's TLS private key (T5) is its own too: a command has no business with it.
SECRET_SUFFIXES = ("_SIGNING_KEY", "_WEBHOOK_KEY", "_DATABASE_URL", "_TLS_KEY_FILE")


def is_secret(name: str) -> bool:
    """Whether the runner's variable `name` is kept from its commands."""
    return name in SECRET_VARIABLES or name.endswith(SECRET_SUFFIXES)


class CommandFailed(Exception):
    """The command exited with a non-zero status or was killed by a signal."""


def parse_commands(spec: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """Validate a `{function: argv list | command string}` mapping; a string becomes
    `/bin/sh -c <string>`."""
    commands: dict[str, tuple[str, ...]] = {}
    for name, command in spec.items():
        if isinstance(command, str):
            argv = (SHELL, "-c", command) if command.strip() else ()
        elif isinstance(command, list | tuple) and all(isinstance(a, str) for a in command):
            argv = tuple(command)
        else:
            raise ValueError(f"command for function {name!r} must be a list of strings or a string")
        if not argv:
            raise ValueError(f"command for function {name!r} is empty")
        commands[str(name)] = argv
    if not commands:
        raise ValueError("no commands configured: map at least one function name to a command")
    return commands


def load_commands(source: str) -> dict[str, tuple[str, ...]]:
    """Commands from a JSON file path, or from inline JSON (starting with `{`)."""
    text = source if source.lstrip().startswith("{") else pathlib.Path(source).read_text()
    try:
        spec = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"commands {source!r} are not valid JSON: {exc}") from None
    if not isinstance(spec, dict):
        raise ValueError("commands must be a JSON object mapping function names to commands")
    return parse_commands(spec)


class CommandRunner:
    """An execution handler that runs the declared command for each call."""

    def __init__(
        self,
        commands: Mapping[str, Sequence[str]],
        *,
        env: Mapping[str, str] | None = None,
        kill_grace_seconds: float = 5.0,
    ) -> None:
        self.commands = parse_commands(dict(commands))
        self.env = dict(env or {})
        self.kill_grace_seconds = kill_grace_seconds
        self._swept: set[pathlib.Path] = set()

    def reap_orphans(self, root: pathlib.Path | str) -> list[int]:
        """Kill the commands runners that died left running under `root`, once per root
        (`reap_orphans`); the process groups killed. Blocks up to the kill grace."""
        root = pathlib.Path(root).resolve()
        if root in self._swept:
            return []
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
        process = await asyncio.create_subprocess_exec(
            *argv,
            cwd=ctx.output_dir,
            env=self.environment(ctx),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # its own process group, so a cancel stops it all
        )
        guard = _guard()
        guard.track(process.pid, ctx, argv, self.kill_grace_seconds)
        ctx.log.info("command.started", argv=list(argv), pid=process.pid)
        lines = _LineReporter(ctx)
        stderr_tail = bytearray()
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(lines.read(process.stdout))
                group.create_task(_tail(process.stderr, stderr_tail))
                group.create_task(lines.flush_periodically())
                returncode = await process.wait()
                lines.closed.set()
        except BaseExceptionGroup as failed:
            await self._terminate(process, ctx)
            raise failed.exceptions[0] from None  # the reason, not "unhandled errors in a..."
        except BaseException:
            await self._terminate(process, ctx)
            raise
        finally:
            guard.untrack(process.pid)  # the worker uploads what is left in the folder
        ctx.log.info("command.exited", returncode=returncode)
        if returncode != 0:
            how = (
                f"was killed by signal {-returncode}"
                if returncode < 0
                else f"exited with status {returncode}"
            )
            tail = _last_bytes(_text(bytes(stderr_tail)), STDERR_TAIL_BYTES).strip()
            raise CommandFailed(f"command {argv[0]} {how}" + (f": {tail}" if tail else ""))
        return lines.last_line

    async def _terminate(self, process: asyncio.subprocess.Process, ctx: ExecutionContext) -> None:
        """Stop the command's whole process group: SIGTERM, then SIGKILL after the grace.

        The leader may have exited already while a process it started runs on (holding
        its output open, so the command is not over): the group is signalled all the
        same. Its id cannot be another group's: Linux gives no pid out again while a
        process group of that id exists.
        """
        pgid = process.pid
        if process.returncode is not None and not _watchdog.group_running(pgid):
            return
        ctx.log.info("command.terminating", pid=pgid)
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


__all__ = [
    "FLUSH_SECONDS",
    "MAX_LINES_PER_REPORT",
    "MAX_LINE_BYTES",
    "MAX_REPORTED_LINES",
    "RECORDS_FOLDER",
    "CommandFailed",
    "CommandRunner",
    "load_commands",
    "parse_commands",
    "reap_orphans",
]
