"""`agentworks crews ...` and `agentworks functions ...`: declared functions (F1-F15, G3).

`crews call|call-status|call-file|functions|reply|cancel` address crews by name;
`functions list|call|call-status|call-file|reply|cancel --workflow <id>` the same for
workflows (or `--crew`), plus the owner's `functions declare|remove`. Every command calls
the `functions` tool (or `declarations`) on the gateway's HTTP API.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

from agentworks_cli.api import ApiClient
from agentworks_cli.main import (
    EXIT_CALL_ENDED,
    UsageError,
    _note,
    _print_fields,
    _print_json,
    _print_table,
    _short_time,
)

END_STATUSES = frozenset({"completed", "failed", "interrupted", "cancelled"})
WAIT_SECONDS = 25
# Page size of `call-file` downloads and status pages while waiting (service maxima).
READ_PAGE_BYTES = 1024 * 1024
STATUS_PAGE = 200
VARIABLE_TYPES = ("string", "integer", "number", "boolean", "object", "array")

INPUTS_HELP = (
    "Inputs: --inputs-json takes a JSON object (or @FILE, or - for stdin); -i KEY=VALUE sets "
    "one input and may repeat. A VALUE that is valid JSON is used as JSON (-i count=3 is the "
    "number 3, -i dry_run=true a boolean, -i 'tags=[\"a\"]' a list, -i 'id=\"7\"' the string "
    "7); anything else is a string (-i 'text=hello world')."
)

# ------------------------------------------------------------------------------ inputs


def parse_input(pair: str) -> tuple[str, Any]:
    """`KEY=VALUE` -> (key, value): VALUE as JSON when it parses, else the string itself."""
    key, sep, raw = pair.partition("=")
    if not sep or not key:
        raise UsageError(f"-i {pair!r}: write KEY=VALUE, e.g. -i text=hello or -i count=3")
    try:
        return key, json.loads(raw)
    except ValueError:
        return key, raw


def _json_argument(value: str, what: str) -> Any:
    """A JSON value given inline, as @FILE, or as - (stdin)."""
    if value == "-":
        text, source = sys.stdin.read(), "stdin"
    elif value.startswith("@"):
        path = Path(value[1:])
        try:
            text, source = path.read_text(), str(path)
        except OSError as exc:
            raise UsageError(f"{what}: cannot read {path}: {exc.strerror or exc}") from None
    else:
        text, source = value, "the argument"
    try:
        return json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{what}: {source} is not valid JSON ({exc})") from None


def call_inputs(args: argparse.Namespace) -> dict[str, Any]:
    """The inputs of `call`, from --inputs-json or the -i pairs (empty: no inputs)."""
    if args.inputs_json is not None:
        inputs = _json_argument(args.inputs_json, "--inputs-json")
        if not isinstance(inputs, dict):
            raise UsageError(
                f"--inputs-json must be a JSON object, got {type(inputs).__name__}: "
                'e.g. --inputs-json \'{"text": "hi"}\''
            )
        return inputs
    inputs: dict[str, Any] = {}
    for pair in args.input or ():
        key, value = parse_input(pair)
        if key in inputs:
            raise UsageError(f"-i {key}=... is given twice; give each input once")
        inputs[key] = value
    return inputs


# ------------------------------------------------------------------------------ output


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024 or unit == "MiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"  # pragma: no cover


def _files(status: Mapping[str, Any]) -> str:
    return ", ".join(
        f"{f['name']} ({_size(f['size'])}{', text' if f['text'] else ''})" for f in status["files"]
    )


def _result(status: Mapping[str, Any]) -> str | None:
    if not status.get("has_result"):
        return None
    return json.dumps(status["result"], ensure_ascii=False)


def _status_words(status: Mapping[str, Any]) -> str:
    """The status, saying when an open call has not been claimed by a runtime yet."""
    if status["status"] == "running" and not status.get("started", True):
        return "running (not started: waiting for a runtime of its target to claim it)"
    return status["status"]


def print_status(status: Mapping[str, Any]) -> None:
    """A call's status for people: fields, then the message and event pages."""
    _print_fields(
        [
            ("call_id", status["call_id"]),
            ("target", status["target"]),
            ("function", status["function"]),
            ("status", _status_words(status)),
            ("progress", status["progress"] or None),
            ("question", status["question"]),
            ("answer", status["answer"]),
            ("result", _result(status)),
            ("error", status["error"]),
            ("files", _files(status) or None),
            ("caller", status["caller"]),
            ("created_at", _short_time(status["created_at"])),
            ("ended_at", _short_time(status["ended_at"])),
        ]
    )
    if status["messages"]:
        print("messages:")
        for message in status["messages"]:
            text = message["text"].replace("\n", "\n      ")
            print(f"  [{message['index']}] {message['role']}: {text}")
    if status["events"]:
        print("events:")
        for event in status["events"]:
            tool = f" ({event['tool_name']})" if event.get("tool_name") else ""
            print(f"  [{event['index']}] {event['kind']}{tool}: {event['text']}")
    print(f"next: --after {status['next_after']} --after-event {status['next_after_event']}")
    sys.stdout.flush()


