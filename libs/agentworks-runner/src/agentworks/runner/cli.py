"""`agentworks-runtime`: run the demo crew, your turn handler, the command runner, or
the reference LLM runtime.

    agentworks-runtime demo                      # turns of crew:demo as agent:demo/demo-bot
    agentworks-runtime functions-demo --root DIR # executions of crew:demo's demo functions
    agentworks-runtime turns mypkg.agent:handle  # serves AGENTWORKS_RUNTIME_TARGETS
    agentworks-runtime run-commands --commands commands.json --root DIR --target crew:x
    agentworks-runtime llm --model llama3.2      # turns and executions answered by a model

`run-commands` serves the executions of the config's `commands` and, when it has
`turns`, the turns of those targets too (a command per turn, L2: with
--messaging-address, and --scheduler-address for wake-ups); every command gets its
agent tools over MCP.

A runtime authenticates with a runtime credential (AGENTWORKS_RUNTIME_CREDENTIAL, or
--credential-file) that it exchanges at the gateway (--gateway-url) for short-lived
identities; it holds no signing key.

Turns and executions are served by separate workers (and, here, separate processes);
`serving.run_until_signal` runs several workers in one process under one signal
handler. Every flag falls back to an environment variable (see `RuntimeConfig`). The
first SIGTERM/SIGINT finishes the work in hand and exits; a second one exits at once.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import pathlib
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from agentworks.core.logging import configure_logging, get_logger
from agentworks.core.tracing import TracingUnavailable, configure_tracing
from agentworks.runner.arguments import FLAG_ENV
from agentworks.runner.arguments import parser as _parser
from agentworks.runtime.config import (
    RuntimeConfig,
)
from agentworks.runtime.executions import ExecutionHandler, serve_executions
from agentworks.runtime.serving import run_until_signal
from agentworks.runtime.turns import TurnHandler, TurnWorker

# The demo crew comes with the dev tools (agentworks-dev, beside `agentworks up`), loaded by
# name for `demo` and `functions-demo`: the runner imports nothing of them otherwise.
DEMO_MODULES = {"demo": "agentworks_dev.demo", "functions-demo": "agentworks_dev.demo_functions"}


def load_demo(command: str) -> Any:
    """The demo crew's module of `demo` or `functions-demo`; ValueError without agentworks-dev."""
    try:
        return importlib.import_module(DEMO_MODULES[command])
    except ModuleNotFoundError as exc:
        if exc.name and DEMO_MODULES[command].startswith(exc.name):
            raise ValueError(
                f"{command}: the demo crew comes with agentworks-dev, which is not installed"
            ) from None
        raise


