"""The supervised child processes: started, output prefixed, watched (exit and liveness),
restarted with backoff, stopped in order."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TextIO

import structlog

from agentworks_dev.parent import die_with_parent
from agentworks_dev.specs import (
    HEALTHY_UPTIME_SECONDS,
    LIVENESS_FAILURES,
    LIVENESS_PERIOD_SECONDS,
    LIVENESS_TIMEOUT_SECONDS,
    NAME_WIDTH,
    OUTPUT_LINE_LIMIT,
    RESTART_BACKOFF_MAX,
)

log = structlog.get_logger("agentworks.up")


@dataclass
class Child:
    """One supervised child process and what the supervisor knows about it."""

    name: str
    argv: list[str]
    env: dict[str, str]
    process: asyncio.subprocess.Process | None = None
    started_at: float = 0.0
    restarts: int = 0
    tail: collections.deque[str] = field(default_factory=lambda: collections.deque(maxlen=20))
    watcher: asyncio.Task[None] | None = None
    # Its liveness check (B3): whether it answers its health within the timeout given;
    # None: only its exit is watched (the demo runtimes).
    alive: Callable[[float], Awaitable[bool]] | None = None
    # Times it was killed because its health stopped answering; whether the process
    # running now has answered its liveness check yet.
    unresponsive: int = 0
    answered: bool = False

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None


class Children:
    """The children launched so far: each run, restarted after it exits (with backoff)
    or stops answering its liveness check, until `stopping` is set (`stop`)."""

    def __init__(
        self, ready_timeout: float, stop_timeout: float, out: TextIO | None = None
    ) -> None:
        self.all: list[Child] = []
        self.stopping = asyncio.Event()
        # A child's time to answer its first liveness check; to end after SIGTERM.
        self.ready_timeout = ready_timeout
        self.stop_timeout = stop_timeout
        self.out = sys.stdout if out is None else out  # where their prefixed output goes
        # B3: how each service's liveness is checked once it is up (specs.py).
        self.liveness_period = LIVENESS_PERIOD_SECONDS
        self.liveness_timeout = LIVENESS_TIMEOUT_SECONDS
        self.liveness_failures = LIVENESS_FAILURES

    def __iter__(self) -> Iterator[Child]:
        return iter(self.all)

    def launch(self, child: Child) -> None:
        self.all.append(child)
        child.watcher = asyncio.create_task(self._watch(child), name=f"watch-{child.name}")

    async def _spawn(self, child: Child) -> asyncio.subprocess.Process:
        process = await asyncio.create_subprocess_exec(
            *child.argv,
            env=child.env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            limit=OUTPUT_LINE_LIMIT,
            # Own process group: the terminal's Ctrl-C reaches only the supervisor,
            # which then stops the children in order.
            process_group=0,
            # And SIGTERM from the kernel if the supervisor dies (even by SIGKILL).
            preexec_fn=functools.partial(die_with_parent, os.getpid()),
        )
        child.process = process
        child.started_at = time.monotonic()
        log.info("child.started", child=child.name, pid=process.pid)
        return process

    async def _pump(self, child: Child, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        prefix = f"{child.name:<{NAME_WIDTH}}| "
        while True:
            try:
                raw = await process.stdout.readline()
            except ValueError:  # a line longer than the limit: drop the rest of it
                continue
            if not raw:
                return
            line = raw.decode("utf-8", errors="replace").rstrip("\n")
            child.tail.append(line)
            self.out.write(prefix + line + "\n")
            self.out.flush()

    async def _watch(self, child: Child) -> None:
        backoff = 1.0
        while not self.stopping.is_set():
            process = await self._spawn(child)
            pump = asyncio.create_task(self._pump(child, process))
            liveness = asyncio.create_task(self._liveness(child, process))
            code = await process.wait()
            liveness.cancel()
            await pump
            if self.stopping.is_set():
                return
            uptime = time.monotonic() - child.started_at
            if uptime > HEALTHY_UPTIME_SECONDS:
                backoff = 1.0
            log.error(
                "child.exited",
                child=child.name,
                code=code,
                uptime=round(uptime, 1),
                restart_in=backoff,
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), backoff)
            backoff = min(backoff * 2, RESTART_BACKOFF_MAX)
            child.restarts += 1

    async def _liveness(self, child: Child, process: asyncio.subprocess.Process) -> None:
        """Kill `child` when its health stops answering (B3): a service whose loop is
        stuck is a live process that serves nothing, and used to be left so. Checked
        every `liveness_period` once it has answered; `liveness_failures` failures in a
        row (no answer within `liveness_timeout`, or NOT_SERVING) and it is killed
        (SIGKILL: a stuck loop cannot drain), then restarted as after any exit."""
        if child.alive is None:
            return
        child.answered, failures = False, 0
        while process.returncode is None and not self.stopping.is_set():
            await asyncio.sleep(self.liveness_period)
            if await child.alive(self.liveness_timeout):
                child.answered, failures = True, 0
                continue
            if self.stopping.is_set() or process.returncode is not None:
                return  # ending anyway
            starting = time.monotonic() - child.started_at < self.ready_timeout
            if not child.answered and starting:
                continue  # still starting: it has until the ready timeout to answer
            failures += 1
            if failures < self.liveness_failures:
                continue
            log.error(
                "child.unresponsive",
                child=child.name,
                failures=failures,
                every=self.liveness_period,
                action="killing it, to be restarted",
            )
            child.unresponsive += 1
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            return

    async def stop(self, order: Sequence[tuple[str, ...]]) -> None:
        """Stop the children whose names start with the first prefixes, then the next
        ones, ..., then any left; SIGKILL stragglers. None is restarted any more."""
        self.stopping.set()
        for prefixes in order:
            group = [c for c in self.all if c.name.startswith(prefixes)]
            await self._stop_group(group)
        await self._stop_group(self.all)  # anything not matched above
        for child in self.all:
            if child.watcher is not None:
                child.watcher.cancel()
                await asyncio.wait({child.watcher})
        if self.all:
            log.info("stopped", children=len(self.all))

    async def _stop_group(self, group: list[Child]) -> None:
        running = [(c, c.process) for c in group if c.process and c.process.returncode is None]
        if not running:
            return
        for _, process in running:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        waits = {asyncio.ensure_future(p.wait()): (c, p) for c, p in running}
        _, pending = await asyncio.wait(waits, timeout=self.stop_timeout)
        for future in pending:
            child, process = waits[future]
            log.warning("child.killed", child=child.name, after=self.stop_timeout)
            with contextlib.suppress(ProcessLookupError):
                process.kill()
        if pending:
            await asyncio.wait(pending)
        for child, process in running:
            log.info("child.stopped", child=child.name, code=process.returncode)

    def kill_all(self) -> None:
        for child in self.all:
            if child.process and child.process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    child.process.kill()
