"""`agentworks messages send|read|watch|transcript`: agent messaging through the `messages`
tool (C1-C7, G3), an inbox's messages pushed as they arrive (`watch`, the gateway's inbox
stream, N1), and whole transcripts through the read-only `transcript` tool (V2, C12)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import urllib.parse
from collections.abc import Mapping
from typing import Any

from agentworks.core.limits import MAX_WAIT_SECONDS
from agentworks_cli import streams
from agentworks_cli.api import ApiClient, ApiError
from agentworks_cli.errors import UsageError
from agentworks_cli.output import local_time, note, print_fields, print_json
from agentworks_cli.terminal import paint

FOLLOW_WAIT_SECONDS = MAX_WAIT_SECONDS
# --follow's pause after an unreachable gateway or service: first, then at most (doubling).
FOLLOW_RETRY_SECONDS = (1.0, 10.0)


def _print_message(message: Mapping[str, Any]) -> None:
    text = message.get("text", "")
    for part in message.get("parts") or ():
        text += "\n" + (part["text"] if "text" in part else json.dumps(part.get("data")))
    body = text.replace("\n", "\n    ")
    when = paint(local_time(message.get("created_at")), "dim")
    print(f"{when}  {paint(message.get('sender', '?') + ':', 'bold')}\n    {body}")


async def send(api: ApiClient, args: argparse.Namespace) -> None:
    text = sys.stdin.read() if args.message == "-" else args.message
    call: dict[str, Any] = {"action": "send", "message": text}
    for field in ("crew", "workflow", "inbox_id", "submission_id"):
        if getattr(args, field):
            call[field] = getattr(args, field)
    receipt = await api.call("messages", call)
    if args.json:
        print_json(receipt)
        return
    fields = ("accepted", "message_id", "conversation_id", "inbox_id")
    print_fields((k, receipt[k]) for k in fields)
    note(
        f"replies: agentworks messages read --inbox {receipt['inbox_id']} --wait {MAX_WAIT_SECONDS}"
    )


async def read(api: ApiClient, args: argparse.Namespace) -> None:
    wait = args.wait if args.wait is not None else (FOLLOW_WAIT_SECONDS if args.follow else 0)
    if not 0 <= wait <= FOLLOW_WAIT_SECONDS:  # the service's range, in the flag's words
        raise UsageError(f"--wait must be 0-{FOLLOW_WAIT_SECONDS} seconds, got {wait}")
    call: dict[str, Any] = {"action": "read", "inbox_id": args.inbox, "wait_seconds": wait}
    if args.follow:
        args.on_interrupt = f"stopped following inbox {args.inbox}"
    if args.after:
        call["after"] = args.after
    if args.limit is not None:
        call["limit"] = args.limit
    announced = False
    pause = FOLLOW_RETRY_SECONDS[0]
    while True:
        if wait and not args.json and sys.stderr.isatty() and not announced:
            stop = " (Ctrl-C to stop)" if args.follow else ""
            note(f"waiting up to {wait} s for new messages{stop} ...")
            announced = args.follow
        try:
            page = await api.call("messages", call)
        except ApiError as exc:
            # --follow runs until Ctrl-C: a restarting gateway or service is waited out.
            if not args.follow or exc.code not in ("UNAVAILABLE", "DEADLINE_EXCEEDED"):
                raise
            note(f"{exc.message}; trying again in {pause:g} s (Ctrl-C to stop)")
            await asyncio.sleep(pause)
            pause = min(pause * 2, FOLLOW_RETRY_SECONDS[1])
            continue
        pause = FOLLOW_RETRY_SECONDS[0]
        if args.json:
            if page["messages"] or not args.follow:
                print_json(page, compact=args.follow)
        else:
            for message in page["messages"]:
                _print_message(message)
            if not args.follow:
                if not page["messages"]:
                    note("no new messages")
                print(f"next_cursor: {page['next_cursor']}", flush=True)
        if not args.follow:
            return
        call["after"] = page["next_cursor"]
        if not args.json and page["messages"]:
            note(f"next_cursor: {page['next_cursor']}")


async def watch(api: ApiClient, args: argparse.Namespace) -> None:
    """Print the inbox's messages as they arrive, until Ctrl-C; a dropped stream is
    opened again from the last message's cursor (nothing lost or repeated)."""
    args.on_interrupt = f"stopped watching inbox {args.inbox}"
    path = f"{streams.STREAMS_PREFIX}/inboxes/{urllib.parse.quote(args.inbox, safe='')}"
    if not args.json and sys.stderr.isatty():
        note(f"watching inbox {args.inbox} (Ctrl-C to stop) ...")

    def retrying(exc: ApiError, pause: float) -> None:
        note(f"{exc.message}; reconnecting in {pause:g} s (Ctrl-C to stop)")

    async for event in streams.resuming(api, path, last_id=args.after or "", on_retry=retrying):
        if event.name != "message":
            continue
        if args.json:
            print_json({**event.data, "cursor": event.id}, compact=True)
        else:
            _print_message(event.data)
            note(f"cursor: {event.id}")


