"""The function tools under a turn's or execution's capability (T3, L1, L2, L8, F13).

A turn capability lists functions as its agent and reads, answers and reads the files of
only the calls made from its own conversation; an execution capability lists and calls
functions as its runtime (a workflow's with its own run as the source) and reads and
answers only the calls that execution made, and nothing once the execution has ended.
Anything else is NOT_FOUND (a call it may not see) or PERMISSION_DENIED (what the
capability cannot do), over real gRPC against the services.
"""

from __future__ import annotations

import json
from typing import Any

import grpc
import pytest

from agentworks.client import FunctionsClient, MessagingClient
from agentworks.client.common import target_ref
from agentworks.core.identity import METADATA_KEY
from agentworks.functions.v1 import functions_pb2 as f
from agentworks.functions.v1 import functions_pb2_grpc

pytestmark = pytest.mark.timeout(120)

CREW = target_ref("crew:demo")
ECHO = {"type": "object", "properties": {"text": {"type": "string"}}}


async def rpc(stub: Any, method: str, request: Any, token: str) -> tuple[str, str, Any]:
    """(status code name, details, response) of one call with `token` as the identity."""
    try:
        response = await getattr(stub, method)(
            request, metadata=((METADATA_KEY, token),), timeout=10
        )
    except grpc.aio.AioRpcError as exc:
        return exc.code().name, exc.details() or "", None
    return "OK", "", response


def echo(text: str, **fields: Any) -> f.CallRequest:
    return f.CallRequest(
        target=CREW, function="echo", inputs_json=json.dumps({"text": text}), **fields
    )


@pytest.fixture
async def suite(start_messaging, start_functions, identity):
    """crew:demo (runtime agent:demo/bot) with `echo`, callable by its agents and by
    workflow:wf, whose `step` function runs as workflow runs; yields (clients, stub)."""
    messaging = await start_messaging.default()
    functions = await start_functions()
    clients: dict[str, Any] = {}
    for name, principal, roles in (
        ("ops", "user:ops", {"operator"}),
        ("owner", "user:owner", set()),
        ("alice", "user:alice", set()),
        ("bot", "agent:demo/bot", set()),
        ("wf", "workflow:wf", set()),
    ):
        minter = identity(principal, roles)
        clients[name + "_f"] = FunctionsClient(functions.address, identity=minter)
        clients[name + "_m"] = MessagingClient(messaging.address, identity=minter)
    for target in ("crew:demo", "workflow:wf"):
        await clients["ops_f"].register_target(target, owner="user:owner", running_limit=10)
    await clients["ops_m"].register_target("crew:demo", owner="user:owner")
    await clients["owner_f"].declare_function(
        "crew:demo",
        "echo",
        input_schema=ECHO,
        allowed_callers=["user:alice", "agent:demo/*", "workflow:wf"],
    )
    await clients["owner_f"].declare_function(
        "workflow:wf",
        "step",
        input_schema=ECHO,
        allowed_callers=["user:alice"],
        workflow={"route": "r"},
    )
    channel = grpc.aio.insecure_channel(functions.address)
    yield clients, functions_pb2_grpc.FunctionsServiceStub(channel)
    for client in clients.values():
        await client.close()
    await channel.close()


async def test_a_turn_capability_reads_only_the_calls_of_its_own_conversation_T3_L2_F13(
    suite,
):
    """T3 L2 F13: with turn A's capability the agent lists crew:demo's functions (as
    itself), calls into A, and reads that call's status; a call of the same agent made
    from conversation B (with B's capability), one it made with no conversation, and
    alice's are NOT_FOUND for GetStatus, Reply and ReadFile alike; Cancel stays refused."""
    clients, stub = suite
    one = await clients["alice_m"].send("first", target="crew:demo")
    two = await clients["alice_m"].send("second", target="crew:demo")
    turns = [await clients["bot_m"].claim_turn(["crew:demo"], lease_seconds=60) for _ in "12"]
    a = next(t for t in turns if t.conversation_id == one.conversation_id)
    b = next(t for t in turns if t.conversation_id == two.conversation_id)

    code, details, listed = await rpc(
        stub, "ListFunctions", f.ListFunctionsRequest(target=CREW), a.capability
    )
    assert code == "OK", details
    assert [fn.name for fn in listed.functions] == ["echo"]
    code, details, mine = await rpc(
        stub, "Call", echo("a", notify_conversation_id=a.conversation_id), a.capability
    )
    assert code == "OK", details
    code, details, theirs = await rpc(
        stub, "Call", echo("b", notify_conversation_id=b.conversation_id), b.capability
    )
    assert code == "OK", details
    plain = await clients["bot_f"].call("crew:demo", "echo", {"text": "c"})
    alices = await clients["alice_f"].call("crew:demo", "echo", {"text": "d"})

    code, details, status = await rpc(
        stub, "GetStatus", f.GetStatusRequest(call_id=mine.call_id), a.capability
    )
    assert code == "OK", details
    assert status.call_id == mine.call_id
    for other in (theirs, plain, alices):
        for method, request in (
            ("GetStatus", f.GetStatusRequest(call_id=other.call_id)),
            ("Reply", f.ReplyRequest(call_id=other.call_id, text="an answer")),
            ("ReadFile", f.ReadFileRequest(call_id=other.call_id, file="out.txt")),
        ):
            code, details, _ = await rpc(stub, method, request, a.capability)
            assert (code, "not found" in details) == ("NOT_FOUND", True), (method, details)
    code, details, _ = await rpc(
        stub, "Cancel", f.CancelRequest(call_id=mine.call_id), a.capability
    )
    assert code == "PERMISSION_DENIED" and "a turn capability allows only" in details, details
    # B's own capability still reads B's call; the runtime itself reads all of its own.
    code, _, _ = await rpc(
        stub, "GetStatus", f.GetStatusRequest(call_id=theirs.call_id), b.capability
    )
    assert code == "OK"
    assert (await clients["bot_f"].get_status(mine.call_id)).call_id == mine.call_id


