"""The `agentworks-runtime` command line: its subcommands and flags, and the environment
variable each flag stands for (every flag falls back to one, `RuntimeConfig`)."""

from __future__ import annotations

import argparse

from agentworks.runtime.config import DEFAULT_TURN_CONCURRENCY, DEFAULT_TURN_SECONDS

FLAG_ENV = {
    "messaging_address": "AGENTWORKS_MESSAGING_ADDRESS",
    "functions_address": "AGENTWORKS_FUNCTIONS_ADDRESS",
    "scheduler_address": "AGENTWORKS_SCHEDULER_ADDRESS",
    "principal": "AGENTWORKS_RUNTIME_PRINCIPAL",
    "targets": "AGENTWORKS_RUNTIME_TARGETS",
    "root": "AGENTWORKS_RUNTIME_ROOT",
    "credential_file": "AGENTWORKS_RUNTIME_CREDENTIAL_FILE",
    "gateway_url": "AGENTWORKS_GATEWAY_URL",
    "sandbox": "AGENTWORKS_RUNTIME_SANDBOX",
    "bwrap": "AGENTWORKS_RUNTIME_BWRAP",
    "model": "AGENTWORKS_LLM_MODEL",
    "concurrency": "AGENTWORKS_RUNTIME_CONCURRENCY",
    "turn_seconds": "AGENTWORKS_RUNTIME_TURN_SECONDS",
}


def parser() -> argparse.ArgumentParser:
    """The `agentworks-runtime` argument parser."""
    parser = argparse.ArgumentParser(
        prog="agentworks-runtime",
        description="Run an AgentWorks agent runtime: turns, function executions, commands.",
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--principal", help="agent:<crew>/<agent> (env AGENTWORKS_RUNTIME_PRINCIPAL)"
    )
    common.add_argument(
        "--targets", help="comma-separated, e.g. crew:demo (env AGENTWORKS_RUNTIME_TARGETS)"
    )
    common.add_argument(
        "--credential-file",
        help="file holding the runtime credential, awr_... (env "
        "AGENTWORKS_RUNTIME_CREDENTIAL_FILE; or AGENTWORKS_RUNTIME_CREDENTIAL)",
    )
    common.add_argument(
        "--gateway-url",
        help="where the credential is exchanged, e.g. http://127.0.0.1:8080 "
        "(env AGENTWORKS_GATEWAY_URL)",
    )
    turns_flags = argparse.ArgumentParser(add_help=False)
    turns_flags.add_argument(
        "--messaging-address", help="host:port[,host:port] (env AGENTWORKS_MESSAGING_ADDRESS)"
    )
    turns_flags.add_argument(
        "--scheduler-address",
        help="host:port[,host:port] for wake-ups (env AGENTWORKS_SCHEDULER_ADDRESS)",
    )
    turns_flags.add_argument(
        "--functions-address",
        help="host:port[,host:port] for function calls (env AGENTWORKS_FUNCTIONS_ADDRESS)",
    )
    turns_flags.add_argument(
        "--concurrency",
        metavar="N",
        help="turns of different conversations handled at once (env "
        f"AGENTWORKS_RUNTIME_CONCURRENCY, default {DEFAULT_TURN_CONCURRENCY})",
    )
    turns_flags.add_argument(
        "--turn-seconds",
        metavar="S",
        help="the most one turn may take; its handler (or command) is then ended and the "
        f"turn completed (env AGENTWORKS_RUNTIME_TURN_SECONDS, default {DEFAULT_TURN_SECONDS})",
    )
    exec_flags = argparse.ArgumentParser(add_help=False)
    exec_flags.add_argument(
        "--functions-address", help="host:port[,host:port] (env AGENTWORKS_FUNCTIONS_ADDRESS)"
    )
    exec_flags.add_argument(
        "--root",
        help="project root; calls run in ROOT/.calls/<call_id>/ (env AGENTWORKS_RUNTIME_ROOT, "
        "default: the working directory)",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser(
        "demo", parents=[common, turns_flags], help="serve the demo crew's turns (crew:demo)"
    )
    sub.add_parser(
        "functions-demo",
        parents=[common, exec_flags],
        help="serve the demo crew's function executions (hello, word_count, confirm)",
    )
    turns = sub.add_parser(
        "turns", parents=[common, turns_flags], help="serve turns with your handler"
    )
    turns.add_argument("handler", help="package.module:function, an async (TurnContext) -> None")
    llm = sub.add_parser(
        "llm",
        parents=[common, turns_flags],
        help="serve turns and executions with a model on an OpenAI-compatible endpoint (L4)",
        description="The reference LLM runtime: the model answers turns and executions "
        "through the agent tools. The endpoint is the openai client's: OPENAI_BASE_URL "
        "(e.g. http://localhost:11434/v1 for Ollama) and OPENAI_API_KEY (local servers "
        "need none); more settings: AGENTWORKS_LLM_* (docs/agents.md).",
    )
    llm.add_argument("--model", help="the model to ask (env AGENTWORKS_LLM_MODEL)")
    llm.add_argument(
        "--serve",
        choices=("both", "turns", "executions"),
        default="both",
        help="what to serve for the targets (default both)",
    )
    llm.add_argument(
        "--root",
        help="project root of executions; calls run in ROOT/.calls/<call_id>/ "
        "(env AGENTWORKS_RUNTIME_ROOT, default: the working directory)",
    )
    commands = sub.add_parser(
        "run-commands",
        parents=[common, exec_flags],
        help="serve executions (and turns) by running a declared command per call (R2) "
        "and per turn (L2)",
    )
    commands.add_argument(
        "--messaging-address",
        help="host:port[,host:port] for turn commands (env AGENTWORKS_MESSAGING_ADDRESS)",
    )
    commands.add_argument(
        "--scheduler-address",
        help="host:port[,host:port] for the turns' wake-ups (env AGENTWORKS_SCHEDULER_ADDRESS)",
    )
    commands.add_argument(
        "--concurrency",
        metavar="N",
        help="turns (and executions) handled at once (env AGENTWORKS_RUNTIME_CONCURRENCY; "
        f"turns default {DEFAULT_TURN_CONCURRENCY}, executions as the targets' running limits "
        "allow)",
    )
    commands.add_argument(
        "--turn-seconds",
        metavar="S",
        help="the most one turn command may take before it is ended (env "
        f"AGENTWORKS_RUNTIME_TURN_SECONDS, default {DEFAULT_TURN_SECONDS})",
    )
    commands.add_argument(
        "--commands",
        required=True,
        metavar="FILE|JSON",
        help='a JSON file or inline JSON: {"function": ["argv", ...] (run as is) or '
        '"command string" (run by /bin/sh -c)}, or {"commands": {...}, "turns": {"crew:x": '
        'command}, "limits": {...}, "network": "outbound"|"none", "read_only": [...], '
        '"targets": {"crew:x": {...}}}',
    )
    commands.add_argument(
        "--sandbox",
        choices=("bwrap", "none"),
        help="run each command in a bubblewrap sandbox (bwrap, the default) or without one "
        "(none: commands see all the runner sees; env AGENTWORKS_RUNTIME_SANDBOX)",
    )
    commands.add_argument(
        "--bwrap",
        metavar="PATH",
        help="the bubblewrap program (env AGENTWORKS_RUNTIME_BWRAP, default bwrap on PATH)",
    )
    commands.add_argument(
        "--target",
        action="append",
        default=[],
        metavar="crew:x",
        help="a target to serve (repeatable; default AGENTWORKS_RUNTIME_TARGETS)",
    )
    return parser
