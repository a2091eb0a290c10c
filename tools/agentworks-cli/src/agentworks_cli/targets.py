"""`agentworks targets register|update|set-limit|get|list`: crews and workflows (C1, F12,
G3, V1)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from agentworks_cli.api import ApiClient
from agentworks_cli.errors import UsageError
from agentworks_cli.listing import fetch, more, paging_options
from agentworks_cli.output import print_fields, print_json, print_table


def bare(value: str, kind: str) -> str:
    """A crew's name or a workflow's id as the call commands take it: without the
    `crew:`/`workflow:` prefix that the targets commands use."""
    prefix = f"{kind}:"
    if value.startswith(prefix):
        what = "crew's name" if kind == "crew" else "workflow's id"
        raise UsageError(
            f"give the {what} without the {prefix!r} prefix: "
            f"{value.removeprefix(prefix)!r}, not {value!r}"
        )
    return value


def _running_limit(result: Mapping[str, Any]) -> str:
    if result.get("effective_running_limit") is None:
        return "- (not registered with functions: run `agentworks targets register` again)"
    if not result.get("running_limit"):
        return f"{result['effective_running_limit']} (the functions service's default)"
    return str(result["running_limit"])


def _print_target(result: Mapping[str, Any]) -> None:
    pairs = [
        ("target", result["target"]),
        ("owner", result["owner"]),
        ("free_text_ask", result["capabilities"]["free_text_ask"]),
        ("a2a_card", result["capabilities"].get("a2a_card", True)),
    ]
    if "running_limit" in result:  # not after `update`, which changes messaging only
        pairs.append(("running_limit", _running_limit(result)))
    pairs += [("created_at", result.get("created_at")), ("updated_at", result.get("updated_at"))]
    print_fields(pairs)


def _target(args: argparse.Namespace) -> str:
    """TARGET (crew:<name> or workflow:<id>), or --crew NAME / --workflow ID."""
    given = [
        value
        for value in (
            args.target,
            args.crew and "crew:" + bare(args.crew, "crew"),
            args.workflow and "workflow:" + bare(args.workflow, "workflow"),
        )
        if value
    ]
    if len(given) != 1:
        command = args.action.replace("_", "-")
        said = "nothing" if not given else " and ".join(given)
        raise UsageError(
            f"targets {command}: name one target, as TARGET (crew:<name> or workflow:<id>) "
            f"or with --crew NAME or --workflow ID; got {said}"
        )
    return given[0]


async def targets(api: ApiClient, args: argparse.Namespace) -> None:
    call: dict[str, Any] = {"action": args.action, "target": _target(args)}
    if args.action == "register":
        call["owner"] = args.owner
    if args.action in ("register", "set_limit") and args.running_limit is not None:
        call["running_limit"] = args.running_limit
    for name in ("free_text_ask", "a2a_card"):
        if args.action in ("register", "update") and getattr(args, name) is not None:
            call[name] = getattr(args, name)
    if args.action == "update" and args.free_text_ask is None and args.a2a_card is None:
        raise UsageError(
            "targets update: say --free-text-ask or --no-free-text-ask, "
            "--a2a-card or --no-a2a-card (or both)"
        )
    result = await api.call("targets", call)
    print_json(result) if args.json else _print_target(result)


async def list_targets(api: ApiClient, args: argparse.Namespace) -> None:
    page = await fetch(api, args, "targets", target=args.target)
    if args.json:
        print_json(page)
        return
    print_table(
        ("TARGET", "OWNER", "RUNNING", "FREE", "FUNCTIONS"),
        (
            (
                t["target"],
                t["owner"],
                f"{t['running']}/{t['effective_running_limit']}",
                t["free"],
                ", ".join(f["name"] for f in t["functions"]),
            )
            for t in page["items"]
        ),
        "no targets (you own none and may call no function)",
    )
    more(page)


def _target_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", nargs="?", metavar="TARGET", help="crew:<name> or workflow:<id>")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--crew", metavar="NAME", help="the crew NAME (instead of TARGET)")
    where.add_argument("--workflow", metavar="ID", help="the workflow ID (instead of TARGET)")


def _capability_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--free-text-ask",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the 'Agent messaging' setting: accept programmatic messages (on unless turned off)",
    )
    parser.add_argument(
        "--a2a-card",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="serve the target as an A2A agent: its agent card, the /a2a/agents listing and "
        "A2A requests (on unless turned off; off answers as for an unknown target)",
    )


def add_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add `targets` to the `agentworks` parser."""
    targets_cmd = commands.add_parser("targets", help="register and inspect crews and workflows")
    targets_cmds = targets_cmd.add_subparsers(title="actions", metavar="ACTION", required=True)
    register = targets_cmds.add_parser(
        "register",
        parents=[common],
        help="register (or replace) a crew or workflow (operator)",
    )
    _target_arguments(register)
    register.add_argument(
        "--owner", required=True, metavar="PRINCIPAL", help="owner, e.g. user:alice"
    )
    _capability_flags(register)
    register.add_argument(
        "--running-limit",
        type=int,
        metavar="N",
        help="function calls that may run at once (1-1000; default: the functions service's "
        "default); more are refused as busy",
    )
    register.set_defaults(run=targets, action="register")
    update = targets_cmds.add_parser(
        "update", parents=[common], help="change a target's capabilities (owner or operator)"
    )
    _target_arguments(update)
    _capability_flags(update)
    update.set_defaults(run=targets, action="update")
    set_limit = targets_cmds.add_parser(
        "set-limit",
        parents=[common],
        help="change how many function calls of a target may run at once (operator)",
    )
    _target_arguments(set_limit)
    set_limit.add_argument(
        "--running-limit",
        type=int,
        required=True,
        metavar="N",
        help="1-1000, or 0 for the functions service's default",
    )
    set_limit.set_defaults(run=targets, action="set_limit")
    listing = targets_cmds.add_parser(
        "list",
        parents=[common],
        help="list targets with their functions and running slots",
        description="List the crews and workflows you own (every function) or may call a "
        "function of (those functions), with their running slots in use and free (the "
        "operator: all).",
    )
    listing.add_argument(
        "--target", metavar="TARGET", help="only this crew:<name> or workflow:<id>"
    )
    paging_options(listing, "targets")
    listing.set_defaults(run=list_targets)
    get = targets_cmds.add_parser("get", parents=[common], help="show a crew or workflow")
    _target_arguments(get)
    get.set_defaults(run=targets, action="get")
