"""`agentworks`: the command line for AgentWorks (G3).

Every command calls a tool on the gateway's HTTP API (`POST /api/v1/tools/<tool>`), the
same tools MCP clients use. Output is human-readable by default and JSON with `--json`;
exit codes are in errors.py (and docs/cli.md). The commands live in a module per area
(messages, calls, declarations, targets, tokens, wake_ups, schedules, pauses, webhooks,
mcp), put together by parser.py; this module only runs one. `keys` alone is local: it
makes signing keys on this machine and calls nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from agentworks_cli.api import ApiClient, ApiError
from agentworks_cli.errors import EXIT_CODES, EXIT_ERROR, EXIT_OK, EXIT_USAGE, UsageError
from agentworks_cli.output import note, print_json
from agentworks_cli.parser import build_parser
from agentworks_cli.settings import Settings, no_token, resolve_settings, url_origin

UP_NEEDS_DEV = "`agentworks up` needs the agentworks-dev package; `make run` installs it"


def _run_up(argv: list[str]) -> int:
    try:
        from agentworks_dev import up  # the supervisor, a development tool: import lazily
    except ModuleNotFoundError as exc:
        if exc.name != "agentworks_dev":
            raise
        note(f"agentworks: {UP_NEEDS_DEV}")
        return EXIT_USAGE
    return up.main(argv)


def _fail(code: str, message: str, as_json: bool, exit_code: int | None = None) -> int:
    """Say what failed (the error object on stdout with --json, else on stderr); the
    exit code is the status's unless given."""
    if as_json:
        print_json({"error": {"code": code, "message": message}})
    else:
        note(f"agentworks: {message}")
    return EXIT_CODES.get(code, EXIT_ERROR) if exit_code is None else exit_code


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["up"]:
        return _run_up(argv[1:])
    parser = build_parser()
    if "--json" in argv:  # a usage error too is a JSON object on stdout then
        said = io.StringIO()
        try:
            with contextlib.redirect_stderr(said):
                args = parser.parse_args(argv)
        except SystemExit as exc:
            if exc.code == 0:  # --help
                raise
            last = (said.getvalue().strip().splitlines() or ["invalid arguments"])[-1]
            return _fail("USAGE", last.replace(": error: ", ": "), True, EXIT_USAGE)
    else:
        args = parser.parse_args(argv)
    if args.run is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE

    if getattr(args, "local", False):  # `keys`: made here, no gateway or token involved
        try:
            return args.run(args)
        except UsageError as exc:
            return _fail("USAGE", str(exc), args.json, exc.exit_code)

    from agentworks.client.logging import configure_logging

    # stdout carries results (and MCP frames for `mcp stdio`); logs go to stderr.
    configure_logging("cli", level=os.environ.get("AGENTWORKS_LOG_LEVEL", "warning"), json=False)
    settings: Settings | None = None
    try:
        settings = resolve_settings(args.url, args.token, os.environ, Path.cwd())
        if not settings.token:
            raise no_token(settings)
        return asyncio.run(_dispatch(args, settings))
    except (UsageError, UnicodeError) as exc:
        if isinstance(exc, UnicodeError):  # argv, stdin or an @file that is not UTF-8
            exc = UsageError(
                "an argument, a file or stdin is not valid UTF-8 text, or the token is not "
                f"ASCII ({exc}); the API takes UTF-8 JSON"
            )
        return _fail("USAGE", str(exc), args.json, exc.exit_code)
    except ApiError as exc:
        if settings is not None:
            exc = url_origin(exc, settings)
        return _fail(exc.code, exc.message, args.json)
    except KeyboardInterrupt:
        return EXIT_OK if getattr(args, "follow", False) else 130
    except BrokenPipeError:  # `agentworks ... | head`: the reader has gone; no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1  # as Python itself exits on EPIPE


async def _dispatch(args: argparse.Namespace, settings: Settings) -> int:
    async with ApiClient(settings.url, settings.token) as api:
        code = await args.run(api, args)
    return EXIT_OK if code is None else code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