def print_functions(result: Mapping[str, Any]) -> None:
    rows = []
    for fn in result["functions"]:
        schema = fn["input_schema"]
        required = set(schema.get("required", ()))
        properties = sorted(  # required inputs first
            (schema.get("properties") or {}).items(), key=lambda item: item[0] not in required
        )
        inputs = ", ".join(
            f"{name}{'*' if name in required else ''}:{prop.get('type', 'any')}"
            for name, prop in properties
        )
        description = (fn["description"] or "").splitlines()[0] if fn["description"] else ""
        rows.append(
            (
                fn["name"],
                inputs,
                "yes" if fn["output_schema"] else "no",
                "yes" if fn["starts_work"] else "no",
                description if len(description) <= 60 else description[:59] + "…",
            )
        )
    _print_table(
        ("FUNCTION", "INPUTS (*required)", "RESULT", "STARTS_WORK", "DESCRIPTION"),
        rows,
        f"no functions you may call on {result['target']}",
    )


# ----------------------------------------------------------------------------- commands


def _bare(value: str, kind: str) -> str:
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


def _target_args(args: argparse.Namespace) -> dict[str, str]:
    if getattr(args, "workflow", None):
        return {"workflow_id": _bare(args.workflow, "workflow")}
    return {"crew": _bare(args.crew, "crew")}


def _show_call_command(args: argparse.Namespace) -> str:
    return "crews" if args.group == "crews" else "functions"


async def list_functions(api: ApiClient, args: argparse.Namespace) -> None:
    result = await api.call("functions", {"action": "list", **_target_args(args)})
    _print_json(result) if args.json else print_functions(result)


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
            _print_json(receipt)
        else:
            fields = ("call_id", "status", "created", "output_folder", "target", "function")
            _print_fields((k, receipt[k]) for k in fields)
            _note(f"status: agentworks {group} call-status --call {receipt['call_id']}")
        return None
    return await wait_for_call(api, receipt, args, group)


async def wait_for_call(
    api: ApiClient, receipt: Mapping[str, Any], args: argparse.Namespace, group: str
) -> int | None:
    """Long-poll status, showing progress, messages and questions on stderr, until it ends."""
    call_id = receipt["call_id"]
    how = "accepted" if receipt["created"] else "recovered (same submission id)"
    _note(
        f"call {call_id} {how}; waiting for it to end (Ctrl-C stops waiting, the call goes on: "
        f"agentworks {group} call-status --call {call_id})"
    )
    request: dict[str, Any] = {
        "action": "status",
        "call_id": call_id,
        "after": -1,
        "after_event": -1,
        "message_limit": STATUS_PAGE,
        "event_limit": STATUS_PAGE,
        "wait_seconds": WAIT_SECONDS,
    }
    progress = question = None
    while True:
        status = await api.call("functions", request)
        if status["progress"] and status["progress"] != progress:
            progress = status["progress"]
            _note(f"progress: {progress}")
        for message in status["messages"]:
            _note(f"{message['role']}: {message['text']}")
        if status["question"] and status["question"] != question:
            question = status["question"]
            _note(
                f"question: {question}\n"
                f"  answer with: agentworks {group} reply --call {call_id} 'your answer'"
            )
        if status["status"] in END_STATUSES:
            break
        request.update(
            after=status["next_after"],
            after_event=status["next_after_event"],
            seen_version=status["version"],
        )
    final = await api.call("functions", {"action": "status", "call_id": call_id})
    if args.json:
        _print_json(final)
    else:
        print_status(final)
    if final["status"] != "completed":
        error = final["error"].removeprefix(f"{final['status']}: ")  # said once is enough
        why = f": {error}" if error else ""
        _note(f"agentworks: call {call_id} ended {final['status']}{why}")
        return EXIT_CALL_ENDED
    return None


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
    _print_json(status) if args.json else print_status(status)


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
        _print_json(await api.call("functions", request))
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
                _note(f"{args.file}: more remains, continue with --offset {next_offset}")
                break
    finally:
        if out is not None and args.out:
            out.close()
        elif out is not None:
            out.flush()
    if args.out:
        _note(f"wrote {written} bytes of {args.file} to {args.out}")


