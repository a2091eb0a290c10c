"""`agentworks crews ...` and `agentworks functions ...`: declared functions (F1-F15, G3).

`crews call|call-status|call-file|functions|reply|cancel` address crews by name;
`functions list|call|call-status|call-file|reply|cancel --workflow <id>` the same for
workflows (or `--crew`), plus the owner's `functions declare|remove`. Every command calls
the `functions` tool (or `declarations`) on the gateway's HTTP API.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Any, BinaryIO

from agentworks.core.limits import MAX_WAIT_SECONDS
from agentworks_cli import declarations
from agentworks_cli.api import ApiClient
from agentworks_cli.call_output import choices_of, print_functions, print_status
from agentworks_cli.call_wait import wait_for_call
from agentworks_cli.errors import UsageError
from agentworks_cli.inputs import INPUTS_HELP, call_inputs
from agentworks_cli.output import note, print_fields, print_json
from agentworks_cli.targets import bare

# Page size of `call-file` downloads (the service's maximum).
READ_PAGE_BYTES = 1024 * 1024


def _target_args(args: argparse.Namespace) -> dict[str, str]:
    if getattr(args, "workflow", None):
        return {"workflow_id": bare(args.workflow, "workflow")}
    return {"crew": bare(args.crew, "crew")}


def _show_call_command(args: argparse.Namespace) -> str:
    return "crews" if args.group == "crews" else "functions"


async def list_functions(api: ApiClient, args: argparse.Namespace) -> None:
    result = await api.call("functions", {"action": "list", **_target_args(args)})
    print_json(result) if args.json else print_functions(result)


async def call(api: ApiClient, args: argparse.Namespace) -> int | None:
    request: dict[str, Any] = {
        "action": "call",
        **_target_args(args),
        "function": args.function,
        "inputs": call_inputs(args),
    }
    if args.submission_id:
        request["submission_id"] = args.submission_id
    receipt = await api.call("functions", request)
    group = _show_call_command(args)
    if not args.wait:
        if args.json:
            print_json(receipt)
        else:
            fields = ("call_id", "status", "created", "output_folder", "target", "function")
            print_fields((k, receipt[k]) for k in fields)
            note(f"status: agentworks {group} call-status --call {receipt['call_id']}")
        return None
    return await wait_for_call(api, receipt, args, group)


async def call_status(api: ApiClient, args: argparse.Namespace) -> None:
    request: dict[str, Any] = {"action": "status", **_named_call(args)}
    for field, value in (
        ("after", args.after),
        ("after_event", args.after_event),
        ("message_limit", args.limit),
        ("event_limit", args.event_limit),
        ("wait_seconds", args.wait),
    ):
        if value is not None:
            request[field] = value
    status = await api.call("functions", request)
    print_json(status) if args.json else print_status(status)


def _page_bytes(page: Mapping[str, Any]) -> bytes:
    import base64

    if "content_base64" in page:
        return base64.b64decode(page["content_base64"])
    return page["content"].encode("utf-8")


async def call_file(api: ApiClient, args: argparse.Namespace) -> None:
    """Download a call's file page by page (following next_offset) to --out or stdout."""
    request: dict[str, Any] = {
        "action": "read",
        **_named_call(args),
        "file": args.file,
        "offset": args.offset,
    }
    if args.json:
        if args.limit is not None:
            request["limit"] = args.limit
        print_json(await api.call("functions", request))
        return
    if args.limit is not None and args.limit < 1:
        raise UsageError(f"--limit must be at least 1 byte, got {args.limit}")
    out: BinaryIO | None = None  # opened once the first page arrived: no file on a refusal
    written = 0
    try:
        while True:
            page_size = READ_PAGE_BYTES
            if args.limit is not None:
                page_size = min(page_size, args.limit - written)
            page = await api.call("functions", {**request, "limit": page_size})
            if out is None:
                # A one-shot CLI: blocking writes hold up nothing else.
                out = open(args.out, "wb") if args.out else sys.stdout.buffer  # noqa: ASYNC230, SIM115
            data = _page_bytes(page)
            out.write(data)
            written += len(data)
            next_offset = page["next_offset"]
            if next_offset is None:
                break
            request["offset"] = next_offset
            if args.limit is not None and written >= args.limit:
                note(f"{args.file}: more remains, continue with --offset {next_offset}")
                break
    finally:
        if out is not None and args.out:
            out.close()
        elif out is not None:
            out.flush()
    if args.out:
        note(f"wrote {written} bytes of {args.file} to {args.out}")


