"""Every gateway tool and every action refuses bad input with a clear error naming what
was wrong, and stores nothing: the MCP tools are called with the official MCP client
(a tool result with `isError: true`), the operator and owner tools on `/api/v1` (the
JSON error and its HTTP status), against real messaging, functions and scheduler
services; every table of the four services' schemas is the same before and after each
refused call (P6, G2, A1, C2, C7, F1-F3, F7, F8, S1, S4, S5).

The table is checked against the tool registry: a tool or action without rows fails
`test_every_tool_action_has_bad_input_rows`. Besides the hand-written rows, each action
gets generated ones from its published schema: an unknown argument, an argument of
another action, each required argument missing, and each argument of the wrong JSON
type. Services start once per module; the rows of one action run in one test.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
import pytest_asyncio
from mcp import Client

from agentworks.client import FunctionsClient, MessagingClient, SchedulerClient
from agentworks.core.identity import Minter
from agentworks.core.keys import KeyDirectory
from agentworks.server.testing import database_snapshot, service_env
from agentworks_gateway import tools
from agentworks_gateway.api import HTTP_STATUS
from agentworks_gateway.app import start
from agentworks_gateway.config import Config
from agentworks_gateway.tokens import ensure_token, new_token

SCHEMAS = ["messaging", "functions", "scheduler", "gateway"]
UNKNOWN_UUID = "00000000-0000-0000-0000-000000000000"
# Principals, and the tokens the world below creates for them.
PRINCIPALS = {
    "alice": ("user:alice", set()),
    "owner": ("user:owner", set()),
    "ops": ("user:ops", {"operator"}),
    "bot": ("agent:demo/bot", set()),
}
ECHO_SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string"}, "count": {"type": "integer"}},
    "required": ["text"],
    "additionalProperties": False,
}
Args = dict[str, Any]


# ----------------------------------------------------------------------------- world


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(
    module_database_url: str, signing_keys: KeyDirectory
) -> AsyncIterator[SimpleNamespace]:
    """Messaging, functions, scheduler and a gateway on one database, and in it: crew:demo
    (owner user:owner) with `echo`, workflow:wf-1, alice's conversation with the crew, a
    call of alice's (claimed by agent:demo/bot, with out.txt and a pending question), and
    the bot's wake-up, schedule and webhook in the conversation."""
    from agentworks_functions.app import start as start_functions
    from agentworks_functions.config import Config as FunctionsConfig
    from agentworks_messaging.app import start as start_messaging
    from agentworks_messaging.config import Config as MessagingConfig
    from agentworks_scheduler.app import start as start_scheduler
    from agentworks_scheduler.config import Config as SchedulerConfig

    url, key = module_database_url, signing_keys
    started: list[Any] = []
    try:
        messaging = await start_messaging(
            MessagingConfig.from_env(service_env(url, key, "MESSAGING"))
        )
        started.append(messaging)
        functions = await start_functions(
            FunctionsConfig.from_env(
                service_env(url, key, "FUNCTIONS", FUNCTIONS_MESSAGING_ADDRESS=messaging.address)
            )
        )
        started.append(functions)
        scheduler = await start_scheduler(
            SchedulerConfig.from_env(
                service_env(url, key, "SCHEDULER", SCHEDULER_MESSAGING_ADDRESS=messaging.address)
            )
        )
        started.append(scheduler)
        gateway = await start(
            Config.from_env(
                {
                    "GATEWAY_DATABASE_URL": url,
                    "GATEWAY_LISTEN": "127.0.0.1:0",
                    "GATEWAY_MESSAGING_ADDRESS": messaging.address,
                    "GATEWAY_FUNCTIONS_ADDRESS": functions.address,
                    "GATEWAY_SCHEDULER_ADDRESS": scheduler.address,
                    **key.env("gateway"),
                    "LOG_JSON": "false",
                }
            )
        )
        started.append(gateway)
        tokens = {}
        for who, (principal, roles) in PRINCIPALS.items():
            tokens[who] = new_token()
            await asyncio.to_thread(ensure_token, url, tokens[who], principal, roles, who)
        w = SimpleNamespace(gateway=gateway, tokens=tokens, database_url=url)
        async with httpx.AsyncClient(base_url=gateway.url, timeout=60) as http:

            async def tool(who: str, name: str, args: Args) -> Args:
                response = await http.post(
                    f"/api/v1/tools/{name}",
                    json=args,
                    headers={"Authorization": f"Bearer {tokens[who]}"},
                )
                assert response.status_code == 200, response.text
                return response.json()

            for target in ("crew:demo", "workflow:wf-1"):
                await tool(
                    "ops",
                    "targets",
                    {"action": "register", "target": target, "owner": "user:owner"},
                )
            await tool(
                "owner",
                "declarations",
                {
                    "action": "declare",
                    "target": "crew:demo",
                    "name": "echo",
                    "input_schema": ECHO_SCHEMA,
                    "allowed_callers": ["user:*"],
                },
            )
            sent = await tool(
                "alice", "messages", {"action": "send", "crew": "demo", "message": "hi"}
            )
            w.inbox_id, w.conversation_id = sent["inbox_id"], sent["conversation_id"]
            called = await tool(
                "alice",
                "functions",
                {"action": "call", "crew": "demo", "function": "echo", "inputs": {"text": "hi"}},
            )
            w.call_id = called["call_id"]
        bot = Minter("agent:demo/bot", key.ensure("gateway")[0])
        async with MessagingClient(messaging.address, identity=bot) as runtime:
            turn = await runtime.claim_turn(["crew:demo"], wait_seconds=10)
            assert turn is not None
            await runtime.complete_turn(turn.turn_id)
        async with FunctionsClient(functions.address, identity=bot) as worker:
            execution = await worker.claim_execution(
                ["crew:demo"], wait_seconds=10, lease_seconds=300
            )
            assert execution is not None and execution.call_id == w.call_id
            await worker.upload_file(w.call_id, "out.txt", b"hello")
            await worker.ask_input(w.call_id, "q1", "which one?")
        async with SchedulerClient(scheduler.address, identity=bot) as agent:
            wake_up = await agent.create_wake_up(w.conversation_id, delay_seconds=3600)
            schedule = await agent.create_schedule(
                w.conversation_id, "hourly", interval_seconds=3600
            )
            webhook = await agent.create_webhook(w.conversation_id, name="ci")
        w.wake_up_id, w.schedule_id = wake_up.wake_up_id, schedule.schedule_id
        w.webhook_id = webhook.webhook_id
        w.token_id = next(
            t["token_id"]
            for t in (await _list_tokens(gateway.url, tokens["ops"]))
            if t["principal"] == "user:alice"
        )
        yield w
    finally:
        for service in reversed(started):
            await service.stop(0)


async def _list_tokens(url: str, token: str) -> list[Args]:
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        response = await http.post(
            "/api/v1/tools/tokens",
            json={"action": "list"},
            headers={"Authorization": f"Bearer {token}"},
        )
        return response.json()["tokens"]


# ------------------------------------------------------------------------------ rows


@dataclass(frozen=True)
class Row:
    """One bad request: `args` (or `args(world)`), the expected status name, and words
    the error message must contain (naming the field)."""

    tool: str
    action: str | None
    args: Args | Callable[[SimpleNamespace], Any]
    words: str | tuple[str, ...]
    code: str = "INVALID_ARGUMENT"
    who: str = "alice"
    what: str = ""

    def arguments(self, w: SimpleNamespace) -> Any:
        return self.args(w) if callable(self.args) else self.args


ROWS: list[Row] = []


def rows(tool: str, action: str | None, *entries: tuple, who: str = "alice") -> None:
    """Add rows of one tool action: (what, args, words[, code[, who]])."""
    for entry in entries:
        what, args, words, *rest = entry
        code = rest[0] if rest else "INVALID_ARGUMENT"
        ROWS.append(Row(tool, action, args, words, code, rest[1] if len(rest) > 1 else who, what))


# ------------------------------------------------------------------------- invoking


def _encodable(args: Any) -> bool:
    """Whether JSON of `args` is UTF-8 text (lone surrogates are not)."""
    try:
        json.dumps(args, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return False
    return True


MCP_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-11-25",
}


