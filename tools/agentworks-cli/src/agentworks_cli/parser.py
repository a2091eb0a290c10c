"""The `agentworks` argument parser (also the source of docs/cli.md): the options every
command shares, and each area's commands from its own module."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from agentworks_cli import (
    calls,
    keys,
    mcp,
    messages,
    pauses,
    schedules,
    targets,
    tokens,
    wake_ups,
    webhooks,
)
from agentworks_cli.settings import DEFAULT_URL


class CommandParser(argparse.ArgumentParser):
    """The parser of a command or action: an argument it does not know is its own error,
    shown with its own usage (argparse would leave it to the top-level parser, whose
    usage says nothing about the command's options)."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


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
        f"directory, used only with the token from that file; else {DEFAULT_URL})",
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
    return parent


def build_parser() -> argparse.ArgumentParser:
    """The `agentworks` argument parser (also the source of docs/cli.md)."""
    common = _common_options()
    parser = argparse.ArgumentParser(
        prog="agentworks",
        description="Talk to AgentWorks crews and workflows, and operate the suite.",
        epilog="Exit codes: 0 ok, 1 other error, 2 usage/invalid argument, 3 auth, "
        "4 not found, 5 busy, 6 refused (conflict/precondition), 7 unavailable, 8 a waited-for "
        "call ended failed/interrupted/cancelled.",
        # A parent of its own: set_defaults below changes the defaults of these actions,
        # and the subcommands' copies must keep theirs (SUPPRESS).
        parents=[_common_options()],
    )
    parser.set_defaults(url=None, token=None, json=False, run=None)
    # Commands and their actions (CommandParser, inherited) report unknown arguments
    # with their own usage.
    commands = parser.add_subparsers(
        title="commands", metavar="COMMAND", parser_class=CommandParser
    )
    # In this order in `agentworks --help` and docs/cli.md.
    areas = (messages, calls, targets, tokens, wake_ups, schedules, pauses, webhooks, mcp, keys)
    for area in areas:
        area.add_commands(commands, common)

    # up (parsed by the supervisor itself; see main)
    commands.add_parser(
        "up",
        help="start the whole suite locally (embedded PostgreSQL, services, demo runtime); "
        "`agentworks up --help` lists its options",
        add_help=False,
    )
    return parser