async def reply(api: ApiClient, args: argparse.Namespace) -> None:
    if args.choice is not None:
        text = await _chosen(api, args)
    elif args.text is None:
        raise UsageError("give the answer as TEXT (- reads stdin), or --choice N")
    else:
        text = sys.stdin.read() if args.text == "-" else args.text
    status = await api.call("functions", {"action": "reply", **_named_call(args), "text": text})
    if args.json:
        print_json(status)
    else:
        print(f"answered call {status['call_id']}; it is {status['status']}", flush=True)


async def _chosen(api: ApiClient, args: argparse.Namespace) -> str:
    """The pending question's choice number `--choice` (as `call-status` lists them)."""
    status = await api.call("functions", {"action": "status", **_named_call(args)})
    listed = choices_of(status)
    if not listed:
        raise UsageError(f"call {args.call} has no question with choices; answer with TEXT instead")
    if not 1 <= args.choice <= len(listed):
        raise UsageError(f"--choice must be 1 to {len(listed)}: {_listed(listed)}")
    return listed[args.choice - 1]


def _listed(choices: list[str]) -> str:
    return ", ".join(f"{i} = {c!r}" for i, c in enumerate(choices, 1))


async def cancel(api: ApiClient, args: argparse.Namespace) -> None:
    status = await api.call("functions", {"action": "cancel", **_named_call(args)})
    if args.json:
        print_json(status)
    else:
        print(f"call {status['call_id']} is {status['status']}", flush=True)


# ------------------------------------------------------------------------------ parser


def _call_id(parser: argparse.ArgumentParser, group: str) -> None:
    parser.add_argument("--call", required=True, metavar="ID", help="the call_id")
    if group == "functions":  # the call_id is enough; a target given must be the call's
        where = parser.add_mutually_exclusive_group()
        where.add_argument("--workflow", metavar="ID", help="the call's workflow (checked)")
        where.add_argument("--crew", metavar="NAME", help="the call's crew (checked)")


def _named_call(args: argparse.Namespace) -> dict[str, Any]:
    """The call's arguments: its call_id, and the crew or workflow it was named with."""
    named: dict[str, Any] = {"call_id": args.call}
    if getattr(args, "workflow", None):
        named["workflow_id"] = bare(args.workflow, "workflow")
    if getattr(args, "crew", None):
        named["crew"] = bare(args.crew, "crew")
    return named


def _add_call(
    sub: Any, common: argparse.ArgumentParser, group: str, *, by_crew: bool
) -> argparse.ArgumentParser:
    parser = sub.add_parser(
        "call",
        parents=[common],
        help="call a function; prints the call receipt (--wait: the outcome)",
        description="Call a function with checked inputs. Every call is a new isolated "
        "execution with its own call_id; without --wait the receipt is printed at once. "
        "A target at its running limit refuses the call as busy (exit 5): retry later. "
        + INPUTS_HELP,
    )
    if by_crew:
        parser.add_argument("crew", metavar="CREW", help="the crew's name")
    else:
        _target_choice(parser)
    parser.add_argument("function", metavar="FUNCTION", help="the function's name")
    inputs = parser.add_mutually_exclusive_group()
    inputs.add_argument(
        "--inputs-json", metavar="JSON", help="all inputs as a JSON object, @FILE or - (stdin)"
    )
    inputs.add_argument(
        "-i",
        "--input",
        action="append",
        metavar="KEY=VALUE",
        help="one input (repeatable); VALUE is JSON when it parses as JSON, else a string",
    )
    parser.add_argument(
        "--submission-id",
        metavar="KEY",
        help="retry key: calling again with the same key returns the same call, not new work",
    )
    parser.add_argument(
        "--wait",
        action="store_true",
        help="wait for the call to end, showing on stderr the time since it was accepted, "
        "whether a runtime has claimed it yet, progress, messages and questions; then print "
        "its status (exit 8 if it failed, was interrupted or cancelled)",
    )
    parser.set_defaults(run=call, group=group)
    return parser


