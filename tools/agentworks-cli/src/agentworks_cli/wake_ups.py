"""`agentworks wake-ups create|list|get|cancel|reschedule`: durable wake-ups (S1, G3)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from agentworks_cli.api import ApiClient
from agentworks_cli.output import print_fields, print_json, print_table, short_time
from agentworks_cli.scheduler import (
    DURATION_HELP,
    TIME_HELP,
    cli_time,
    duration,
    list_options,
    list_request,
    next_page,
    set_fields,
    submission_option,
)


def _print_wake_up(w: Mapping[str, Any]) -> None:
    print_fields(
        [
            ("wake_up_id", w["wake_up_id"]),
            ("status", w["status"]),
            ("due_at", w["due_at"]),
            ("conversation_id", w["conversation_id"]),
            ("product", w["product"] or None),
            ("note", w["note"] or None),
            ("created_by", w["created_by"]),
            ("fired_at", w["fired_at"]),
            ("error", w["error"]),
        ]
    )


async def wake_ups(api: ApiClient, args: argparse.Namespace) -> None:
    if args.action == "list":
        request = list_request("list", args)
        if args.all:
            request["include_finished"] = True
        result = await api.call("wake_ups", request)
        if args.json:
            print_json(result)
            return
        print_table(
            ("ID", "STATUS", "DUE", "CONVERSATION", "PRODUCT", "NOTE"),
            (
                (
                    w["wake_up_id"],
                    w["status"],
                    short_time(w["due_at"]),
                    w["conversation_id"],
                    w["product"],
                    w["note"].splitlines()[0][:40] if w["note"] else "",
                )
                for w in result["wake_ups"]
            ),
            "no wake-ups",
            keep=(0, 2, 3),
        )
        next_page(result, "wake_ups", args)
        return
    if args.action == "create":
        request = set_fields(
            {"action": "create"},
            args,
            conversation_id="conversation",
            note="note",
            product="product",
            submission_id="submission_id",
        )
    else:
        request = {"action": args.action, "wake_up_id": args.wake_up_id}
    if args.action in ("create", "reschedule"):
        if args.at:
            request["at"] = cli_time(args.at, "--at")
        else:
            request["delay_seconds"] = duration(args.delay, "--delay")
    result = await api.call("wake_ups", request)
    print_json(result) if args.json else _print_wake_up(result)


def add_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add `wake-ups` to the `agentworks` parser."""
    wake = commands.add_parser(
        "wake-ups", help="create, list, cancel and reschedule durable wake-ups"
    )
    wake_cmds = wake.add_subparsers(title="actions", metavar="ACTION", required=True)
    create = wake_cmds.add_parser(
        "create",
        parents=[common],
        help="create a wake-up (operators, or the agents of the conversation's target)",
        description="Prompt a conversation's agents again at a time (--at) or after a delay "
        "(--delay), with an optional note. Messages never cancel it; global and product "
        "pauses hold it.",
    )
    create.add_argument("--conversation", required=True, metavar="ID", help="the conversation")
    when = create.add_mutually_exclusive_group(required=True)
    when.add_argument("--at", metavar="TIME", help=f"when: {TIME_HELP}")
    when.add_argument("--delay", metavar="DURATION", help=f"from now: {DURATION_HELP}")
    create.add_argument("--note", help="the text the agents get with the wake-up")
    create.add_argument(
        "--product",
        metavar="PRODUCT",
        help="operators: the product whose pauses hold it (default: the conversation's target)",
    )
    submission_option(create, "wake-up")
    create.set_defaults(run=wake_ups, action="create")
    listing = wake_cmds.add_parser(
        "list", parents=[common], help="list the wake-ups you may see (pending unless --all)"
    )
    list_options(listing, "wake-ups")
    listing.add_argument(
        "--all", action="store_true", help="also fired, cancelled and failed wake-ups"
    )
    listing.set_defaults(run=wake_ups, action="list")
    for action, text in (("get", "show a wake-up"), ("cancel", "cancel a pending wake-up")):
        one = wake_cmds.add_parser(action, parents=[common], help=text)
        one.add_argument("wake_up_id", metavar="ID", help="the wake-up id")
        one.set_defaults(run=wake_ups, action=action)
    move = wake_cmds.add_parser(
        "reschedule", parents=[common], help="give a pending wake-up a new time"
    )
    move.add_argument("wake_up_id", metavar="ID", help="the wake-up id")
    when = move.add_mutually_exclusive_group(required=True)
    when.add_argument("--at", metavar="TIME", help=f"the new time: {TIME_HELP}")
    when.add_argument("--delay", metavar="DURATION", help=f"from now: {DURATION_HELP}")
    move.set_defaults(run=wake_ups, action="reschedule")
