"""`agentworks schedules ...`: recurring prompts into a conversation (S2, S3, G3)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from agentworks_cli.api import ApiClient, ApiError
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


def _rule_text(rule: Mapping[str, Any]) -> str:
    if "cron" in rule:
        return f"cron {rule['cron']} ({rule['time_zone']})"
    return f"every {rule['interval_seconds']} s"


def _print_schedule(x: Mapping[str, Any]) -> None:
    print_fields(
        [
            ("schedule_id", x["schedule_id"]),
            ("name", x["name"] or None),
            ("rule", _rule_text(x["recurrence"])),
            ("paused", x["paused"]),
            ("next_fire_at", x["next_fire_at"]),
            ("last_fired_at", x["last_fired_at"]),
            ("fire_count", x["fire_count"]),
            ("conversation_id", x["conversation_id"]),
            ("product", x["product"] or None),
            ("prompt", x["prompt"]),
            ("last_error", x["last_error"]),
            ("created_by", x["created_by"]),
        ]
    )


async def _pause_scopes(api: ApiClient) -> set[str]:
    """The scopes paused now ("" is global); empty when the caller may not see them."""
    try:
        state = await api.call("pauses", {"action": "status"})
    except ApiError:  # pause status is for operators
        return set()
    return {p["product"] for p in state["pauses"]}


def _held(product: str, scopes: set[str]) -> str:
    """`no`, or which pause holds a schedule of `product` (S3): it stays due meanwhile."""
    kind = product.partition(":")[0] + ":*"
    for scope, words in (("", "global pause"), (product, product), (kind, kind)):
        if scope in scopes:
            return f"no (held: {words})"
    return "no"


def _rule_request(request: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    if args.cron is not None:
        request["cron"] = args.cron
    if args.every is not None:
        request["interval_seconds"] = duration(args.every, "--every")
    if args.time_zone is not None:
        request["time_zone"] = args.time_zone
    return request


async def schedules(api: ApiClient, args: argparse.Namespace) -> None:
    action = args.action
    if action == "list":
        result = await api.call("schedules", list_request("list", args))
        if args.json:
            print_json(result)
            return
        scopes = await _pause_scopes(api) if result["schedules"] else set()
        print_table(
            ("ID", "NAME", "RULE", "NEXT", "PAUSED", "CONVERSATION"),
            (
                (
                    x["schedule_id"],
                    x["name"],
                    _rule_text(x["recurrence"]),
                    short_time(x["next_fire_at"]),
                    "yes" if x["paused"] else _held(x["product"], scopes),
                    x["conversation_id"],
                )
                for x in result["schedules"]
            ),
            "no schedules",
            keep=(0, 3, 5),
        )
        next_page(result, "schedules", args)
        return
    request: dict[str, Any] = {"action": action}
    if getattr(args, "schedule_id", None):
        request["schedule_id"] = args.schedule_id
    if action == "create":
        set_fields(request, args, conversation_id="conversation", prompt="prompt", name="name")
        set_fields(request, args, product="product", paused="paused", submission_id="submission_id")
        if args.start_at:
            request["start_at"] = cli_time(args.start_at, "--start-at")
        _rule_request(request, args)
    elif action == "update":
        set_fields(request, args, prompt="prompt", name="name")
        _rule_request(request, args)
    elif action == "preview":
        _rule_request(request, args)
        set_fields(request, args, count="count")
        if args.after:
            request["after"] = cli_time(args.after, "--after")
    result = await api.call("schedules", request)
    if args.json:
        print_json(result)
    elif action == "delete":
        print(f"deleted schedule {args.schedule_id}", flush=True)
    elif action == "preview":
        for when in result["fire_times"]:
            print(when)
    else:
        _print_schedule(result)


def _rule_options(parser: argparse.ArgumentParser, *, required: bool) -> None:
    rule = parser.add_mutually_exclusive_group(required=required)
    rule.add_argument(
        "--cron",
        metavar="EXPR",
        help="five-field cron (minute hour day month weekday) or @hourly/@daily/@weekly/...",
    )
    rule.add_argument("--every", metavar="DURATION", help=f"a fixed interval: {DURATION_HELP}")
    parser.add_argument(
        "--time-zone", metavar="TZ", help="IANA time zone of the cron rule (default UTC)"
    )


def add_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add `schedules` to the `agentworks` parser."""
    sched = commands.add_parser("schedules", help="recurring prompts into a conversation")
    sched_cmds = sched.add_subparsers(title="actions", metavar="ACTION", required=True)
    create = sched_cmds.add_parser(
        "create",
        parents=[common],
        help="create a schedule (operators, or the agents of the conversation's target)",
        description="Deliver PROMPT into a conversation on a cron rule (in --time-zone) or "
        "every fixed interval. Global and product pauses hold it; occurrences missed "
        "meanwhile collapse into one.",
    )
    create.add_argument("--conversation", required=True, metavar="ID", help="the conversation")
    create.add_argument("--prompt", required=True, help="the text each occurrence delivers")
    _rule_options(create, required=True)
    create.add_argument("--name", help="a label")
    create.add_argument(
        "--product",
        metavar="PRODUCT",
        help="operators: the product whose pauses hold it (default: the conversation's target)",
    )
    create.add_argument(
        "--start-at", metavar="TIME", help=f"--every only: the first occurrence ({TIME_HELP})"
    )
    create.add_argument("--paused", action="store_true", help="create it paused")
    submission_option(create, "schedule")
    create.set_defaults(run=schedules, action="create")
    listing = sched_cmds.add_parser(
        "list",
        parents=[common],
        help="list the schedules you may see: yours and those on targets you own",
    )
    list_options(listing, "schedules")
    listing.set_defaults(run=schedules, action="list")
    for action, text in (
        ("get", "show a schedule"),
        ("pause", "pause one schedule"),
        ("resume", "resume one schedule (what was missed meanwhile is skipped)"),
        ("delete", "delete a schedule"),
    ):
        one = sched_cmds.add_parser(action, parents=[common], help=text)
        one.add_argument("schedule_id", metavar="ID", help="the schedule id")
        one.set_defaults(run=schedules, action=action)
    update = sched_cmds.add_parser(
        "update", parents=[common], help="change prompt, name or rule (a new rule starts now)"
    )
    update.add_argument("schedule_id", metavar="ID", help="the schedule id")
    update.add_argument("--prompt", help="the new prompt")
    update.add_argument("--name", help="the new label")
    _rule_options(update, required=False)
    update.set_defaults(run=schedules, action="update")
    preview = sched_cmds.add_parser(
        "preview",
        parents=[common],
        help="the next fire times of a schedule, or of a rule",
        description="Print the next fire times (UTC) of a saved schedule (ID) or of a rule "
        "(--cron with --time-zone, or --every).",
    )
    preview.add_argument("schedule_id", nargs="?", metavar="ID", help="a saved schedule")
    _rule_options(preview, required=False)
    preview.add_argument("--count", type=int, metavar="N", help="how many (1-100, default 5)")
    preview.add_argument("--after", metavar="TIME", help=f"fire times after this ({TIME_HELP})")
    preview.set_defaults(run=schedules, action="preview")