def _target_choice(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--workflow", metavar="ID", help="the workflow's id")
    where.add_argument("--crew", metavar="NAME", help="the crew's name")


def _add_call_reads(sub: Any, common: argparse.ArgumentParser, group: str) -> None:
    status = sub.add_parser(
        "call-status",
        parents=[common],
        help="show a call's status, progress, messages, answer, result and files",
        description="Show a call: status (running, waiting_for_input, completed, failed, "
        "interrupted, cancelled), progress, a page of execution messages and events, the "
        "answer, the validated result, the error, the files and a pending question. Page "
        "with --after / --after-event (start at -1; the output ends with the next values).",
    )
    _call_id(status, group)
    status.add_argument(
        "--after", type=int, metavar="N", help="messages after index N (default -1: from the start)"
    )
    status.add_argument(
        "--after-event", type=int, metavar="N", help="events after index N (default -1)"
    )
    status.add_argument("--limit", type=int, metavar="N", help="at most N messages (1-200)")
    status.add_argument("--event-limit", type=int, metavar="N", help="at most N events (1-200)")
    status.add_argument(
        "--wait",
        type=int,
        metavar="S",
        help="while the call is open and nothing is new, wait up to S seconds "
        f"(0-{MAX_WAIT_SECONDS})",
    )
    status.set_defaults(run=call_status, group=group)

    read = sub.add_parser(
        "call-file",
        parents=[common],
        help="download a file a call produced (binary-safe)",
        description="Write a call's output file to --out (or stdout), reading it page by page "
        "from --offset until the end or --limit bytes. With --json, print one page as the API "
        "returns it (content or content_base64, next_offset) instead.",
    )
    _call_id(read, group)
    read.add_argument(
        "--file", required=True, metavar="NAME", help="the file, as call-status lists it"
    )
    read.add_argument("--offset", type=int, default=0, metavar="N", help="start at byte N")
    read.add_argument(
        "--limit", type=int, metavar="N", help="at most N bytes (--json: the page size)"
    )
    read.add_argument("--out", metavar="PATH", help="write to this file instead of stdout")
    read.set_defaults(run=call_file, group=group)

    answer = sub.add_parser(
        "reply",
        parents=[common],
        help="answer a call's pending question",
        description="Answer the question a waiting call (status waiting_for_input) asked.",
    )
    _call_id(answer, group)
    given = answer.add_mutually_exclusive_group()
    given.add_argument("text", nargs="?", metavar="TEXT", help="the answer; - reads stdin")
    given.add_argument(
        "--choice",
        type=int,
        metavar="N",
        help="answer with the question's choice N (1 = the first call-status lists)",
    )
    answer.set_defaults(run=reply, group=group)

    stop = sub.add_parser("cancel", parents=[common], help="cancel an open call")
    _call_id(stop, group)
    stop.set_defaults(run=cancel, group=group)


def add_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add `crews` and `functions` to the `agentworks` parser."""
    crews = commands.add_parser("crews", help="call a crew's functions and read the calls")
    crews_cmds = crews.add_subparsers(title="actions", metavar="ACTION", required=True)
    listing = crews_cmds.add_parser(
        "functions", parents=[common], help="list the functions you may call on a crew"
    )
    listing.add_argument("crew", metavar="CREW", help="the crew's name")
    listing.set_defaults(run=list_functions, group="crews")
    _add_call(crews_cmds, common, "crews", by_crew=True)
    _add_call_reads(crews_cmds, common, "crews")

    functions = commands.add_parser(
        "functions", help="call workflow (or crew) functions; declare and remove them (owner)"
    )
    functions_cmds = functions.add_subparsers(title="actions", metavar="ACTION", required=True)
    listing = functions_cmds.add_parser(
        "list", parents=[common], help="list the functions you may call on a workflow or crew"
    )
    _target_choice(listing)
    listing.set_defaults(run=list_functions, group="functions")
    _add_call(functions_cmds, common, "functions", by_crew=False)
    _add_call_reads(functions_cmds, common, "functions")

    declarations.add_actions(functions_cmds, common)