def load_handler(spec: str) -> TurnHandler:
    """Import `module:function` and return the function."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"handler {spec!r} must look like package.module:function")
    try:
        handler = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cannot load handler {spec!r}: {exc}") from exc
    if not callable(handler):
        raise ValueError(f"handler {spec!r} is not callable")
    return handler


def turn_worker(config: RuntimeConfig, handler: TurnHandler) -> TurnWorker:
    """A TurnWorker for `config` (messaging, scheduler and functions addresses, identity,
    targets, TLS)."""
    return TurnWorker(
        config.messaging_address,
        config.minter(),
        config.targets,
        handler,
        scheduler_address=config.scheduler_address or None,
        functions_address=config.functions_address or None,
        wait_seconds=config.wait_seconds,
        lease_seconds=config.lease_seconds,
        concurrency=config.turn_concurrency,
        turn_seconds=config.turn_seconds,
        health_file=config.health_file,
        tls=config.tls,
        gateway_url=config.gateway_url,
    )


async def serve(config: RuntimeConfig, handler: TurnHandler) -> int:
    """Run a turn worker until SIGTERM/SIGINT; the process exit code."""
    return await run_until_signal(turn_worker(config, handler))


def command_runner(
    config: RuntimeConfig, runner_config: Any, environ: Mapping[str, str], kind: Any = None
) -> Any:
    """The CommandRunner of `run-commands` (or, with `kind`, that runner class: the
    `TurnCommandRunner`), its sandbox checked (SandboxUnavailable when there is none
    and `--sandbox none` was not given); says what it runs commands in, in the log, and
    in the health file when there is one; loudly without a sandbox."""
    from agentworks.runner.runner import CommandRunner, secret_files
    from agentworks.runner.sandbox import WITHOUT_SANDBOX, Sandbox

    log = get_logger(__name__)
    kind = kind or CommandRunner
    extra = {"root": config.root} if kind is not CommandRunner else {}
    if config.sandbox == "none":
        print(f"agentworks-runtime: WARNING: --sandbox none: {WITHOUT_SANDBOX}", file=sys.stderr)
        runner = kind.from_config(runner_config, sandbox="none", **extra)
        state = {"sandbox": "none", "gives_up": WITHOUT_SANDBOX}
    else:
        sandbox = Sandbox(bwrap=config.bwrap, uid=config.sandbox_uid, gid=config.sandbox_uid)
        runner = kind.from_config(
            runner_config, sandbox=sandbox, hidden=secret_files(environ), **extra
        )
        state = {"sandbox": "bwrap", "how": runner.sandbox_description}
        log.info("sandbox.ready", how=runner.sandbox_description)
    if config.health_file:
        try:
            pathlib.Path(config.health_file).write_text(json.dumps(state) + "\n")
        except OSError as exc:
            log.warning("health_file.unwritable", path=config.health_file, error=str(exc))
    return runner


def telemetry(config: RuntimeConfig) -> None:
    """Switch tracing on when the OTEL_* variables ask (before any channel is made), and
    serve /metrics on AGENTWORKS_RUNTIME_METRICS_LISTEN when it is set."""
    from agentworks.runtime import metrics

    configure_tracing("runtime", grpc_server=False)
    port = metrics.serve(config.metrics_listen)
    if port:
        get_logger(__name__).info("metrics.serving", port=port)


def _run_commands(config: RuntimeConfig, runner_config: Any, environ: Mapping[str, str]) -> int:
    """`run-commands`: an execution worker for the `commands`, a turn worker for the
    `turns`, in one process under one signal handler."""
    from agentworks.runner.sandbox import SandboxUnavailable
    from agentworks.runner.turn_runner import TurnCommandRunner
    from agentworks.runtime.executions import execution_worker

    runners = []
    try:
        if runner_config.commands:
            runners.append(command_runner(config, runner_config, environ))
        if runner_config.turns:
            runners.append(command_runner(config, runner_config, environ, TurnCommandRunner))
    except SandboxUnavailable as exc:
        print(f"agentworks-runtime: refusing to start: {exc}", file=sys.stderr)
        return 2
    for runner in runners:
        # Commands a runner that died left running under this root: kill them now,
        # before the first call (the runner module docstring says why and how).
        runner.reap_orphans(config.root)
        # Where a command reaches its call with its capability (T3).
        runner.env.setdefault("AGENTWORKS_FUNCTIONS_ADDRESS", config.functions_address)

    async def serve_all() -> int:
        # Made in the loop that runs them: a grpc.aio channel belongs to its loop.
        workers: list[Any] = []
        for runner in runners:
            if isinstance(runner, TurnCommandRunner):
                runner.env.setdefault("AGENTWORKS_MESSAGING_ADDRESS", config.messaging_address)
                workers.append(turn_worker(config, runner))
            else:
                workers.append(execution_worker(config, runner))
        return await run_until_signal(*workers, drain_seconds=config.drain_seconds)

    return asyncio.run(serve_all())


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `agentworks-runtime` console script."""
    args = _parser().parse_args(argv)
    environ = dict(os.environ)
    for flag, variable in FLAG_ENV.items():
        value = getattr(args, flag, None)
        if value:
            environ[variable] = value
    if getattr(args, "target", None):
        environ["AGENTWORKS_RUNTIME_TARGETS"] = ",".join(args.target)
    executions: ExecutionHandler | dict[str, ExecutionHandler] | None = None
    handler: TurnHandler | None = None
    try:
        if args.command == "llm":
            from agentworks.agents.llm import LlmConfig

            llm_config = LlmConfig.from_env(environ)
            config = RuntimeConfig.from_env(environ)
        elif args.command == "demo":
            demo = load_demo(args.command)
            handler = demo.handle_turn
            config = RuntimeConfig.from_env(
                environ, default_principal=demo.PRINCIPAL, default_targets=demo.TARGETS
            )
        elif args.command == "functions-demo":
            demo_functions = load_demo(args.command)
            executions = demo_functions.HANDLERS
            config = RuntimeConfig.from_env(
                environ,
                default_principal=demo_functions.PRINCIPAL,
                default_targets=demo_functions.TARGETS,
            )
        elif args.command == "run-commands":
            from agentworks.runner.runner import load_runner_config

            runner_config = load_runner_config(args.commands)
            config = RuntimeConfig.from_env(environ)
        else:
            handler = load_handler(args.handler)
            config = RuntimeConfig.from_env(environ)
    except (ValueError, OSError) as exc:
        print(f"agentworks-runtime: {exc}", file=sys.stderr)
        return 2
    configure_logging("runtime", level=config.log_level, json=config.log_json)
    for problem in config.unknown_settings:
        get_logger(__name__).warning("config.unknown_setting", problem=problem)
    try:
        telemetry(config)
    except (ValueError, OSError, TracingUnavailable) as exc:
        print(f"agentworks-runtime: {exc}", file=sys.stderr)
        return 2
    if args.command == "llm":
        from agentworks.agents.llm import serve_llm

        serves = ("turns", "executions") if args.serve == "both" else (args.serve,)
        return asyncio.run(serve_llm(config, llm_config, serves))
    if args.command == "run-commands":
        return _run_commands(config, runner_config, environ)
    if executions is not None:
        return asyncio.run(serve_executions(config, executions))
    assert handler is not None
    return asyncio.run(serve(config, handler))
