"""`agentworks`: the command line for AgentWorks (G3).

Every command calls a tool on the gateway's HTTP API (`POST /api/v1/tools/<tool>`), the
same tools MCP clients use. Output is human-readable by default and JSON with `--json`.
Exit codes (documented in docs/cli.md):

    0 ok · 1 other error · 2 usage or invalid argument · 3 authentication or permission
    4 not found · 5 busy (limit reached) · 6 refused (conflict, failed precondition)
    7 unavailable (gateway or service unreachable, deadline exceeded)
    8 a waited-for function call ended failed, interrupted or cancelled

The function commands (`crews`, `functions`) live in `cli_calls.py`, the scheduler's
(`wake-ups`, `schedules`, `pauses`, `webhooks`) in `cli_scheduler.py`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentworks_cli.api import ApiClient, ApiError

DEFAULT_URL = "http://127.0.0.1:8080"
CONFIG_FILE = Path(".agentworks") / "cli.json"
FOLLOW_WAIT_SECONDS = 25
# --follow's pause after an unreachable gateway or service: first, then at most (doubling).
FOLLOW_RETRY_SECONDS = (1.0, 10.0)

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_AUTH = 3
EXIT_NOT_FOUND = 4
EXIT_BUSY = 5
EXIT_REFUSED = 6
EXIT_UNAVAILABLE = 7
EXIT_CALL_ENDED = 8

# gRPC status name (as the API reports it) -> exit code.
EXIT_CODES = {
    "INVALID_ARGUMENT": EXIT_USAGE,
    "OUT_OF_RANGE": EXIT_USAGE,
    "UNAUTHENTICATED": EXIT_AUTH,
    "PERMISSION_DENIED": EXIT_AUTH,
    "NOT_FOUND": EXIT_NOT_FOUND,
    "RESOURCE_EXHAUSTED": EXIT_BUSY,
    "ALREADY_EXISTS": EXIT_REFUSED,
    "FAILED_PRECONDITION": EXIT_REFUSED,
    "ABORTED": EXIT_REFUSED,
    "UNAVAILABLE": EXIT_UNAVAILABLE,
    "DEADLINE_EXCEEDED": EXIT_UNAVAILABLE,
}

EXIT_CODE_DOC = [
    (EXIT_OK, "success"),
    (EXIT_ERROR, "any other error (INTERNAL, UNKNOWN, an unexpected answer)"),
    (EXIT_USAGE, "usage error, or the request was refused as INVALID_ARGUMENT"),
    (EXIT_AUTH, "no token, unknown or revoked token (UNAUTHENTICATED), or PERMISSION_DENIED"),
    (EXIT_NOT_FOUND, "NOT_FOUND (unknown inbox, target, token, call ...)"),
    (EXIT_BUSY, "RESOURCE_EXHAUSTED: a limit is reached, retry later"),
    (EXIT_REFUSED, "ALREADY_EXISTS or FAILED_PRECONDITION (e.g. agent messaging is off)"),
    (EXIT_UNAVAILABLE, "the gateway or a service is unreachable (UNAVAILABLE, DEADLINE_EXCEEDED)"),
    (
        EXIT_CALL_ENDED,
        "`call --wait`: the function call ended failed, interrupted or cancelled",
    ),
]


class UsageError(Exception):
    """A problem with how the CLI was called or configured (before any request)."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


# ---------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class Settings:
    """Where the gateway is and which token to present."""

    url: str
    token: str
    url_source: str
    token_source: str
    # The cli.json of `agentworks up` that was read ("" if none), and where it was
    # looked for: both for messages.
    config: str = ""
    searched: str = ""


def _owned_by_user(file: Path) -> bool:
    """Whether the current user owns `file` (always true where there are no uids)."""
    getuid = getattr(os, "getuid", None)
    if getuid is None:
        return True
    try:
        return file.stat().st_uid == getuid()
    except OSError:
        return False