async def reply(api: ApiClient, args: argparse.Namespace) -> None:
    text = sys.stdin.read() if args.text == "-" else args.text
    status = await api.call("functions", {"action": "reply", **_named_call(args), "text": text})
    if args.json:
        _print_json(status)
    else:
        print(f"answered call {status['call_id']}; it is {status['status']}", flush=True)


async def cancel(api: ApiClient, args: argparse.Namespace) -> None:
    status = await api.call("functions", {"action": "cancel", **_named_call(args)})
    if args.json:
        _print_json(status)
    else:
        print(f"call {status['call_id']} is {status['status']}", flush=True)


def parse_variable(spec: str) -> dict[str, Any]:
    """`NAME:TYPE[:required][=DEFAULT]` -> a workflow variable (DEFAULT as JSON if it parses)."""
    head, sep, default = spec.partition("=")
    parts = head.split(":")
    if len(parts) not in (2, 3) or not parts[0] or (len(parts) == 3 and parts[2] != "required"):
        raise UsageError(
            f"--variable {spec!r}: write NAME:TYPE, NAME:TYPE:required or NAME:TYPE=DEFAULT, "
            "e.g. --variable region:string:required or --variable limit:integer=10"
        )
    if parts[1] not in VARIABLE_TYPES:
        raise UsageError(
            f"--variable {spec!r}: type {parts[1]!r} is not one of {', '.join(VARIABLE_TYPES)}"
        )
    variable: dict[str, Any] = {"name": parts[0], "type": parts[1], "required": len(parts) == 3}
    if sep:
        variable["default"] = parse_input(f"x={default}")[1]
    return variable


_DECLARATION_KEYS = (
    "target",
    "name",
    "description",
    "input_schema",
    "output_schema",
    "allowed_callers",
    "starts_work",
    "workflow",
)


def declaration(args: argparse.Namespace) -> dict[str, Any]:
    """The `declarations` arguments from --file, overridden by flags."""
    spec: dict[str, Any] = {}
    if args.file:
        spec = _json_argument(f"@{args.file}" if args.file != "-" else "-", "--file")
        if not isinstance(spec, dict):
            raise UsageError(f"--file {args.file} must hold a JSON object (the declaration)")
        unknown = sorted(set(spec) - set(_DECLARATION_KEYS))
        if unknown:
            raise UsageError(
                f"--file {args.file}: unknown keys {', '.join(unknown)}; a declaration has "
                + ", ".join(_DECLARATION_KEYS)
            )
        if spec.get("target", args.target) != args.target:
            raise UsageError(f"--file {args.file} declares for {spec['target']}, not {args.target}")
    spec["target"] = args.target
    for key in ("name", "description"):
        if getattr(args, key) is not None:
            spec[key] = getattr(args, key)
    for key in ("input_schema", "output_schema"):
        value = getattr(args, key)
        if value is not None:
            spec[key] = _json_argument(value, "--" + key.replace("_", "-"))
    if args.allowed_caller:
        spec["allowed_callers"] = list(args.allowed_caller)
    if args.starts_work is not None:
        spec["starts_work"] = args.starts_work
    if args.route or args.allowed_group or args.variable:
        workflow = dict(spec.get("workflow") or {})
        if args.route:
            workflow["route"] = args.route
        if args.allowed_group:
            workflow["allowed_groups"] = list(args.allowed_group)
        if args.variable:
            workflow["variables"] = [parse_variable(v) for v in args.variable]
        spec["workflow"] = workflow
    for key, flag in (("name", "--name"), ("input_schema", "--input-schema")):
        if key not in spec:
            raise UsageError(f"functions declare needs {key}: give {flag} or put it in --file")
    return spec


