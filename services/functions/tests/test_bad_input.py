"""Every functions RPC refuses bad input with a clear error naming what was wrong, and
stores nothing: the content of every table of the `functions` schema is the same
before and after the refused request (P6, F1, F3, F7, F8, R1)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import grpc
import psycopg
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from agentworks.common.v1 import common_pb2
from agentworks.core.errors import AgentWorksError, from_trailers
from agentworks.core.identity import METADATA_KEY
from agentworks.functions.v1 import functions_pb2 as pb
from agentworks.functions.v1 import functions_pb2_grpc
from agentworks.server.testing import database_snapshot

CREW = common_pb2.TargetRef(kind=common_pb2.TARGET_KIND_CREW, name="demo")
WORKFLOW = common_pb2.TargetRef(kind=common_pb2.TARGET_KIND_WORKFLOW, name="wf-1")
NO_KIND = common_pb2.TargetRef(name="demo")
BAD_KIND = common_pb2.TargetRef(kind=99, name="demo")  # type: ignore[arg-type]
GHOST = common_pb2.TargetRef(kind=common_pb2.TARGET_KIND_CREW, name="ghost")
UNKNOWN_UUID = "00000000-0000-0000-0000-000000000000"
OPS, OWNER, ALICE, BOT, SCOUT = (
    "user:ops",
    "user:owner",
    "user:alice",
    "agent:demo/bot",
    "agent:alpha/scout",
)
NAN, INF = float("nan"), float("inf")


def js(value: Any) -> str:
    """`value` as the JSON text of a `*_json` field (NaN and Infinity as Python writes
    them, so that the service sees what a careless client would send)."""
    return json.dumps(value)


def fn(schema: Any = None, **fields: Any) -> pb.Function:
    """A declaration of crew:demo's `f` with `schema` as input_schema (unless overridden)."""
    fields.setdefault("target", CREW)
    fields.setdefault("name", "f")
    function = pb.Function(**fields)
    if schema is not None:
        function.input_schema_json = js(schema)
    return function


OBJECT = {"type": "object"}


def nested(depth: int) -> dict[str, Any]:
    """A JSON object nested `depth` deep: {"a": {"a": ... {} ...}} (`{}` is 1 deep)."""
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


# One level deeper than JSON may nest (MAX_JSON_DEPTH, 24).
DEEP_VALUE = js(nested(25))
DEEP_SCHEMA = {"type": "object", "properties": {"a": {"const": nested(22)}}}
LOOP_SCHEMA = {
    "type": "object",
    "$defs": {"a": {"$ref": "#/$defs/a"}},
    "not": {"$ref": "#/$defs/a"},
}
LEGACY_SCHEMA = {"type": "object", "properties": {"a": {"$ref": "http://127.0.0.1:9/s.json"}}}

Build = Callable[[SimpleNamespace], Any]


def read_file(name: str) -> Build:
    return lambda c: pb.ReadFileRequest(call_id=c.call_id, file=name)


Case = tuple[str, str, Build, str, str | dict[str, str]]
Row = tuple[Any, str | dict[str, str]]


def cases(method: str, principal: str, code: str, *rows: Row) -> list[Case]:
    """The cases of one RPC, caller and expected code: rows of (request, words the
    message must contain). A request may be a builder `f(ctx)` when it needs the call."""

    def builder(request: Any) -> Build:
        return request if callable(request) else (lambda c: request)

    return [(method, principal, builder(request), code, words) for request, words in rows]


def declare(**fields: Any) -> pb.DeclareFunctionRequest:
    """Declare crew:demo's `f` (input_schema {"type": "object"} unless `schema` says)."""
    schema = fields.pop("schema", OBJECT)
    return pb.DeclareFunctionRequest(function=fn(schema, **fields))


def variable(**fields: Any) -> pb.DeclareFunctionRequest:
    """Declare workflow:wf-1's `f` with one workflow variable."""
    binding = pb.WorkflowBinding(route="r", variables=[pb.WorkflowVariable(**fields)])
    return declare(target=WORKFLOW, workflow=binding)


def call(function: str = "echo", inputs: Any = None, **fields: Any) -> pb.CallRequest:
    """Call crew:demo's `function` (echo with {"text": "x"} unless said otherwise)."""
    request = pb.CallRequest(target=CREW, function=function, **fields)
    request.inputs_json = js({"text": "x"} if inputs is None else inputs)
    return request


