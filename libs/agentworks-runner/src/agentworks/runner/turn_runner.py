"""The command runner's turns (L2): a declared command per turn of a target.

A runner config's `turns` maps a target to a command (`command_config`):

    {"turns": {"crew:demo": ["python3", "/srv/agent/chat.py"]},
     "commands": {"summarize": ["python3", "/srv/tools/summarize.py"]}}

`TurnCommandRunner` is a turn handler (`TurnWorker`) that runs its target's command for
each turn, in a sandbox of its own with the target's limits and network, as the
execution commands run (`runner.py`, `command_process.py`, `sandbox.py`), in the
turn's own folder `<root>/.turns/<turn_id>/` (0700; removed when the turn ends; the
sandbox shows it alone of all the calls' and turns' folders). The command gets:

- `AGENTWORKS_TURN_ID`, `AGENTWORKS_CONVERSATION_ID`, `AGENTWORKS_TARGET`,
  `AGENTWORKS_REPLY_INBOX_ID`, `AGENTWORKS_PROJECT_ROOT`, `AGENTWORKS_TURN_FOLDER`;
- `AGENTWORKS_TURN_FILE`: a JSON file in the folder with the turn and its deliveries
  (`{"turn_id", "conversation_id", "target", "reply_inbox_id", "deliveries": [...]}`,
  each delivery as the `read_transcript` tool shows it, a message's with its
  `message`);
- `AGENTWORKS_CAPABILITY` and `AGENTWORKS_CAPABILITY_FILE`: the turn's capability (T3),
  the file rewritten as heartbeats renew it;
- its MCP endpoint (`agent_mcp.handout`): `AGENTWORKS_MCP_CONFIG` (an `mcp.json`-form
  file), `AGENTWORKS_MCP_COMMAND`, `AGENTWORKS_MCP_SOCKET`, `AGENTWORKS_MCP_TOKEN`, the
  turn's tools acting with its capability only, served until the command ends, with
  instructions and the turn's input as the resource `agentworks://turn/input` (L11).

Replies are explicit (C6): the agent sends them with the `send_message` tool. The
command's stdout is never forwarded; it is counted and its last line logged. A command
that fails (non-zero status, a limit) is logged and the turn is completed all the same,
as for any turn handler that raises (`turns.py`), with why it failed (L12): its exit
status or limit and its stderr's last 40 lines (at most 4 KiB, `failure_text`), which
the target's owner and the operator read on the turn's deliveries (the transcript, the
console's conversation page, `agentworks conversations show`) and its caller never
(A3).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pathlib
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentworks.agents.agent_mcp.resources import turn_input
from agentworks.core.capability import CAPABILITY_FILE_VARIABLE, CAPABILITY_VARIABLE
from agentworks.runner.command_config import RunnerConfig, parse_turn_commands
from agentworks.runner.command_process import CommandFailed, ProcessRunner
from agentworks.runner.limits import LimitExceeded, Policy
from agentworks.runner.line_reports import MAX_LINE_BYTES, _lines, _text
from agentworks.runner.runner import base_environment, secret_files
from agentworks.runner.sandbox import Sandbox
from agentworks.runtime import capability_file
from agentworks.runtime.folders import own_folders
from agentworks.runtime.turn_context import TurnContext

TURNS_FOLDER = ".turns"
TURN_FILE = ".agentworks-turn.json"

# How often the capability file is brought up to date with the renewed capability.
CAPABILITY_CHECK_SECONDS = 0.5


@dataclass
class TurnJob:
    """What the process runner needs of a turn (`command_process.Job`)."""

    root: pathlib.Path
    call_id: str  # the turn's id, in the runner's records
    output_dir: pathlib.Path
    log: Any


class _TurnOutput:
    """A turn command's stdout: never forwarded (C6); counted, its last line kept."""

    def __init__(self) -> None:
        self.closed = asyncio.Event()
        self.last_line = ""
        self.count = 0

    async def read(self, stream: asyncio.StreamReader | None) -> None:
        assert stream is not None
        async for raw, cut in _lines(stream, MAX_LINE_BYTES):
            self.count += 1
            line = _text(raw, partial=cut > 0).strip()
            if line:
                self.last_line = line

    async def flush_periodically(self) -> None:
        await self.closed.wait()


def turn_description(ctx: TurnContext) -> dict[str, Any]:
    """The turn and its deliveries as JSON (AGENTWORKS_TURN_FILE; the endpoint's
    `agentworks://turn/input` resource is the same document, L11)."""
    return turn_input(ctx)