def _print_entry(entry: Mapping[str, Any], target: str) -> None:
    when = paint(local_time(entry.get("created_at")), "dim")
    if entry["type"] == "message":
        to = target if entry["direction"] == "to_target" else "inbox"
        text = entry.get("text", "")
        for part in entry.get("parts") or ():
            text += "\n" + (part["text"] if "text" in part else json.dumps(part.get("data")))
        who = paint(f"{entry['sender']} → {to}:", "bold")
        print(f"{when}  {who}\n    " + text.replace("\n", "\n    "))
        return
    kind, status = entry["kind"], entry["status"]
    label = paint(f"[{kind} · {status}]", "dim" if kind == "message" else "bold")
    if kind == "message":
        detail = f"delivered message {entry['message_id']}"
    elif entry.get("payload") is not None:
        detail = entry["payload"][:500]
    elif entry.get("payload_base64") is not None:
        detail = f"({len(entry['payload_base64']) * 3 // 4} bytes, not text; see --json)"
    else:
        detail = entry.get("text", "")
    print(f"{when}  {label} " + detail.replace("\n", "\n    "))
    if entry.get("turn_error"):  # its turn failed (L12): the target's owner reads why
        print(
            paint("    its turn failed:", "bold")
            + "\n      "
            + entry["turn_error"].replace("\n", "\n      ")
        )


async def transcript(api: ApiClient, args: argparse.Namespace) -> None:
    call: dict[str, Any] = {}
    if args.conversation:
        call["conversation_id"] = args.conversation
    else:
        call["inbox_id"] = args.inbox
    if args.cursor:
        call["cursor"] = args.cursor
    if args.limit is not None:
        call["limit"] = args.limit
    page = await api.call("transcript", call)
    items = list(page["items"])
    while args.all and page["items"]:
        page = await api.call("transcript", {**call, "cursor": page["next_cursor"]})
        items.extend(page["items"])
    if args.json:
        print_json({**page, "items": items})
        return
    note(f"conversation {page['conversation_id']} with {page['target']}, inbox {page['inbox_id']}")
    for entry in items:
        _print_entry(entry, page["target"])
    if not items:
        note("nothing (more) in this transcript")
    print(f"next_cursor: {page['next_cursor']}", flush=True)


