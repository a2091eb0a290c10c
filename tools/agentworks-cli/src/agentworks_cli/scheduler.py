"""`agentworks wake-ups|schedules|pauses|webhooks`: the scheduler's commands (S1-S5, G3).

Each calls the tool of the same name (`wake_ups`, `schedules`, `pauses`, `webhooks`) on
the gateway's HTTP API. The scheduler decides who may do what: operators may state a
`--product`; pauses need the operator role.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Mapping
from datetime import UTC, datetime, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from agentworks_cli.api import ApiClient, ApiError
from agentworks_cli.main import UsageError, _note, _print_fields, _print_json, _print_table
from agentworks_cli.main import _short_time as short

_DURATION = re.compile(r"^(\d+)\s*([smhd]?)$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}

TIME_HELP = "ISO 8601, e.g. 2026-01-31T09:00 (local time) or 2026-01-31T08:00:00Z"
DURATION_HELP = "seconds, or a number with s, m, h or d (90, 15m, 2h, 1d)"


def local_zone() -> tzinfo | None:
    """The local time zone with its rules (TZ, else /etc/localtime); None if unknown."""
    name = os.environ.get("TZ", "").removeprefix(":")
    try:
        if name:
            return ZoneInfo(name)
        with open("/etc/localtime", "rb") as file:
            return ZoneInfo.from_file(file)
    except (OSError, ValueError, ZoneInfoNotFoundError):
        return None


def cli_time(value: str, flag: str) -> str:
    """An ISO 8601 time; without an offset it is read in the local time zone, where a
    time the clocks skip (a spring-forward gap) moves forward by the gap, as cron rules
    do (02:30 on such a day in New York is 03:30 EDT)."""
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise UsageError(f"{flag} {value!r} is not a time ({exc}): use {TIME_HELP}") from None
    if parsed.tzinfo is None:
        zone = local_zone()
        if zone is None:
            parsed = parsed.astimezone()
        else:  # fold 0: a skipped time takes the offset before the gap, so moves forward
            parsed = parsed.replace(tzinfo=zone).astimezone(UTC).astimezone(zone)
    return parsed.isoformat()


def duration(value: str, flag: str) -> int:
    """Seconds from `90`, `90s`, `15m`, `2h` or `1d`."""
    match = _DURATION.match(value.strip())
    if not match:
        raise UsageError(f"{flag} {value!r} is not a duration: use {DURATION_HELP}")
    return int(match.group(1)) * _UNITS[match.group(2)]


def _set(request: dict[str, Any], args: argparse.Namespace, **fields: str) -> dict[str, Any]:
    """Copy the given (not None) options into the request: field=attribute name."""
    for field, attribute in fields.items():
        value = getattr(args, attribute, None)
        if value is not None and value is not False:
            request[field] = value
    return request


def _list_request(action: str, args: argparse.Namespace) -> dict[str, Any]:
    return _set(
        {"action": action},
        args,
        conversation_id="conversation",
        product="product",
        after="after",
        limit="limit",
    )


# The scheduler's page size when --limit is not given (docs/scheduler.md).
LIST_LIMIT_DEFAULT = 50


def _next_page(result: Mapping[str, Any], key: str, args: argparse.Namespace) -> None:
    """A hint for the next page, when this one is full (a shorter page was the last)."""
    if result["next_cursor"] and len(result[key]) >= (
        getattr(args, "limit", None) or LIST_LIMIT_DEFAULT
    ):
        _note(f"more may follow: --after {result['next_cursor']}")


# ------------------------------------------------------------------------------ wake-ups


def _print_wake_up(w: Mapping[str, Any]) -> None:
    _print_fields(
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
        request = _list_request("list", args)
        if args.all:
            request["include_finished"] = True
        result = await api.call("wake_ups", request)
        if args.json:
            _print_json(result)
            return
        _print_table(
            ("ID", "STATUS", "DUE", "CONVERSATION", "PRODUCT", "NOTE"),
            (
                (
                    w["wake_up_id"],
                    w["status"],
                    short(w["due_at"]),
                    w["conversation_id"],
                    w["product"],
                    w["note"].splitlines()[0][:40] if w["note"] else "",
                )
                for w in result["wake_ups"]
            ),
            "no wake-ups",
        )
        _next_page(result, "wake_ups", args)
        return
    if args.action == "create":
        request = _set(
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
    _print_json(result) if args.json else _print_wake_up(result)


# ----------------------------------------------------------------------------- schedules


def _rule_text(rule: Mapping[str, Any]) -> str:
    if "cron" in rule:
        return f"cron {rule['cron']} ({rule['time_zone']})"
    return f"every {rule['interval_seconds']} s"


def _print_schedule(x: Mapping[str, Any]) -> None:
    _print_fields(
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
        result = await api.call("schedules", _list_request("list", args))
        if args.json:
            _print_json(result)
            return
        scopes = await _pause_scopes(api) if result["schedules"] else set()
        _print_table(
            ("ID", "NAME", "RULE", "NEXT", "PAUSED", "CONVERSATION"),
            (
                (
                    x["schedule_id"],
                    x["name"],
                    _rule_text(x["recurrence"]),
                    short(x["next_fire_at"]),
                    "yes" if x["paused"] else _held(x["product"], scopes),
                    x["conversation_id"],
                )
                for x in result["schedules"]
            ),
            "no schedules",
        )
        _next_page(result, "schedules", args)
        return
    request: dict[str, Any] = {"action": action}
    if getattr(args, "schedule_id", None):
        request["schedule_id"] = args.schedule_id
    if action == "create":
        _set(request, args, conversation_id="conversation", prompt="prompt", name="name")
        _set(request, args, product="product", paused="paused", submission_id="submission_id")
        if args.start_at:
            request["start_at"] = cli_time(args.start_at, "--start-at")
        _rule_request(request, args)
    elif action == "update":
        _set(request, args, prompt="prompt", name="name")
        _rule_request(request, args)
    elif action == "preview":
        _rule_request(request, args)
        _set(request, args, count="count")
        if args.after:
            request["after"] = cli_time(args.after, "--after")
    result = await api.call("schedules", request)
    if args.json:
        _print_json(result)
    elif action == "delete":
        print(f"deleted schedule {args.schedule_id}", flush=True)
    elif action == "preview":
        for when in result["fire_times"]:
            print(when)
    else:
        _print_schedule(result)


# -------------------------------------------------------------------------------- pauses


async def pauses(api: ApiClient, args: argparse.Namespace) -> None:
    request = _set({"action": args.action}, args, product="product", reason="reason")
    state = await api.call("pauses", request)
    if args.json:
        _print_json(state)
        return
    if state.get("note"):  # a resume that lifted nothing: say so before the table
        _note(state["note"])
    _print_table(
        ("SCOPE", "REASON", "PAUSED_BY", "PAUSED_AT"),
        (
            (p["product"] or "(global)", p["reason"], p["paused_by"], short(p["paused_at"]))
            for p in state["pauses"]
        ),
        "no pauses: timers fire",
    )


# ------------------------------------------------------------------------------ webhooks


def _print_webhook(api: ApiClient, w: Mapping[str, Any], *, created: bool = False) -> None:
    pairs = [("webhook_id", w["webhook_id"]), ("url", api.url + w["path"])]
    if "secret" in w:
        pairs.append(("secret", w["secret"]))
    pairs += [
        ("secret_fingerprint", w["secret_fingerprint"]),
        ("name", w["name"] or None),
        ("conversation_id", w["conversation_id"]),
        ("product", w["product"] or None),
        ("created_by", w["created_by"]),
        ("created_at", w["created_at"]),
        ("secret_rotated_at", w["secret_rotated_at"]),
    ]
    _print_fields(pairs)
    if "secret" in w:
        _note(
            "store the secret now: it is not shown again. Sign each POST with "
            "X-AgentWorks-Timestamp, X-AgentWorks-Signature and X-AgentWorks-Delivery "
            "(docs/scheduler.md, Signing recipe)"
        )
    elif created:
        _note(
            "this --submission-id created this webhook earlier; its secret is given again "
            "only within 24 hours of the create and until a rotate: run `agentworks webhooks "
            f"rotate {w['webhook_id']}` for a new one"
        )


async def webhooks(api: ApiClient, args: argparse.Namespace) -> None:
    action = args.action
    if action == "list":
        result = await api.call("webhooks", _list_request("list", args))
        if args.json:
            _print_json(result)
            return
        _print_table(
            ("ID", "NAME", "CONVERSATION", "PRODUCT", "FINGERPRINT", "CREATED"),
            (
                (
                    w["webhook_id"],
                    w["name"],
                    w["conversation_id"],
                    w["product"],
                    w["secret_fingerprint"],
                    short(w["created_at"]),
                )
                for w in result["webhooks"]
            ),
            "no webhooks",
        )
        _next_page(result, "webhooks", args)
        return
    request: dict[str, Any] = {"action": action}
    if action == "create":
        _set(request, args, conversation_id="conversation", name="name", product="product")
        _set(request, args, submission_id="submission_id")
    else:
        request["webhook_id"] = args.webhook_id
    result = await api.call("webhooks", request)
    if args.json:
        _print_json(result)
    elif action == "delete":
        print(f"deleted webhook {args.webhook_id}", flush=True)
    else:
        _print_webhook(api, result, created=action == "create")


# ------------------------------------------------------------------------------ parser


def _list_options(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--conversation", metavar="ID", help=f"only {what} of this conversation")
    parser.add_argument(
        "--product", metavar="PRODUCT", help=f"only {what} of this product (crew:<name>)"
    )
    parser.add_argument("--after", metavar="CURSOR", help="the next page: the cursor printed last")
    parser.add_argument("--limit", type=int, metavar="N", help="at most N (1-200)")


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


def _submission_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--submission-id",
        metavar="KEY",
        help=f"retry key (up to 128 characters): running the command again with the same key "
        f"returns the {what} the first run created instead of making a second one",
    )


def add_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add `wake-ups`, `schedules`, `pauses` and `webhooks` to the `agentworks` parser."""
    # wake-ups
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
    _submission_option(create, "wake-up")
    create.set_defaults(run=wake_ups, action="create")
    listing = wake_cmds.add_parser(
        "list", parents=[common], help="list the wake-ups you may see (pending unless --all)"
    )
    _list_options(listing, "wake-ups")
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

    # schedules
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
    _submission_option(create, "schedule")
    create.set_defaults(run=schedules, action="create")
    listing = sched_cmds.add_parser("list", parents=[common], help="list schedules")
    _list_options(listing, "schedules")
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

    # pauses
    pause = commands.add_parser("pauses", help="hold and release timers (operator)")
    pause_cmds = pause.add_subparsers(title="actions", metavar="ACTION", required=True)
    product_help = "crew:<name>, workflow:<id>, crew:* or workflow:*; omit for the global pause"
    hold = pause_cmds.add_parser(
        "pause", parents=[common], help="hold timers, globally or for --product"
    )
    hold.add_argument("--product", metavar="PRODUCT", help=product_help)
    hold.add_argument("--reason", help="why (shown by pauses status)")
    hold.set_defaults(run=pauses, action="pause")
    release = pause_cmds.add_parser(
        "resume", parents=[common], help="lift a pause; held timers fire on the next tick"
    )
    release.add_argument("--product", metavar="PRODUCT", help=product_help)
    release.set_defaults(run=pauses, action="resume")
    state = pause_cmds.add_parser("status", parents=[common], help="show the pauses in force")
    state.set_defaults(run=pauses, action="status")

    # webhooks
    hooks = commands.add_parser("webhooks", help="signed webhooks into a conversation")
    hooks_cmds = hooks.add_subparsers(title="actions", metavar="ACTION", required=True)
    create = hooks_cmds.add_parser(
        "create",
        parents=[common],
        help="create a webhook; prints its URL and secret (shown once)",
        description="Create a webhook into a conversation (operators, or the agents of the "
        "conversation's target). Outside systems POST events to the printed URL, signed "
        "with the secret; each body is delivered byte-for-byte into the conversation. "
        "Webhooks are inbound only: AgentWorks never calls out to a URL.",
    )
    create.add_argument("--conversation", required=True, metavar="ID", help="the conversation")
    create.add_argument("--name", help="a label, shown to the agents with each event")
    create.add_argument(
        "--product",
        metavar="PRODUCT",
        help="operators: the product it belongs to (default: the conversation's target)",
    )
    _submission_option(create, "webhook (and its secret, within 24 hours, unless rotated)")
    create.set_defaults(run=webhooks, action="create")
    listing = hooks_cmds.add_parser("list", parents=[common], help="list webhooks (no secrets)")
    _list_options(listing, "webhooks")
    listing.set_defaults(run=webhooks, action="list")
    for action, text in (
        ("get", "show a webhook (not its secret)"),
        ("rotate", "give a webhook a new secret (shown once); the old one stops at once"),
        ("delete", "delete a webhook"),
    ):
        one = hooks_cmds.add_parser(action, parents=[common], help=text)
        one.add_argument("webhook_id", metavar="ID", help="the webhook id")
        one.set_defaults(run=webhooks, action=action)
