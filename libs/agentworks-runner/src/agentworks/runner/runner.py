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
  (`agentworks.core.capability_identity.CapabilityIdentity` reads it). Set only when
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
`MAX_FILES_PER_CALL`) is skipped and counted by reason in one bounded summary (a `runner`
message, a `files_skipped` event, one log line) on the call. Exit status 0 finishes the
execution; any other status (or a signal) fails it with the status and the tail of
stderr, and a failed command's stderr tail (its last 40 lines, at most 4 KiB: what it
wrote, nothing added) is recorded as an event of kind `stderr` on the call (L12), which
its caller and the target's owner read. A cancel (F15) or a lost lease terminates the
command's process group (SIGTERM, then SIGKILL); in a sandbox every process of it gets
the SIGTERM, whatever its group.

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

import contextlib
import json
import os
import pathlib
from collections.abc import Mapping, Sequence
from typing import Any

import structlog

from agentworks.core.capability import CAPABILITY_FILE_VARIABLE, CAPABILITY_VARIABLE
from agentworks.runner.command_config import (
    SHELL,
    RunnerConfig,
    load_commands,
    load_runner_config,
    parse_commands,
    parse_runner_config,
)
from agentworks.runner.command_process import CommandFailed, Prepared, ProcessRunner
from agentworks.runner.guard import RECORDS_FOLDER, reap_orphans
from agentworks.runner.limits import LimitExceeded, Policy
from agentworks.runner.line_reports import (
    FLUSH_SECONDS,
    MAX_LINE_BYTES,
    MAX_LINES_PER_REPORT,
    MAX_REPORTED_LINES,
    _LineReporter,
)
from agentworks.runner.sandbox import Sandbox
from agentworks.runtime import capability_file
from agentworks.runtime.executions import ExecutionContext
from agentworks.runtime.reporting import describe

log = structlog.get_logger("agentworks.runner.runner")

# The event a failed command's stderr tail is recorded as (L12).
STDERR_EVENT_KIND = "stderr"

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


# Variables only an item's own command has: never inherited from the runner's.
ITEM_VARIABLES = (
    CAPABILITY_VARIABLE,
    CAPABILITY_FILE_VARIABLE,
    "AGENTWORKS_CORRECTION_PROMPT",
    "AGENTWORKS_MCP_CONFIG",
    "AGENTWORKS_MCP_COMMAND",
    "AGENTWORKS_MCP_SOCKET",
    "AGENTWORKS_MCP_TOKEN",
    "AGENTWORKS_MCP_URL",
)


class CommandRunner(ProcessRunner):
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
        mcp: bool = True,
    ) -> None:
        """`sandbox`: a `Sandbox`, "bwrap" (the default one) or "none" (no sandbox:
        `WITHOUT_SANDBOX` says what that gives up). A sandbox is checked here: without
        a working one, `SandboxUnavailable`. `policy`: limits, network and read-only
        paths of every target, `targets`: of some (`limits`). `hidden`: files the sandbox
        must not show (default: those the runner's secret variables name). `mcp`: serve
        each command its execution's agent tools over MCP (L2, `agent_mcp`)."""
        self.commands = parse_commands(dict(commands))
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
    def from_config(cls, config: RunnerConfig, **kwargs: Any) -> CommandRunner:
        """A runner for a `RunnerConfig` (`load_runner_config`)."""
        return cls(config.commands, policy=config.policy, targets=config.targets, **kwargs)

    def environment(self, ctx: ExecutionContext) -> dict[str, str]:
        """The command's environment for one execution: the runner's own, without its
        secrets (`is_secret`), then the configured `env`, then the call's variables."""
        env = base_environment(self.env)
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
        policy = self.policy_for(ctx.target)
        ctx.upload_limit_bytes = policy.limits.output_bytes
        name = f"{os.getpid()}-{ctx.call_id}-{ctx._round}"
        socket = self.mcp_socket() if self.mcp else None
        prepared = await self.prepare(ctx, argv, self.environment(ctx), policy, name, socket)
        ctx.file_owner = prepared.file_owner
        try:
            async with contextlib.AsyncExitStack() as stack:
                if ctx.capability:
                    ctx.capability_file = ctx.output_dir / capability_file.FILE_NAME
                    capability_file.write(ctx.capability_file, ctx.capability, owner=ctx.file_owner)
                if socket is not None:
                    served = _serve(ctx, prepared, socket)
                    prepared.env.update(await stack.enter_async_context(served))
                return await self.start_and_run(ctx, prepared, policy, _LineReporter(ctx))
        except BaseException as exc:
            await self.discard(prepared)
            if isinstance(exc, CommandFailed | LimitExceeded) and prepared.stderr_tail:
                await _stderr_event(ctx, prepared.stderr_tail)
            raise
        finally:
            if ctx.capability_file is not None:
                capability_file.remove(ctx.capability_file)
                ctx.capability_file = None


async def _stderr_event(ctx: ExecutionContext, tail: str) -> None:
    """A failed command's stderr tail as an event of kind `stderr` on its call (L12),
    which the call's caller and the target's owner read (A3). Best effort: the failure
    itself carries the tail in its error too."""
    try:
        await ctx.report(events=[{"kind": STDERR_EVENT_KIND, "text": tail}])
    except Exception as exc:  # a cancelled or lost call: its end says what happened
        ctx.log.warning("execution.stderr_unreported", error=describe(exc))


def _serve(
    ctx: ExecutionContext, prepared: Prepared, socket: tuple[pathlib.Path, str]
) -> contextlib.AbstractAsyncContextManager[dict[str, str]]:
    """The execution's MCP endpoint while its command runs (L2, `agent_mcp.handout`)."""
    from agentworks.agents.agent_mcp.handout import execution_offer

    served: contextlib.AbstractAsyncContextManager[dict[str, str]] = execution_offer(ctx).serve(
        ctx.output_dir, socket=socket, owner=prepared.file_owner, sandboxed=prepared.sandboxed
    )
    return served


def base_environment(configured: Mapping[str, str]) -> dict[str, str]:
    """A command's environment before its item's variables: the runner's own without
    its secrets (`is_secret`) and without any item's variables, then `configured`."""
    env = {name: value for name, value in os.environ.items() if not is_secret(name)}
    env.update(configured)
    for name in ITEM_VARIABLES:
        env.pop(name, None)
    return env


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
