"""The `agentworks` argument parser (also the source of docs/cli.md): the options every
command shares, and each area's commands from its own module."""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Sequence
from importlib import metadata
from typing import Any

from agentworks_cli import (
    calls,
    completion,
    endpoints,
    keys,
    listing,
    mcp,
    messages,
    pauses,
    runtimes,
    schedules,
    targets,
    tokens,
    wake_ups,
    webhooks,
)
from agentworks_cli.settings import DEFAULT_URL


def did_you_mean(word: str, choices: Sequence[str]) -> str:
    """`; did you mean 'x'?` for the choice closest to a mistyped `word`, else ""."""
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


class SuggestingParser(argparse.ArgumentParser):
    """A mistyped command, action or choice is refused (exit 2) with the closest one."""

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        if action.choices is not None and value not in action.choices:
            choices = ", ".join(map(repr, action.choices))
            hint = did_you_mean(str(value), [str(c) for c in action.choices])
            raise argparse.ArgumentError(
                action, f"invalid choice: {value!r}{hint} (choose from {choices})"
            )
        super()._check_value(action, value)


class CommandParser(SuggestingParser):
    """The parser of a command or action: an argument it does not know is its own error,
    shown with its own usage (argparse would leave it to the top-level parser, whose
    usage says nothing about the command's options), with the closest option it has."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            options = [o for a in self._actions for o in a.option_strings if o.startswith("--")]
            first = extras[0].partition("=")[0]
            hint = did_you_mean(first, options) if first.startswith("--") else ""
            self.error(f"unrecognized arguments: {' '.join(extras)}{hint}")
        return parsed, extras


def cli_version() -> str:
    """The installed agentworks-cli package's version."""
    try:
        return metadata.version("agentworks-cli")
    except metadata.PackageNotFoundError:  # run from a source tree that is not installed
        return "unknown"


def _common_options() -> argparse.ArgumentParser:
    # SUPPRESS keeps a subcommand from resetting what was given before it, so
    # `agentworks --json tokens list` and `agentworks tokens list --json` both work.
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("connection and output")
    group.add_argument(
        "--url",
        default=argparse.SUPPRESS,
        help="gateway base URL (env AGENTWORKS_URL, else url in the cli.json of `agentworks "
        "up`: $AGENTWORKS_HOME/cli.json, or .agentworks/cli.json here or in a parent "
        "directory, used with the token from that file, or with a token you give when "
        f"it is on this machine (loopback); else {DEFAULT_URL})",
    )
    group.add_argument(
        "--token",
        default=argparse.SUPPRESS,
        help="API token (env AGENTWORKS_TOKEN, else token in that cli.json if you own it)",
    )
    group.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS,
        help="print JSON for scripts instead of text",
    )
    group.add_argument(
        "--no-color",
        action="store_true",
        default=argparse.SUPPRESS,
        help="no colour (colour is used only on a terminal, and never when NO_COLOR is set)",
    )
    return parent


def build_parser() -> argparse.ArgumentParser:
    """The `agentworks` argument parser (also the source of docs/cli.md)."""
    common = _common_options()
    parser = SuggestingParser(
        prog="agentworks",
        description="Talk to AgentWorks crews and workflows, and operate the suite.",
        epilog="Exit codes: 0 ok, 1 other error, 2 usage/invalid argument, 3 auth, "
        "4 not found, 5 busy, 6 refused (conflict/precondition), 7 unavailable, 8 a waited-for "
        "call ended failed/interrupted/cancelled, 130 interrupted (Ctrl-C).",
        # A parent of its own: set_defaults below changes the defaults of these actions,
        # and the subcommands' copies must keep theirs (SUPPRESS).
        parents=[_common_options()],
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"agentworks {cli_version()}",
        help="print the CLI's version and exit",
    )
    parser.set_defaults(url=None, token=None, json=False, no_color=False, run=None, offline=None)
    # Commands and their actions (CommandParser, inherited) report unknown arguments
    # with their own usage.
    commands = parser.add_subparsers(
        title="commands", metavar="COMMAND", parser_class=CommandParser
    )
    # In this order in `agentworks --help` and docs/cli.md.
    areas = (
        messages,
        listing,
        calls,
        targets,
        tokens,
        runtimes,
        wake_ups,
        schedules,
        pauses,
        webhooks,
        endpoints,
        mcp,
        keys,
    )
    for area in areas:
        area.add_commands(commands, common)
    completion.add_commands(commands)

    # up (parsed by the supervisor itself; see main)
    commands.add_parser(
        "up",
        help="start the whole suite locally (embedded PostgreSQL, services, demo runtime); "
        "`agentworks up --help` lists its options",
        add_help=False,
    )
    return parser
