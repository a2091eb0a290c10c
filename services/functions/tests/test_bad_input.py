"""Every functions RPC refuses bad input with a clear error naming what was wrong, and
stores nothing: the content of every table of the `functions` schema is the same
before and after the refused request (P6, F1, F3, F7, F8, R1)."""

from __future__ import annotations

import json
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import grpc
import psycopg
import pytest
from google.protobuf import struct_pb2

from agentworks.common.v1 import common_pb2
from agentworks.core.identity import METADATA_KEY
from agentworks.functions.v1 import functions_pb2 as pb
from agentworks.functions.v1 import functions_pb2_grpc

CREW = common_pb2.TargetRef(kind=common_pb2.TARGET_KIND_CREW, name="demo")
WORKFLOW = common_pb2.TargetRef(kind=common_pb2.TARGET_KIND_WORKFLOW, name="wf-1")
NO_KIND = common_pb2.TargetRef(name="demo")
BAD_KIND = common_pb2.TargetRef(kind=99, name="demo")  # type: ignore[arg-type]
GHOST = common_pb2.TargetRef(kind=common_pb2.TARGET_KIND_CREW, name="ghost")
UNKNOWN_UUID = "00000000-0000-0000-0000-000000000000"
TABLES = [
    "targets",
    "functions",
    "calls",
    "execution_messages",
    "execution_events",
    "workflow_steps",
    "questions",
    "blobs",
    "blob_chunks",
    "files",
    "notices",
]
OPS, OWNER, ALICE, BOT, SCOUT = (
    "user:ops",
    "user:owner",
    "user:alice",
    "agent:demo/bot",
    "agent:alpha/scout",
)
NAN, INF = float("nan"), float("inf")


def struct(value: dict[str, Any]) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    out.update(value)
    return out


def fn(schema: Any = None, **fields: Any) -> pb.Function:
    """A declaration of crew:demo's `f` with `schema` as input_schema (unless overridden)."""
    fields.setdefault("target", CREW)
    fields.setdefault("name", "f")
    function = pb.Function(**fields)
    if schema is not None:
        function.input_schema.CopyFrom(struct(schema))
    return function


OBJECT = {"type": "object"}
LEGACY_SCHEMA = {"type": "object", "properties": {"a": {"$ref": "http://127.0.0.1:9/s.json"}}}

Build = Callable[[SimpleNamespace], Any]


def read_file(name: str) -> Build:
    return lambda c: pb.ReadFileRequest(call_id=c.call_id, file=name)


