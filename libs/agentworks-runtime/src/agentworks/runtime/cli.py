"""`agentworks-runtime`: run the demo crew or your own turn handler as a runtime process.

    agentworks-runtime demo                      # serves crew:demo as agent:demo/demo-bot
    agentworks-runtime turns mypkg.agent:handle  # serves AGENTWORKS_RUNTIME_TARGETS

Every flag falls back to an environment variable (see `RuntimeConfig`). The first
SIGTERM/SIGINT finishes the current turn and exits; a second one exits at once.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import signal
import sys
from collections.abc import Sequence

from agentworks.core import errors
from agentworks.core.identity import Minter
from agentworks.core.logging import configure_logging
from agentworks.runtime import demo
from agentworks.runtime.config import RuntimeConfig
from agentworks.runtime.turns import TurnHandler, TurnWorker

_FLAG_ENV = {
    "messaging_address": "AGENTWORKS_MESSAGING_ADDRESS",
    "principal": "AGENTWORKS_RUNTIME_PRINCIPAL",
    "targets": "AGENTWORKS_RUNTIME_TARGETS",
}


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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentworks-runtime", description="Run an AgentWorks agent runtime (turns)."
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--messaging-address", help="host:port[,host:port] (env AGENTWORKS_MESSAGING_ADDRESS)"
    )
    common.add_argument(
        "--principal", help="agent:<crew>/<agent> (env AGENTWORKS_RUNTIME_PRINCIPAL)"
    )
    common.add_argument(
        "--targets", help="comma-separated, e.g. crew:demo (env AGENTWORKS_RUNTIME_TARGETS)"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("demo", parents=[common], help="run the demo crew (crew:demo)")
    turns = sub.add_parser("turns", parents=[common], help="serve turns with your handler")
    turns.add_argument("handler", help="package.module:function, an async (TurnContext) -> None")
    return parser


async def serve(config: RuntimeConfig, handler: TurnHandler) -> int:
    """Run a turn worker until SIGTERM/SIGINT; the process exit code."""
    worker = TurnWorker(
        config.messaging_address,
        Minter(config.principal, config.internal_key),
        config.targets,
        handler,
        wait_seconds=config.wait_seconds,
        lease_seconds=config.lease_seconds,
        concurrency=config.concurrency,
        health_file=config.health_file,
    )
    run = asyncio.create_task(worker.run())
    signals = 0

    def on_signal() -> None:
        nonlocal signals
        signals += 1
        if signals == 1:
            worker.stop()
        else:
            run.cancel()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    try:
        await run
    except asyncio.CancelledError:
        return 130
    except errors.AgentWorksError as exc:
        print(f"agentworks-runtime: {exc.message}", file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `agentworks-runtime` console script."""
    args = _parser().parse_args(argv)
    environ = dict(os.environ)
    for flag, variable in _FLAG_ENV.items():
        value = getattr(args, flag, None)
        if value:
            environ[variable] = value
    try:
        if args.command == "demo":
            handler: TurnHandler = demo.handle_turn
            config = RuntimeConfig.from_env(
                environ, default_principal=demo.PRINCIPAL, default_targets=demo.TARGETS
            )
        else:
            handler = load_handler(args.handler)
            config = RuntimeConfig.from_env(environ)
    except ValueError as exc:
        print(f"agentworks-runtime: {exc}", file=sys.stderr)
        return 2
    configure_logging("runtime", level=config.log_level, json=config.log_json)
    return asyncio.run(serve(config, handler))
