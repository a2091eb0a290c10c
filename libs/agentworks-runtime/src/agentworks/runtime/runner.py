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
non-empty stdout line is the final message. A line longer than `MAX_LINE_BYTES` is cut
(with a note saying so), and NUL characters, which the service cannot store, become
U+FFFD, in stdout lines and the stderr tail alike. Every regular file in the folder is
uploaded when the command ends (successful or not), `result.json` first; a file the
service refuses (a name with a backslash or a control character, too big, past the
call's `MAX_FILES_PER_CALL`) is skipped, logged and named in one message (role
`runner`) on the call. Exit status 0 finishes the execution; any other status (or a
signal) fails it with the status and the tail of stderr. A cancel (F15) or a lost lease
terminates the command's process group (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import json
import os
import pathlib
import shlex
import signal
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from agentworks.core import errors
from agentworks.functions.v1 import functions_pb2 as f
from agentworks.runtime.executions import (
    ExecutionContext,
    ExecutionStopped,
    describe,
    fit_text,
)

# Bytes of stderr kept for the error message of a failed command.
STDERR_TAIL_BYTES = 4096
# Execution messages per call the runner reports; the service allows 10,000.
MAX_REPORTED_LINES = 9_900
# A longer stdout line is cut to this many bytes (the service allows 64 KiB a message).
MAX_LINE_BYTES = 16 * 1024
FLUSH_SECONDS = 0.2
MAX_LINES_PER_REPORT = 100
# Files the service keeps per call; past it, uploads are refused (and skipped here).
MAX_FILES_PER_CALL = 500
# The runner's own note on the call (skipped files).
RUNNER_NOTE_BYTES = 16 * 1024


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
        except BaseExceptionGroup as failed:
            await self._terminate(process, ctx)
            raise failed.exceptions[0] from None  # the reason, not "unhandled errors in a..."
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
            tail = _last_bytes(_text(bytes(stderr_tail)), STDERR_TAIL_BYTES).strip()
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
        self.refused = False  # the service refused a batch: report no more lines
        self.closed = asyncio.Event()
        self.eof = asyncio.Event()

    async def read(self, stream: asyncio.StreamReader | None) -> None:
        assert stream is not None
        async for raw, cut in _lines(stream, MAX_LINE_BYTES):
            line = _text(raw, partial=cut > 0).rstrip("\r")
            if cut:
                line += f" [... line cut: {len(raw) + cut} bytes in all]"
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
            if self.refused:
                continue
            try:
                await self.ctx.report(messages=[_stdout(line) for line in batch])
            except errors.InvalidArgument as exc:
                # Lines are cleaned and bounded, so this is the call's message limit
                # (a correction turn runs the command again): keep running, stop sending.
                self.refused = True
                self.ctx.log.warning("command.output_refused", error=exc.message)
                continue
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


def _text(data: bytes, *, partial: bool = False) -> str:
    """Output bytes as text the service can store: invalid UTF-8 and NUL become U+FFFD.
    With `partial`, a character cut in two at the end is left out."""
    if partial:
        text = codecs.getincrementaldecoder("utf-8")("replace").decode(data, final=False)
    else:
        text = data.decode("utf-8", "replace")
    return text.replace("\x00", "\ufffd")


def _last_bytes(text: str, limit: int) -> str:
    """The end of `text`, at most `limit` UTF-8 bytes (a cut character left out)."""
    data = text.encode()
    return text if len(data) <= limit else data[-limit:].decode("utf-8", "ignore")


async def _lines(stream: asyncio.StreamReader, limit: int) -> AsyncIterator[tuple[bytes, int]]:
    """The lines of `stream` without their newline, each cut to `limit` bytes, with how
    many bytes were cut off. Reads in chunks: a line of any length neither fails
    (StreamReader.readline's 64 KiB limit) nor fills memory."""
    line = bytearray()
    cut = 0
    while chunk := await stream.read(65536):
        *ended, rest = chunk.split(b"\n")
        for part in ended:
            room = max(0, limit - len(line))
            line += part[:room]
            yield bytes(line), cut + max(0, len(part) - room)
            line.clear()
            cut = 0
        room = max(0, limit - len(line))
        line += rest[:room]
        cut += max(0, len(rest) - room)
    if line or cut:
        yield bytes(line), cut


async def _tail(stream: asyncio.StreamReader | None, keep: bytearray) -> None:
    assert stream is not None
    while chunk := await stream.read(65536):
        keep += chunk
        del keep[:-STDERR_TAIL_BYTES]


async def upload_folder(ctx: ExecutionContext) -> int:
    """Upload every regular file in the call's folder (symlinks are skipped); the count.

    `result.json` goes first. A file the service refuses, or that cannot be read, is
    skipped and the rest are still uploaded; the skipped files are logged and named,
    with the reasons, in one message (role `runner`) on the call.
    """
    folder = ctx.output_dir

    def files() -> list[str]:
        found = []
        for directory, _, names in os.walk(folder, followlinks=False):
            for name in names:
                path = pathlib.Path(directory, name)
                if path.is_file() and not path.is_symlink():
                    found.append(path.relative_to(folder).as_posix())
        return sorted(found)

    result = ctx.result_file.name
    names = sorted(await asyncio.to_thread(files), key=lambda name: name != result)
    skipped: dict[str, list[str]] = {}  # reason -> names
    count = 0
    for name in names:
        reason = ""
        if len(ctx.uploaded) >= MAX_FILES_PER_CALL and name not in ctx.uploaded:
            reason = f"the call already has {MAX_FILES_PER_CALL} files, the most it can keep"
        elif not _is_utf8(name):
            reason = "its name is not valid UTF-8"
        else:
            try:
                if await ctx.upload_file(name, path=folder / name) is not None:
                    count += 1
            except errors.InvalidArgument as exc:
                reason = exc.message
            except OSError as exc:  # removed or unreadable meanwhile
                reason = describe(exc)
        if reason:
            ctx.log.warning("command.file_skipped", file=name, reason=reason)
            skipped.setdefault(reason, []).append(name)
    if skipped:
        await _note_skipped(ctx, skipped, len(names))
    return count


def _is_utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # undecodable bytes in the name (surrogate escapes)
        return False
    return True


async def _note_skipped(ctx: ExecutionContext, skipped: dict[str, list[str]], total: int) -> None:
    """Say on the call which files were not uploaded and why (one `runner` message)."""
    count = sum(len(names) for names in skipped.values())
    parts = []
    for reason, names in skipped.items():
        shown = ", ".join(repr(name) for name in names[:20])
        more = f" and {len(names) - 20} more" if len(names) > 20 else ""
        parts.append(f"{shown}{more}: {reason}")
    text = f"{count} of {total} files in the output folder were not uploaded: " + "; ".join(parts)
    try:
        await ctx.message(fit_text(text, RUNNER_NOTE_BYTES), role="runner")
    except errors.InvalidArgument as exc:  # the call's message limit: the log has it
        ctx.log.warning("command.note_refused", error=exc.message)