# (method, principal, request builder, expected code, words the message must contain)
CASES: list[tuple[str, str, Build, str, str]] = [
    # --------------------------------------------------------------- targets
    (
        "RegisterTarget",
        OPS,
        lambda c: pb.RegisterTargetRequest(owner=OWNER),
        "INVALID_ARGUMENT",
        "ref.kind",
    ),
    (
        "RegisterTarget",
        OPS,
        lambda c: pb.RegisterTargetRequest(ref=BAD_KIND, owner=OWNER),
        "INVALID_ARGUMENT",
        "ref.kind",
    ),
    (
        "RegisterTarget",
        OPS,
        lambda c: pb.RegisterTargetRequest(
            ref=common_pb2.TargetRef(kind=1, name="../etc"), owner=OWNER
        ),
        "INVALID_ARGUMENT",
        "target.name",
    ),
    (
        "RegisterTarget",
        OPS,
        lambda c: pb.RegisterTargetRequest(ref=common_pb2.TargetRef(kind=1), owner=OWNER),
        "INVALID_ARGUMENT",
        "target.name",
    ),
    (
        "RegisterTarget",
        OPS,
        lambda c: pb.RegisterTargetRequest(
            ref=common_pb2.TargetRef(kind=1, name="n" * 129), owner=OWNER
        ),
        "INVALID_ARGUMENT",
        "target.name",
    ),
    (
        "RegisterTarget",
        OPS,
        lambda c: pb.RegisterTargetRequest(ref=CREW, owner="nobody"),
        "INVALID_ARGUMENT",
        "owner",
    ),
    (
        "RegisterTarget",
        OPS,
        lambda c: pb.RegisterTargetRequest(ref=CREW),
        "INVALID_ARGUMENT",
        "owner",
    ),
    (
        "RegisterTarget",
        OPS,
        lambda c: pb.RegisterTargetRequest(ref=CREW, owner=OWNER, running_limit=-1),
        "INVALID_ARGUMENT",
        "running_limit",
    ),
    (
        "RegisterTarget",
        OPS,
        lambda c: pb.RegisterTargetRequest(ref=CREW, owner=OWNER, running_limit=1001),
        "INVALID_ARGUMENT",
        "running_limit",
    ),
    (
        "RegisterTarget",
        ALICE,
        lambda c: pb.RegisterTargetRequest(ref=CREW, owner=ALICE),
        "PERMISSION_DENIED",
        "operator",
    ),
    ("GetTarget", ALICE, lambda c: pb.GetTargetRequest(), "INVALID_ARGUMENT", "ref.kind"),
    ("GetTarget", ALICE, lambda c: pb.GetTargetRequest(ref=GHOST), "NOT_FOUND", "not registered"),
    # ---------------------------------------------------------- declarations
    (
        "DeclareFunction",
        OWNER,
        lambda c: pb.DeclareFunctionRequest(),
        "INVALID_ARGUMENT",
        "function.target.kind",
    ),
    (
        "DeclareFunction",
        OWNER,
        lambda c: pb.DeclareFunctionRequest(function=fn(OBJECT, target=GHOST)),
        "NOT_FOUND",
        "not registered",
    ),
    (
        "DeclareFunction",
        ALICE,
        lambda c: pb.DeclareFunctionRequest(function=fn(OBJECT)),
        "PERMISSION_DENIED",
        "only the owner",
    ),
    (
        "DeclareFunction",
        OWNER,
        lambda c: pb.DeclareFunctionRequest(function=fn(OBJECT, name="")),
        "INVALID_ARGUMENT",
        "function name",
    ),
    (
        "DeclareFunction",
        OWNER,
        lambda c: pb.DeclareFunctionRequest(function=fn(OBJECT, name="1st")),
        "INVALID_ARGUMENT",
        "function name",
    ),
    (
        "DeclareFunction",
        OWNER,
        lambda c: pb.DeclareFunctionRequest(function=fn(OBJECT, name="f" * 65)),
        "INVALID_ARGUMENT",
        "function name",
    ),
    (
        "DeclareFunction",
        OWNER,
        lambda c: pb.DeclareFunctionRequest(function=fn(OBJECT, name="f\x00")),
        "INVALID_ARGUMENT",
        "function name",
    ),
    (
        "DeclareFunction",
        OWNER,
        lambda c: pb.DeclareFunctionRequest(function=fn(OBJECT, description="d" * 5000)),
        "INVALID_ARGUMENT",
        "description",
    ),
    (
        "DeclareFunction",
        OWNER,
        lambda c: pb.DeclareFunctionRequest(function=fn(OBJECT, description="a\x00b")),
        "INVALID_ARGUMENT",
        "description",
    ),
    (
        "DeclareFunction",
        OWNER,
        lambda c: pb.DeclareFunctionRequest(function=fn()),
        "INVALID_ARGUMENT",
        "input_schema is required",
    ),
    (
        "DeclareFunction",
        OWNER,
        lambda c: pb.DeclareFunctionRequest(function=fn({"type": "string"})),
        "INVALID_ARGUMENT",
        "describe an object",
    ),
    (
        "DeclareFunction",
        OWNER,
        lambda c: pb.DeclareFunctionRequest(function=fn({"type": "objekt"})),
        "INVALID_ARGUMENT",
        "input_schema is not a valid JSON Schema",
    ),
    (
        "DeclareFunction",
        OWNER,
        lambda c: pb.DeclareFunctionRequest(function=fn({"type": "object", "required": "text"})),
        "INVALID_ARGUMENT",
        "input_schema is not a valid JSON Schema 2020-12 at required",
    ),
    (
        "DeclareFunction",
        OWNER,
        lambda c: pb.DeclareFunctionRequest(
            function=fn({"type": "object", "properties": {"a": {"pattern": "("}}})
        ),
        "INVALID_ARGUMENT",
        "input_schema",
    ),
    (
        "DeclareFunction",
        OWNER,
        lambda c: pb.DeclareFunctionRequest(
            function=fn({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"})
        ),
        "INVALID_ARGUMENT",
        "$schema",
    ),
    (
        "DeclareFunction",
        OWNER,
        lambda c: pb.DeclareFunctionRequest(function=fn({"$schema": 7, "type": "object"})),
        "INVALID_ARGUMENT",
        "$schema",
    ),
    (
        "DeclareFunction",
        OWNER,
        lambda c: pb.DeclareFunctionRequest(
            function=fn({"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}})
        ),
        "INVALID_ARGUMENT",
        "$ref",
    ),
    (
        "DeclareFunction",
        OWNER,
        lambda c: pb.DeclareFunctionRequest(
            function=fn(
                {"type": "object", "properties": {"a": {"$ref": "https://example.com/schema.json"}}}
            )
        ),
        "INVALID_ARGUMENT",
        "$ref",
    ),
    (
        "DeclareFunction",
        OWNER,
        lambda c: pb.DeclareFunctionRequest(function=fn({"type": "object", "maxProperties": NAN})),
        "INVALID_ARGUMENT",
        "input_schema",
    ),
    (
        "DeclareFunction",
        OWNER,
        lambda c: pb.DeclareFunctionRequest(
            function=fn({"type": "object", "properties": {"a": {"maximum": INF}}})
        ),
        "INVALID_ARGUMENT",
        "input_schema",
    ),
    (
        "DeclareFunction",
        OWNER,
        lambda c: pb.DeclareFunctionRequest(
            function=fn({"type": "object", "properties": {"a": {"const": "x\x00"}}})
        ),
        "INVALID_ARGUMENT",
        "input_schema",
    ),
    (
        "DeclareFunction",
        OWNER,
        lambda c: pb.DeclareFunctionRequest(
            function=fn({"type": "object", "description": "x" * 70_000})
        ),
        "INVALID_ARGUMENT",
        "input_schema is larger",
    ),
    (
        "DeclareFunction",
        OWNER,
        lambda c: pb.DeclareFunctionRequest(function=fn(OBJECT, output_schema=struct({"type": 5}))),
        "INVALID_ARGUMENT",
        "output_schema",
    ),
    (
        "DeclareFunction",
        OWNER,
        lambda c: pb.DeclareFunctionRequest(function=fn(OBJECT, allowed_callers=["nobody"])),
        "INVALID_ARGUMENT",
        "allowed_callers",
    ),
    (
        "DeclareFunction",
        OWNER,
        lambda c: pb.DeclareFunctionRequest(
            function=fn(OBJECT, allowed_callers=[f"user:u{i}" for i in range(101)])
        ),
        "INVALID_ARGUMENT",
        "allowed_callers",
    ),
    (
        "DeclareFunction",
        OWNER,
        lambda c: pb.DeclareFunctionRequest(
            function=fn(OBJECT, workflow=pb.WorkflowBinding(route="r"))
        ),
        "INVALID_ARGUMENT",
        "workflow is only",
    ),
    (
        "DeclareFunction",
        OWNER,
        lambda c: pb.DeclareFunctionRequest(function=fn(OBJECT, target=WORKFLOW)),
        "INVALID_ARGUMENT",
        "workflow.route",
    ),
    (
        "DeclareFunction",
        OWNER,
        lambda c: pb.DeclareFunctionRequest(
            function=fn(OBJECT, target=WORKFLOW, workflow=pb.WorkflowBinding(route="../../x y"))
        ),
        "INVALID_ARGUMENT",
        "workflow.route",
    ),
    (
        "DeclareFunction",
        OWNER,
        lambda c: pb.DeclareFunctionRequest(
            function=fn(
                OBJECT,
                target=WORKFLOW,
                workflow=pb.WorkflowBinding(
                    route="r", variables=[pb.WorkflowVariable(name="v", type="date")]
                ),
            )
        ),
        "INVALID_ARGUMENT",
        ".type 'date'",
    ),
    (
        "DeclareFunction",
        OWNER,
        lambda c: pb.DeclareFunctionRequest(
            function=fn(
                OBJECT,
                target=WORKFLOW,
                workflow=pb.WorkflowBinding(
                    route="r",
                    variables=[
                        pb.WorkflowVariable(
                            name="v",
                            type="integer",
                            default_value=struct_pb2.Value(string_value="3"),
                        )
                    ],
                ),
            )
        ),
        "INVALID_ARGUMENT",
        ".default",
    ),
    (
        "DeclareFunction",
        OWNER,
        lambda c: pb.DeclareFunctionRequest(
            function=fn(
                OBJECT,
                target=WORKFLOW,
                workflow=pb.WorkflowBinding(
                    route="r",
                    variables=[
                        pb.WorkflowVariable(
                            name="v",
                            type="number",
                            default_value=struct_pb2.Value(number_value=NAN),
                        )
                    ],
                ),
            )
        ),
        "INVALID_ARGUMENT",
        "default",
    ),
    (
        "RemoveFunction",
        ALICE,
        lambda c: pb.RemoveFunctionRequest(target=CREW, name="echo"),
        "PERMISSION_DENIED",
        "only the owner",
    ),
    (
        "RemoveFunction",
        OWNER,
        lambda c: pb.RemoveFunctionRequest(target=CREW, name="ghost"),
        "NOT_FOUND",
        "function 'ghost'",
    ),
    (
        "RemoveFunction",
        OWNER,
        lambda c: pb.RemoveFunctionRequest(target=CREW, name="a\x00"),
        "NOT_FOUND",
        "function 'a\\x00'",
    ),
    (
        "RemoveFunction",
        OWNER,
        lambda c: pb.RemoveFunctionRequest(name="echo"),
        "INVALID_ARGUMENT",
        "target.kind",
    ),
    (
        "ListFunctions",
        ALICE,
        lambda c: pb.ListFunctionsRequest(target=BAD_KIND),
        "INVALID_ARGUMENT",
        "target.kind",
    ),
    (
        "ListFunctions",
        ALICE,
        lambda c: pb.ListFunctionsRequest(target=GHOST),
        "NOT_FOUND",
        "not registered",
    ),
    # ------------------------------------------------------------------ calls
    (
        "Call",
        ALICE,
        lambda c: pb.CallRequest(target=CREW, inputs=struct({"text": "x"})),
        "INVALID_ARGUMENT",
        "function is required",
    ),
    (
        "Call",
        ALICE,
        lambda c: pb.CallRequest(function="echo", inputs=struct({"text": "x"})),
        "INVALID_ARGUMENT",
        "target.kind",
    ),
    (
        "Call",
        ALICE,
        lambda c: pb.CallRequest(target=GHOST, function="echo"),
        "NOT_FOUND",
        "not registered",
    ),
    (
        "Call",
        ALICE,
        lambda c: pb.CallRequest(target=CREW, function="ghost"),
        "NOT_FOUND",
        "function 'ghost' not found",
    ),
    (
        "Call",
        ALICE,
        lambda c: pb.CallRequest(target=CREW, function="echo\x00"),
        "NOT_FOUND",
        "function 'echo\\x00' not found",
    ),
    (
        "Call",
        ALICE,
        lambda c: pb.CallRequest(target=CREW, function="echo"),
        "INVALID_ARGUMENT",
        "inputs.text: missing (required)",
    ),
    (
        "Call",
        ALICE,
        lambda c: pb.CallRequest(target=CREW, function="echo", inputs=struct({"text": 5})),
        "INVALID_ARGUMENT",
        "inputs.text: expected string, got integer",
    ),
    (
        "Call",
        ALICE,
        lambda c: pb.CallRequest(target=CREW, function="echo", inputs=struct({"text": ["x"]})),
        "INVALID_ARGUMENT",
        "inputs.text: expected string, got array",
    ),
    (
        "Call",
        ALICE,
        lambda c: pb.CallRequest(
            target=CREW, function="echo", inputs=struct({"text": "x", "colour": "red"})
        ),
        "INVALID_ARGUMENT",
        "inputs.colour: unknown (not in the schema)",
    ),
    (
        "Call",
        ALICE,
        lambda c: pb.CallRequest(
            target=CREW, function="echo", inputs=struct({"text": "x", "count": 1.5})
        ),
        "INVALID_ARGUMENT",
        "inputs.count: expected integer, got number",
    ),
    (
        "Call",
        ALICE,
        lambda c: pb.CallRequest(
            target=CREW, function="echo", inputs=struct({"text": None, "count": {}})
        ),
        "INVALID_ARGUMENT",
        "(2 problems)",
    ),
    (
        "Call",
        ALICE,
        lambda c: pb.CallRequest(target=CREW, function="echo", inputs=struct({"text": "a\x00b"})),
        "INVALID_ARGUMENT",
        "inputs.text",
    ),
    (
        "Call",
        ALICE,
        lambda c: pb.CallRequest(target=CREW, function="anything", inputs=struct({"x": NAN})),
        "INVALID_ARGUMENT",
        "inputs.x",
    ),
    (
        "Call",
        ALICE,
        lambda c: pb.CallRequest(target=CREW, function="anything", inputs=struct({"x": [1, -INF]})),
        "INVALID_ARGUMENT",
        "inputs.x[1]",
    ),
    (
        "Call",
        ALICE,
        lambda c: pb.CallRequest(target=CREW, function="anything", inputs=struct({"k\x00": 1})),
        "INVALID_ARGUMENT",
        "inputs",
    ),
    (
        "Call",
        ALICE,
        lambda c: pb.CallRequest(
            target=CREW, function="anything", inputs=struct({"x": "y" * 300_000})
        ),
        "INVALID_ARGUMENT",
        "inputs are larger",
    ),
    (
        "Call",
        ALICE,
        lambda c: pb.CallRequest(
            target=CREW, function="echo", inputs=struct({"text": "x"}), submission_id="s" * 201
        ),
        "INVALID_ARGUMENT",
        "submission_id",
    ),
    (
        "Call",
        ALICE,
        lambda c: pb.CallRequest(
            target=CREW, function="echo", inputs=struct({"text": "x"}), submission_id="s\x00"
        ),
        "INVALID_ARGUMENT",
        "submission_id",
    ),
    (
        "Call",
        ALICE,
        lambda c: pb.CallRequest(
            target=CREW, function="echo", inputs=struct({"text": "other"}), submission_id="s1"
        ),
        "ALREADY_EXISTS",
        "submission_id 's1'",
    ),
    (
        "Call",
        ALICE,
        lambda c: pb.CallRequest(
            target=CREW,
            function="echo",
            inputs=struct({"text": "x"}),
            notify_conversation_id=UNKNOWN_UUID,
        ),
        "INVALID_ARGUMENT",
        "notify_conversation_id",
    ),
    (
        "Call",
        SCOUT,
        lambda c: pb.CallRequest(
            target=CREW,
            function="echo",
            inputs=struct({"text": "x"}),
            notify_conversation_id="not-a-uuid",
        ),
        "INVALID_ARGUMENT",
        "notify_conversation_id",
    ),
    (
        "Call",
        ALICE,
        lambda c: pb.CallRequest(
            target=CREW,
            function="echo",
            inputs=struct({"text": "x"}),
            source=pb.CallSource(run_id="r", step="s"),
        ),
        "INVALID_ARGUMENT",
        "source",
    ),
    (
        "Call",
        "workflow:wf-2",
        lambda c: pb.CallRequest(
            target=CREW,
            function="echo",
            inputs=struct({"text": "x"}),
            source=pb.CallSource(run_id="r", step="s\x00"),
        ),
        "INVALID_ARGUMENT",
        "source.step",
    ),
    (
        "Call",
        ALICE,
        lambda c: pb.CallRequest(target=CREW, function="legacy", inputs=struct({"a": "x"})),
        "INVALID_ARGUMENT",
        "cannot be resolved",
    ),
    ("GetStatus", ALICE, lambda c: pb.GetStatusRequest(), "NOT_FOUND", "call ''"),
    (
        "GetStatus",
        ALICE,
        lambda c: pb.GetStatusRequest(call_id="../../etc"),
        "NOT_FOUND",
        "call '../../etc'",
    ),
    ("GetStatus", ALICE, lambda c: pb.GetStatusRequest(call_id=UNKNOWN_UUID), "NOT_FOUND", "call"),
    (
        "GetStatus",
        ALICE,
        lambda c: pb.GetStatusRequest(call_id=c.call_id, after=-2),
        "INVALID_ARGUMENT",
        "after must be",
    ),
    (
        "GetStatus",
        ALICE,
        lambda c: pb.GetStatusRequest(call_id=c.call_id, after_event=-9),
        "INVALID_ARGUMENT",
        "after_event",
    ),
    (
        "GetStatus",
        ALICE,
        lambda c: pb.GetStatusRequest(call_id=c.call_id, message_limit=201),
        "INVALID_ARGUMENT",
        "message_limit",
    ),
    (
        "GetStatus",
        ALICE,
        lambda c: pb.GetStatusRequest(call_id=c.call_id, message_limit=-1),
        "INVALID_ARGUMENT",
        "message_limit",
    ),
    (
        "GetStatus",
        ALICE,
        lambda c: pb.GetStatusRequest(call_id=c.call_id, event_limit=2**31 - 1),
        "INVALID_ARGUMENT",
        "event_limit",
    ),
    (
        "GetStatus",
        ALICE,
        lambda c: pb.GetStatusRequest(call_id=c.call_id, wait_seconds=26),
        "INVALID_ARGUMENT",
        "wait_seconds",
    ),
    (
        "GetStatus",
        ALICE,
        lambda c: pb.GetStatusRequest(call_id=c.call_id, wait_seconds=-1),
        "INVALID_ARGUMENT",
        "wait_seconds",
    ),
    *[
        (
            "ReadFile",
            ALICE,
            read_file(name),
            "INVALID_ARGUMENT",
            "file",
        )
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
    ],
    (
        "ReadFile",
        ALICE,
        lambda c: pb.ReadFileRequest(call_id=c.call_id, file=f".calls/{c.call_id}/../x"),
        "INVALID_ARGUMENT",
        "file",
    ),
    (
        "ReadFile",
        ALICE,
        lambda c: pb.ReadFileRequest(call_id=c.call_id, file="n" * 256),
        "INVALID_ARGUMENT",
        "file name",
    ),
    (
        "ReadFile",
        ALICE,
        lambda c: pb.ReadFileRequest(call_id=c.call_id, file="nope.txt"),
        "NOT_FOUND",
        "file 'nope.txt'",
    ),
    (
        "ReadFile",
        ALICE,
        lambda c: pb.ReadFileRequest(call_id=c.call_id, file="out.txt", offset=-1),
        "INVALID_ARGUMENT",
        "offset",
    ),
    (
        "ReadFile",
        ALICE,
        lambda c: pb.ReadFileRequest(call_id=c.call_id, file="out.txt", offset=2**62),
        "INVALID_ARGUMENT",
        "offset",
    ),
    (
        "ReadFile",
        ALICE,
        lambda c: pb.ReadFileRequest(call_id=c.call_id, file="out.txt", limit=2 * 1024 * 1024),
        "INVALID_ARGUMENT",
        "limit",
    ),
    (
        "ReadFile",
        ALICE,
        lambda c: pb.ReadFileRequest(call_id=c.call_id, file="out.txt", limit=-1),
        "INVALID_ARGUMENT",
        "limit",
    ),
    (
        "Reply",
        ALICE,
        lambda c: pb.ReplyRequest(call_id=c.call_id),
        "INVALID_ARGUMENT",
        "text is empty",
    ),
    (
        "Reply",
        ALICE,
        lambda c: pb.ReplyRequest(call_id=c.call_id, text="r" * 70_000),
        "INVALID_ARGUMENT",
        "text is 70000 bytes",
    ),
    (
        "Reply",
        ALICE,
        lambda c: pb.ReplyRequest(call_id=c.call_id, text="r\x00"),
        "INVALID_ARGUMENT",
        "text",
    ),
    (
        "Reply",
        ALICE,
        lambda c: pb.ReplyRequest(call_id=UNKNOWN_UUID, text="r"),
        "NOT_FOUND",
        "call",
    ),
    ("Cancel", ALICE, lambda c: pb.CancelRequest(call_id="nope"), "NOT_FOUND", "call 'nope'"),
    # ---------------------------------------------------------------- runtime
    (
        "ClaimExecution",
        BOT,
        lambda c: pb.ClaimExecutionRequest(),
        "INVALID_ARGUMENT",
        "targets is empty",
    ),
    (
        "ClaimExecution",
        BOT,
        lambda c: pb.ClaimExecutionRequest(targets=[CREW] * 101),
        "INVALID_ARGUMENT",
        "at most 100 targets",
    ),
    (
        "ClaimExecution",
        BOT,
        lambda c: pb.ClaimExecutionRequest(targets=[NO_KIND]),
        "INVALID_ARGUMENT",
        "targets[].kind",
    ),
    (
        "ClaimExecution",
        BOT,
        lambda c: pb.ClaimExecutionRequest(targets=[GHOST]),
        "PERMISSION_DENIED",
        "may not run executions of crew:ghost",
    ),
    (
        "ClaimExecution",
        BOT,
        lambda c: pb.ClaimExecutionRequest(targets=[CREW], wait_seconds=26),
        "INVALID_ARGUMENT",
        "wait_seconds",
    ),
    (
        "ClaimExecution",
        BOT,
        lambda c: pb.ClaimExecutionRequest(targets=[CREW], wait_seconds=-1),
        "INVALID_ARGUMENT",
        "wait_seconds",
    ),
    (
        "ClaimExecution",
        BOT,
        lambda c: pb.ClaimExecutionRequest(targets=[CREW], lease_seconds=100_000),
        "INVALID_ARGUMENT",
        "lease_seconds",
    ),
    (
        "ClaimExecution",
        BOT,
        lambda c: pb.ClaimExecutionRequest(targets=[CREW], lease_seconds=-5),
        "INVALID_ARGUMENT",
        "lease_seconds",
    ),
    (
        "HeartbeatExecution",
        BOT,
        lambda c: pb.HeartbeatExecutionRequest(call_id=UNKNOWN_UUID),
        "NOT_FOUND",
        "execution",
    ),
    (
        "HeartbeatExecution",
        BOT,
        lambda c: pb.HeartbeatExecutionRequest(call_id=c.call_id, lease_seconds=100_000),
        "INVALID_ARGUMENT",
        "lease_seconds",
    ),
    (
        "HeartbeatExecution",
        "agent:demo/other",
        lambda c: pb.HeartbeatExecutionRequest(call_id=c.call_id),
        "NOT_FOUND",
        "execution",
    ),
    (
        "Report",
        BOT,
        lambda c: pb.ReportRequest(call_id=c.call_id, progress="p" * 5000),
        "INVALID_ARGUMENT",
        "progress",
    ),
    (
        "Report",
        BOT,
        lambda c: pb.ReportRequest(call_id=c.call_id, progress="p\x00"),
        "INVALID_ARGUMENT",
        "progress",
    ),
    (
        "Report",
        BOT,
        lambda c: pb.ReportRequest(
            call_id=c.call_id, messages=[pb.ExecutionMessage(text="m")] * 101
        ),
        "INVALID_ARGUMENT",
        "101 messages",
    ),
    (
        "Report",
        BOT,
        lambda c: pb.ReportRequest(
            call_id=c.call_id, messages=[pb.ExecutionMessage(role="Bad Role", text="m")]
        ),
        "INVALID_ARGUMENT",
        "role",
    ),
    (
        "Report",
        BOT,
        lambda c: pb.ReportRequest(
            call_id=c.call_id, messages=[pb.ExecutionMessage(text="m" * 70_000)]
        ),
        "INVALID_ARGUMENT",
        "message text",
    ),
    (
        "Report",
        BOT,
        lambda c: pb.ReportRequest(
            call_id=c.call_id,
            messages=[pb.ExecutionMessage(text="ok"), pb.ExecutionMessage(text="m\x00")],
        ),
        "INVALID_ARGUMENT",
        "message text",
    ),
    (
        "Report",
        BOT,
        lambda c: pb.ReportRequest(call_id=c.call_id, events=[pb.ExecutionEvent()]),
        "INVALID_ARGUMENT",
        "event kind",
    ),
    (
        "Report",
        BOT,
        lambda c: pb.ReportRequest(call_id=c.call_id, events=[pb.ExecutionEvent(kind="tool_call")]),
        "INVALID_ARGUMENT",
        "tool_name",
    ),
    (
        "Report",
        BOT,
        lambda c: pb.ReportRequest(
            call_id=c.call_id, events=[pb.ExecutionEvent(kind="tool_call", tool_name="t\x00")]
        ),
        "INVALID_ARGUMENT",
        "tool_name",
    ),
    (
        "Report",
        BOT,
        lambda c: pb.ReportRequest(
            call_id=c.call_id, events=[pb.ExecutionEvent(kind="note", text="e" * 9000)]
        ),
        "INVALID_ARGUMENT",
        "event text",
    ),
    (
        "Report",
        BOT,
        lambda c: pb.ReportRequest(
            call_id=c.call_id, steps=[pb.WorkflowStep(step="s", status="started")]
        ),
        "INVALID_ARGUMENT",
        "workflow function executions only",
    ),
    (
        "Report",
        BOT,
        lambda c: pb.ReportRequest(call_id=c.call_id, sequence=-1),
        "INVALID_ARGUMENT",
        "sequence",
    ),
    (
        "Report",
        "agent:demo/other",
        lambda c: pb.ReportRequest(call_id=c.call_id),
        "NOT_FOUND",
        "execution",
    ),
    ("UploadFile", BOT, lambda c: [], "INVALID_ARGUMENT", "empty upload"),
    (
        "UploadFile",
        BOT,
        lambda c: [pb.FileChunk(call_id=c.call_id, data=b"x")],
        "INVALID_ARGUMENT",
        "file is required",
    ),
    (
        "UploadFile",
        BOT,
        lambda c: [pb.FileChunk(call_id=c.call_id, name="../x", data=b"x")],
        "INVALID_ARGUMENT",
        "file '../x'",
    ),
    (
        "UploadFile",
        BOT,
        lambda c: [pb.FileChunk(call_id=c.call_id, name="/abs", data=b"x")],
        "INVALID_ARGUMENT",
        "file '/abs'",
    ),
    (
        "UploadFile",
        BOT,
        lambda c: [
            pb.FileChunk(call_id=c.call_id, name="a.txt", data=b"x"),
            pb.FileChunk(name="b.txt", data=b"y"),
        ],
        "INVALID_ARGUMENT",
        "same call and file",
    ),
    (
        "UploadFile",
        BOT,
        lambda c: [
            pb.FileChunk(call_id=c.call_id, name="a.txt", data=b"x", media_type="text/\x00plain")
        ],
        "INVALID_ARGUMENT",
        "media_type",
    ),
    (
        "UploadFile",
        BOT,
        lambda c: [pb.FileChunk(call_id=c.call_id, name="a.txt", data=b"x", media_type="t" * 300)],
        "INVALID_ARGUMENT",
        "media_type",
    ),
    (
        "UploadFile",
        "agent:demo/other",
        lambda c: [pb.FileChunk(call_id=c.call_id, name="a.txt", data=b"x")],
        "NOT_FOUND",
        "execution",
    ),
    (
        "AskInput",
        BOT,
        lambda c: pb.AskInputRequest(call_id=c.call_id, ask_id="q2"),
        "INVALID_ARGUMENT",
        "question is empty",
    ),
    (
        "AskInput",
        BOT,
        lambda c: pb.AskInputRequest(call_id=c.call_id, ask_id="q2", question="q" * 9000),
        "INVALID_ARGUMENT",
        "question",
    ),
    (
        "AskInput",
        BOT,
        lambda c: pb.AskInputRequest(call_id=c.call_id, ask_id="q2", question="q\x00"),
        "INVALID_ARGUMENT",
        "question",
    ),
    (
        "AskInput",
        BOT,
        lambda c: pb.AskInputRequest(call_id=c.call_id, question="q"),
        "INVALID_ARGUMENT",
        "ask_id",
    ),
    (
        "AskInput",
        BOT,
        lambda c: pb.AskInputRequest(call_id=c.call_id, ask_id="a" * 101, question="q"),
        "INVALID_ARGUMENT",
        "ask_id",
    ),
    (
        "AskInput",
        BOT,
        lambda c: pb.AskInputRequest(call_id=c.call_id, ask_id="a\x00", question="q"),
        "INVALID_ARGUMENT",
        "ask_id",
    ),
    (
        "AskInput",
        BOT,
        lambda c: pb.AskInputRequest(call_id=c.call_id, ask_id="q2", question="q", wait_seconds=26),
        "INVALID_ARGUMENT",
        "wait_seconds",
    ),
    (
        "AskInput",
        BOT,
        lambda c: pb.AskInputRequest(call_id=c.call_id, ask_id="q2", question="another"),
        "FAILED_PRECONDITION",
        "pending question",
    ),
    (
        "FinishExecution",
        BOT,
        lambda c: pb.FinishExecutionRequest(call_id=c.call_id, correction_round=2),
        "INVALID_ARGUMENT",
        "correction_round",
    ),
    (
        "FinishExecution",
        BOT,
        lambda c: pb.FinishExecutionRequest(call_id=c.call_id, final_message="f" * 300_000),
        "INVALID_ARGUMENT",
        "final_message",
    ),
    (
        "FinishExecution",
        BOT,
        lambda c: pb.FinishExecutionRequest(call_id=c.call_id, final_message="f\x00"),
        "INVALID_ARGUMENT",
        "final_message",
    ),
    (
        "FinishExecution",
        BOT,
        lambda c: pb.FinishExecutionRequest(call_id=c.call_id, failed=True, error="e" * 20_000),
        "INVALID_ARGUMENT",
        "error",
    ),
    (
        "FinishExecution",
        "agent:demo/other",
        lambda c: pb.FinishExecutionRequest(call_id=c.call_id),
        "NOT_FOUND",
        "execution",
    ),
]


def snapshot(database_url: str) -> dict[str, str]:
    """A digest of the content of every table of the functions schema."""
    with psycopg.connect(database_url) as conn:
        return {
            table: conn.execute(
                f"SELECT count(*) || ':' || md5(coalesce(string_agg(t::text, '|' "
                f"ORDER BY t::text), '')) FROM functions.{table} t"
            ).fetchone()[0]
            for table in TABLES
        }


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


async def invoke(address: str, token: str, method: str, request: Any) -> tuple[str, str]:
    """(status code name, details) of one RPC; ("OK", "") when it was accepted."""
    async with grpc.aio.insecure_channel(address) as channel:
        stub = functions_pb2_grpc.FunctionsServiceStub(channel)
        metadata = ((METADATA_KEY, token),)
        try:
            if method == "UploadFile":

                async def chunks():
                    for chunk in request:
                        yield chunk

                await stub.UploadFile(chunks(), metadata=metadata, timeout=10)
            else:
                await getattr(stub, method)(request, metadata=metadata, timeout=10)
        except grpc.aio.AioRpcError as exc:
            return exc.code().name, exc.details() or ""
    return "OK", ""


METHODS = list(dict.fromkeys(case[0] for case in CASES))

# Row for docs/reliability.md (see tests/conftest.py).
RELIABILITY = {
    "test": "test_bad_input_is_refused_clearly_and_stores_nothing_P6_F3",
    "scenario": "Bad input, functions service (P6, F1, F3, F7, F8)",
    "action": f"{len(CASES)} cases over all {len(METHODS)} RPCs (one test per RPC): "
    "missing fields, wrong enum values, Struct inputs of the wrong "
    "JSON type, unknown input fields, NUL characters, non-finite numbers, empty and "
    "oversized values, bad cursors and limits, malformed JSON Schemas, path traversal in "
    "file names",
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
        got, details = await invoke(functions.address, token, method, request)
        if got != code or words not in details:
            problems.append(f"case {number}: expected {code} with {words!r}, got {got}: {details}")
        if snapshot(database_url) != before:
            problems.append(f"case {number}: the database changed")
    assert not problems, "\n".join(problems)


def test_every_rpc_has_bad_input_cases():
    """The table covers the whole FunctionsService."""
    service = pb.DESCRIPTOR.services_by_name["FunctionsService"]
    assert set(METHODS) == {m.name for m in service.methods}