async def declare(api: ApiClient, args: argparse.Namespace) -> None:
    function = await api.call("declarations", {"action": "declare", **declaration(args)})
    if args.json:
        _print_json(function)
        return
    _print_fields(
        [
            ("target", function["target"]),
            ("name", function["name"]),
            ("description", function["description"] or None),
            ("inputs", ", ".join(function["input_schema"].get("properties") or {})),
            ("output_schema", "yes" if function["output_schema"] else "no"),
            ("allowed_callers", function["allowed_callers"]),
            ("starts_work", function["starts_work"]),
            ("route", (function.get("workflow") or {}).get("route")),
            ("updated_at", function["updated_at"]),
        ]
    )


async def remove(api: ApiClient, args: argparse.Namespace) -> None:
    result = await api.call(
        "declarations", {"action": "remove", "target": args.target, "name": args.name}
    )
    if args.json:
        _print_json(result)
    else:
        print(f"removed {args.name} from {args.target}; its calls stay readable", flush=True)


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
        named["workflow_id"] = _bare(args.workflow, "workflow")
    if getattr(args, "crew", None):
        named["crew"] = _bare(args.crew, "crew")
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
        help="wait for the call to end, showing progress, messages and questions on stderr; "
        "then print its status (exit 8 if it failed, was interrupted or cancelled)",
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
        help="while the call is open and nothing is new, wait up to S seconds (0-25)",
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
    answer.add_argument("text", metavar="TEXT", help="the answer; - reads stdin")
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

    declare_cmd = functions_cmds.add_parser(
        "declare",
        parents=[common],
        help="declare (or replace) a function of a target you own",
        description="Declare a function: from --file (a JSON object with name, description, "
        "input_schema, output_schema, allowed_callers, starts_work, workflow), from flags, "
        "or both (flags win). Schemas are JSON Schema 2020-12, given inline or as @FILE. "
        "Workflow functions need --route; --variable is NAME:TYPE, NAME:TYPE:required or "
        "NAME:TYPE=DEFAULT (TYPE: " + ", ".join(VARIABLE_TYPES) + ").",
    )
    declare_cmd.add_argument("target", metavar="TARGET", help="crew:<name> or workflow:<id>")
    declare_cmd.add_argument(
        "--file", metavar="PATH", help="the declaration as JSON (- reads stdin)"
    )
    declare_cmd.add_argument("--name", help="the function's name")
    declare_cmd.add_argument("--description", help="what it does, for callers")
    declare_cmd.add_argument(
        "--input-schema", metavar="JSON", help="JSON Schema of the inputs (an object schema)"
    )
    declare_cmd.add_argument(
        "--output-schema", metavar="JSON", help="JSON Schema of the result (FUNCTION_RESULT_FILE)"
    )
    declare_cmd.add_argument(
        "--allowed-caller",
        action="append",
        metavar="PRINCIPAL",
        help="who may call besides you (repeatable): user:alice, user:*, agent:<crew>/*, *",
    )
    declare_cmd.add_argument(
        "--starts-work",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the function only starts work and completes with its start receipt",
    )
    declare_cmd.add_argument("--route", help="workflow functions: the route the run follows")
    declare_cmd.add_argument(
        "--allowed-group",
        action="append",
        metavar="GROUP",
        help="workflow functions: a group the run may record steps in (repeatable)",
    )
    declare_cmd.add_argument(
        "--variable",
        action="append",
        metavar="SPEC",
        help="workflow functions: a typed variable (repeatable), e.g. region:string:required",
    )
    declare_cmd.set_defaults(run=declare)

    remove_cmd = functions_cmds.add_parser(
        "remove", parents=[common], help="remove a function of a target you own"
    )
    remove_cmd.add_argument("target", metavar="TARGET", help="crew:<name> or workflow:<id>")
    remove_cmd.add_argument("name", metavar="NAME", help="the function's name")
    remove_cmd.set_defaults(run=remove)