def status(**fields: Any) -> Build:
    return lambda c: pb.GetStatusRequest(call_id=c.call_id, **fields)


def page(**fields: Any) -> Build:
    return lambda c: pb.ReadFileRequest(call_id=c.call_id, file="out.txt", **fields)


def runtime_call(request_type: Any, **fields: Any) -> Build:
    """A runtime RPC's request about the pending call."""
    return lambda c: request_type(call_id=c.call_id, **fields)


def report(**fields: Any) -> Build:
    return runtime_call(pb.ReportRequest, **fields)


def upload(*chunks: dict[str, Any]) -> Build:
    """An upload of these chunks; the first one names the pending call."""
    return lambda c: [
        pb.FileChunk(**({"call_id": c.call_id} if i == 0 else {}), **chunk)
        for i, chunk in enumerate(chunks)
    ]


def ask(**fields: Any) -> Build:
    fields.setdefault("ask_id", "q2")
    return runtime_call(pb.AskInputRequest, **fields)


def finish(**fields: Any) -> Build:
    return runtime_call(pb.FinishExecutionRequest, **fields)


def as_expected(code: str, words: str | dict[str, str], got: str, refusal: Any) -> bool:
    """Whether a refusal is the expected one: `words` in its message, or, for a field's
    proto rule (`words` a dict), the reason FIELD_RULE with that field and rule in its
    ErrorInfo metadata: the rule's numbers and wording are the validator's, not the test's."""
    if got != code:
        return False
    if isinstance(words, dict):
        return refusal.reason == "FIELD_RULE" and words.items() <= refusal.metadata.items()
    return words in refusal.message


def field_rule(field: str, rule: str) -> dict[str, str]:
    """The ErrorInfo metadata a refusal by a field's proto rule names (see as_expected)."""
    return {"field": field, "rule": rule}


INVALID, NOT_FOUND, DENIED = "INVALID_ARGUMENT", "NOT_FOUND", "PERMISSION_DENIED"