class TurnCommandRunner(ProcessRunner):
    """A turn handler that runs its target's declared command for each turn (L2)."""

    def __init__(
        self,
        turns: Mapping[str, Sequence[str]],
        *,
        root: pathlib.Path | str = ".",
        env: Mapping[str, str] | None = None,
        kill_grace_seconds: float = 5.0,
        sandbox: Sandbox | str = "bwrap",
        policy: Policy | None = None,
        targets: Mapping[str, Policy] | None = None,
        hidden: Sequence[str] | None = None,
        mcp: bool = True,
    ) -> None:
        """`turns`: a command per target; `root`: the project root the turns' folders go
        under. The rest as for `runner.CommandRunner`."""
        self.turns = parse_turn_commands(dict(turns))
        if not self.turns:
            raise ValueError('no turn commands configured: map a target to a command in "turns"')
        self.root = pathlib.Path(root).resolve()
        self.mcp = mcp
        super().__init__(
            env=env,
            kill_grace_seconds=kill_grace_seconds,
            sandbox=sandbox,
            policy=policy,
            targets=targets,
            hidden=secret_files(os.environ) if hidden is None else hidden,
        )

    @classmethod
    def from_config(cls, config: RunnerConfig, **kwargs: Any) -> TurnCommandRunner:
        """A turn runner for a `RunnerConfig`'s `turns` (`load_runner_config`)."""
        return cls(config.turns, policy=config.policy, targets=config.targets, **kwargs)

    def folder(self, ctx: TurnContext) -> pathlib.Path:
        """The turn's folder, `<root>/.turns/<turn_id>/`."""
        return self.root / TURNS_FOLDER / ctx.turn_id

    def environment(self, ctx: TurnContext, folder: pathlib.Path) -> dict[str, str]:
        """The command's environment for one turn (without its MCP variables)."""
        env = base_environment(self.env)
        env.update(
            AGENTWORKS_TURN_ID=ctx.turn_id,
            AGENTWORKS_CONVERSATION_ID=ctx.conversation_id,
            AGENTWORKS_TARGET=ctx.target,
            AGENTWORKS_REPLY_INBOX_ID=ctx.reply_inbox_id,
            AGENTWORKS_PROJECT_ROOT=str(self.root),
            AGENTWORKS_TURN_FOLDER=str(folder),
            AGENTWORKS_TURN_FILE=str(folder / TURN_FILE),
        )
        if ctx.capability:
            env[CAPABILITY_VARIABLE] = ctx.capability
            env[CAPABILITY_FILE_VARIABLE] = str(folder / capability_file.FILE_NAME)
        return env

    async def __call__(self, ctx: TurnContext) -> None:
        argv = self.turns.get(ctx.target)
        if argv is None:
            raise CommandFailed(
                f"no turn command is configured for target {ctx.target!r}; configured: "
                f"{sorted(self.turns)}"
            )
        folder = self.folder(ctx)
        # `.turns` a real folder of the runner's (B4: never a link a command left).
        await asyncio.to_thread(own_folders, self.root, (TURNS_FOLDER,))
        folder.mkdir(mode=0o700, exist_ok=True)
        job = TurnJob(self.root, ctx.turn_id, folder, ctx.log)
        policy = self.policy_for(ctx.target)
        name = f"{os.getpid()}-turn-{ctx.turn_id}"
        try:
            socket = self.mcp_socket() if self.mcp else None
            env = self.environment(ctx, folder)
            prepared = await self.prepare(job, argv, env, policy, name, socket)
            try:
                async with contextlib.AsyncExitStack() as stack:
                    owner = prepared.file_owner
                    _write(folder / TURN_FILE, json.dumps(turn_description(ctx)), owner)
                    if ctx.capability:
                        stack.enter_context(_kept_current(ctx, folder, owner))
                    if socket is not None:
                        from agentworks.agents.agent_mcp.handout import turn_offer

                        served = turn_offer(ctx).serve(
                            folder, socket=socket, owner=owner, sandboxed=prepared.sandboxed
                        )
                        prepared.env.update(await stack.enter_async_context(served))
                    output = _TurnOutput()
                    await self.start_and_run(job, prepared, policy, output)
                    ctx.log.info("turn.command_ended", lines=output.count, last=output.last_line)
            except BaseException as exc:
                await self.discard(prepared)
                if isinstance(exc, CommandFailed | LimitExceeded):
                    ctx.error_detail = failure_text(exc, prepared.stderr_tail)
                raise
        finally:
            await asyncio.to_thread(shutil.rmtree, folder, True)


def failure_text(exc: CommandFailed | LimitExceeded, stderr_tail: str) -> str:
    """Why a turn command failed, for the target's owner (L12): what ended it (its status
    or the limit it passed) and its stderr's last 40 lines (at most 4 KiB), as it wrote
    them; the worker cleans and cuts it (`turns.turn_error`)."""
    summary = exc.summary if isinstance(exc, CommandFailed) else str(exc)
    return f"{summary}\n{stderr_tail}" if stderr_tail else summary


def _write(path: pathlib.Path, text: str, owner: int | None) -> None:
    """`text` in a new file at `path` the command's user alone may read (0600)."""
    capability_file.write(path, text, owner=owner)


@contextlib.contextmanager
def _kept_current(ctx: TurnContext, folder: pathlib.Path, owner: int | None) -> Any:
    """The capability file, rewritten while the command runs as the heartbeats renew the
    turn's capability, and removed at its end."""
    path = folder / capability_file.FILE_NAME
    capability_file.write(path, ctx.capability, owner=owner)
    written = ctx.capability

    async def keep() -> None:
        nonlocal written
        while True:
            await asyncio.sleep(CAPABILITY_CHECK_SECONDS)
            if ctx.capability != written:
                with contextlib.suppress(OSError):
                    capability_file.write(path, ctx.capability, owner=owner)
                written = ctx.capability

    task = asyncio.ensure_future(keep())
    try:
        yield
    finally:
        task.cancel()
        capability_file.remove(path)