def add_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add `messages` to the `agentworks` parser."""
    messages = commands.add_parser(
        "messages", help="send messages and read replies (agent messaging)"
    )
    messages_cmds = messages.add_subparsers(title="actions", metavar="ACTION", required=True)
    send_cmd = messages_cmds.add_parser(
        "send",
        parents=[common],
        help="send a message; prints the delivery receipt",
        description="Send a message to a crew or workflow (a new conversation) or to the "
        "conversation of an inbox. Prints the delivery receipt: accepted, message_id, "
        "conversation_id, inbox_id. The receipt is not an answer; read replies with "
        "`agentworks messages read --inbox <inbox_id>`.",
    )
    where = send_cmd.add_mutually_exclusive_group(required=True)
    where.add_argument("--crew", metavar="NAME", help="start a conversation with this crew")
    where.add_argument("--workflow", metavar="ID", help="start a conversation with this workflow")
    where.add_argument(
        "--inbox", dest="inbox_id", metavar="ID", help="continue the conversation of this inbox"
    )
    send_cmd.add_argument(
        "--submission-id",
        metavar="KEY",
        help="retry key: resending with the same key returns the first receipt",
    )
    send_cmd.add_argument("message", metavar="MESSAGE", help="the message text; - reads stdin")
    send_cmd.set_defaults(run=send)

    read_cmd = messages_cmds.add_parser(
        "read",
        parents=[common],
        help="read the messages agents sent to an inbox",
        description="Print the messages agents sent to an inbox after a cursor, oldest "
        "first, then the next cursor. Reading does not consume messages.",
    )
    read_cmd.add_argument("--inbox", required=True, metavar="ID", help="the inbox to read")
    read_cmd.add_argument("--after", metavar="CURSOR", help="start after this cursor (next_cursor)")
    read_cmd.add_argument("--limit", type=int, metavar="N", help="at most N messages (1-100)")
    read_cmd.add_argument(
        "--wait",
        type=int,
        metavar="S",
        help=f"wait up to S seconds (0-{MAX_WAIT_SECONDS}) for a first message "
        f"(--follow: {FOLLOW_WAIT_SECONDS})",
    )
    read_cmd.add_argument(
        "--follow",
        action="store_true",
        help="keep reading and print messages as they arrive, until Ctrl-C "
        "(with --json: one JSON page per line); an unreachable gateway or service is "
        "retried, with a note on stderr",
    )
    read_cmd.set_defaults(run=read)

    watch_cmd = messages_cmds.add_parser(
        "watch",
        parents=[common],
        help="print an inbox's messages as they arrive (pushed), until Ctrl-C",
        description="Print the messages agents send to an inbox as they arrive, pushed by "
        "the gateway's event stream (no polling), until Ctrl-C; each message's cursor goes "
        "to stderr (with --json: one JSON object a line, with its `cursor`). A dropped "
        "connection is opened again from the last cursor: nothing lost or repeated.",
    )
    watch_cmd.add_argument("--inbox", required=True, metavar="ID", help="the inbox to watch")
    watch_cmd.add_argument(
        "--after", metavar="CURSOR", help="start after this cursor (else the first message)"
    )
    watch_cmd.set_defaults(run=watch)

    transcript_cmd = messages_cmds.add_parser(
        "transcript",
        parents=[common],
        help="read a conversation's whole transcript, both directions, every delivery",
        description="Print a conversation's transcript oldest first: the messages both ways "
        "(sender → the crew or workflow, or → inbox for agents' replies) and the delivery "
        "records of every kind (message, wake_up, schedule, webhook, function_completed, "
        "conversation_reply) "
        "with their status, then the next cursor. For its caller, the target's owner, its "
        "agents and the operator.",
    )
    which = transcript_cmd.add_mutually_exclusive_group(required=True)
    which.add_argument("--conversation", metavar="ID", help="the conversation")
    which.add_argument("--inbox", metavar="ID", help="the conversation of this inbox")
    transcript_cmd.add_argument(
        "--cursor", metavar="CURSOR", help="start after this cursor (next_cursor)"
    )
    transcript_cmd.add_argument(
        "--limit", type=int, metavar="N", help="at most N entries a page (1-200)"
    )
    transcript_cmd.add_argument(
        "--all", action="store_true", help="every page to the end (else the first page)"
    )
    transcript_cmd.set_defaults(run=transcript)
