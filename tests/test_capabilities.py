"""Per-turn and per-execution capabilities (T3), over real gRPC against the services.

A claimed execution comes with a capability signed by service:functions, a claimed turn
with one signed by service:messaging; each allows its own item's operations only, and
is refused once the item's lease ends. A capability from any other signer, or one with
a role or for a user, is refused UNAUTHENTICATED (trust.py's policy).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import grpc
import jwt
import pytest

from agentworks.client import FunctionsClient, MessagingClient, SchedulerClient
from agentworks.client.common import target_ref
from agentworks.core import capability as cap
from agentworks.core.capability_identity import CapabilityIdentity
from agentworks.core.identity import METADATA_KEY, mint
from agentworks.functions.v1 import functions_pb2 as f
from agentworks.functions.v1 import functions_pb2_grpc
from agentworks.messaging.v1 import messaging_pb2 as m
from agentworks.messaging.v1 import messaging_pb2_grpc
from agentworks.scheduler.v1 import scheduler_pb2 as s
from agentworks.scheduler.v1 import scheduler_pb2_grpc

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


@pytest.fixture
async def suite(start_messaging, start_functions, identity):
    """messaging and functions with crew:demo (runtime agent:demo/bot) and its `echo`;
    yields (clients by name, functions stub, messaging stub)."""
    messaging = await start_messaging.default()  # where a scheduler delivers too
    functions = await start_functions()
    clients: dict[str, Any] = {}
    for name, principal, roles in (
        ("ops", "user:ops", {"operator"}),
        ("owner", "user:owner", set()),
        ("alice", "user:alice", set()),
        ("bot", "agent:demo/bot", set()),
    ):
        minter = identity(principal, roles)
        clients[name + "_f"] = FunctionsClient(functions.address, identity=minter)
        clients[name + "_m"] = MessagingClient(messaging.address, identity=minter)
    await clients["ops_f"].register_target("crew:demo", owner="user:owner", running_limit=10)
    await clients["ops_m"].register_target("crew:demo", owner="user:owner")
    await clients["owner_f"].declare_function(
        "crew:demo", "echo", input_schema=ECHO, allowed_callers=["user:alice", "agent:demo/*"]
    )
    channels = [grpc.aio.insecure_channel(a) for a in (functions.address, messaging.address)]
    stubs = (
        functions_pb2_grpc.FunctionsServiceStub(channels[0]),
        messaging_pb2_grpc.MessagingServiceStub(channels[1]),
    )
    yield clients, *stubs
    for client in clients.values():
        await client.close()
    for channel in channels:
        await channel.close()


async def test_an_execution_capability_acts_on_its_own_call_only_T3(suite, signing_keys):
    """T3: the capability of execution X, signed by service:functions for the claimer,
    reports, heartbeats (getting a renewed one) and asks on X; on Y, and for a Call
    asking for a notice, Cancel, ClaimExecution, a finish that claims the next, or any
    messaging operation, it is PERMISSION_DENIED saying why; X's own call (alice's) it
    does not read: NOT_FOUND (tests/test_capability_scope.py has the function tools)."""
    clients, functions, messaging = suite
    x = await clients["alice_f"].call("crew:demo", "echo", {"text": "x"})
    y = await clients["alice_f"].call("crew:demo", "echo", {"text": "y"})
    first = await clients["bot_f"].claim_execution(["crew:demo"], lease_seconds=60)
    second = await clients["bot_f"].claim_execution(["crew:demo"], lease_seconds=60)
    assert {first.call_id, second.call_id} == {x.call_id, y.call_id}
    own, other = (first, second) if first.call_id == x.call_id else (second, first)
    token = own.capability
    assert token and other.capability and token != other.capability
    claims = jwt.decode(token, options={"verify_signature": False})
    assert claims["sub"] == "agent:demo/bot" and claims["iss"] == "service:functions"
    assert claims["cap"] == {"kind": "execution", "id": x.call_id, "call_id": x.call_id}
    assert claims["exp"] <= own.lease_expires_at.seconds + 1 and claims["roles"] == []

    code, _, _ = await rpc(
        functions, "Report", f.ReportRequest(call_id=x.call_id, progress="p"), token
    )
    assert code == "OK"
    code, _, beat = await rpc(
        functions,
        "HeartbeatExecution",
        f.HeartbeatExecutionRequest(call_id=x.call_id, lease_seconds=60),
        token,
    )
    assert code == "OK" and beat.capability and beat.capability != ""
    assert (
        jwt.decode(beat.capability, options={"verify_signature": False})["cap"]["id"] == x.call_id
    )
    status = await clients["alice_f"].get_status(x.call_id)
    assert status.progress == "p"

    refused = {
        "Report on Y": (
            "Report",
            f.ReportRequest(call_id=y.call_id, progress="p"),
            f"not execution {y.call_id!r}",
        ),
        "Heartbeat of Y": (
            "HeartbeatExecution",
            f.HeartbeatExecutionRequest(call_id=y.call_id),
            f"not execution {y.call_id!r}",
        ),
        "Finish Y": (
            "FinishExecution",
            f.FinishExecutionRequest(call_id=y.call_id, final_message="mine"),
            "for execution",
        ),
        "Ask on Y": (
            "AskInput",
            f.AskInputRequest(call_id=y.call_id, ask_id="a", question="q?"),
            "for execution",
        ),
        "Call notifying a conversation": (
            "Call",
            f.CallRequest(
                target=CREW,
                function="echo",
                inputs_json='{"text": "z"}',
                notify_conversation_id="00000000-0000-4000-8000-000000000000",
            ),
            "an execution capability does not act for a conversation",
        ),
        "Cancel X": (
            "Cancel",
            f.CancelRequest(call_id=x.call_id),
            "an execution capability allows only",
        ),
        "Claim": (
            "ClaimExecution",
            f.ClaimExecutionRequest(targets=[CREW]),
            "allows only AskInput, Call, FinishExecution, GetStatus, HeartbeatExecution, "
            "ListFunctions, Reply, Report, UploadFile",
        ),
        "Finish X claiming the next": (
            "FinishExecution",
            f.FinishExecutionRequest(
                call_id=x.call_id, claim_next=f.ClaimExecutionRequest(targets=[CREW])
            ),
            "it claims nothing",
        ),
    }
    for what, (method, request, says) in refused.items():
        code, details, _ = await rpc(functions, method, request, token)
        assert (code, says in details) == ("PERMISSION_DENIED", True), (what, code, details)
    code, details, _ = await rpc(
        functions, "GetStatus", f.GetStatusRequest(call_id=x.call_id), token
    )
    assert code == "NOT_FOUND", details
    for method, request in (
        ("ClaimTurn", m.ClaimTurnRequest(targets=[CREW])),
        ("Read", m.ReadRequest(inbox_id="in_x")),
        ("SendMessage", m.SendMessageRequest(inbox_id="in_x", text="hi")),
    ):
        code, details, _ = await rpc(messaging, method, request, token)
        assert code == "PERMISSION_DENIED" and "allows nothing on this service" in details
    # Y is untouched; the runtime itself still works on it.
    await clients["bot_f"].report(y.call_id, progress="still mine")
    assert (await clients["alice_f"].get_status(y.call_id)).progress == "still mine"


async def test_an_execution_capability_is_refused_once_its_lease_ends_T3(suite):
    """T3: after X finishes, its capability reports, heartbeats and finishes nothing
    (PERMISSION_DENIED: ended with its lease); a cancelled call's capability and one
    whose lease ran out are refused the same way."""
    clients, functions, _ = suite
    calls = [await clients["alice_f"].call("crew:demo", "echo", {"text": t}) for t in "xyz"]
    claimed = {}
    for lease in (60, 60, 1):
        execution = await clients["bot_f"].claim_execution(["crew:demo"], lease_seconds=lease)
        claimed[execution.call_id] = execution
    x, y, z = (claimed[c.call_id] for c in calls)
    code, _, _ = await rpc(
        functions, "Report", f.ReportRequest(call_id=x.call_id, progress="p"), x.capability
    )
    assert code == "OK"
    await clients["bot_f"].finish_execution(x.call_id, final_message="done")
    await clients["alice_f"].cancel(y.call_id)
    await asyncio.sleep(1.5)  # z's one-second lease runs out
    for execution, status in ((x, "completed"), (y, "cancelled"), (z, "")):
        for method, request in (
            ("Report", f.ReportRequest(call_id=execution.call_id, progress="late")),
            ("HeartbeatExecution", f.HeartbeatExecutionRequest(call_id=execution.call_id)),
            ("FinishExecution", f.FinishExecutionRequest(call_id=execution.call_id)),
        ):
            code, details, _ = await rpc(functions, method, request, execution.capability)
            # z's may also have expired as an identity (UNAUTHENTICATED) by now.
            allowed = ("PERMISSION_DENIED",) if status else ("PERMISSION_DENIED", "UNAUTHENTICATED")
            assert code in allowed, (method, code, details)
            if code == "PERMISSION_DENIED":
                assert "has ended with its lease" in details and status in details, details
    assert (await clients["alice_f"].get_status(x.call_id)).progress == "p"


async def test_a_turn_capability_sends_into_its_own_conversation_only_T3(suite):
    """T3: a turn's capability (service:messaging, bound to the turn and its
    conversation) sends into its reply inbox, heartbeats (renewed) and completes its
    turn, and calls functions as its agent notified into its conversation; another
    conversation's inbox, another turn, reads, claims and other calls are
    PERMISSION_DENIED; after CompleteTurn it sends nothing."""
    clients, functions, messaging = suite
    one = await clients["alice_m"].send("first", target="crew:demo")
    two = await clients["alice_m"].send("second", target="crew:demo")
    turns = [await clients["bot_m"].claim_turn(["crew:demo"], lease_seconds=60) for _ in "12"]
    mine = next(t for t in turns if t.conversation_id == one.conversation_id)
    other = next(t for t in turns if t.conversation_id == two.conversation_id)
    token = mine.capability
    claims = jwt.decode(token, options={"verify_signature": False})
    assert (claims["iss"], claims["sub"]) == ("service:messaging", "agent:demo/bot")
    assert claims["cap"] == {
        "kind": "turn",
        "id": mine.turn_id,
        "conversation_id": one.conversation_id,
    }

    code, _, _ = await rpc(
        messaging, "SendMessage", m.SendMessageRequest(inbox_id=one.inbox_id, text="hi"), token
    )
    assert code == "OK"
    code, _, beat = await rpc(
        messaging, "HeartbeatTurn", m.HeartbeatTurnRequest(turn_id=mine.turn_id), token
    )
    assert code == "OK" and beat.capability
    notify_own = f.CallRequest(
        target=CREW,
        function="echo",
        inputs_json='{"text": "t"}',
        notify_conversation_id=one.conversation_id,
    )
    code, details, receipt = await rpc(functions, "Call", notify_own, token)
    assert code == "OK", details
    status = await clients["bot_f"].get_status(receipt.call_id)
    assert status.caller == "agent:demo/bot"

    refused = [
        (
            messaging,
            "SendMessage",
            m.SendMessageRequest(inbox_id=two.inbox_id, text="not mine"),
            "it acts in that conversation only",
        ),
        (
            messaging,
            "HeartbeatTurn",
            m.HeartbeatTurnRequest(turn_id=other.turn_id),
            f"not turn {other.turn_id!r}",
        ),
        (
            messaging,
            "CompleteTurn",
            m.CompleteTurnRequest(turn_id=other.turn_id),
            f"not turn {other.turn_id!r}",
        ),
        (messaging, "Read", m.ReadRequest(inbox_id=one.inbox_id), "a turn capability allows"),
        (messaging, "ClaimTurn", m.ClaimTurnRequest(targets=[CREW]), "a turn capability allows"),
        (
            messaging,
            "Send",
            m.SendRequest(inbox_id=one.inbox_id, text="as alice?"),
            "a turn capability allows",
        ),
        (
            functions,
            "Call",
            f.CallRequest(
                target=CREW,
                function="echo",
                inputs_json="{}",
                notify_conversation_id=two.conversation_id,
            ),
            "it acts for that conversation only",
        ),
        (
            functions,
            "Call",
            f.CallRequest(target=CREW, function="echo", inputs_json="{}"),
            "it acts for that conversation only",
        ),
        (
            functions,
            "Cancel",
            f.CancelRequest(call_id=receipt.call_id),
            "a turn capability allows only Call, GetStatus, ListFunctions, ReadFile, Reply",
        ),
        (
            functions,
            "ClaimExecution",
            f.ClaimExecutionRequest(targets=[CREW]),
            "a turn capability allows only Call",
        ),
    ]
    for stub, method, request, says in refused:
        code, details, _ = await rpc(stub, method, request, token)
        assert (code, says in details) == ("PERMISSION_DENIED", True), (method, code, details)

    code, _, _ = await rpc(
        messaging, "CompleteTurn", m.CompleteTurnRequest(turn_id=mine.turn_id), token
    )
    assert code == "OK"
    code, details, _ = await rpc(
        messaging, "SendMessage", m.SendMessageRequest(inbox_id=one.inbox_id, text="late"), token
    )
    assert code == "PERMISSION_DENIED" and "has ended with its lease (completed)" in details
    # The runtime's own identity still acts on the other turn.
    await clients["bot_m"].send_message(two.inbox_id, "the runtime itself")


async def test_a_turn_capability_asks_for_wake_ups_of_its_own_conversation_only_T3(
    suite, start_scheduler, identity
):
    """T3: with a turn's capability the scheduler creates, lists, reads, reschedules and
    cancels wake-ups of the turn's conversation (its participation check asks messaging
    with the capability, which reads that transcript only); another conversation's, and
    schedules, are PERMISSION_DENIED; after CompleteTurn a create is refused."""
    clients, _, _ = suite
    scheduler = await start_scheduler()
    one = await clients["alice_m"].send("first", target="crew:demo")
    two = await clients["alice_m"].send("second", target="crew:demo")
    turns = [await clients["bot_m"].claim_turn(["crew:demo"], lease_seconds=60) for _ in "12"]
    mine = next(t for t in turns if t.conversation_id == one.conversation_id)
    token = mine.capability
    bot_s = SchedulerClient(scheduler.address, identity=identity("agent:demo/bot"))
    theirs = await bot_s.create_wake_up(two.conversation_id, delay_seconds=3600)
    async with grpc.aio.insecure_channel(scheduler.address) as channel:
        stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        code, details, wake_up = await rpc(
            stub,
            "CreateWakeUp",
            s.CreateWakeUpRequest(conversation_id=one.conversation_id, delay_seconds=3600),
            token,
        )
        assert code == "OK", details
        for method, request in (
            ("ListWakeUps", s.ListWakeUpsRequest(conversation_id=one.conversation_id)),
            ("GetWakeUp", s.GetWakeUpRequest(wake_up_id=wake_up.wake_up_id)),
            (
                "RescheduleWakeUp",
                s.RescheduleWakeUpRequest(wake_up_id=wake_up.wake_up_id, delay_seconds=60),
            ),
            ("CancelWakeUp", s.CancelWakeUpRequest(wake_up_id=wake_up.wake_up_id)),
        ):
            code, details, _ = await rpc(stub, method, request, token)
            assert code == "OK", (method, details)
        refused: list[tuple[str, Any, str]] = [
            (
                "CreateWakeUp",
                s.CreateWakeUpRequest(conversation_id=two.conversation_id, delay_seconds=60),
                "it acts for that conversation only",
            ),
            ("ListWakeUps", s.ListWakeUpsRequest(), "it acts for that conversation only"),
            (
                "GetWakeUp",
                s.GetWakeUpRequest(wake_up_id=theirs.wake_up_id),
                "it acts for that conversation only",
            ),
            (
                "CancelWakeUp",
                s.CancelWakeUpRequest(wake_up_id=theirs.wake_up_id),
                "it acts for that conversation only",
            ),
            (
                "CreateSchedule",
                s.CreateScheduleRequest(conversation_id=one.conversation_id, prompt="p"),
                "a turn capability allows only",
            ),
        ]
        for method, request, says in refused:
            code, details, _ = await rpc(stub, method, request, token)
            assert (code, says in details) == ("PERMISSION_DENIED", True), (method, details)
        await clients["bot_m"].complete_turn(mine.turn_id)
        code, details, _ = await rpc(
            stub,
            "CreateWakeUp",
            s.CreateWakeUpRequest(conversation_id=one.conversation_id, delay_seconds=60),
            token,
        )
        assert code == "PERMISSION_DENIED" and "has ended with its lease" in details, details
    assert (await bot_s.get_wake_up(theirs.wake_up_id)).status == s.WAKE_UP_STATUS_PENDING
    await bot_s.close()


async def test_only_the_leasing_service_signs_a_capability_T3_T1(suite, signing_keys):
    """T3 T1: a capability signed by the gateway's key, an execution one
    signed by messaging, one with a role, and one for a user are UNAUTHENTICATED naming
    the rule; a capability with a malformed cap claim too."""
    clients, functions, _ = suite
    call = await clients["alice_f"].call("crew:demo", "echo", {"text": "x"})
    await clients["bot_f"].claim_execution(["crew:demo"], lease_seconds=60)
    bound = cap.execution(call.call_id)
    key = signing_keys.ensure
    forged = [
        (mint("agent:demo/bot", key("gateway")[0], capability=bound), "signer gateway may not"),
        (
            mint("agent:demo/bot", key("service:messaging")[0], capability=bound),
            "only service:functions does",
        ),
        (
            mint(
                "agent:demo/bot", key("service:functions")[0], capability=bound, roles={"operator"}
            ),
            "a capability carries no role",
        ),
        (
            mint("user:alice", key("service:functions")[0], capability=bound),
            "not for user:alice",
        ),
        (
            mint(
                "agent:demo/bot",
                key("service:functions")[0],
                capability=cap.Capability("anything", call.call_id),
            ),
            "capabilities are turn or execution",
        ),
    ]
    for token, says in forged:
        code, details, _ = await rpc(
            functions, "Report", f.ReportRequest(call_id=call.call_id, progress="p"), token
        )
        assert code == "UNAUTHENTICATED" and says in details, (code, details)
    # And an expired capability is refused as an expired identity.
    old = mint(
        "agent:demo/bot",
        key("service:functions")[0],
        capability=bound,
        ttl_seconds=60,
        now=time.time() - 600,
    )
    code, details, _ = await rpc(functions, "Report", f.ReportRequest(call_id=call.call_id), old)
    assert code == "UNAUTHENTICATED" and "expired" in details


async def test_capability_identity_reads_the_renewed_token_from_its_file_T3(suite, tmp_path):
    """T3: the SDK's CapabilityIdentity sends the token in AGENTWORKS_CAPABILITY_FILE,
    read again when the file changes, so a child keeps working across lease renewals."""
    clients, _, _ = suite
    call = await clients["alice_f"].call("crew:demo", "echo", {"text": "x"})
    execution = await clients["bot_f"].claim_execution(["crew:demo"], lease_seconds=60)
    path = tmp_path / "capability"
    path.write_text("not-a-token")
    identity = CapabilityIdentity.from_env({cap.CAPABILITY_FILE_VARIABLE: str(path)})
    async with FunctionsClient(identity=identity, channel=clients["bot_f"].channel) as child:
        with pytest.raises(Exception, match="not a signed token"):
            await child.report(call.call_id, progress="refused")
        path.write_text(execution.capability + "\n")
        await child.report(call.call_id, progress="from the child")
    assert (await clients["alice_f"].get_status(call.call_id)).progress == "from the child"