def find_config(environ: Mapping[str, str], cwd: Path) -> tuple[Path | None, str]:
    """The cli.json `agentworks up` wrote, and where it was looked for (for messages):
    `$AGENTWORKS_HOME/cli.json` when AGENTWORKS_HOME is set, else `.agentworks/cli.json`
    in `cwd` or the nearest parent that has one (as git finds `.git`). A file another
    user owns (one planted in /tmp/.agentworks, say) is ignored, and the message says so."""
    home = environ.get("AGENTWORKS_HOME")
    if home:
        file = cwd / home / CONFIG_FILE.name
        searched = f"{file} (from AGENTWORKS_HOME)"
        if not file.is_file():
            return None, searched
        if not _owned_by_user(file):
            return None, f"{searched}, ignored: {file} is not owned by you"
        return file, searched
    ignored: list[str] = []
    for directory in (cwd, *cwd.parents):
        file = directory / CONFIG_FILE
        if file.is_file():
            if _owned_by_user(file):
                return file, str(file)
            ignored.append(str(file))
    searched = f"{CONFIG_FILE} in {cwd} and its parents"
    if ignored:
        searched += f" (ignored, not owned by you: {', '.join(ignored)})"
    return None, searched


def resolve_settings(
    url: str | None, token: str | None, environ: Mapping[str, str], cwd: Path
) -> Settings:
    """Flags first, then AGENTWORKS_URL / AGENTWORKS_TOKEN, then the cli.json that
    `agentworks up` wrote in its home (`find_config`). The cli.json is read only when
    it must supply the token, and its URL is used only with its own token: a token from
    --token or AGENTWORKS_TOKEN is never sent to a URL some cli.json chose."""

    def given(flag: str | None, env_name: str, key: str) -> tuple[str, str]:
        if flag:
            return flag, f"--{key}"
        if environ.get(env_name):
            return environ[env_name], env_name
        return "", ""

    resolved_url, url_source = given(url, "AGENTWORKS_URL", "url")
    resolved_token, token_source = given(token, "AGENTWORKS_TOKEN", "token")
    file: Path | None = None
    searched = ""
    if not resolved_token:
        file, searched = find_config(environ, cwd)
    if file is not None:
        try:
            stored = json.loads(file.read_text())
        except (OSError, ValueError) as exc:
            raise UsageError(f"cannot read {file}: {exc}; fix or delete it") from None
        if not isinstance(stored, dict):
            raise UsageError(f"{file} must hold a JSON object with keys url and token")
        if stored.get("token"):
            resolved_token, token_source = str(stored["token"]), str(file)
            if not resolved_url and stored.get("url"):
                resolved_url, url_source = str(stored["url"]), str(file)
    return Settings(
        url=resolved_url or DEFAULT_URL,
        token=resolved_token,
        url_source=url_source or "default",
        token_source=token_source,
        config="" if file is None else str(file),
        searched=searched,
    )


def _no_token(settings: Settings) -> UsageError:
    if settings.config:
        where = f"{settings.config} has no token"
    else:
        where = f"looked for {settings.searched}: not found"
    return UsageError(
        "no API token: pass --token, set AGENTWORKS_TOKEN, or run `agentworks up`, which "
        f"writes .agentworks/cli.json ({where}; for a suite started with --home DIR: "
        "export AGENTWORKS_HOME=DIR); an operator can create a token with "
        "`agentworks tokens create`",
        EXIT_AUTH,
    )


def _url_origin(exc: ApiError, settings: Settings) -> ApiError:
    """A gateway that cannot be reached: say where its URL came from (a stale cli.json
    of a suite that has stopped shows at once)."""
    if exc.code not in ("UNAVAILABLE", "DEADLINE_EXCEEDED") or "the gateway at" not in exc.message:
        return exc
    source = settings.url_source
    if source == "default":
        origin = "is the default (no --url, AGENTWORKS_URL, or cli.json that gave the token)"
    elif source.startswith("--") or source == "AGENTWORKS_URL":
        origin = f"came from {source}"
    else:
        origin = (
            f"came from {source}, written by `agentworks up`: if that suite has stopped, "
            "start it again, or delete the file"
        )
    return ApiError(exc.code, f"{exc.message}. The URL {origin}")


# ----------------------------------------------------------------------------- output


def _print_json(data: Any, *, compact: bool = False) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=None if compact else 2), flush=True)