class Surface:
    """Calls tools as the principals of the world: MCP tools over MCP, the others on /api."""

    def __init__(
        self, w: SimpleNamespace, stack: contextlib.AsyncExitStack, mcp_session: Callable
    ) -> None:
        self.w = w
        self.stack = stack
        self.mcp_session = mcp_session
        self.sessions: dict[str, Client] = {}
        self.http: httpx.AsyncClient | None = None

    async def client(self) -> httpx.AsyncClient:
        if self.http is None:
            self.http = await self.stack.enter_async_context(
                httpx.AsyncClient(base_url=self.w.gateway.url, timeout=60)
            )
        return self.http

    async def raw_mcp(self, tool: str, args: Any, token: str) -> tuple[str, str]:
        """A tools/call the SDK cannot send (it refuses to encode a lone surrogate): the
        same JSON-RPC request, with the surrogate as a JSON escape (`\\ud800`)."""
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
        body["params"] = {"name": tool, "arguments": args}
        response = await (await self.client()).post(
            "/mcp",
            content=json.dumps(body),  # ASCII: the surrogate is escaped
            headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"},
        )
        answer = response.json()
        if "error" in answer:
            return f"JSON-RPC {answer['error'].get('code')}", answer["error"].get("message", "")
        result = answer["result"]
        text = "".join(part.get("text", "") for part in result["content"])
        if not result.get("isError"):
            return "OK", text[:300]
        return result["structuredContent"]["error"]["code"], text

    async def call(self, row: Row, args: Any) -> tuple[str, str]:
        """(status name, message) of a refused call; ("OK", result) if it was accepted."""
        token = self.w.tokens[row.who]
        if tools.TOOLS[row.tool].mcp and not _encodable(args):
            return await self.raw_mcp(row.tool, args, token)
        if tools.TOOLS[row.tool].mcp:
            if row.who not in self.sessions:
                self.sessions[row.who] = await self.stack.enter_async_context(
                    self.mcp_session(self.w.gateway.mcp_url, token)
                )
            result = await self.sessions[row.who].call_tool(row.tool, args)
            text = "".join(getattr(part, "text", "") for part in result.content)
            if not result.is_error:
                return "OK", text[:300]
            error = (result.structured_content or {}).get("error", {})
            assert error.get("message") == text, "the text and structured error differ"
            return error.get("code", "?"), text
        response = await (await self.client()).post(
            f"/api/v1/tools/{row.tool}",
            content=json.dumps(args),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        if response.status_code == 200:
            return "OK", response.text[:300]
        error = response.json()["error"]
        if HTTP_STATUS.get(error["code"]) != response.status_code:
            return f"{error['code']} with HTTP {response.status_code}", error["message"]
        return error["code"], error["message"]


# ---------------------------------------------------------------------- the table
# Conventions: `w` is the world; words name the field. Every row is refused; none
# may change a database.

BIG = "x" * 70_000  # past every text limit of 64 KiB
HUGE_INT = 2**70  # a JSON number past int64
DEEP: dict[str, Any] = {"text": "x"}
for _ in range(40):
    DEEP = {"text": "x", "more": DEEP}
LONE_SURROGATE = "\ud800"  # JSON can carry it ("\\ud800"); it is not Unicode text
# The MCP SDK's client will not send one (it cannot encode it), and its server's JSON
# parser refuses the escape: a JSON-RPC parse error saying where, before any tool runs.
SURROGATE_REFUSED = (("Parse error", "unexpected end of hex escape"), "JSON-RPC -32700")
# The services' words for a NUL character (agentworks.core.checks.check_no_nul), after
# the field's name (messaging's `text` is the tools' `message`: the refusal says so).
NUL = " contains a NUL character (\\u0000), which cannot be stored; remove it"
# Messaging's words.
DESTINATION_MISSING = (
    "destination is missing: give a target (crew or workflow) to start a new conversation, "
    "or an inbox_id to continue one"
)
MESSAGE_EMPTY = "text is empty: send some text or at least one part"


def call_id(**extra: Any) -> Callable[[SimpleNamespace], Args]:
    return lambda w: {"call_id": w.call_id, **extra}


def fn(action: str, /, **extra: Any) -> Callable[[SimpleNamespace], Args]:
    """`functions` arguments about alice's call."""
    return lambda w: {"action": action, "call_id": w.call_id, **extra}


def with_id(key: str, action: str, /, **extra: Any) -> Callable[[SimpleNamespace], Args]:
    """Arguments naming one of the world's ids (`wake_up_id` -> w.wake_up_id)."""
    return lambda w: {"action": action, key: getattr(w, key), **extra}


def in_conversation(action: str, /, **extra: Any) -> Callable[[SimpleNamespace], Args]:
    return lambda w: {"action": action, "conversation_id": w.conversation_id, **extra}


rows(
    "messages",
    None,
    ("no action", {"crew": "demo", "message": "hi"}, "'action' is a required property"),
    ("unknown action", {"action": "delete"}, "action: 'delete' is not one of ['send', 'read']"),
    ("action of the wrong type", {"action": 1}, "action: 1 is not of type 'string'"),
)
rows(
    "messages",
    "send",
    # Messaging's refusals, as it words them (metadata naming `text` names `message`).
    ("no destination", {"action": "send", "message": "hi"}, DESTINATION_MISSING),
    (
        "two destinations",
        {"action": "send", "crew": "demo", "workflow": "wf-1", "message": "hi"},
        "takes one of crew, workflow or inbox_id (got crew, workflow)",
    ),
    ("empty crew", {"action": "send", "crew": "", "message": "hi"}, DESTINATION_MISSING),
    ("unknown crew", {"action": "send", "crew": "nope", "message": "hi"}, "crew:nope", "NOT_FOUND"),
    ("crew name with ..", {"action": "send", "crew": "../etc", "message": "hi"}, "name"),
    ("no message", {"action": "send", "crew": "demo"}, MESSAGE_EMPTY),
    ("blank message", {"action": "send", "crew": "demo", "message": "  "}, MESSAGE_EMPTY),
    (
        "oversized message",
        {"action": "send", "crew": "demo", "message": BIG},
        "text is 70000 bytes; the limit is 65536 bytes",
    ),
    ("NUL in message", {"action": "send", "crew": "demo", "message": "a\x00b"}, "text" + NUL),
    (
        "lone surrogate in message",
        {"action": "send", "crew": "demo", "message": "a" + LONE_SURROGATE},
        *SURROGATE_REFUSED,
    ),
    (
        "part with text and data",
        {"action": "send", "crew": "demo", "message": "m", "parts": [{"text": "a", "data": {}}]},
        "parts.0",
    ),
    (
        "part data not an object",
        {"action": "send", "crew": "demo", "message": "m", "parts": [{"data": "[1]"}]},
        "parts.0.data: '[1]' is not of type 'object'",
    ),
    (
        "NUL in part data",
        {"action": "send", "crew": "demo", "message": "m", "parts": [{"data": {"k": "\x00"}}]},
        "parts[0].data.k" + NUL,
    ),
    (
        "oversized submission_id",
        {"action": "send", "crew": "demo", "message": "m", "submission_id": "s" * 201},
        "submission_id: ",
    ),
    (
        "NUL in submission_id",
        {"action": "send", "crew": "demo", "message": "m", "submission_id": "s\x00"},
        "submission_id" + NUL,
    ),
    (
        "unknown inbox",
        {"action": "send", "inbox_id": UNKNOWN_UUID, "message": "m"},
        "inbox",
        "NOT_FOUND",
    ),
    (
        "someone else's inbox",
        lambda w: {"action": "send", "inbox_id": w.inbox_id, "message": "m"},
        "inbox",
        "NOT_FOUND",
        "owner",
    ),
)
rows(
    "messages",
    "read",
    ("no inbox_id", {"action": "read"}, "needs inbox_id"),
    ("unknown inbox", {"action": "read", "inbox_id": UNKNOWN_UUID}, "inbox", "NOT_FOUND"),
    ("malformed inbox id", {"action": "read", "inbox_id": "../x"}, "inbox", "NOT_FOUND"),
    ("NUL in inbox_id", {"action": "read", "inbox_id": "x\x00"}, "inbox_id" + NUL),
    (
        "someone else's inbox",
        lambda w: {"action": "read", "inbox_id": w.inbox_id},
        "inbox",
        "NOT_FOUND",
        "owner",
    ),
    (
        "malformed cursor",
        lambda w: {"action": "read", "inbox_id": w.inbox_id, "after": "%%%"},
        "cursor",
    ),
    (
        "cursor past int64",
        lambda w: {
            "action": "read",
            "inbox_id": w.inbox_id,
            "after": "cDE6OTk5OTk5OTk5OTk5OTk5OTk5OTk5",
        },
        "cursor",
    ),
    (
        "limit 0",
        {"action": "read", "inbox_id": "x", "limit": 0},
        "limit: 0 is less than the minimum of 1",
    ),
    (
        "limit 101",
        {"action": "read", "inbox_id": "x", "limit": 101},
        "limit: 101 is greater than the maximum of 100",
    ),
    (
        "limit 1.5",
        {"action": "read", "inbox_id": "x", "limit": 1.5},
        "limit: 1.5 is not of type 'integer'",
    ),
    (
        "limit true",
        {"action": "read", "inbox_id": "x", "limit": True},
        "limit: True is not of type 'integer'",
    ),
    (
        "wait_seconds 26",
        {"action": "read", "inbox_id": "x", "wait_seconds": 26},
        "wait_seconds: 26 is greater",
    ),
    (
        "wait_seconds -1",
        {"action": "read", "inbox_id": "x", "wait_seconds": -1},
        "wait_seconds: -1 is less",
    ),
    (
        "wait_seconds past int64",
        {"action": "read", "inbox_id": "x", "wait_seconds": HUGE_INT},
        "wait_seconds",
    ),
)
for alias, kind, other in (("ask_crew", "crew", "workflow"), ("chat", "workflow", "crew")):
    name = "demo" if kind == "crew" else "wf-1"
    rows(
        alias,
        None,
        ("no destination", {"message": "hi"}, DESTINATION_MISSING),
        (
            "two destinations",
            lambda w, k=kind, n=name: {k: n, "inbox_id": w.inbox_id, "message": "hi"},
            f"{alias} takes one of {kind} or inbox_id (got {kind}, inbox_id)",
        ),
        ("no message", {kind: name}, "'message' is a required property"),
        (f"a {other}", {other: "x", "message": "hi"}, f"'{other}' was unexpected"),
        ("unknown target", {kind: "nope", "message": "hi"}, f"{kind}:nope", "NOT_FOUND"),
        ("oversized message", {kind: name, "message": BIG}, "text is 70000 bytes"),
        ("NUL in message", {kind: name, "message": "\x00"}, "text" + NUL),
        ("lone surrogate", {kind: name, "message": LONE_SURROGATE}, *SURROGATE_REFUSED),
        (
            "message not a string",
            {kind: name, "message": ["hi"]},
            "message: ['hi'] is not of type 'string'",
        ),
        ("parts not a list", {kind: name, "message": "m", "parts": '[{"text": "a"}]'}, "parts: "),
    )

rows(
    "functions",
    None,
    ("no action", {"crew": "demo"}, "'action' is a required property"),
    ("unknown action", {"action": "run", "crew": "demo"}, "action: 'run' is not one of"),
)
rows(
    "functions",
    "list",
    ("no target", {"action": "list"}, "action 'list' needs exactly one of crew or workflow_id"),
    (
        "two targets",
        {"action": "list", "crew": "demo", "workflow_id": "wf-1"},
        "needs exactly one of crew or workflow_id (got crew, workflow_id)",
    ),
    ("empty crew", {"action": "list", "crew": ""}, "crew: is empty"),
    ("unknown crew", {"action": "list", "crew": "nope"}, "crew:nope", "NOT_FOUND"),
    ("crew name with ..", {"action": "list", "crew": "../../etc"}, "name"),
    (
        "NUL in crew",
        {"action": "list", "crew": "de\x00mo"},
        ("target.name 'de\\x00mo'", "does not match the pattern"),
    ),
    ("oversized crew", {"action": "list", "crew": "c" * 300}, "name"),
)
rows(
    "functions",
    "call",
    ("no function", {"action": "call", "crew": "demo"}, "action 'call' needs function"),
    (
        "no target",
        {"action": "call", "function": "echo"},
        "needs exactly one of crew or workflow_id",
    ),
    (
        "unknown function",
        {"action": "call", "crew": "demo", "function": "ghost"},
        "function 'ghost' not found",
        "NOT_FOUND",
    ),
    (
        "NUL in function",
        {"action": "call", "crew": "demo", "function": "echo\x00"},
        "function" + NUL,
    ),
    (
        "inputs missing a field",
        {"action": "call", "crew": "demo", "function": "echo"},
        "inputs.text: missing (required)",
    ),
    (
        "input of the wrong type",
        {"action": "call", "crew": "demo", "function": "echo", "inputs": {"text": 5}},
        "inputs.text: expected string, got integer",
    ),
    (
        "unknown input",
        {
            "action": "call",
            "crew": "demo",
            "function": "echo",
            "inputs": {"text": "x", "colour": "red"},
        },
        "inputs.colour: unknown (not in the schema)",
    ),
    (
        "inputs as a JSON string",
        {"action": "call", "crew": "demo", "function": "echo", "inputs": '{"text": "x"}'},
        "inputs: '{\"text\": \"x\"}' is not of type 'object'",
    ),
    (
        "inputs as malformed JSON",
        {"action": "call", "crew": "demo", "function": "echo", "inputs": '{"text": '},
        "inputs: ",
    ),
    (
        "NUL in an input",
        {"action": "call", "crew": "demo", "function": "echo", "inputs": {"text": "a\x00"}},
        "inputs.text" + NUL,
    ),
    (
        "lone surrogate in an input",
        {"action": "call", "crew": "demo", "function": "echo", "inputs": {"text": LONE_SURROGATE}},
        *SURROGATE_REFUSED,
    ),
    (
        "inputs nested 40 deep",
        {"action": "call", "crew": "demo", "function": "echo", "inputs": DEEP},
        "inputs nests objects and arrays more than 24 deep",
    ),
    (
        "oversized inputs",
        {"action": "call", "crew": "demo", "function": "echo", "inputs": {"text": "y" * 300_000}},
        "inputs are larger",
    ),
    (
        "oversized submission_id",
        {
            "action": "call",
            "crew": "demo",
            "function": "echo",
            "inputs": {"text": "x"},
            "submission_id": "s" * 201,
        },
        "submission_id: ",
    ),
    (
        "not an allowed caller",
        {"action": "call", "crew": "demo", "function": "echo", "inputs": {"text": "x"}},
        "function 'echo' not found",
        "NOT_FOUND",
        "bot",
    ),
    (
        "wait_seconds 26",
        {"action": "call", "crew": "demo", "function": "echo", "inputs": {"text": "x"}}
        | {"wait_seconds": 26},
        "wait_seconds: 26 is greater",
    ),
)
rows(
    "functions",
    "status",
    ("no call_id", {"action": "status"}, "action 'status' needs call_id"),
    ("empty call_id", {"action": "status", "call_id": ""}, "call_id: is empty"),
    ("unknown call", {"action": "status", "call_id": UNKNOWN_UUID}, "call", "NOT_FOUND"),
    (
        "call_id with ..",
        {"action": "status", "call_id": "../../etc"},
        "call '../../etc'",
        "NOT_FOUND",
    ),
    ("someone else's call", fn("status"), "call", "NOT_FOUND", "bot"),
    ("after -2", fn("status", after=-2), "after: -2 is less than the minimum of -1"),
    ("after past int64", fn("status", after=HUGE_INT), "after"),
    ("after as a string", fn("status", after="0"), "after: '0' is not of type 'integer'"),
    ("message_limit 0", fn("status", message_limit=0), "message_limit: 0 is less"),
    ("message_limit 201", fn("status", message_limit=201), "message_limit: 201 is greater"),
    ("event_limit 201", fn("status", event_limit=201), "event_limit: 201 is greater"),
    ("after_event -9", fn("status", after_event=-9), "after_event: -9 is less"),
    ("wait_seconds 26", fn("status", wait_seconds=26), "wait_seconds: 26 is greater"),
    ("seen_version -1", fn("status", seen_version=-1), "seen_version: -1 is less"),
    ("seen_version past int64", fn("status", seen_version=HUGE_INT), "seen_version"),
    ("a read argument", fn("status", file="out.txt"), "action 'status' does not take file"),
)
TRAVERSALS = ["../secret", "/etc/passwd", "out/../../x", "a\\b", ".", "a//b", "x\x00", "x\n"]
rows(
    "functions",
    "read",
    ("no file", fn("read"), "action 'read' needs file"),
    ("empty file", fn("read", file=""), "file: is empty"),
    *((f"path traversal {name!r}", fn("read", file=name), "file") for name in TRAVERSALS),
    (
        "escape via the call folder",
        lambda w: fn("read", file=f".calls/{w.call_id}/../x")(w),
        "file",
    ),
    ("oversized file name", fn("read", file="n" * 256), "file name"),
    ("unknown file", fn("read", file="nope.txt"), "file 'nope.txt'", "NOT_FOUND"),
    ("offset -1", fn("read", file="out.txt", offset=-1), "offset: -1 is less"),
    ("offset past int64", fn("read", file="out.txt", offset=HUGE_INT), "offset"),
    ("offset 2^62", fn("read", file="out.txt", offset=2**62), "offset"),
    ("limit 0", fn("read", file="out.txt", limit=0), "limit: 0 is less"),
    ("limit 2 MiB", fn("read", file="out.txt", limit=2 * 1024 * 1024), "limit: 2097152 is greater"),
    ("someone else's call", fn("read", file="out.txt"), "call", "NOT_FOUND", "bot"),
)
rows(
    "functions",
    "reply",
    ("no text", fn("reply"), "action 'reply' needs text"),
    ("empty text", fn("reply", text=""), "text: is empty"),
    ("oversized text", fn("reply", text=BIG), "text is 70000 bytes"),
    ("NUL in text", fn("reply", text="r\x00"), "text" + NUL),
    ("lone surrogate in text", fn("reply", text=LONE_SURROGATE), *SURROGATE_REFUSED),
    (
        "unknown call",
        {"action": "reply", "call_id": UNKNOWN_UUID, "text": "r"},
        "call",
        "NOT_FOUND",
    ),
    ("someone else's call", fn("reply", text="r"), "call", "NOT_FOUND", "bot"),
)
rows(
    "functions",
    "cancel",
    ("no call_id", {"action": "cancel"}, "action 'cancel' needs call_id"),
    ("unknown call", {"action": "cancel", "call_id": "nope"}, "call 'nope'", "NOT_FOUND"),
    ("someone else's call", fn("cancel"), "call", "NOT_FOUND", "bot"),
    ("a reply argument", fn("cancel", text="r"), "action 'cancel' does not take text"),
)
rows(
    "get_crew_function_call",
    None,
    ("no call_id", {}, "'call_id' is a required property"),
    ("unknown call", {"call_id": UNKNOWN_UUID}, "call", "NOT_FOUND"),
    ("offset without file", call_id(offset=0), "offset needs file too"),
    (
        "status argument with file",
        call_id(file="out.txt", after=0),
        "a read (with file) does not take after",
    ),
    *((f"path traversal {name!r}", call_id(file=name), "file") for name in TRAVERSALS[:4]),
    ("after -5", call_id(after=-5), "after: -5 is less"),
    ("limit 2 MiB", call_id(file="out.txt", limit=2 * 1024 * 1024), "limit: 2097152 is greater"),
    ("someone else's call", call_id(), "call", "NOT_FOUND", "bot"),
)

rows(
    "list",
    None,
    ("an unknown kind", {"what": "everything"}, "what: 'everything' is not one of"),
    (
        "a filter of another kind",
        {"what": "targets", "caller": "user:alice"},
        "list what='targets' does not take caller; it takes cursor, limit, target",
    ),
    ("a malformed cursor", {"what": "calls", "cursor": "garbage"}, "is not a cursor of this list"),
    (
        "another list's cursor",
        {"what": "conversations", "cursor": "ZmMxOlsxLCJ4Il0"},
        "is not a cursor of this list",
    ),
    ("a runtimes cursor", {"what": "runtimes", "cursor": "x"}, "cursor 'x' is not a cursor"),
    ("limit 201", {"what": "calls", "limit": 201}, "limit: 201 is greater"),
    ("limit 0", {"what": "targets", "limit": 0}, "limit: 0 is less"),
    ("a time without zone", {"what": "calls", "created_after": "2026-01-01"}, "no time zone"),
    ("not a time", {"what": "calls", "created_before": "soon"}, "created_before 'soon'"),
    ("an unknown status", {"what": "calls", "status": "done"}, "status: 'done' is not one of"),
    ("a caller that is no principal", {"what": "calls", "caller": "alice"}, "caller"),
    (
        "a target without kind",
        {"what": "calls", "target": "demo"},
        "target: 'demo' is not valid: expected crew:<name>",
    ),
    ("a malformed since", {"what": "conversations", "since": "garbage"}, "since 'garbage'"),
    (
        "an empty time range",
        {
            "what": "calls",
            "created_after": "2026-01-02T00:00:00Z",
            "created_before": "2026-01-01T00:00:00Z",
        },
        "is not before created_before",
    ),
)
rows(
    "transcript",
    None,
    ("neither id", {}, "exactly one of conversation_id and inbox_id (got neither)"),
    (
        "both ids",
        {"conversation_id": UNKNOWN_UUID, "inbox_id": UNKNOWN_UUID},
        "exactly one of conversation_id and inbox_id (got conversation_id, inbox_id)",
    ),
    ("an unknown conversation", {"conversation_id": UNKNOWN_UUID}, "not found", "NOT_FOUND"),
    ("an unknown inbox", {"inbox_id": UNKNOWN_UUID}, "inbox", "NOT_FOUND"),
    (
        "a malformed cursor",
        lambda w: {"conversation_id": w.conversation_id, "cursor": "garbage"},
        "after 'garbage' is not a cursor",
    ),
    ("limit 500", {"conversation_id": UNKNOWN_UUID, "limit": 500}, "limit: 500 is greater"),
    ("a NUL in the inbox id", {"inbox_id": "a\x00b"}, "inbox"),
)

# -------------------------------------------------------- operator and owner tools

rows(
    "targets",
    None,
    (
        "no action",
        {"target": "crew:demo"},
        "'action' is a required property",
        "INVALID_ARGUMENT",
        "ops",
    ),
    ("no target", {"action": "get"}, "'target' is a required property", "INVALID_ARGUMENT", "ops"),
    (
        "target without a kind",
        {"action": "get", "target": "demo"},
        "target: 'demo' is not valid: expected crew:<name> or workflow:<id>",
        "INVALID_ARGUMENT",
        "ops",
    ),
)
rows(
    "targets",
    "register",
    ("no owner", {"action": "register", "target": "crew:x"}, "action 'register' needs owner"),
    (
        "owner not a principal",
        {"action": "register", "target": "crew:x", "owner": "nobody"},
        "owner",
    ),
    (
        "target name with ..",
        {"action": "register", "target": "crew:../x", "owner": "user:o"},
        "name",
    ),
    (
        "NUL in the target",
        {"action": "register", "target": "crew:a\x00", "owner": "user:o"},
        ("ref.name 'a\\x00'", "does not match the pattern"),
    ),
    (
        "running_limit 1001",
        {"action": "register", "target": "crew:x", "owner": "user:o", "running_limit": 1001},
        "running_limit: 1001 is greater",
    ),
    (
        "running_limit past int64",
        {"action": "register", "target": "crew:x", "owner": "user:o", "running_limit": HUGE_INT},
        "running_limit",
    ),
    (
        "free_text_ask as a string",
        {"action": "register", "target": "crew:x", "owner": "user:o", "free_text_ask": "false"},
        "free_text_ask: 'false' is not of type 'boolean'",
    ),
    (
        "not an operator",
        {"action": "register", "target": "crew:x", "owner": "user:o"},
        "operator",
        "PERMISSION_DENIED",
        "alice",
    ),
    who="ops",
)
rows(
    "targets",
    "update",
    (
        "no free_text_ask",
        {"action": "update", "target": "crew:demo"},
        "action 'update' needs free_text_ask",
    ),
    (
        "unknown target",
        {"action": "update", "target": "crew:ghost", "free_text_ask": False},
        "not registered",
        "NOT_FOUND",
    ),
    (
        "not the owner",
        {"action": "update", "target": "crew:demo", "free_text_ask": False},
        "owner",
        "PERMISSION_DENIED",
        "alice",
    ),
    who="ops",
)
rows(
    "targets",
    "set_limit",
    (
        "no running_limit",
        {"action": "set_limit", "target": "crew:demo"},
        "action 'set_limit' needs running_limit",
    ),
    (
        "running_limit -1",
        {"action": "set_limit", "target": "crew:demo", "running_limit": -1},
        "running_limit: -1 is less",
    ),
    (
        "unknown target",
        {"action": "set_limit", "target": "crew:ghost", "running_limit": 2},
        "not registered",
        "NOT_FOUND",
    ),
    (
        "not an operator",
        {"action": "set_limit", "target": "crew:demo", "running_limit": 2},
        "operator",
        "PERMISSION_DENIED",
        "owner",
    ),
    who="ops",
)
rows(
    "targets",
    "get",
    ("unknown target", {"action": "get", "target": "crew:ghost"}, "not registered", "NOT_FOUND"),
    (
        "unknown kind",
        {"action": "get", "target": "team:demo"},
        "target: 'team:demo' is not valid: expected crew:<name>",
    ),
    (
        "a register argument",
        {"action": "get", "target": "crew:demo", "owner": "user:x"},
        "action 'get' does not take owner",
    ),
)
rows(
    "tokens",
    None,
    ("no action", {}, "'action' is a required property", "INVALID_ARGUMENT", "ops"),
)
rows(
    "tokens",
    "create",
    ("no principal", {"action": "create"}, "action 'create' needs principal"),
    ("principal not a principal", {"action": "create", "principal": "nobody"}, "nobody"),
    (
        "NUL in the principal",
        {"action": "create", "principal": "user:a\x00"},
        "principal 'user:a\\x00' is not a principal",
    ),
    (
        "unknown role",
        {"action": "create", "principal": "user:x", "roles": ["admin"]},
        "roles.0: 'admin' is not one of ['operator']",
    ),
    ("oversized label", {"action": "create", "principal": "user:x", "label": "l" * 201}, "label: "),
    (
        "NUL in the label",
        {"action": "create", "principal": "user:x", "label": "a\x00b"},
        "label" + NUL,
    ),
    (
        "lone surrogate in the label",
        {"action": "create", "principal": "user:x", "label": LONE_SURROGATE},
        "label: contains a lone surrogate (\\ud800)",
    ),
    (
        "not an operator",
        {"action": "create", "principal": "user:x"},
        "only operators may create tokens",
        "PERMISSION_DENIED",
        "alice",
    ),
    who="ops",
)
rows(
    "tokens",
    "list",
    (
        "include_revoked as a string",
        {"action": "list", "include_revoked": "yes"},
        "include_revoked: 'yes' is not of type 'boolean'",
    ),
    (
        "not an operator",
        {"action": "list"},
        "only operators may list tokens",
        "PERMISSION_DENIED",
        "alice",
    ),
    who="ops",
)
rows(
    "tokens",
    "revoke",
    ("no token_id", {"action": "revoke"}, "action 'revoke' needs token_id"),
    (
        "unknown token",
        {"action": "revoke", "token_id": "tok_nope"},
        "no token 'tok_nope'",
        "NOT_FOUND",
    ),
    ("NUL in token_id", {"action": "revoke", "token_id": "tok_\x00"}, "token_id" + NUL),
    (
        "not an operator",
        lambda w: {"action": "revoke", "token_id": w.token_id},
        "only operators may revoke tokens",
        "PERMISSION_DENIED",
        "alice",
    ),
    who="ops",
)
rows(
    "runtime_credentials",
    None,
    ("no action", {}, "'action' is a required property", "INVALID_ARGUMENT", "owner"),
)
rows(
    "runtime_credentials",
    "create",
    ("no principal", {"action": "create"}, "action 'create' needs principal"),
    (
        "a user principal",
        {"action": "create", "principal": "user:x"},
        "principal: 'user:x' is not valid: expected create (required): who the runtime acts as",
    ),
    (
        "another crew's target",
        {"action": "create", "principal": "agent:demo/bot", "targets": ["crew:other"]},
        "target crew:other: agent:demo/bot may serve only crew:demo",
    ),
    (
        "NUL in the label",
        {"action": "create", "principal": "agent:demo/bot", "label": "a\x00b"},
        "label" + NUL,
    ),
    (
        "no expiry of zero",
        {"action": "create", "principal": "agent:demo/bot", "expires_in_seconds": 0},
        "expires_in_seconds: 0 is less than the minimum of 1",
    ),
    (
        "not the target's owner",
        {"action": "create", "principal": "agent:demo/bot"},
        "only the owner of crew:demo (user:owner) or an operator may create runtime credentials",
        "PERMISSION_DENIED",
        "alice",
    ),
    who="owner",
)
rows(
    "runtime_credentials",
    "list",
    (
        "include_revoked as a string",
        {"action": "list", "include_revoked": "yes"},
        "include_revoked: 'yes' is not of type 'boolean'",
    ),
    who="owner",
)
rows(
    "runtime_credentials",
    "revoke",
    ("no credential_id", {"action": "revoke"}, "action 'revoke' needs credential_id"),
    (
        "unknown credential",
        {"action": "revoke", "credential_id": "cred_nope"},
        "no runtime credential 'cred_nope'",
        "NOT_FOUND",
    ),
    who="owner",
)
DECLARE = {
    "action": "declare",
    "target": "crew:demo",
    "name": "f2",
    "input_schema": {"type": "object"},
}
rows(
    "declarations",
    None,
    ("no action", {"target": "crew:demo", "name": "f"}, "'action' is a required property"),
    ("no name", {"action": "remove", "target": "crew:demo"}, "'name' is a required property"),
    who="owner",
)
rows(
    "declarations",
    "declare",
    (
        "no input_schema",
        {k: v for k, v in DECLARE.items() if k != "input_schema"},
        "action 'declare' needs input_schema",
    ),
    (
        "input_schema as a JSON string",
        {**DECLARE, "input_schema": '{"type": "object"}'},
        "input_schema: '{\"type\": \"object\"}' is not of type 'object'",
    ),
    (
        "input_schema not an object schema",
        {**DECLARE, "input_schema": {"type": "string"}},
        "input_schema must describe an object",
    ),
    (
        "invalid JSON Schema",
        {**DECLARE, "input_schema": {"type": "objekt"}},
        "input_schema is not a valid JSON Schema",
    ),
    (
        "pattern RE2 cannot run",
        {**DECLARE, "input_schema": {"type": "object", "properties": {"a": {"pattern": "(?=a)"}}}},
        "input_schema at properties/a/pattern",
    ),
    (
        "remote $ref",
        {
            **DECLARE,
            "input_schema": {"type": "object", "properties": {"a": {"$ref": "file:///etc/passwd"}}},
        },
        "$ref",
    ),
    (
        "NUL in the schema",
        {**DECLARE, "input_schema": {"type": "object", "description": "\x00"}},
        "input_schema",
    ),
    (
        "oversized schema",
        {**DECLARE, "input_schema": {"type": "object", "description": BIG}},
        "input_schema is larger",
    ),
    ("bad function name", {**DECLARE, "name": "1st"}, "function name"),
    ("oversized description", {**DECLARE, "description": "d" * 5000}, "description"),
    ("caller not a principal", {**DECLARE, "allowed_callers": ["nobody"]}, "allowed_callers"),
    ("workflow binding on a crew", {**DECLARE, "workflow": {"route": "r"}}, "workflow is only"),
    (
        "workflow without route",
        {**DECLARE, "target": "workflow:wf-1", "workflow": {}},
        "workflow: 'route' is a required property",
    ),
    (
        "variable of an unknown type",
        {
            **DECLARE,
            "target": "workflow:wf-1",
            "workflow": {"route": "r", "variables": [{"name": "v", "type": "date"}]},
        },
        "workflow.variables.0.type: 'date' is not one of",
    ),
    ("unknown target", {**DECLARE, "target": "crew:ghost"}, "not registered", "NOT_FOUND"),
    ("not the owner", DECLARE, "only the owner", "PERMISSION_DENIED", "alice"),
    who="owner",
)
rows(
    "declarations",
    "remove",
    (
        "unknown function",
        {"action": "remove", "target": "crew:demo", "name": "ghost"},
        "function 'ghost'",
        "NOT_FOUND",
    ),
    (
        "a declare argument",
        {"action": "remove", "target": "crew:demo", "name": "echo", "starts_work": True},
        "action 'remove' does not take starts_work",
    ),
    (
        "not the owner",
        {"action": "remove", "target": "crew:demo", "name": "echo"},
        "only the owner",
        "PERMISSION_DENIED",
        "alice",
    ),
    who="owner",
)

B64_PAST_INT64 = "cDE6OTk5OTk5OTk5OTk5OTk5OTk5OTk5"  # a cursor whose number is past int64
rows(
    "wake_ups",
    None,
    ("no action", {}, "'action' is a required property"),
    who="bot",
)
rows(
    "wake_ups",
    "create",
    (
        "no time",
        in_conversation("create", note="n"),
        "action 'create' needs exactly one of at or delay_seconds",
    ),
    (
        "two times",
        in_conversation("create", at="2030-01-01T00:00:00Z", delay_seconds=5),
        "(got at, delay_seconds)",
    ),
    ("no conversation", {"action": "create", "delay_seconds": 5}, "needs conversation_id"),
    ("negative delay", in_conversation("create", delay_seconds=-1), "delay_seconds: -1 is less"),
    ("NUL in note", in_conversation("create", delay_seconds=5, note="a\x00b"), "note" + NUL),
    (
        "long submission_id",
        in_conversation("create", delay_seconds=5, submission_id="k" * 201),
        "submission_id: is 201 characters",
    ),
    (
        "another product",
        in_conversation("create", delay_seconds=5, product="crew:other"),
        "product is taken from your identity",
    ),
    (
        "unknown conversation",
        {"action": "create", "conversation_id": UNKNOWN_UUID, "delay_seconds": 5},
        "conversation",
        "NOT_FOUND",
    ),
    (
        "not an agent or operator",
        in_conversation("create", delay_seconds=5),
        "operators can attach wake-ups",
        "PERMISSION_DENIED",
        "alice",
    ),
    who="bot",
)
rows(
    "wake_ups",
    "list",
    ("limit 0", {"action": "list", "limit": 0}, "limit: 0 is less"),
    ("limit 201", {"action": "list", "limit": 201}, "limit: 201 is greater"),
    ("malformed cursor", {"action": "list", "after": "%%%"}, "cursor"),
    ("cursor past int64", {"action": "list", "after": B64_PAST_INT64}, "cursor"),
    (
        "empty conversation_id",
        {"action": "list", "conversation_id": ""},
        "conversation_id: is empty",
    ),
    (
        "unknown conversation",
        {"action": "list", "conversation_id": "nope"},
        "conversation",
        "NOT_FOUND",
    ),
    (
        "include_finished as a string",
        {"action": "list", "include_finished": "yes"},
        "include_finished: 'yes' is not of type 'boolean'",
    ),
    (
        "NUL in product",
        {"action": "list", "product": "crew:\x00"},
        "product 'crew:\\x00' is not a product",
    ),
    who="bot",
)
rows(
    "wake_ups",
    "get",
    ("unknown wake-up", {"action": "get", "wake_up_id": UNKNOWN_UUID}, "wake-up", "NOT_FOUND"),
    ("malformed id", {"action": "get", "wake_up_id": "../x"}, "wake-up", "NOT_FOUND"),
    ("empty id", {"action": "get", "wake_up_id": ""}, "wake_up_id: is empty"),
    ("someone else's wake-up", with_id("wake_up_id", "get"), "wake-up", "NOT_FOUND", "alice"),
    who="bot",
)
rows(
    "wake_ups",
    "cancel",
    ("no id", {"action": "cancel"}, "action 'cancel' needs wake_up_id"),
    ("unknown wake-up", {"action": "cancel", "wake_up_id": UNKNOWN_UUID}, "wake-up", "NOT_FOUND"),
    ("someone else's wake-up", with_id("wake_up_id", "cancel"), "wake-up", "NOT_FOUND", "alice"),
    who="bot",
)
rows(
    "wake_ups",
    "reschedule",
    (
        "no time",
        with_id("wake_up_id", "reschedule"),
        "action 'reschedule' needs exactly one of at or delay_seconds",
    ),
    (
        "two times",
        with_id("wake_up_id", "reschedule", at="2030-01-01T00:00:00Z", delay_seconds=5),
        "(got at, delay_seconds)",
    ),
    (
        "not a time",
        with_id("wake_up_id", "reschedule", at="tomorrow"),
        "at 'tomorrow' is not a time",
    ),
    (
        "time without offset",
        with_id("wake_up_id", "reschedule", at="2030-01-01T00:00:00"),
        "has no time zone",
    ),
    ("too far ahead", with_id("wake_up_id", "reschedule", at="9999-12-31T23:59:59Z"), "at"),
    ("long past", with_id("wake_up_id", "reschedule", at="2000-01-01T00:00:00Z"), "at"),
    (
        "delay -1",
        with_id("wake_up_id", "reschedule", delay_seconds=-1),
        "delay_seconds: -1 is less",
    ),
    (
        "delay past int64",
        with_id("wake_up_id", "reschedule", delay_seconds=HUGE_INT),
        "delay_seconds",
    ),
    (
        "delay past 400 days",
        with_id("wake_up_id", "reschedule", delay_seconds=10**9),
        "delay_seconds",
    ),
    who="bot",
)
rows(
    "schedules",
    None,
    ("unknown action", {"action": "run"}, "action: 'run' is not one of"),
    who="bot",
)
rows(
    "schedules",
    "create",
    ("no prompt", in_conversation("create", interval_seconds=3600), "action 'create' needs prompt"),
    (
        "no rule",
        in_conversation("create", prompt="p"),
        "needs exactly one of cron or interval_seconds",
    ),
    (
        "two rules",
        in_conversation("create", prompt="p", cron="@daily", interval_seconds=3600),
        "(got cron, interval_seconds)",
    ),
    ("bad cron", in_conversation("create", prompt="p", cron="* * *"), "cron"),
    (
        "unknown time zone",
        in_conversation("create", prompt="p", cron="@daily", time_zone="Mars/Base"),
        "time_zone",
    ),
    (
        "time zone with an interval",
        in_conversation("create", prompt="p", interval_seconds=3600, time_zone="UTC"),
        "time_zone applies to cron rules",
    ),
    (
        "interval below the minimum",
        in_conversation("create", prompt="p", interval_seconds=0),
        "interval_seconds must be between",
    ),
    (
        "interval past int64",
        in_conversation("create", prompt="p", interval_seconds=HUGE_INT),
        "interval_seconds",
    ),
    (
        "start_at not a time",
        in_conversation("create", prompt="p", interval_seconds=3600, start_at="soon"),
        "start_at 'soon' is not a time",
    ),
    (
        "NUL in prompt",
        in_conversation("create", prompt="p\x00", interval_seconds=3600),
        "prompt" + NUL,
    ),
    ("oversized prompt", in_conversation("create", prompt=BIG, interval_seconds=3600), "prompt"),
    (
        "oversized name",
        in_conversation("create", prompt="p", interval_seconds=3600, name="n" * 201),
        "name: is 201 characters; it must be at most 200 characters",
    ),
    (
        "unknown conversation",
        {
            "action": "create",
            "conversation_id": UNKNOWN_UUID,
            "prompt": "p",
            "interval_seconds": 3600,
        },
        "conversation",
        "NOT_FOUND",
    ),
    (
        "not serving the conversation",
        in_conversation("create", prompt="p", interval_seconds=3600),
        "conversation",
        "PERMISSION_DENIED",
        "alice",
    ),
    who="bot",
)
rows(
    "schedules",
    "list",
    ("limit 201", {"action": "list", "limit": 201}, "limit: 201 is greater"),
    ("malformed cursor", {"action": "list", "after": "%%%"}, "cursor"),
    ("cursor past int64", {"action": "list", "after": B64_PAST_INT64}, "cursor"),
    who="bot",
)
for action in ("get", "pause", "resume", "delete"):
    rows(
        "schedules",
        action,
        ("no id", {"action": action}, f"action '{action}' needs schedule_id"),
        (
            "unknown schedule",
            {"action": action, "schedule_id": UNKNOWN_UUID},
            "schedule",
            "NOT_FOUND",
        ),
        ("empty id", {"action": action, "schedule_id": ""}, "schedule_id: is empty"),
        (
            "someone else's schedule",
            with_id("schedule_id", action),
            "schedule",
            "NOT_FOUND",
            "alice",
        ),
        who="bot",
    )
rows(
    "schedules",
    "update",
    ("bad cron", with_id("schedule_id", "update", cron="61 * * * *"), "cron"),
    (
        "two rules",
        with_id("schedule_id", "update", cron="@daily", interval_seconds=3600),
        "takes at most one of cron or interval_seconds",
    ),
    (
        "time zone alone",
        with_id("schedule_id", "update", time_zone="UTC"),
        "time_zone goes with a cron rule",
    ),
    ("empty prompt", with_id("schedule_id", "update", prompt=""), "prompt: is empty"),
    ("NUL in name", with_id("schedule_id", "update", name="n\x00"), "name" + NUL),
    (
        "a create argument",
        with_id("schedule_id", "update", paused=True),
        "action 'update' does not take paused",
    ),
    (
        "unknown schedule",
        {"action": "update", "schedule_id": UNKNOWN_UUID, "prompt": "p"},
        "schedule",
        "NOT_FOUND",
    ),
    who="bot",
)
rows(
    "schedules",
    "preview",
    (
        "no rule",
        {"action": "preview"},
        "needs exactly one of schedule_id, cron or interval_seconds",
    ),
    ("count 101", {"action": "preview", "cron": "@daily", "count": 101}, "count: 101 is greater"),
    (
        "after not a time",
        {"action": "preview", "cron": "@daily", "after": "later"},
        "after 'later' is not a time",
    ),
    (
        "after near the year 9999",
        {"action": "preview", "cron": "@daily", "after": "9999-12-31T00:00:00Z"},
        "after",
    ),
    ("bad cron", {"action": "preview", "cron": "every day"}, "cron"),
    (
        "saved schedule with a time zone",
        with_id("schedule_id", "preview", time_zone="UTC"),
        "drop time_zone",
    ),
    who="bot",
)
rows(
    "pauses",
    None,
    ("unknown action", {"action": "stop"}, "action: 'stop' is not one of"),
    who="ops",
)
rows(
    "pauses",
    "pause",
    ("not a product", {"action": "pause", "product": "everything"}, "product"),
    ("oversized reason", {"action": "pause", "reason": "r" * 501}, "reason: "),
    ("NUL in reason", {"action": "pause", "reason": "r\x00"}, "reason" + NUL),
    ("not an operator", {"action": "pause"}, "operator", "PERMISSION_DENIED", "alice"),
    who="ops",
)
rows(
    "pauses",
    "resume",
    ("not a product", {"action": "resume", "product": "crew:"}, "product"),
    (
        "a pause argument",
        {"action": "resume", "reason": "r"},
        "action 'resume' does not take reason",
    ),
    ("not an operator", {"action": "resume"}, "operator", "PERMISSION_DENIED", "alice"),
    who="ops",
)
rows(
    "pauses",
    "status",
    (
        "a product",
        {"action": "status", "product": "crew:demo"},
        "action 'status' does not take product",
    ),
    who="ops",
)
rows(
    "webhooks",
    None,
    ("no action", {"name": "x"}, "'action' is a required property"),
    who="bot",
)
rows(
    "webhooks",
    "create",
    ("no conversation", {"action": "create", "name": "x"}, "action 'create' needs conversation_id"),
    (
        "unknown conversation",
        {"action": "create", "conversation_id": UNKNOWN_UUID},
        "conversation",
        "NOT_FOUND",
    ),
    ("oversized name", in_conversation("create", name="n" * 201), "name: "),
    ("NUL in name", in_conversation("create", name="n\x00"), "name" + NUL),
    (
        "not serving the conversation",
        in_conversation("create"),
        "conversation",
        "PERMISSION_DENIED",
        "alice",
    ),
    who="bot",
)
rows(
    "webhooks",
    "list",
    ("limit 0", {"action": "list", "limit": 0}, "limit: 0 is less"),
    ("malformed cursor", {"action": "list", "after": "%%%"}, "cursor"),
    who="bot",
)
for action in ("get", "rotate", "delete"):
    rows(
        "webhooks",
        action,
        ("no id", {"action": action}, f"action '{action}' needs webhook_id"),
        ("unknown webhook", {"action": action, "webhook_id": UNKNOWN_UUID}, "webhook", "NOT_FOUND"),
        ("someone else's webhook", with_id("webhook_id", action), "webhook", "NOT_FOUND", "alice"),
        who="bot",
    )

# Webhooks out (N2): registration checks the URL against the address policy (no
# allow-list here) before it reads an inbox as the caller; ids of others are unknown.
rows(
    "endpoints",
    None,
    ("no action", {"url": "https://8.8.8.8/"}, "'action' is a required property"),
)
rows(
    "endpoints",
    "register",
    ("no url", {"action": "register", "events": ["call_ends"]}, "action 'register' needs url"),
    ("no events", {"action": "register", "url": "https://8.8.8.8/"}, "needs events"),
    (
        "a loopback url",
        {"action": "register", "url": "http://127.0.0.1:9/x", "events": ["call_ends"]},
        ("127.0.0.1", "loopback", "GATEWAY_WEBHOOKS_ALLOW"),
    ),
    (
        "the metadata address",
        {"action": "register", "url": "http://169.254.169.254/", "events": ["call_ends"]},
        ("link-local", "GATEWAY_WEBHOOKS_ALLOW"),
    ),
    (
        "not https",
        {"action": "register", "url": "ftp://8.8.8.8/", "events": ["call_ends"]},
        "must start with https://",
    ),
    (
        "an unknown source",
        {"action": "register", "url": "https://8.8.8.8/", "events": ["all"]},
        "is not an event source",
    ),
    (
        "NUL in description",
        {
            "action": "register",
            "url": "https://8.8.8.8/",
            "events": ["call_ends"],
            "description": "d\x00",
        },
        "description" + NUL,
    ),
    (
        "an inbox not yours",
        {"action": "register", "url": "https://8.8.8.8/", "events": [f"inbox:{UNKNOWN_UUID}"]},
        "inbox",
        "NOT_FOUND",
    ),
)
rows(
    "endpoints",
    "list",
    ("limit 0", {"action": "list", "limit": 0}, "limit: 0 is less"),
    ("malformed cursor", {"action": "list", "after": "%%%"}, "cursor"),
)
for action in ("get", "rotate", "delete", "deliveries"):
    rows(
        "endpoints",
        action,
        ("no id", {"action": action}, f"action '{action}' needs endpoint_id"),
        ("unknown endpoint", {"action": action, "endpoint_id": "ep_0"}, "endpoint", "NOT_FOUND"),
    )
rows(
    "endpoints",
    "deliveries",
    (
        "an unknown status",
        {"action": "deliveries", "endpoint_id": "ep_0", "status": "lost"},
        "'lost' is not one of",
    ),
)
rows(
    "endpoints",
    "redeliver",
    ("no id", {"action": "redeliver"}, "action 'redeliver' needs delivery_id"),
    ("unknown delivery", {"action": "redeliver", "delivery_id": "msg_0"}, "delivery", "NOT_FOUND"),
)

# Handler-level checks the published schemas cannot express (these tools have no
# per-action rules): arguments of another action.
rows(
    "messages",
    "read",
    (
        "a send argument",
        {"action": "read", "inbox_id": "x", "message": "m"},
        "messages action 'read' does not take message",
    ),
)
rows(
    "messages",
    "send",
    (
        "a read argument",
        {"action": "send", "crew": "demo", "message": "m", "limit": 5},
        "messages action 'send' does not take limit",
    ),
)
rows(
    "targets",
    "update",
    (
        "a register argument",
        {"action": "update", "target": "crew:demo", "free_text_ask": True, "owner": "user:x"},
        "targets action 'update' does not take owner",
    ),
    who="ops",
)
rows(
    "tokens",
    "list",
    (
        "a create argument",
        {"action": "list", "principal": "user:x"},
        "tokens action 'list' does not take principal",
    ),
    who="ops",
)


# ------------------------------------------------------------------ generated rows

WRONG_TYPE = {"string": 5, "integer": "5", "boolean": "true", "array": "x", "object": "[]"}


def slots() -> list[tuple[str, str | None]]:
    """(tool, action) of every tool and action in the registry; (tool, None) for the
    tool itself (and for the whole of tools without actions)."""
    out: list[tuple[str, str | None]] = []
    for tool in tools.TOOLS.values():
        out.append((tool.name, None))
        out += [
            (tool.name, a)
            for a in tool.input_schema["properties"].get("action", {}).get("enum", ())
        ]
    return out


def generated(tool_name: str, action: str | None) -> Iterator[Row]:
    """Rows every action gets from its published schema (see the module docstring)."""
    tool = tools.TOOLS[tool_name]
    schema = tool.input_schema
    properties = schema["properties"]
    has_actions = "action" in properties
    if has_actions and action is None:
        return
    base: Args = {"action": action} if has_actions else {}
    rule = tool.rules.get(action) if action else None
    fields = [f for f in (rule.fields if rule else properties) if f != "action"]
    required = [r for r in ((rule.required if rule else ()) or schema.get("required", ()))]
    required = [r for r in required if r != "action"]
    who = next((r.who for r in ROWS if (r.tool, r.action) == (tool_name, action)), "alice")

    def row(what: str, args: Args, words: str | tuple[str, ...]) -> Row:
        return Row(tool_name, action, args, words, "INVALID_ARGUMENT", who, f"generated: {what}")

    yield row("unknown argument", {**base, "bogus": 1}, "'bogus' was unexpected")
    if required:
        yield row("nothing but the action", base, tuple(required))
    foreign = next((f for f in properties if f not in fields and f != "action"), None)
    if rule is not None and foreign is not None:
        yield row(
            f"argument of another action ({foreign})",
            {**base, foreign: "x"},
            f"does not take {foreign}",
        )
    for name in fields:
        kind = properties[name].get("type")
        if kind in WRONG_TYPE:
            wrong = WRONG_TYPE[kind]
            yield row(
                f"{name} of the wrong type",
                {**base, name: wrong},
                f"{name}: {wrong!r} is not of type '{kind}'",
            )


ALL_ROWS = ROWS + [r for tool, action in slots() for r in generated(tool, action)]


def _words(row: Row) -> tuple[str, ...]:
    return (row.words,) if isinstance(row.words, str) else row.words


def _id(slot: tuple[str, str | None]) -> str:
    return f"{slot[0]}.{slot[1]}" if slot[1] else slot[0]


@pytest.mark.reliability(
    scenario="Bad input, gateway tools over MCP and /api/v1 (P6, G2)",
    action=f"{len(ALL_ROWS)} cases over every tool and action of the registry "
    f"({len(slots())} slots, one test each), with the official MCP client for the MCP tools "
    "and HTTP for the operator tools: missing, unknown and mistyped arguments and "
    "arguments of another action (generated from each published schema for every "
    "action), empty and oversized values, NUL characters and lone surrogates, bad and "
    "past-int64 cursors, out-of-range numbers (also past int64), malformed JSON in "
    "inputs and schemas, path traversal in file names, unknown and someone else's ids, "
    "missing roles",
    check="isError with the status name and a message naming the field (HTTP status "
    "matching the status on /api); every table of the messaging, functions, scheduler "
    "and gateway schemas unchanged",
)
@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize(("tool", "action"), slots(), ids=[_id(s) for s in slots()])
async def test_bad_input_is_refused_clearly_and_stores_nothing_P6_G2(
    world, mcp_session, tool, action
):
    """P6 G2 A1 C2 C7 F1 F2 F3 F7 F8 S1 S4 S5: each row of this tool action gets its
    status and a message naming the field, and no table of any service changes. All rows
    run; the failures are listed together."""
    cases = [row for row in ALL_ROWS if (row.tool, row.action) == (tool, action)]
    problems = []
    before = await asyncio.to_thread(database_snapshot, world.database_url, SCHEMAS)
    async with contextlib.AsyncExitStack() as stack:
        surface = Surface(world, stack, mcp_session)
        for row in cases:
            code, message = await surface.call(row, row.arguments(world))
            if code != row.code or not all(word in message for word in _words(row)):
                expected = f"expected {row.code} with {_words(row)}"
                problems.append(f"{row.what}: {expected}, got {code}: {message[:400]}")
            after = await asyncio.to_thread(database_snapshot, world.database_url, SCHEMAS)
            if after != before:
                changed = sorted(t for t in after if after[t] != before.get(t))
                problems.append(f"{row.what}: the database changed: {', '.join(changed)}")
                before = after
    assert not problems, f"{len(problems)} of {len(cases)} rows:\n" + "\n".join(problems)


def test_every_tool_action_has_bad_input_rows_P6_G2():
    """P6 G2: the table covers every tool and action of the registry (a new one without
    hand-written rows fails here), and names no tool or action that does not exist."""
    written = {(row.tool, row.action) for row in ROWS}
    assert set(slots()) - written == set(), "tool actions without bad-input rows"
    assert written - set(slots()) == set(), "rows of tool actions that do not exist"


# ------------------------------------------------------------ requests, not arguments

MIB = 1024 * 1024
CALL = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "messages", '
SEND = b'"arguments": {"action": "send", "crew": "demo", "message": '
# (what, path, raw body, expected HTTP status, words the answer must contain)
RAW = [
    (
        "/api malformed JSON",
        "/api/v1/tools/messages",
        b'{"action": "send", "crew": ',
        400,
        "request body is not JSON",
    ),
    (
        "/api invalid UTF-8",
        "/api/v1/tools/messages",
        b'{"action": "send", "crew": "demo", "message": "\xff\xfe"}',
        400,
        "request body is not JSON",
    ),
    (
        "/api arguments not an object",
        "/api/v1/tools/messages",
        b"[1, 2]",
        400,
        "arguments of messages must be a JSON object, got list",
    ),
    (
        "/api lone surrogate",
        "/api/v1/tools/messages",
        b'{"action": "send", "crew": "demo", "message": "\\ud800"}',
        400,
        "message: contains a lone surrogate (\\ud800)",
    ),
    (
        "/api NaN in inputs",
        "/api/v1/tools/functions",
        b'{"action": "call", "crew": "demo", "function": "echo", '
        b'"inputs": {"text": "x", "count": NaN}}',
        400,
        "inputs.count",
    ),
    (
        "/api oversized body",
        "/api/v1/tools/messages",
        b'{"action": "send", "crew": "demo", "message": "' + b"x" * MIB + b'"}',
        413,  # as on /mcp (it was 400)
        "the limit is 1048576",
    ),
    ("/mcp malformed JSON", "/mcp", CALL + SEND, 400, "Parse error"),
    ("/mcp invalid UTF-8", "/mcp", CALL + SEND + b'"\xff\xfe"}}}', 400, "Parse error"),
    (
        "/mcp arguments not an object",
        "/mcp",
        CALL.replace(b'"messages", ', b'"messages", "arguments": [1]}}'),
        200,  # a JSON-RPC error; the SDK's text does not name the field
        "Invalid request parameters",
    ),
]


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize(("what", "path", "body", "status", "words"), RAW, ids=[r[0] for r in RAW])
async def test_malformed_requests_are_refused_clearly_and_store_nothing_P6_G1(
    world, what, path, body, status, words
):
    """P6 G1: bodies that are not JSON, not UTF-8, not an object, carry what JSON allows
    but text does not, or are too large, get a 4xx answer saying what is wrong; nothing
    is stored."""
    before = await asyncio.to_thread(database_snapshot, world.database_url, SCHEMAS)
    async with httpx.AsyncClient(base_url=world.gateway.url, timeout=60) as http:
        response = await http.post(
            path,
            content=body,
            headers={**MCP_HEADERS, "Authorization": f"Bearer {world.tokens['alice']}"},
        )
    answer = response.json()
    error = answer.get("error") or {}
    message = error.get("message", "") if isinstance(error, dict) else ""
    assert (response.status_code, words in message) == (status, True), response.text[:500]
    assert await asyncio.to_thread(database_snapshot, world.database_url, SCHEMAS) == before