async def _workflow_executions(clients: dict[str, Any], count: int) -> list[f.Execution]:
    calls = [
        await clients["alice_f"].call("workflow:wf", "step", {"text": str(n)}) for n in range(count)
    ]
    claimed = {}
    for _ in calls:
        execution = await clients["wf_f"].claim_execution(["workflow:wf"], lease_seconds=60)
        claimed[execution.call_id] = execution
    return [claimed[c.call_id] for c in calls]


async def test_an_execution_capability_reads_and_answers_only_the_calls_it_made_T3_L8_F14(
    suite,
):
    """T3 L8 F14: workflow execution X's capability lists functions and calls as
    workflow:wf with its own run as the source; the same step again gets the same call;
    a call made by execution Y (same workflow principal), or by the runtime itself, is
    NOT_FOUND to X for GetStatus and Reply; X may not call with Y's run, ask for a
    notice, or cancel."""
    clients, stub = suite
    x, y = await _workflow_executions(clients, 2)
    assert x.run_id and y.run_id and x.run_id != y.run_id

    code, details, listed = await rpc(
        stub, "ListFunctions", f.ListFunctionsRequest(target=CREW), x.capability
    )
    assert code == "OK", details
    assert [fn.name for fn in listed.functions] == ["echo"]
    source = f.CallSource(run_id=x.run_id, step="research", group="")
    code, details, first = await rpc(
        stub, "Call", echo("x", source=source, submission_id="k"), x.capability
    )
    assert code == "OK" and first.created, details
    code, details, again = await rpc(
        stub, "Call", echo("x", source=source, submission_id="k"), x.capability
    )
    assert code == "OK" and again.call_id == first.call_id and not again.created, details
    status = await clients["owner_f"].get_status(first.call_id)
    assert status.caller == "workflow:wf" and status.source.run_id == x.run_id
    code, details, theirs = await rpc(
        stub,
        "Call",
        echo("y", source=f.CallSource(run_id=y.run_id, step="research"), submission_id="k"),
        y.capability,
    )
    assert code == "OK" and theirs.call_id != first.call_id, details
    plain = await clients["wf_f"].call(
        "crew:demo", "echo", {"text": "z"}, source={"run_id": x.run_id, "step": "research"}
    )

    code, details, _ = await rpc(
        stub, "GetStatus", f.GetStatusRequest(call_id=first.call_id), x.capability
    )
    assert code == "OK", details
    for other in (theirs, plain):
        for method, request in (
            ("GetStatus", f.GetStatusRequest(call_id=other.call_id)),
            ("Reply", f.ReplyRequest(call_id=other.call_id, text="an answer")),
        ):
            code, details, _ = await rpc(stub, method, request, x.capability)
            assert (code, "not found" in details) == ("NOT_FOUND", True), (method, details)
    refused: list[tuple[str, Any, str]] = [
        ("Call", echo("w", source=f.CallSource(run_id=y.run_id, step="s")), "its own run"),
        ("Call", echo("w"), "source"),
        (
            "Call",
            echo(
                "w", source=source, notify_conversation_id="0" * 8 + "-0000-4000-8000-" + "0" * 12
            ),
            "does not act for a conversation",
        ),
        ("Cancel", f.CancelRequest(call_id=first.call_id), "an execution capability allows only"),
    ]
    for method, request, says in refused:
        code, details, _ = await rpc(stub, method, request, x.capability)
        assert (code, says in details) == ("PERMISSION_DENIED", True), (method, details)


async def test_an_execution_capability_does_nothing_once_its_execution_ended_T3_L8(suite):
    """T3 L8: after execution X finishes (or is cancelled), its capability lists, calls,
    reads and answers nothing: PERMISSION_DENIED, ended with its lease."""
    clients, stub = suite
    x, y = await _workflow_executions(clients, 2)
    source = f.CallSource(run_id=x.run_id, step="s")
    code, details, made = await rpc(stub, "Call", echo("x", source=source), x.capability)
    assert code == "OK", details
    await clients["wf_f"].finish_execution(x.call_id, final_message="done")
    await clients["alice_f"].cancel(y.call_id)
    for execution, status in ((x, "completed"), (y, "cancelled")):
        for method, request in (
            ("ListFunctions", f.ListFunctionsRequest(target=CREW)),
            ("Call", echo("late", source=f.CallSource(run_id=execution.run_id, step="t"))),
            ("GetStatus", f.GetStatusRequest(call_id=made.call_id)),
            ("Reply", f.ReplyRequest(call_id=made.call_id, text="late")),
        ):
            code, details, _ = await rpc(stub, method, request, execution.capability)
            assert code == "PERMISSION_DENIED", (method, code, details)
            assert "has ended with its lease" in details and status in details, details
    # The runtime itself still reads the call its step made.
    assert (await clients["wf_f"].get_status(made.call_id)).call_id == made.call_id