# (method, principal, request builder, expected code, words the message must contain or,
# for a field's proto rule, the field_rule its ErrorInfo names)
CASES: list[Case] = [
    # --------------------------------------------------------------- targets
    *cases(
        "RegisterTarget",
        OPS,
        INVALID,
        (pb.RegisterTargetRequest(owner=OWNER), "ref.kind"),
        (pb.RegisterTargetRequest(ref=BAD_KIND, owner=OWNER), "ref.kind"),
        *(
            (
                pb.RegisterTargetRequest(ref=common_pb2.TargetRef(**ref), owner=OWNER),
                field_rule("ref.name", "string.pattern"),
            )
            for ref in ({"kind": 1, "name": "../etc"}, {"kind": 1}, {"kind": 1, "name": "n" * 129})
        ),
        (pb.RegisterTargetRequest(ref=CREW, owner="nobody"), "owner"),
        (pb.RegisterTargetRequest(ref=CREW), "owner"),
        (pb.RegisterTargetRequest(ref=CREW, owner=OWNER, running_limit=-1), "running_limit"),
        (pb.RegisterTargetRequest(ref=CREW, owner=OWNER, running_limit=1001), "running_limit"),
    ),
    *cases(
        "RegisterTarget",
        ALICE,
        DENIED,
        (pb.RegisterTargetRequest(ref=CREW, owner=ALICE), "operator"),
    ),
    *cases("GetTarget", ALICE, INVALID, (pb.GetTargetRequest(), "ref.kind")),
    *cases("GetTarget", ALICE, NOT_FOUND, (pb.GetTargetRequest(ref=GHOST), "not registered")),
    # ---------------------------------------------------------- declarations
    *cases(
        "DeclareFunction", OWNER, INVALID, (pb.DeclareFunctionRequest(), "function.target.kind")
    ),
    *cases("DeclareFunction", OWNER, NOT_FOUND, (declare(target=GHOST), "not registered")),
    *cases("DeclareFunction", ALICE, DENIED, (declare(), "only the owner")),
    *cases(
        "DeclareFunction",
        OWNER,
        INVALID,
        *((declare(name=name), "function name") for name in ("", "1st", "f" * 65, "f\x00")),
        (declare(description="d" * 5000), "description"),
        (declare(description="a\x00b"), "description"),
        (pb.DeclareFunctionRequest(function=fn()), "input_schema is required"),
        (declare(schema={"type": "string"}), "describe an object"),
        (declare(schema={"type": "objekt"}), "input_schema is not a valid JSON Schema"),
        (
            declare(schema={"type": "object", "required": "text"}),
            "input_schema is not a valid JSON Schema 2020-12 at required",
        ),
        (declare(schema={"type": "object", "properties": {"a": {"pattern": "("}}}), "input_schema"),
        (
            declare(
                schema={"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}
            ),
            "$schema",
        ),
        (declare(schema={"$schema": 7, "type": "object"}), "$schema"),
        *(
            (declare(schema={"type": "object", "properties": {"a": {"$ref": ref}}}), "$ref")
            for ref in ("#/$defs/missing", "https://example.com/schema.json")
        ),
        *(
            (declare(schema={"type": "object", **schema}), "input_schema")
            for schema in (
                {"maxProperties": NAN},
                {"properties": {"a": {"maximum": INF}}},
                {"properties": {"a": {"const": "x\x00"}}},
            )
        ),
        (
            declare(schema={"type": "object", "description": "x" * 70_000}),
            "input_schema is larger",
        ),
        (declare(output_schema_json=js({"type": 5})), "output_schema"),
        (declare(allowed_callers=["nobody"]), "allowed_callers"),
        (declare(allowed_callers=[f"user:u{i}" for i in range(101)]), "allowed_callers"),
        (declare(workflow=pb.WorkflowBinding(route="r")), "workflow is only"),
        (declare(target=WORKFLOW), "workflow.route"),
        (
            declare(target=WORKFLOW, workflow=pb.WorkflowBinding(route="../../x y")),
            "workflow.route",
        ),
        (variable(name="v", type="date"), ".type 'date'"),
        (
            variable(name="v", type="integer", default_json='"3"'),
            ".default",
        ),
        (
            variable(name="v", type="number", default_json="NaN"),
            "default",
        ),
        (declare(schema=DEEP_SCHEMA), "input_schema nests objects and arrays more than 24 deep"),
        (
            declare(output_schema_json=js(DEEP_SCHEMA)),
            "output_schema nests objects and arrays more than 24 deep",
        ),
        (
            variable(name="v", type="object", default_json=DEEP_VALUE),
            "workflow.variables['v'].default nests objects and arrays more than 24 deep",
        ),
        (declare(schema=LOOP_SCHEMA), "input_schema has references that loop forever"),
        (declare(output_schema_json=js(LOOP_SCHEMA)), "output_schema has references that loop"),
    ),
    *cases(
        "RemoveFunction",
        ALICE,
        DENIED,
        (pb.RemoveFunctionRequest(target=CREW, name="echo"), "only the owner"),
    ),
    *cases(
        "RemoveFunction",
        OWNER,
        NOT_FOUND,
        (pb.RemoveFunctionRequest(target=CREW, name="ghost"), "function 'ghost'"),
        (pb.RemoveFunctionRequest(target=CREW, name="a\x00"), "function 'a\\x00'"),
    ),
    *cases(
        "RemoveFunction", OWNER, INVALID, (pb.RemoveFunctionRequest(name="echo"), "target.kind")
    ),
    *cases(
        "ListFunctions", ALICE, INVALID, (pb.ListFunctionsRequest(target=BAD_KIND), "target.kind")
    ),
    *cases(
        "ListFunctions", ALICE, NOT_FOUND, (pb.ListFunctionsRequest(target=GHOST), "not registered")
    ),
    # ---------------------------------------------------------------- listing (V1)
    *cases(
        "ListTargets",
        ALICE,
        INVALID,
        (pb.ListTargetsRequest(target=BAD_KIND), "target.kind"),
        (pb.ListTargetsRequest(after="nope"), "after 'nope' is not a cursor of this list"),
        (pb.ListTargetsRequest(after="fc1:x"), "is not a cursor of this list"),
        (pb.ListTargetsRequest(limit=-1), field_rule("limit", "int32.gte_lte")),
        (pb.ListTargetsRequest(limit=201), field_rule("limit", "int32.gte_lte")),
    ),
    *cases(
        "ListCalls",
        ALICE,
        INVALID,
        (pb.ListCallsRequest(target=BAD_KIND), "target.kind"),
        (pb.ListCallsRequest(caller="alice"), "caller 'alice' is not a principal"),
        (pb.ListCallsRequest(caller="user:a\x00"), "is not a principal"),
        (pb.ListCallsRequest(statuses=[0]), "statuses: 0 is not a call state"),  # type: ignore[list-item]
        (pb.ListCallsRequest(statuses=[99]), "statuses: 99 is not a call state"),  # type: ignore[list-item]
        (pb.ListCallsRequest(after="ft1:x"), "after 'ft1:x' is not a cursor of this list"),
        (pb.ListCallsRequest(limit=500), field_rule("limit", "int32.gte_lte")),
        (
            pb.ListCallsRequest(
                created_after=Timestamp(seconds=2_000_000_000),
                created_before=Timestamp(seconds=1_000_000_000),
            ),
            "is not before created_before",
        ),
        (
            pb.ListCallsRequest(created_before=Timestamp(seconds=1_600_000_000, nanos=-1)),
            "created_before is not a valid timestamp: nanos must be 0-999,999,999",
        ),
    ),
    # ------------------------------------------------------------------ calls
    *cases(
        "Call",
        ALICE,
        INVALID,
        (pb.CallRequest(target=CREW, inputs_json=js({"text": "x"})), "function is required"),
        (
            pb.CallRequest(target=CREW, function="echo\x00"),
            "function contains a NUL character (\\u0000), which cannot be stored; remove it",
        ),
        (pb.CallRequest(function="echo", inputs_json=js({"text": "x"})), "target.kind"),
        (pb.CallRequest(target=CREW, function="echo"), "inputs.text: missing (required)"),
        (
            pb.CallRequest(target=CREW, function="echo", inputs_json='{"text": "x"'),
            "inputs is not valid JSON: Expecting ',' delimiter at line 1 column 13",
        ),
        (
            pb.CallRequest(target=CREW, function="echo", inputs_json='["x"]'),
            "inputs must be a JSON object, got array",
        ),
        (call(inputs={"text": 5}), "inputs.text: expected string, got integer"),
        (call(inputs={"text": ["x"]}), "inputs.text: expected string, got array"),
        (call(inputs={"text": "x", "colour": "red"}), "inputs.colour: unknown (not in the schema)"),
        (call(inputs={"text": "x", "count": 1.5}), "inputs.count: expected integer, got number"),
        (call(inputs={"text": None, "count": {}}), "(2 problems)"),
        (call(inputs={"text": "a\x00b"}), "inputs.text"),
        (call("anything", {"x": NAN}), "inputs.x"),
        (call("anything", {"x": [1, -INF]}), "inputs.x[1]"),
        (call("anything", {"k\x00": 1}), "inputs"),
        (call("anything", {"x": "y" * 300_000}), "inputs are larger"),
        (
            call("anything", {"x": nested(24)}),
            "inputs nests objects and arrays more than 24 deep",
        ),
        (call(submission_id="s" * 201), "submission_id"),
        (call(submission_id="s\x00"), "submission_id"),
        (call(notify_conversation_id=UNKNOWN_UUID), "notify_conversation_id"),
        (call(source=pb.CallSource(run_id="r", step="s")), "source"),
        (call("legacy", {"a": "x"}), "cannot be resolved"),
    ),
    *cases(
        "Call",
        ALICE,
        NOT_FOUND,
        (pb.CallRequest(target=GHOST, function="echo"), "not registered"),
        (pb.CallRequest(target=CREW, function="ghost"), "function 'ghost' not found"),
    ),
    *cases(
        "Call",
        ALICE,
        "ALREADY_EXISTS",
        (call(inputs={"text": "other"}, submission_id="s1"), "submission_id 's1'"),
    ),
    *cases(
        "Call",
        SCOUT,
        INVALID,
        (call(notify_conversation_id="not-a-uuid"), "notify_conversation_id"),
    ),
    # L6: an agent's own identity (no turn capability) names no conversation it is in.
    *cases(
        "Call",
        SCOUT,
        DENIED,
        (
            call(notify_conversation_id=UNKNOWN_UUID),
            "notices go only to a conversation the caller takes part in",
        ),
    ),
    *cases(
        "Call",
        "workflow:wf-2",
        INVALID,
        (call(source=pb.CallSource(run_id="r", step="s\x00")), "source.step"),
    ),
    # ------------------------------------------------------------------ push (N1)
    *cases(
        "WatchCall",
        ALICE,
        NOT_FOUND,
        (pb.WatchCallRequest(), "call ''"),
        (pb.WatchCallRequest(call_id=UNKNOWN_UUID), "call"),
    ),
    *cases(
        "WatchCall",
        ALICE,
        INVALID,
        (
            lambda c: pb.WatchCallRequest(call_id=c.call_id, heartbeat_seconds=4),
            field_rule("heartbeat_seconds", "int32.gte_lte"),
        ),
        (
            lambda c: pb.WatchCallRequest(call_id=c.call_id, heartbeat_seconds=61),
            field_rule("heartbeat_seconds", "int32.gte_lte"),
        ),
        (lambda c: pb.WatchCallRequest(call_id=c.call_id, after=-2), "after"),
    ),
    *cases(
        "WatchCallEnds",
        ALICE,
        INVALID,
        (
            pb.WatchCallEndsRequest(heartbeat_seconds=-1),
            field_rule("heartbeat_seconds", "int32.gte_lte"),
        ),
        (pb.WatchCallEndsRequest(after="not-a-cursor"), "not-a-cursor"),
    ),
    *cases(
        "GetStatus",
        ALICE,
        NOT_FOUND,
        (pb.GetStatusRequest(), "call ''"),
        (pb.GetStatusRequest(call_id="../../etc"), "call '../../etc'"),
        (pb.GetStatusRequest(call_id=UNKNOWN_UUID), "call"),
    ),
    *cases(
        "GetStatus",
        ALICE,
        INVALID,
        (status(after=-2), "after must be"),
        (status(after_event=-9), "after_event"),
        (status(message_limit=201), field_rule("message_limit", "int32.gte_lte")),
        (status(message_limit=-1), field_rule("message_limit", "int32.gte_lte")),
        (status(event_limit=2**31 - 1), field_rule("event_limit", "int32.gte_lte")),
        (status(wait_seconds=26), field_rule("wait_seconds", "int32.gte_lte")),
        (status(wait_seconds=-1), field_rule("wait_seconds", "int32.gte_lte")),
    ),
    *cases(
        "ReadFile",
        ALICE,
        INVALID,
        *(
            (read_file(name), "file")
            for name in [
                "../secret",
                "/etc/passwd",
                "out/../../x",
                "a\\b",
                ".",
                "a//b",
                "a/./b",
                "x\x00",
                "x\n",
                "",
            ]
        ),
        (lambda c: pb.ReadFileRequest(call_id=c.call_id, file=f".calls/{c.call_id}/../x"), "file"),
        (read_file("n" * 256), "file name"),
        (page(offset=-1), "offset"),
        (page(offset=2**62), "offset"),
        (page(limit=2 * 1024 * 1024), field_rule("limit", "int32.gte_lte")),
        (page(limit=-1), field_rule("limit", "int32.gte_lte")),
    ),
    *cases("ReadFile", ALICE, NOT_FOUND, (read_file("nope.txt"), "file 'nope.txt'")),
    *cases(
        "Reply",
        ALICE,
        INVALID,
        (runtime_call(pb.ReplyRequest), "text is empty"),
        (runtime_call(pb.ReplyRequest, text="r" * 70_000), field_rule("text", "string.max_bytes")),
        (runtime_call(pb.ReplyRequest, text="r\x00"), "text"),
    ),
    *cases("Reply", ALICE, NOT_FOUND, (pb.ReplyRequest(call_id=UNKNOWN_UUID, text="r"), "call")),
    *cases("Cancel", ALICE, NOT_FOUND, (pb.CancelRequest(call_id="nope"), "call 'nope'")),
    # ---------------------------------------------------------------- runtime
    *cases(
        "ClaimExecution",
        BOT,
        INVALID,
        (pb.ClaimExecutionRequest(), field_rule("targets", "repeated.min_items")),
        (
            pb.ClaimExecutionRequest(targets=[CREW] * 101),
            field_rule("targets", "repeated.max_items"),
        ),
        (pb.ClaimExecutionRequest(targets=[NO_KIND]), "targets[].kind"),
        *(
            (pb.ClaimExecutionRequest(targets=[CREW], **fields), name)
            for name, values in (("wait_seconds", (26, -1)), ("lease_seconds", (100_000, -5)))
            for fields in ({name: value} for value in values)
        ),
    ),
    *cases(
        "ClaimExecution",
        BOT,
        DENIED,
        (pb.ClaimExecutionRequest(targets=[GHOST]), "may not run executions of crew:ghost"),
    ),
    *cases(
        "HeartbeatExecution",
        BOT,
        NOT_FOUND,
        (pb.HeartbeatExecutionRequest(call_id=UNKNOWN_UUID), "execution"),
    ),
    *cases(
        "HeartbeatExecution",
        BOT,
        INVALID,
        (runtime_call(pb.HeartbeatExecutionRequest, lease_seconds=100_000), "lease_seconds"),
    ),
    *cases(
        "Report",
        BOT,
        INVALID,
        (report(progress="p" * 5000), field_rule("progress", "string.max_bytes")),
        (report(progress="p\x00"), "progress"),
        (
            report(messages=[pb.ExecutionMessage(text="m")] * 101),
            field_rule("messages", "repeated.max_items"),
        ),
        (report(messages=[pb.ExecutionMessage(role="Bad Role", text="m")]), "role"),
        (report(messages=[pb.ExecutionMessage(text="m" * 70_000)]), "message text"),
        (
            report(messages=[pb.ExecutionMessage(text="ok"), pb.ExecutionMessage(text="m\x00")]),
            "message text",
        ),
        (report(events=[pb.ExecutionEvent()]), "event kind"),
        (report(events=[pb.ExecutionEvent(kind="tool_call")]), "tool_name"),
        (report(events=[pb.ExecutionEvent(kind="tool_call", tool_name="t\x00")]), "tool_name"),
        (report(events=[pb.ExecutionEvent(kind="note", text="e" * 9000)]), "event text"),
        (
            report(steps=[pb.WorkflowStep(step="s", status="started")]),
            "workflow function executions only",
        ),
        (report(sequence=-1), field_rule("sequence", "int64.gte")),
    ),
    *cases(
        "UploadFile",
        BOT,
        INVALID,
        (lambda c: [], "empty upload"),
        (upload({"data": b"x"}), "file is required"),
        (upload({"name": "../x", "data": b"x"}), "file '../x'"),
        (upload({"name": "/abs", "data": b"x"}), "file '/abs'"),
        (
            upload({"name": "a.txt", "data": b"x"}, {"name": "b.txt", "data": b"y"}),
            "same call and file",
        ),
        (upload({"name": "a.txt", "data": b"x", "media_type": "text/\x00plain"}), "media_type"),
        (upload({"name": "a.txt", "data": b"x", "media_type": "t" * 300}), "media_type"),
    ),
    *cases(
        "AskInput",
        BOT,
        INVALID,
        (ask(), "question is empty"),
        (ask(question="q" * 9000), field_rule("question", "string.max_bytes")),
        (ask(question="q\x00"), "question"),
        *((ask(ask_id=ask_id, question="q"), "ask_id") for ask_id in ("", "a" * 101, "a\x00")),
        (ask(question="q", wait_seconds=26), field_rule("wait_seconds", "int32.gte_lte")),
    ),
    *cases("AskInput", BOT, "FAILED_PRECONDITION", (ask(question="another"), "pending question")),
    *cases(
        "FinishExecution",
        BOT,
        INVALID,
        (finish(correction_round=2), "correction_round"),
        (finish(final_message="f" * 300_000), field_rule("final_message", "string.max_bytes")),
        (finish(final_message="f\x00"), "final_message"),
        (finish(failed=True, error="e" * 20_000), field_rule("error", "string.max_bytes")),
    ),
    # Another agent of the crew is not the runtime that holds the execution.
    *(
        (method, "agent:demo/other", build, NOT_FOUND, "execution")
        for method, build in (
            ("HeartbeatExecution", runtime_call(pb.HeartbeatExecutionRequest)),
            ("Report", report()),
            ("UploadFile", upload({"name": "a.txt", "data": b"x"})),
            ("FinishExecution", finish()),
        )
    ),
]


def snapshot(database_url: str) -> dict[str, str]:
    """A digest of the content of every table of the functions schema."""
    return database_snapshot(database_url, ["functions"])


@pytest.fixture
async def ctx(clients, operator, owner, echo, runtime, database_url) -> SimpleNamespace:
    """crew:demo with `echo` and `anything`, workflow:wf-1, and one call of alice's:
    claimed by agent:demo/bot, with a file out.txt and a pending question (ask_id q1)."""
    await operator.register_target("workflow:wf-1", owner="user:owner")
    await owner.declare_function(
        "crew:demo", "anything", input_schema={"type": "object"}, allowed_callers=["user:*"]
    )
    # Declared before $ref checks existed: a reference to another host. Calling it must
    # not fetch anything (port 9 is discard; nothing listens) and must not fail INTERNAL.
    with psycopg.connect(database_url) as conn:
        conn.execute(
            "INSERT INTO functions.functions (target_kind, target_name, name, input_schema,"
            " allowed_callers) VALUES ('crew', 'demo', 'legacy', %s, '{user:*}')",
            (json.dumps(LEGACY_SCHEMA),),
        )
    alice = await clients(ALICE)
    receipt = await alice.call("crew:demo", echo, {"text": "hi"}, submission_id="s1")
    execution = await runtime.claim_execution(["crew:demo"], wait_seconds=5, lease_seconds=300)
    assert execution is not None and execution.call_id == receipt.call_id
    await runtime.upload_file(receipt.call_id, "out.txt", b"hello")
    await runtime.ask_input(receipt.call_id, "q1", "which one?")
    return SimpleNamespace(call_id=receipt.call_id)


async def invoke(
    address: str, token: str, method: str, request: Any
) -> tuple[str, AgentWorksError | None]:
    """(status code name, the refusal with its reason and metadata) of one RPC; ("OK",
    None) when it was accepted."""
    async with grpc.aio.insecure_channel(address) as channel:
        stub = functions_pb2_grpc.FunctionsServiceStub(channel)
        metadata = ((METADATA_KEY, token),)
        try:
            if method == "UploadFile":

                async def chunks():
                    for chunk in request:
                        yield chunk

                await stub.UploadFile(chunks(), metadata=metadata, timeout=10)
            elif method in ("WatchCall", "WatchCallEnds"):
                # A stream (N1): its refusal comes before any event.
                stream = getattr(stub, method)(request, metadata=metadata, timeout=10)
                try:
                    async for _ in stream:
                        break
                finally:
                    stream.cancel()
            else:
                await getattr(stub, method)(request, metadata=metadata, timeout=10)
        except grpc.aio.AioRpcError as exc:
            refusal = from_trailers(exc.code(), exc.details() or "", exc.trailing_metadata())
            return exc.code().name, refusal
    return "OK", None


METHODS = list(dict.fromkeys(case[0] for case in CASES))

# Row for docs/reliability.md (see tests/conftest.py).
RELIABILITY = {
    "test": "test_bad_input_is_refused_clearly_and_stores_nothing_P6_F3",
    "scenario": "Bad input, functions service (P6, F1, F3, F7, F8)",
    "action": f"{len(CASES)} cases over all {len(METHODS)} RPCs (one test per RPC): "
    "missing fields, wrong enum values, inputs that are not JSON or of the wrong "
    "JSON type, unknown input fields, NUL characters, non-finite numbers, empty and "
    "oversized values, JSON nested too deep, bad cursors and limits, malformed JSON Schemas "
    "and endless $ref loops, path traversal in file names",
    "check": "the expected status code (never INTERNAL) with a message naming the field; "
    "every table of the functions schema byte-for-byte unchanged",
}


@pytest.mark.parametrize("method", METHODS)
async def test_bad_input_is_refused_clearly_and_stores_nothing_P6_F3(
    functions, identity, ctx, database_url, method
):
    """P6 F1 F3 F7 F8 R1: each case of this RPC gets its code and a message naming the
    field, and leaves the functions schema unchanged. All cases run; failures are listed."""
    problems = []
    cases = [case for case in CASES if case[0] == method]
    for number, (_, principal, build, code, words) in enumerate(cases):
        request = build(ctx)
        before = snapshot(database_url)
        roles = {"operator"} if principal == OPS else set()
        token = identity(principal, roles).token()
        got, refusal = await invoke(functions.address, token, method, request)
        if not as_expected(code, words, got, refusal):
            said = (refusal.message, refusal.reason, refusal.metadata) if refusal else ""
            problems.append(f"case {number}: expected {code} with {words!r}, got {got}: {said}")
        if snapshot(database_url) != before:
            problems.append(f"case {number}: the database changed")
    assert not problems, "\n".join(problems)


def test_every_rpc_has_bad_input_cases():
    """The table covers the whole FunctionsService."""
    service = pb.DESCRIPTOR.services_by_name["FunctionsService"]
    assert set(METHODS) == {m.name for m in service.methods}


MIB = 1024 * 1024
MAX_FILE_BYTES = 64 * MIB  # the file limit (docs/functions.md)
DRAIN_BYTES = 64 * MIB  # how much more the service reads before it refuses


@pytest.mark.reliability(
    scenario="UploadFile above the 64 MiB file limit (P6, R1)",
    action="a runtime streams 1 MiB chunks (the same buffer: the test holds 1 MiB): a 65 "
    "MiB file with the asyncio client the runtime SDK uses, and an endless stream",
    check="INVALID_ARGUMENT naming the file and the limit (not the asyncio client's "
    "INTERNAL); the endless stream is cut once the limit and the drain allowance are "
    "passed; every table of the functions schema (blobs, blob_chunks, files) unchanged",
)
async def test_an_upload_above_64_mib_is_refused_and_stores_nothing_P6_R1(
    functions, identity, ctx, database_url
):
    """P6 R1: the limit is checked per chunk as the upload streams in; past 64 MiB the
    chunks written so far are deleted and the upload is refused naming the file and the
    limit. The service reads (and drops) up to 64 MiB more first, so a client that is
    still writing gets that answer: grpc.aio reports INTERNAL "Internal error from Core"
    when the status arrives mid-write (grpc/grpc#36066)."""
    before = snapshot(database_url)
    piece = b"\xff" * MIB
    metadata = ((METADATA_KEY, identity(BOT).token()),)
    expected = f"file 'big.bin' is larger than {MAX_FILE_BYTES} bytes; nothing was stored"

    def chunks(count: int):
        yield pb.FileChunk(call_id=ctx.call_id, name="big.bin", data=piece)
        for _ in range(count - 1):
            yield pb.FileChunk(data=piece)

    async def stream(count: int):
        for chunk in chunks(count):
            yield chunk

    async with grpc.aio.insecure_channel(functions.address) as channel:
        stub = functions_pb2_grpc.FunctionsServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.UploadFile(stream(MAX_FILE_BYTES // MIB + 1), metadata=metadata, timeout=120)
    assert (refused.value.code(), refused.value.details()) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        expected,
    )
    assert snapshot(database_url) == before

    # A client that never stops is cut off: the synchronous client reports the status
    # the service sent even while it is still writing.
    sent = 0
    endless = 4 * (MAX_FILE_BYTES + DRAIN_BYTES) // MIB  # bounded, should the limit be gone

    def counted():
        nonlocal sent
        for chunk in chunks(endless):
            sent += 1
            yield chunk

    def upload_sync() -> grpc.RpcError:
        with grpc.insecure_channel(functions.address) as sync_channel:
            sync_stub = functions_pb2_grpc.FunctionsServiceStub(sync_channel)
            try:
                sync_stub.UploadFile(counted(), metadata=metadata, timeout=120)
            except grpc.RpcError as exc:
                return exc
        raise AssertionError("an endless upload was accepted")

    cut = await asyncio.to_thread(upload_sync)
    assert (cut.code(), cut.details()) == (grpc.StatusCode.INVALID_ARGUMENT, expected)
    read = (MAX_FILE_BYTES + DRAIN_BYTES) // MIB
    assert read < sent <= read + 16, sent  # plus what flow control lets through
    assert snapshot(database_url) == before
