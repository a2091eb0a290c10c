"""`agentworks calls list|cancel`, `conversations list`, `inboxes list`, and the paging the
other list commands share (`targets list`, `runtimes list`): the read-only `list` tool
(V1), a page at a time (`--cursor`) or every page (`--all`).

The services decide what you see (A3): your own calls and conversations, and those of
the targets you own; the operator sees all.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from agentworks_cli import call_watch
from agentworks_cli.api import ApiClient
from agentworks_cli.output import note, print_json, print_table, short_time
from agentworks_cli.scheduler import cli_time

CALL_STATUSES = (
    "open",
    "running",
    "waiting_for_input",
    "completed",
    "failed",
    "interrupted",
    "cancelled",
)


def paging_options(parser: argparse.ArgumentParser, what: str) -> None:
    """--limit, --cursor and --all, as every list command takes them."""
    parser.add_argument("--limit", type=int, metavar="N", help=f"at most N {what} a page (1-200)")
    parser.add_argument(
        "--cursor", metavar="CURSOR", help="the next page: the cursor the last page printed"
    )
    parser.add_argument(
        "--all", action="store_true", help="every page, one after the other (else the first)"
    )


async def fetch(api: ApiClient, args: argparse.Namespace, what: str, **filters: Any) -> dict:
    """One page of `list` (or every page with --all, as one), filters not None only."""
    request: dict[str, Any] = {"what": what}
    request.update({k: v for k, v in filters.items() if v is not None and v is not False})
    if args.limit is not None:
        request["limit"] = args.limit
    if args.cursor:
        request["cursor"] = args.cursor
    page = await api.call("list", request)
    if not args.all:
        return page
    items = list(page["items"])
    while page["next_cursor"]:
        page = await api.call("list", {**request, "cursor": page["next_cursor"]})
        items.extend(page["items"])
    return {**page, "items": items}


def more(page: Mapping[str, Any]) -> None:
    """Say how to get the next page, when there is one."""
    if page["next_cursor"]:
        note(f"more: --cursor {page['next_cursor']}")


# ------------------------------------------------------------------------------ calls


async def list_calls(api: ApiClient, args: argparse.Namespace) -> None:
    page = await fetch(
        api,
        args,
        "calls",
        target=args.target,
        caller=args.caller,
        status=args.status,
        created_after=cli_time(args.created_after, "--created-after")
        if args.created_after
        else None,
        created_before=cli_time(args.created_before, "--created-before")
        if args.created_before
        else None,
    )
    if args.json:
        print_json(page)
        return
    print_table(
        ("CALL", "STATUS", "TARGET", "FUNCTION", "CALLER", "CREATED", "ENDED", "PROGRESS"),
        (
            (
                c["call_id"],
                c["status"],
                c["target"],
                c["function"],
                c["caller"],
                short_time(c["created_at"]),
                short_time(c["ended_at"]),
                c["question"] or c["progress"],
            )
            for c in page["items"]
        ),
        "no calls",
        keep=(0, 1, 5, 6),
    )
    more(page)
    if any(c["status"] in CALL_STATUSES[1:3] for c in page["items"]):
        note("cancel an open call: agentworks calls cancel CALL_ID")


async def cancel_calls(api: ApiClient, args: argparse.Namespace) -> None:
    ended = []
    for call_id in args.call_ids:
        status = await api.call("functions", {"action": "cancel", "call_id": call_id})
        ended.append(status)
        if not args.json:
            print(f"call {status['call_id']} is {status['status']}", flush=True)
    if args.json:
        print_json(ended)


# ---------------------------------------------------------------------- conversations


def _last(conversation: Mapping[str, Any]) -> str:
    last = conversation["last_message"]
    if last is None:
        return ""
    text = last["text"].splitlines()[0] if last["text"] else ""
    return f"{last['sender']}: {text}"


async def list_conversations(api: ApiClient, args: argparse.Namespace) -> None:
    page = await fetch(api, args, args.what, target=args.target, since=args.since)
    if args.json:
        print_json(page)
        return
    if args.what == "inboxes":
        print_table(
            ("INBOX", "CONVERSATION", "TARGET", "PRINCIPAL", "CREATED"),
            (
                (
                    i["inbox_id"],
                    i["conversation_id"],
                    i["target"],
                    i["principal"],
                    short_time(i["created_at"]),
                )
                for i in page["items"]
            ),
            "no inboxes",
            keep=(0, 1, 4),
        )
    else:
        header = ["CONVERSATION", "TARGET", "INBOX", "MESSAGES", "LAST AT", "LAST MESSAGE"]
        if args.since:
            header.insert(4, "NEW")
        rows = []
        for c in page["items"]:
            last = c["last_message"]
            row = [
                c["conversation_id"],
                c["target"],
                c["inbox_id"],
                c["message_count"],
                short_time(last["created_at"] if last else None),
                _last(c),
            ]
            if args.since:
                row.insert(4, c["new_messages"])
            rows.append(row)
        print_table(header, rows, "no conversations", keep=(0, 2))
    more(page)
    note(f"later, what is new: --since {page['since_cursor']}")


# ----------------------------------------------------------------------------- parser


def add_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add `calls`, `conversations` and `inboxes` to the `agentworks` parser."""
    calls = commands.add_parser(
        "calls", help="list function calls (yours, and your targets') and cancel open ones"
    )
    calls_cmds = calls.add_subparsers(title="actions", metavar="ACTION", required=True)
    listing = calls_cmds.add_parser(
        "list",
        parents=[common],
        help="list calls, newest first",
        description="List the function calls you may see, newest first: your own and every "
        "call on a target you own (the operator: all). Calls left running by a `call "
        "--wait` you stopped are found with --status open and ended with `agentworks calls "
        "cancel`.",
    )
    listing.add_argument(
        "--target", metavar="TARGET", help="only this crew:<name> or workflow:<id>"
    )
    listing.add_argument("--caller", metavar="PRINCIPAL", help="only calls of this principal")
    listing.add_argument(
        "--status",
        choices=CALL_STATUSES,
        help="only calls in this state (open: running or waiting_for_input)",
    )
    listing.add_argument("--created-after", metavar="TIME", help="created at or after TIME")
    listing.add_argument("--created-before", metavar="TIME", help="created before TIME")
    paging_options(listing, "calls")
    listing.set_defaults(run=list_calls)
    cancel = calls_cmds.add_parser(
        "cancel",
        parents=[common],
        help="cancel open calls (their caller, the target's owner or the operator)",
    )
    cancel.add_argument("call_ids", nargs="+", metavar="CALL_ID", help="the calls to cancel")
    cancel.set_defaults(run=cancel_calls)
    call_watch.add_parser(calls_cmds, common)

    for what, text in (
        ("conversations", "list your conversations (and your targets'), newest first"),
        ("inboxes", "list your inboxes: the addresses of your conversations"),
    ):
        command = commands.add_parser(what, help=text)
        actions = command.add_subparsers(title="actions", metavar="ACTION", required=True)
        listing = actions.add_parser("list", parents=[common], help=text)
        listing.add_argument(
            "--target", metavar="TARGET", help="only those with this crew:<name> or workflow:<id>"
        )
        listing.add_argument(
            "--since",
            metavar="CURSOR",
            help="only those with messages newer than this (the cursor an earlier list "
            "printed after --since)",
        )
        paging_options(listing, what)
        listing.set_defaults(run=list_conversations, what=what)