def _print_fields(pairs: Iterable[tuple[str, Any]]) -> None:
    pairs = list(pairs)
    width = max(len(k) for k, _ in pairs)
    for key, value in pairs:
        if isinstance(value, bool):
            value = str(value).lower()
        elif value is None:
            value = "-"
        elif isinstance(value, list | tuple):
            value = ", ".join(map(str, value)) or "-"
        # Continuation lines of a multi-line value stay in the value column.
        value = str(value).replace("\n", "\n" + " " * (width + 2))
        print(f"{key.ljust(width)}  {value}")
    sys.stdout.flush()


def _note(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _print_table(header: Sequence[str], rows: Iterable[Sequence[Any]], empty: str) -> None:
    """Aligned columns with a header; `empty` goes to stderr when there are no rows."""
    table = [tuple(header)] + [tuple("-" if c in (None, "") else str(c) for c in r) for r in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    for row in table:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    sys.stdout.flush()
    if len(table) == 1:
        _note(empty)


def _short_time(value: str | None) -> str:
    return (value or "")[:19].replace("T", " ") or "-"


def _print_message(message: Mapping[str, Any]) -> None:
    text = message.get("text", "")
    for part in message.get("parts") or ():
        text += "\n" + (part["text"] if "text" in part else json.dumps(part.get("data")))
    body = text.replace("\n", "\n    ")
    print(f"{_short_time(message.get('created_at'))}  {message.get('sender', '?')}:\n    {body}")


def _print_target(result: Mapping[str, Any]) -> None:
    pairs = [
        ("target", result["target"]),
        ("owner", result["owner"]),
        ("free_text_ask", result["capabilities"]["free_text_ask"]),
    ]
    if "running_limit" in result:  # not after `update`, which changes messaging only
        pairs.append(("running_limit", _running_limit(result)))
    pairs += [("created_at", result.get("created_at")), ("updated_at", result.get("updated_at"))]
    _print_fields(pairs)


def _running_limit(result: Mapping[str, Any]) -> str:
    if result.get("effective_running_limit") is None:
        return "- (not registered with functions: run `agentworks targets register` again)"
    if not result.get("running_limit"):
        return f"{result['effective_running_limit']} (the functions service's default)"
    return str(result["running_limit"])


def _print_token(result: Mapping[str, Any]) -> None:
    pairs = [("token_id", result["token_id"])]
    if "token" in result:
        pairs.append(("token", result["token"]))
    pairs += [
        ("principal", result["principal"]),
        ("roles", result["roles"]),
        ("label", result["label"] or "-"),
        ("created_at", result["created_at"]),
        ("revoked_at", result["revoked_at"]),
    ]
    _print_fields(pairs)


# ---------------------------------------------------------------------------- commands


async def _messages_send(api: ApiClient, args: argparse.Namespace) -> None:
    text = sys.stdin.read() if args.message == "-" else args.message
    call: dict[str, Any] = {"action": "send", "message": text}
    for field in ("crew", "workflow", "inbox_id", "submission_id"):
        if getattr(args, field):
            call[field] = getattr(args, field)
    receipt = await api.call("messages", call)
    if args.json:
        _print_json(receipt)
        return
    fields = ("accepted", "message_id", "conversation_id", "inbox_id")
    _print_fields((k, receipt[k]) for k in fields)
    _note(f"replies: agentworks messages read --inbox {receipt['inbox_id']} --wait 25")


async def _messages_read(api: ApiClient, args: argparse.Namespace) -> None:
    wait = args.wait if args.wait is not None else (FOLLOW_WAIT_SECONDS if args.follow else 0)
    if not 0 <= wait <= FOLLOW_WAIT_SECONDS:  # the service's range, in the flag's words
        raise UsageError(f"--wait must be 0-{FOLLOW_WAIT_SECONDS} seconds, got {wait}")
    call: dict[str, Any] = {"action": "read", "inbox_id": args.inbox, "wait_seconds": wait}
    if args.after:
        call["after"] = args.after
    if args.limit is not None:
        call["limit"] = args.limit
    announced = False
    pause = FOLLOW_RETRY_SECONDS[0]
    while True:
        if wait and not args.json and sys.stderr.isatty() and not announced:
            stop = " (Ctrl-C to stop)" if args.follow else ""
            _note(f"waiting up to {wait} s for new messages{stop} ...")
            announced = args.follow
        try:
            page = await api.call("messages", call)
        except ApiError as exc:
            # --follow runs until Ctrl-C: a restarting gateway or service is waited out.
            if not args.follow or exc.code not in ("UNAVAILABLE", "DEADLINE_EXCEEDED"):
                raise
            _note(f"{exc.message}; trying again in {pause:g} s (Ctrl-C to stop)")
            await asyncio.sleep(pause)
            pause = min(pause * 2, FOLLOW_RETRY_SECONDS[1])
            continue
        pause = FOLLOW_RETRY_SECONDS[0]
        if args.json:
            if page["messages"] or not args.follow:
                _print_json(page, compact=args.follow)
        else:
            for message in page["messages"]:
                _print_message(message)
            if not args.follow:
                if not page["messages"]:
                    _note("no new messages")
                print(f"next_cursor: {page['next_cursor']}", flush=True)
        if not args.follow:
            return
        call["after"] = page["next_cursor"]
        if not args.json and page["messages"]:
            _note(f"next_cursor: {page['next_cursor']}")


def _target(args: argparse.Namespace) -> str:
    """TARGET (crew:<name> or workflow:<id>), or --crew NAME / --workflow ID."""
    from agentworks_cli.calls import _bare

    given = [
        value
        for value in (
            args.target,
            args.crew and "crew:" + _bare(args.crew, "crew"),
            args.workflow and "workflow:" + _bare(args.workflow, "workflow"),
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


async def _targets(api: ApiClient, args: argparse.Namespace) -> None:
    call: dict[str, Any] = {"action": args.action, "target": _target(args)}
    if args.action == "register":
        call["owner"] = args.owner
    if args.action in ("register", "set_limit") and args.running_limit is not None:
        call["running_limit"] = args.running_limit
    if args.action in ("register", "update") and args.free_text_ask is not None:
        call["free_text_ask"] = args.free_text_ask
    if args.action == "update" and args.free_text_ask is None:
        raise UsageError("targets update: say --free-text-ask or --no-free-text-ask")
    result = await api.call("targets", call)
    _print_json(result) if args.json else _print_target(result)


async def _tokens(api: ApiClient, args: argparse.Namespace) -> None:
    if args.action == "create":
        call: dict[str, Any] = {"action": "create", "principal": args.principal}
        if args.operator:
            call["roles"] = ["operator"]
        if args.label:
            call["label"] = args.label
        result = await api.call("tokens", call)
        if args.json:
            _print_json(result)
        else:
            _print_token(result)
            _note("store the token now: it is not shown again")
    elif args.action == "list":
        result = await api.call("tokens", {"action": "list", "include_revoked": args.all})
        if args.json:
            _print_json(result)
            return
        _print_table(
            ("ID", "PRINCIPAL", "ROLES", "LABEL", "CREATED", "REVOKED"),
            (
                (
                    t["token_id"],
                    t["principal"],
                    ",".join(t["roles"]),
                    t["label"],
                    _short_time(t["created_at"]),
                    _short_time(t["revoked_at"]),
                )
                for t in result["tokens"]
            ),
            "no tokens",
        )
    else:
        result = await api.call("tokens", {"action": "revoke", "token_id": args.token_id})
        if args.json:
            _print_json(result)
        else:
            print(f"revoked {result['token_id']} ({result['principal']}) at {result['revoked_at']}")


async def _mcp_stdio(api: ApiClient, args: argparse.Namespace) -> None:
    from agentworks_gateway.mcp_server import serve_stdio

    await serve_stdio(api)


# ------------------------------------------------------------------------------ parser


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


def _target_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", nargs="?", metavar="TARGET", help="crew:<name> or workflow:<id>")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--crew", metavar="NAME", help="the crew NAME (instead of TARGET)")
    where.add_argument("--workflow", metavar="ID", help="the workflow ID (instead of TARGET)")


def _free_text_ask_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--free-text-ask",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the 'Agent messaging' setting: accept programmatic messages (on unless turned off)",
    )


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

    # messages
    messages = commands.add_parser(
        "messages", help="send messages and read replies (agent messaging)"
    )
    messages_cmds = messages.add_subparsers(title="actions", metavar="ACTION", required=True)
    send = messages_cmds.add_parser(
        "send",
        parents=[common],
        help="send a message; prints the delivery receipt",
        description="Send a message to a crew or workflow (a new conversation) or to the "
        "conversation of an inbox. Prints the delivery receipt: accepted, message_id, "
        "conversation_id, inbox_id. The receipt is not an answer; read replies with "
        "`agentworks messages read --inbox <inbox_id>`.",
    )
    where = send.add_mutually_exclusive_group(required=True)
    where.add_argument("--crew", metavar="NAME", help="start a conversation with this crew")
    where.add_argument("--workflow", metavar="ID", help="start a conversation with this workflow")
    where.add_argument(
        "--inbox", dest="inbox_id", metavar="ID", help="continue the conversation of this inbox"
    )
    send.add_argument(
        "--submission-id",
        metavar="KEY",
        help="retry key: resending with the same key returns the first receipt",
    )
    send.add_argument("message", metavar="MESSAGE", help="the message text; - reads stdin")
    send.set_defaults(run=_messages_send)

    read = messages_cmds.add_parser(
        "read",
        parents=[common],
        help="read the messages agents sent to an inbox",
        description="Print the messages agents sent to an inbox after a cursor, oldest "
        "first, then the next cursor. Reading does not consume messages.",
    )
    read.add_argument("--inbox", required=True, metavar="ID", help="the inbox to read")
    read.add_argument("--after", metavar="CURSOR", help="start after this cursor (next_cursor)")
    read.add_argument("--limit", type=int, metavar="N", help="at most N messages (1-100)")
    read.add_argument(
        "--wait",
        type=int,
        metavar="S",
        help=f"wait up to S seconds (0-25) for a first message (--follow: {FOLLOW_WAIT_SECONDS})",
    )
    read.add_argument(
        "--follow",
        action="store_true",
        help="keep reading and print messages as they arrive, until Ctrl-C "
        "(with --json: one JSON page per line); an unreachable gateway or service is "
        "retried, with a note on stderr",
    )
    read.set_defaults(run=_messages_read)

    # crews, functions (the function commands live in cli_calls)
    from agentworks_cli import calls as cli_calls
    from agentworks_cli import scheduler as cli_scheduler

    cli_calls.add_commands(commands, common)

    # targets
    targets = commands.add_parser("targets", help="register and inspect crews and workflows")
    targets_cmds = targets.add_subparsers(title="actions", metavar="ACTION", required=True)
    register = targets_cmds.add_parser(
        "register",
        parents=[common],
        help="register (or replace) a crew or workflow (operator)",
    )
    _target_arguments(register)
    register.add_argument(
        "--owner", required=True, metavar="PRINCIPAL", help="owner, e.g. user:alice"
    )
    _free_text_ask_flags(register)
    register.add_argument(
        "--running-limit",
        type=int,
        metavar="N",
        help="function calls that may run at once (1-1000; default: the functions service's "
        "default); more are refused as busy",
    )
    register.set_defaults(run=_targets, action="register")
    update = targets_cmds.add_parser(
        "update", parents=[common], help="change a target's capabilities (owner or operator)"
    )
    _target_arguments(update)
    _free_text_ask_flags(update)
    update.set_defaults(run=_targets, action="update")
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
    set_limit.set_defaults(run=_targets, action="set_limit")
    get = targets_cmds.add_parser("get", parents=[common], help="show a crew or workflow")
    _target_arguments(get)
    get.set_defaults(run=_targets, action="get")

    # tokens
    tokens = commands.add_parser("tokens", help="manage API tokens (operator)")
    tokens_cmds = tokens.add_subparsers(title="actions", metavar="ACTION", required=True)
    create = tokens_cmds.add_parser(
        "create", parents=[common], help="create a token; the secret is printed once"
    )
    create.add_argument(
        "--principal",
        required=True,
        help="who the token acts as: user:<name>, agent:<crew>/<agent>, workflow:<id>, "
        "service:<name>",
    )
    create.add_argument("--operator", action="store_true", help="give the token the operator role")
    create.add_argument("--label", help="what the token is for")
    create.set_defaults(run=_tokens, action="create")
    listing = tokens_cmds.add_parser(
        "list", parents=[common], help="list tokens (never their secrets)"
    )
    listing.add_argument("--all", action="store_true", help="include revoked tokens")
    listing.set_defaults(run=_tokens, action="list")
    revoke = tokens_cmds.add_parser(
        "revoke", parents=[common], help="revoke a token; effective immediately"
    )
    revoke.add_argument("token_id", metavar="ID", help="the token id (tok_...)")
    revoke.set_defaults(run=_tokens, action="revoke")

    # wake-ups, schedules, pauses, webhooks
    cli_scheduler.add_commands(commands, common)

    # mcp
    mcp = commands.add_parser("mcp", help="serve MCP to local clients")
    mcp_cmds = mcp.add_subparsers(title="transports", metavar="TRANSPORT", required=True)
    stdio = mcp_cmds.add_parser(
        "stdio",
        parents=[common],
        help="an MCP server on stdin/stdout that forwards tool calls to the gateway",
        description="Serve the gateway's MCP tools over stdio, for MCP clients that start "
        "a command. Each tool call goes to the gateway's HTTP API with your token.",
    )
    stdio.set_defaults(run=_mcp_stdio)

    # up (parsed by the supervisor itself; see main)
    commands.add_parser(
        "up",
        help="start the whole suite locally (embedded PostgreSQL, services, demo runtime); "
        "`agentworks up --help` lists its options",
        add_help=False,
    )
    return parser


# -------------------------------------------------------------------------------- main


def _run_up(argv: list[str]) -> int:
    from agentworks_dev import up  # written by the supervisor's owner; import lazily

    return up.main(argv)


def _fail(code: str, message: str, as_json: bool, exit_code: int | None = None) -> int:
    """Say what failed (the error object on stdout with --json, else on stderr); the
    exit code is the status's unless given."""
    if as_json:
        _print_json({"error": {"code": code, "message": message}})
    else:
        _note(f"agentworks: {message}")
    return EXIT_CODES.get(code, EXIT_ERROR) if exit_code is None else exit_code


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["up"]:
        return _run_up(argv[1:])
    parser = build_parser()
    if "--json" in argv:  # a usage error too is a JSON object on stdout then
        said = io.StringIO()
        try:
            with contextlib.redirect_stderr(said):
                args = parser.parse_args(argv)
        except SystemExit as exc:
            if exc.code == 0:  # --help
                raise
            last = (said.getvalue().strip().splitlines() or ["invalid arguments"])[-1]
            return _fail("USAGE", last.replace(": error: ", ": "), True, EXIT_USAGE)
    else:
        args = parser.parse_args(argv)
    if args.run is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE

    from agentworks.client.logging import configure_logging

    # stdout carries results (and MCP frames for `mcp stdio`); logs go to stderr.
    configure_logging("cli", level=os.environ.get("AGENTWORKS_LOG_LEVEL", "warning"), json=False)
    settings: Settings | None = None
    try:
        settings = resolve_settings(args.url, args.token, os.environ, Path.cwd())
        if not settings.token:
            raise _no_token(settings)
        return asyncio.run(_dispatch(args, settings))
    except (UsageError, UnicodeError) as exc:
        if isinstance(exc, UnicodeError):  # argv, stdin or an @file that is not UTF-8
            exc = UsageError(
                "an argument, a file or stdin is not valid UTF-8 text, or the token is not "
                f"ASCII ({exc}); the API takes UTF-8 JSON"
            )
        return _fail("USAGE", str(exc), args.json, exc.exit_code)
    except ApiError as exc:
        if settings is not None:
            exc = _url_origin(exc, settings)
        return _fail(exc.code, exc.message, args.json)
    except KeyboardInterrupt:
        return EXIT_OK if getattr(args, "follow", False) else 130
    except BrokenPipeError:  # `agentworks ... | head`: the reader has gone; no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1  # as Python itself exits on EPIPE


async def _dispatch(args: argparse.Namespace, settings: Settings) -> int:
    async with ApiClient(settings.url, settings.token) as api:
        code = await args.run(api, args)
    return EXIT_OK if code is None else code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
