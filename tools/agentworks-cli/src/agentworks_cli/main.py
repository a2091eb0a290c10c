"""`agentworks`: the command line for AgentWorks (G3).

Every command calls a tool on the gateway's HTTP API (`POST /api/v1/tools/<tool>`), the
same tools MCP clients use. Output is human-readable by default and JSON with `--json`;
exit codes are in errors.py (and docs/cli.md). The commands live in a module per area
(messages, calls, declarations, targets, tokens, wake_ups, schedules, pauses, webhooks,
mcp), put together by parser.py; this module only runs one. `completion` and `keys` run
without a gateway (`keys` makes signing keys on this machine and calls nothing).
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
from agentworks_cli.errors import (
    EXIT_CODES,
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
)
from agentworks_cli.output import error, note, print_json
from agentworks_cli.parser import build_parser
from agentworks_cli.settings import Settings, no_token, resolve_settings, url_origin
from agentworks_cli.terminal import disable_colour

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
    return _refused(ApiError(code, message), as_json, exit_code)


def _refused(exc: ApiError, as_json: bool, exit_code: int | None = None) -> int:
    """A refusal: plain words on stderr for people; with --json the error object on
    stdout, its reason and metadata (docs/errors.md) for programs."""
    if as_json:
        print_json({"error": exc.as_object()})
    else:
        error(f"agentworks: {exc.message}")
    return EXIT_CODES.get(exc.code, EXIT_ERROR) if exit_code is None else exit_code


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code. Ctrl-C, wherever it comes, ends it with exit
    130 and one line on stderr (what was stopped), never a traceback."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args: argparse.Namespace | None = None
    try:
        if argv[:1] == ["up"]:
            return _run_up(argv[1:])
        if argv[:1] == ["__complete"]:  # hidden: the completion scripts' names (V8)
            from agentworks_cli import complete

            return complete.print_names(build_parser(), argv[1:])
        parser = build_parser()
        parsed = _parse(parser, argv)
        if isinstance(parsed, int):
            return parsed
        args = parsed
        return _run(parser, args)
    except KeyboardInterrupt:
        said = getattr(args, "on_interrupt", None) or "interrupted"
        note(f"agentworks: {said}")
        return EXIT_INTERRUPTED


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace | int:
    """The parsed arguments, or the exit code of a usage error (with --json, reported as
    the JSON error object on stdout)."""
    if "--json" not in argv:
        return parser.parse_args(argv)
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            return parser.parse_args(argv)
    except SystemExit as exc:
        if exc.code == 0:  # --help, --version
            raise
        last = (said.getvalue().strip().splitlines() or ["invalid arguments"])[-1]
        return _fail("USAGE", last.replace(": error: ", ": "), True, EXIT_USAGE)


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.no_color:
        disable_colour()
    if args.offline is not None:  # `completion`: needs no gateway and no token
        code: int = args.offline(parser, args)
        return code
    if args.run is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE

    if getattr(args, "local", False):  # `keys`: made here, no gateway or token involved
        try:
            return args.run(args)
        except UsageError as exc:
            return _fail("USAGE", str(exc), args.json, exc.exit_code)

    from agentworks.core.logging import configure_logging

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
        return _refused(exc, args.json)
    except BrokenPipeError:  # `agentworks ... | head`: the reader has gone; no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1  # as Python itself exits on EPIPE


async def _dispatch(args: argparse.Namespace, settings: Settings) -> int:
    async with ApiClient(settings.url, settings.token) as api:
        code = await args.run(api, args)
    return EXIT_OK if code is None else code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
