"""The command runner: each call runs a declared command in `.calls/<call_id>/` (R2).

Configuration is a mapping from function name to a command (an argv list, or a string
split like a shell would, without running a shell):

    {"word_count": ["python", "-m", "tools.word_count"], "hello": "echo hello"}

For each execution the runner starts the function's command with:

- working directory `<root>/.calls/<call_id>/` (created; the call's private output folder)
- `FUNCTION_RESULT_FILE`: absolute path of `result.json` in that folder (F10)
- `AGENTWORKS_CALL_ID`, `AGENTWORKS_FUNCTION`, `AGENTWORKS_TARGET`, `AGENTWORKS_CALLER`
- `AGENTWORKS_INPUTS`: the checked inputs as JSON
- `AGENTWORKS_OUTPUT_FOLDER`: the folder's absolute path, `AGENTWORKS_PROJECT_ROOT`: root
- `AGENTWORKS_CORRECTION_PROMPT`: only in the one correction turn (F10), which runs the
  command again in the same folder

Each stdout line becomes an execution message (role `stdout`, batched); the last
non-empty stdout line is the final message. Every regular file in the folder is uploaded
when the command ends (successful or not). Exit status 0 finishes the execution; any
other status (or a signal) fails it with the status and the tail of stderr. A cancel
(F15) or a lost lease terminates the command's process group (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pathlib
import shlex
import signal
from collections.abc import Mapping, Sequence
from typing import Any

from agentworks.functions.v1 import functions_pb2 as f
from agentworks.runtime.executions import ExecutionContext, ExecutionStopped

# Bytes of stderr kept for the error message of a failed command.
STDERR_TAIL_BYTES = 4096
# Execution messages per call the runner reports; the service allows 10,000.
MAX_REPORTED_LINES = 9_900
MAX_LINE_BYTES = 16 * 1024
FLUSH_SECONDS = 0.2
MAX_LINES_PER_REPORT = 100


class CommandFailed(Exception):
    """The command exited with a non-zero status or was killed by a signal."""


def parse_commands(spec: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """Validate a `{function: argv list | command string}` mapping."""
    commands: dict[str, tuple[str, ...]] = {}
    for name, command in spec.items():
        if isinstance(command, str):
            argv = tuple(shlex.split(command))
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

    def environment(self, ctx: ExecutionContext) -> dict[str, str]:
        """The command's environment for one execution."""
        env = {**os.environ, **self.env}
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
        process = await asyncio.create_subprocess_exec(
            *argv,
            cwd=ctx.output_dir,
            env=self.environment(ctx),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # its own process group, so a cancel stops it all
        )
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
        except BaseException:
            await self._terminate(process, ctx)
            raise
        finally:
            if not ctx.stopped:
                with contextlib.suppress(ExecutionStopped):
                    await upload_folder(ctx)
        ctx.log.info("command.exited", returncode=returncode)
        if returncode != 0:
            how = (
                f"was killed by signal {-returncode}"
                if returncode < 0
                else f"exited with status {returncode}"
            )
            tail = stderr_tail.decode("utf-8", "replace").strip()
            raise CommandFailed(f"command {argv[0]} {how}" + (f": {tail}" if tail else ""))
        return lines.last_line

    async def _terminate(self, process: asyncio.subprocess.Process, ctx: ExecutionContext) -> None:
        if process.returncode is not None:
            return
        ctx.log.info("command.terminating", pid=process.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.shield(process.wait()), self.kill_grace_seconds)
        except (TimeoutError, asyncio.CancelledError):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)


class _LineReporter:
    """Stdout lines -> execution messages, a batch at a time."""

    def __init__(self, ctx: ExecutionContext) -> None:
        self.ctx = ctx
        self.pending: list[str] = []
        self.reported = 0
        self.last_line = ""
        self.truncated = False
        self.closed = asyncio.Event()
        self.eof = asyncio.Event()

    async def read(self, stream: asyncio.StreamReader | None) -> None:
        assert stream is not None
        while True:
            raw = await stream.readline()
            if not raw:
                break
            line = raw[:MAX_LINE_BYTES].decode("utf-8", "replace").rstrip("\r\n")
            if line.strip():
                self.last_line = line.strip()
            if self.reported + len(self.pending) < MAX_REPORTED_LINES:
                self.pending.append(line)
            elif not self.truncated:
                self.truncated = True
                self.pending.append(f"[output truncated after {MAX_REPORTED_LINES} lines]")
            if len(self.pending) >= MAX_LINES_PER_REPORT:
                await self.flush()
        self.eof.set()

    async def flush(self) -> None:
        while self.pending:
            batch = self.pending[:MAX_LINES_PER_REPORT]
            del self.pending[:MAX_LINES_PER_REPORT]
            await self.ctx.report(messages=[_stdout(line) for line in batch])
            self.reported += len(batch)

    async def flush_periodically(self) -> None:
        while not (self.closed.is_set() and self.eof.is_set()):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.eof.wait(), FLUSH_SECONDS)
            await self.flush()
            if self.eof.is_set():
                await self.closed.wait()
        await self.flush()


def _stdout(line: str) -> f.ExecutionMessage:
    return f.ExecutionMessage(role="stdout", text=line)


async def _tail(stream: asyncio.StreamReader | None, keep: bytearray) -> None:
    assert stream is not None
    while chunk := await stream.read(65536):
        keep += chunk
        del keep[:-STDERR_TAIL_BYTES]


async def upload_folder(ctx: ExecutionContext) -> int:
    """Upload every regular file in the call's folder (symlinks are skipped); the count."""
    folder = ctx.output_dir

    def files() -> list[str]:
        found = []
        for directory, _, names in os.walk(folder, followlinks=False):
            for name in names:
                path = pathlib.Path(directory, name)
                if path.is_file() and not path.is_symlink():
                    found.append(path.relative_to(folder).as_posix())
        return sorted(found)

    count = 0
    for name in await asyncio.to_thread(files):
        if await ctx.upload_file(name, path=folder / name) is not None:
            count += 1
    return count
