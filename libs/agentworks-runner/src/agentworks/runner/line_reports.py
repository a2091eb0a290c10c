"""A command's stdout lines as execution messages, and its stderr's tail for errors (R2, F7)."""

from __future__ import annotations

import asyncio
import codecs
import contextlib
from collections.abc import AsyncIterator

from agentworks.core import errors
from agentworks.functions.v1 import functions_pb2 as f
from agentworks.runtime.executions import (
    ExecutionContext,
    clean_text,
)

# Bytes of stderr kept for the error message of a failed command.
STDERR_TAIL_BYTES = 4096

# Execution messages per call the runner reports; the service allows 10,000.
MAX_REPORTED_LINES = 9_900

# A longer stdout line is cut to this many bytes (the service allows 64 KiB a message).
MAX_LINE_BYTES = 16 * 1024

FLUSH_SECONDS = 0.2

MAX_LINES_PER_REPORT = 100


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
    return clean_text(text)


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
