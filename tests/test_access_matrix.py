"""Who may do what, at the gRPC level: principals x operations, one expected status per
cell (A1, A2, A3, C3, F2, F6, S1, T1, T2, T4).

Principals: the call's caller and the inbox's principal (alice), the target's owner, an
allowed caller (an agent admitted by a pattern), a disallowed caller, a stranger, the
target's runtime, a runtime of another crew, an operator (users and agents signed by the
gateway's key, the runtimes by the runtime key), and the identities every service must
refuse with UNAUTHENTICATED, saying why: signed with a key outside the trusted set
(forged), with a stranger's key under a trusted kid (foreign), expired, unsigned
(`alg: none`), missing, over the 300 s lifetime, issued in the future, a runtime key
vouching for a user or for the operator role, and a service key vouching for another
service; and the identities runtime credentials are exchanged for (T2: the gateway's,
scoped to the credential's target), which may do what their runtime may and read no
inbox. Where the contract says "anyone else gets
NOT_FOUND", the test also checks that a real id the principal may not see gets the same
answer as a random id, so a guessed `call_id`, inbox or wake-up id reveals nothing.

Revoked API tokens belong to the gateway (bearer tokens -> signed identities) and are
checked there; MCP-level checks are pending (see docs/reliability.md).
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
import pytest

from agentworks.client import FunctionsClient, MessagingClient, SchedulerClient
from agentworks.common.v1 import common_pb2
from agentworks.core.identity import METADATA_KEY, mint
from agentworks.core.keys import KeyDirectory, SigningKey
from agentworks.functions.v1 import functions_pb2 as f
from agentworks.functions.v1 import functions_pb2_grpc
from agentworks.messaging.v1 import messaging_pb2 as m
from agentworks.messaging.v1 import messaging_pb2_grpc
from agentworks.scheduler.v1 import scheduler_pb2 as s
from agentworks.scheduler.v1 import scheduler_pb2_grpc

CREW = common_pb2.TargetRef(kind=common_pb2.TARGET_KIND_CREW, name="demo")

# name -> (principal, roles); the last four are identities no service may accept.
PRINCIPALS: dict[str, tuple[str, frozenset[str]]] = {
    "caller": ("user:alice", frozenset()),
    "owner": ("user:owner", frozenset()),
    "allowed": ("agent:alpha/scout", frozenset()),
    "disallowed": ("agent:beta/x", frozenset()),
    "stranger": ("user:mallory", frozenset()),
    "runtime": ("agent:demo/bot", frozenset()),
    "other_runtime": ("agent:other/bot", frozenset()),
    "operator": ("user:ops", frozenset({"operator"})),
    "forged": ("user:owner", frozenset({"operator"})),
    "foreign": ("user:owner", frozenset({"operator"})),
    "expired": ("user:owner", frozenset()),
    "unsigned": ("user:owner", frozenset({"operator"})),
    "missing": ("user:owner", frozenset()),
    "over_long": ("user:owner", frozenset()),
    "future": ("user:owner", frozenset()),
    "runtime_as_user": ("user:alice", frozenset()),
    "runtime_as_operator": ("service:runner", frozenset({"operator"})),
    "service_as_another": ("service:functions", frozenset()),
    # Identities exchanged for runtime credentials (T2): the gateway signs them with a
    # `targets` claim, the credential's own target only.
    "credential": ("agent:demo/bot", frozenset()),
    "other_credential": ("agent:other/bot", frozenset()),
}
SCOPED_TO = {"credential": "crew:demo", "other_credential": "crew:other"}
# Each identity no service may accept, and what its refusal must say.
BAD_IDENTITIES = {
    "forged": "is not a trusted key",
    "foreign": "the signature is not by key",
    "expired": "identity expired",
    "unsigned": "signed with 'none'",
    "missing": "missing identity",
    "over_long": "lifetime is 3600 s, over the maximum of 300 s",
    "future": "s in the future",
    "runtime_as_user": "signer service:runner may not vouch for user:alice",
    "runtime_as_operator": "signer service:runner may not give service:runner the role(s) operator",
    "service_as_another": "signer service:scheduler may not vouch for service:functions",
}
# Signed by the key of a runtime run as a service (T1: it vouches for itself only, with
# the runtime role at most); the good principals by the gateway's (runtimes' identities
# come from the gateway, T2).
BY_RUNNER = ("runtime_as_user", "runtime_as_operator")


def metadata(name: str, keys: KeyDirectory) -> tuple[tuple[str, str], ...]:
    principal, roles = PRINCIPALS[name]
    key = keys.ensure("service:runner" if name in BY_RUNNER else "gateway")[0]
    if name == "missing":
        return ()
    if name == "forged":
        token = mint(principal, SigningKey.generate("gateway"), roles=roles)
    elif name == "foreign":
        stranger = SigningKey.generate("gateway").private_key
        token = mint(principal, SigningKey(key.kid, key.signer, stranger), roles=roles)
    elif name == "expired":
        token = mint(principal, key, roles=roles, ttl_seconds=60, now=time.time() - 3600)
    elif name == "over_long":
        token = mint(principal, key, roles=roles, ttl_seconds=3600)
    elif name == "future":
        token = mint(principal, key, roles=roles, now=time.time() + 120)
    elif name in SCOPED_TO:
        token = mint(principal, key, roles=roles, targets={SCOPED_TO[name]})
    elif name == "service_as_another":
        token = mint(principal, keys.ensure("service:scheduler")[0], roles=roles)
    elif name == "unsigned":
        claims = {"sub": principal, "aud": "agentworks", "iat": int(time.time())}
        claims |= {"exp": int(time.time()) + 300, "roles": sorted(roles)}
        token = (
            ".".join(
                base64.urlsafe_b64encode(json.dumps(part).encode()).decode().rstrip("=")
                for part in ({"alg": "none", "typ": "JWT"}, claims)
            )
            + "."
        )
    else:
        token = mint(principal, key, roles=roles)
    return ((METADATA_KEY, token),)


@dataclass
class World:
    """Addresses, the ids the operations aim at, and trusted clients to prepare state."""

    stubs: dict[str, Any]
    ids: dict[str, str]
    prepare: dict[str, Any]


RPC = Callable[[str, str, Any], Awaitable[tuple[str, str]]]
Operation = Callable[[World, RPC], Awaitable[tuple[str, str]]]


async def fresh_call(world: World) -> str:
    """A new call of alice's on crew:demo (for operations that end it)."""
    receipt = await world.prepare["alice_f"].call("crew:demo", "echo", {"text": "again"})
    return receipt.call_id


# ------------------------------------------------------------------- the operations

OPERATIONS: dict[str, Operation] = {
    # functions
    "functions.ListFunctions": lambda w, rpc: rpc(
        "functions", "ListFunctions", f.ListFunctionsRequest(target=CREW)
    ),
    "functions.Call": lambda w, rpc: rpc(
        "functions",
        "Call",
        f.CallRequest(target=CREW, function="echo", inputs_json='{"text": "x"}'),
    ),
    "functions.GetStatus": lambda w, rpc: rpc(
        "functions", "GetStatus", f.GetStatusRequest(call_id=w.ids["call"])
    ),
    "functions.ReadFile": lambda w, rpc: rpc(
        "functions", "ReadFile", f.ReadFileRequest(call_id=w.ids["call"], file="out.txt")
    ),
    "functions.Reply": lambda w, rpc: rpc(
        "functions", "Reply", f.ReplyRequest(call_id=w.ids["call"], text="yes")
    ),
    "functions.Cancel": lambda w, rpc: _cancel(w, rpc),
    "functions.DeclareFunction": lambda w, rpc: rpc(
        "functions",
        "DeclareFunction",
        f.DeclareFunctionRequest(
            function=f.Function(target=CREW, name="extra", input_schema_json='{"type": "object"}')
        ),
    ),
    "functions.RegisterTarget": lambda w, rpc: rpc(
        "functions",
        "RegisterTarget",
        f.RegisterTargetRequest(
            ref=common_pb2.TargetRef(kind=common_pb2.TARGET_KIND_CREW, name="made"),
            owner="user:owner",
            running_limit=2,
        ),
    ),
    "functions.ClaimExecution": lambda w, rpc: rpc(
        "functions", "ClaimExecution", f.ClaimExecutionRequest(targets=[CREW])
    ),
    "functions.Report": lambda w, rpc: rpc(
        "functions", "Report", f.ReportRequest(call_id=w.ids["call"], progress="p")
    ),
    "functions.HeartbeatExecution": lambda w, rpc: rpc(
        "functions", "HeartbeatExecution", f.HeartbeatExecutionRequest(call_id=w.ids["call"])
    ),
    # listing (V1): everyone may list; what each sees the services' test_listing.py check
    "functions.ListCalls": lambda w, rpc: rpc("functions", "ListCalls", f.ListCallsRequest()),
    "functions.ListTargets": lambda w, rpc: rpc("functions", "ListTargets", f.ListTargetsRequest()),
    "messaging.ListConversations": lambda w, rpc: rpc(
        "messaging", "ListConversations", m.ListConversationsRequest()
    ),
    "messaging.ListTargets": lambda w, rpc: rpc("messaging", "ListTargets", m.ListTargetsRequest()),
    # messaging
    "messaging.Read": lambda w, rpc: rpc(
        "messaging", "Read", m.ReadRequest(inbox_id=w.ids["inbox"])
    ),
    "messaging.Send(inbox)": lambda w, rpc: rpc(
        "messaging", "Send", m.SendRequest(inbox_id=w.ids["inbox"], text="more")
    ),
    "messaging.GetTranscript": lambda w, rpc: rpc(
        "messaging", "GetTranscript", m.GetTranscriptRequest(conversation_id=w.ids["conversation"])
    ),
    "messaging.SendMessage": lambda w, rpc: rpc(
        "messaging", "SendMessage", m.SendMessageRequest(inbox_id=w.ids["inbox"], text="reply")
    ),
    "messaging.ClaimTurn": lambda w, rpc: rpc(
        "messaging", "ClaimTurn", m.ClaimTurnRequest(targets=[CREW])
    ),
    "messaging.EnqueueDelivery": lambda w, rpc: rpc(
        "messaging",
        "EnqueueDelivery",
        m.EnqueueDeliveryRequest(
            conversation_id=w.ids["conversation"],
            kind=m.DELIVERY_KIND_WAKE_UP,
            idempotency_key=f"k-{uuid.uuid4()}",
        ),
    ),
    "messaging.EnqueueDeliveries": lambda w, rpc: rpc(
        "messaging",
        "EnqueueDeliveries",
        m.EnqueueDeliveriesRequest(
            items=[
                m.EnqueueDeliveryRequest(
                    conversation_id=w.ids["conversation"],
                    kind=m.DELIVERY_KIND_WAKE_UP,
                    idempotency_key=f"k-{uuid.uuid4()}",
                )
            ]
        ),
    ),
    # scheduler
    "scheduler.CreateWakeUp": lambda w, rpc: rpc(
        "scheduler",
        "CreateWakeUp",
        s.CreateWakeUpRequest(conversation_id=w.ids["conversation"], delay_seconds=3600),
    ),
    "scheduler.GetWakeUp": lambda w, rpc: rpc(
        "scheduler", "GetWakeUp", s.GetWakeUpRequest(wake_up_id=w.ids["wake_up"])
    ),
    "scheduler.CancelWakeUp": lambda w, rpc: _cancel_wake_up(w, rpc),
    "scheduler.GetSchedule": lambda w, rpc: rpc(
        "scheduler", "GetSchedule", s.GetScheduleRequest(schedule_id=w.ids["schedule"])
    ),
    "scheduler.GetWebhook": lambda w, rpc: rpc(
        "scheduler", "GetWebhook", s.GetWebhookRequest(webhook_id=w.ids["webhook"])
    ),
    "scheduler.Pause": lambda w, rpc: rpc("scheduler", "Pause", s.PauseRequest(product="crew:x")),
}


async def _cancel(world: World, rpc: RPC) -> tuple[str, str]:
    return await rpc("functions", "Cancel", f.CancelRequest(call_id=await fresh_call(world)))


async def _cancel_wake_up(world: World, rpc: RPC) -> tuple[str, str]:
    """Cancel a new wake-up of the runtime's in alice's conversation."""
    fresh = await world.prepare["bot_s"].create_wake_up(
        world.ids["conversation"], delay_seconds=3600
    )
    return await rpc(
        "scheduler", "CancelWakeUp", s.CancelWakeUpRequest(wake_up_id=fresh.wake_up_id)
    )


OK, NF, PD = "OK", "NOT_FOUND", "PERMISSION_DENIED"
FP = "FAILED_PRECONDITION"
# The expected status per operation and principal (the bad identities always get
# UNAUTHENTICATED and are not repeated here).


def row(*codes: str) -> dict[str, str]:
    """One operation's codes for the good principals but the scoped ones (added below)."""
    good = [name for name in PRINCIPALS if name not in BAD_IDENTITIES and name not in SCOPED_TO]
    assert len(codes) == len(good)
    return dict(zip(good, codes, strict=True))


# fmt: off
EXPECTED: dict[str, dict[str, str]] = {
    #                          caller owner allowed disallowed stranger runtime other_rt operator
    "functions.ListFunctions":  row(OK, OK, OK, OK, OK, OK, OK, OK),
    "functions.Call":           row(OK, OK, OK, NF, NF, NF, NF, NF),
    # The operator reads the status of and cancels any call (V1: it lists them all),
    # but neither reads its files nor answers it, and is told so (PERMISSION_DENIED).
    "functions.GetStatus":      row(OK, OK, NF, NF, NF, NF, NF, OK),
    "functions.ReadFile":       row(OK, OK, NF, NF, NF, NF, NF, PD),
    "functions.Reply":          row(FP, FP, NF, NF, NF, NF, NF, PD),
    "functions.Cancel":         row(OK, OK, NF, NF, NF, NF, NF, OK),
    "functions.DeclareFunction": row(PD, OK, PD, PD, PD, PD, PD, PD),
    "functions.RegisterTarget": row(PD, PD, PD, PD, PD, PD, PD, OK),
    "functions.ClaimExecution": row(PD, PD, PD, PD, PD, OK, PD, PD),
    "functions.Report":         row(NF, NF, NF, NF, NF, OK, NF, NF),
    "functions.HeartbeatExecution": row(NF, NF, NF, NF, NF, OK, NF, NF),
    "functions.ListCalls":      row(OK, OK, OK, OK, OK, OK, OK, OK),
    "functions.ListTargets":    row(OK, OK, OK, OK, OK, OK, OK, OK),
    "messaging.ListConversations": row(OK, OK, OK, OK, OK, OK, OK, OK),
    "messaging.ListTargets":    row(OK, OK, OK, OK, OK, OK, OK, OK),
    "messaging.Read":           row(OK, NF, NF, NF, NF, NF, NF, NF),
    "messaging.Send(inbox)":    row(OK, NF, NF, NF, NF, NF, NF, NF),
    "messaging.GetTranscript":  row(OK, OK, NF, NF, NF, OK, NF, OK),
    "messaging.SendMessage":    row(NF, NF, NF, NF, NF, OK, NF, NF),
    "messaging.ClaimTurn":      row(PD, PD, PD, PD, PD, OK, PD, PD),
    "messaging.EnqueueDelivery": row(PD, PD, PD, PD, PD, PD, PD, OK),
    "messaging.EnqueueDeliveries": row(PD, PD, PD, PD, PD, PD, PD, OK),
    "scheduler.CreateWakeUp":   row(PD, PD, NF, NF, PD, OK, NF, OK),
    # The target's owner sees what its agents attach (V1) but does not change it.
    "scheduler.GetWakeUp":      row(NF, OK, NF, NF, NF, OK, NF, OK),
    "scheduler.CancelWakeUp":   row(NF, PD, NF, NF, NF, OK, NF, OK),
    "scheduler.GetSchedule":    row(NF, OK, NF, NF, NF, OK, NF, OK),
    "scheduler.GetWebhook":     row(NF, OK, NF, NF, NF, OK, NF, OK),
    "scheduler.Pause":          row(PD, PD, PD, PD, PD, PD, PD, OK),
}
# fmt: on
# A runtime credential's identity may do what its runtime may, within its targets, and
# reads no inbox (T2): PERMISSION_DENIED there, whose inbox it is or not.
for _operation, _row in EXPECTED.items():
    _no_inbox = _operation == "messaging.Read"
    _row["credential"] = PD if _no_inbox else _row["runtime"]
    _row["other_credential"] = PD if _no_inbox else _row["other_runtime"]

# Operations whose NOT_FOUND must look exactly like the one for a random id: (operation,
# the world id it aims at).
GUESSES = {
    "functions.GetStatus": "call",
    "functions.ReadFile": "call",
    "functions.Reply": "call",
    "functions.Report": "call",
    "functions.HeartbeatExecution": "call",
    "messaging.Read": "inbox",
    "messaging.Send(inbox)": "inbox",
    "messaging.GetTranscript": "conversation",
    "messaging.SendMessage": "inbox",
    "scheduler.GetWakeUp": "wake_up",
    "scheduler.GetSchedule": "schedule",
    "scheduler.GetWebhook": "webhook",
}


@pytest.fixture
async def world(start_messaging, start_functions, start_scheduler, identity):
    """crew:demo (owner user:owner, runtime agent:demo/bot) on all three services; alice
    has a conversation, and a call with a file claimed by the runtime; the runtime has a
    wake-up, a schedule and a webhook in alice's conversation."""
    messaging = await start_messaging()
    functions = await start_functions()
    scheduler = await start_scheduler(SCHEDULER_MESSAGING_ADDRESS=messaging.address)
    ops = identity("user:ops", {"operator"})
    clients: dict[str, Any] = {
        "ops_m": MessagingClient(messaging.address, identity=ops),
        "ops_f": FunctionsClient(functions.address, identity=ops),
        "owner_f": FunctionsClient(functions.address, identity=identity("user:owner")),
        "alice_m": MessagingClient(messaging.address, identity=identity("user:alice")),
        "alice_f": FunctionsClient(functions.address, identity=identity("user:alice")),
        "bot_f": FunctionsClient(functions.address, identity=identity("agent:demo/bot")),
        "bot_s": SchedulerClient(scheduler.address, identity=identity("agent:demo/bot")),
    }
    await clients["ops_m"].register_target("crew:demo", owner="user:owner")
    await clients["ops_f"].register_target("crew:demo", owner="user:owner", running_limit=100)
    await clients["owner_f"].declare_function(
        "crew:demo",
        "echo",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
        allowed_callers=["user:alice", "agent:alpha/*"],
    )
    receipt = await clients["alice_m"].send("hello", target="crew:demo")
    call = await clients["alice_f"].call("crew:demo", "echo", {"text": "x"})
    execution = await clients["bot_f"].claim_execution(["crew:demo"], lease_seconds=300)
    assert execution is not None and execution.call_id == call.call_id
    await clients["bot_f"].upload_file(call.call_id, "out.txt", b"data")
    wake_up = await clients["bot_s"].create_wake_up(receipt.conversation_id, delay_seconds=3600)
    schedule = await clients["bot_s"].create_schedule(
        receipt.conversation_id, "p", interval_seconds=3600
    )
    webhook = await clients["bot_s"].create_webhook(receipt.conversation_id, name="ci")
    channels = {
        name: grpc.aio.insecure_channel(running.address)
        for name, running in (
            ("messaging", messaging),
            ("functions", functions),
            ("scheduler", scheduler),
        )
    }
    stubs = {
        "messaging": messaging_pb2_grpc.MessagingServiceStub(channels["messaging"]),
        "functions": functions_pb2_grpc.FunctionsServiceStub(channels["functions"]),
        "scheduler": scheduler_pb2_grpc.SchedulerServiceStub(channels["scheduler"]),
    }
    ids = {
        "call": call.call_id,
        "inbox": receipt.inbox_id,
        "conversation": receipt.conversation_id,
        "wake_up": wake_up.wake_up_id,
        "schedule": schedule.schedule_id,
        "webhook": webhook.webhook_id,
    }
    yield World(stubs, ids, clients)
    for client in clients.values():
        await client.close()
    for channel in channels.values():
        await channel.close()


def rpc_as(world: World, name: str, key: KeyDirectory) -> RPC:
    async def rpc(service: str, method: str, request: Any) -> tuple[str, str]:
        try:
            await getattr(world.stubs[service], method)(
                request, metadata=metadata(name, key), timeout=10
            )
        except grpc.aio.AioRpcError as exc:
            return exc.code().name, exc.details() or ""
        return "OK", ""

    return rpc


@pytest.mark.reliability(
    scenario="Access matrix at the gRPC level (A1, A2, A3, C3, F2, S1, T1, T4)",
    action=f"{len(OPERATIONS)} operations on messaging, functions and scheduler, each as "
    f"{len(PRINCIPALS)} principals: caller, owner, allowed and disallowed caller, stranger, "
    "the target's runtime, another crew's runtime, operator, and forged (untrusted key), "
    "foreign (a stranger's key under a trusted kid), expired, unsigned (alg none), missing, "
    "over-long (3600 s), future-dated, runtime-signed user and operator, and a service "
    "signing for another service",
    check="the expected status in every cell; every bad identity UNAUTHENTICATED saying "
    "why; a real "
    "call_id, inbox, conversation, wake-up, schedule or webhook id someone may not see answers "
    "NOT_FOUND exactly like a random id",
)
@pytest.mark.parametrize("service", ["functions", "messaging", "scheduler"])
async def test_access_matrix_A2_A3_T1_T4(world, signing_keys, service):
    """A2 A3 T1 T4: the rows of this service's operations — each as every principal."""
    wrong = []
    for operation in [op for op in OPERATIONS if op.startswith(f"{service}.")]:
        for name in PRINCIPALS:
            wrong += await check_cell(world, signing_keys, operation, name)
    assert not wrong, "\n".join(wrong)


async def check_cell(world: World, key: KeyDirectory, operation: str, name: str) -> list[str]:
    """Mismatches of one cell (empty when it holds)."""
    expected = "UNAUTHENTICATED" if name in BAD_IDENTITIES else EXPECTED[operation][name]
    code, details = await OPERATIONS[operation](world, rpc_as(world, name, key))
    wrong = []
    if code != expected:
        wrong.append(f"{operation} as {name}: expected {expected}, got {code} ({details})")
    elif name in BAD_IDENTITIES and BAD_IDENTITIES[name] not in details:
        wrong.append(f"{operation} as {name}: {details!r} does not say {BAD_IDENTITIES[name]!r}")
    if expected == "NOT_FOUND" and operation in GUESSES:
        what = GUESSES[operation]
        real, guessed = world.ids[what], str(uuid.uuid4())
        probe = World(world.stubs, {**world.ids, what: guessed}, world.prepare)
        code2, details2 = await OPERATIONS[operation](probe, rpc_as(world, name, key))
        if (code2, details2.replace(guessed, "<id>")) != (code, details.replace(real, "<id>")):
            wrong.append(
                f"{operation} as {name}: a real {what} id answers {code} {details!r}, a "
                f"random one {code2} {details2!r} — the difference reveals that it exists"
            )
    return wrong


def test_matrix_covers_every_principal_and_operation():
    """The table is complete: one expectation per (operation, principal)."""
    good = [p for p in PRINCIPALS if p not in BAD_IDENTITIES]
    assert set(EXPECTED) == set(OPERATIONS)
    assert all(list(row) == good for row in EXPECTED.values())


def RELIABILITY_APPENDIX() -> str:
    """The matrix itself, for docs/reliability.md."""
    good = [name for name in PRINCIPALS if name not in BAD_IDENTITIES]
    header = ["operation", *good, " / ".join(BAD_IDENTITIES).replace("_", " ")]
    lines = [
        "## Access matrix (tests/test_access_matrix.py)",
        "",
        "Principals: " + "; ".join(f"{n} = `{PRINCIPALS[n][0]}`" for n in good) + ".",
        "NOT_FOUND cells marked * were also checked to answer exactly like a random id.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for operation, row_ in EXPECTED.items():
        star = "*" if operation in GUESSES else ""
        cells = [code + (star if code == "NOT_FOUND" else "") for code in row_.values()]
        lines.append(f"| {operation} | " + " | ".join(cells) + " | UNAUTHENTICATED |")
    return "\n".join(lines) + "\n" + _capability_appendix()


# ------------------------------------------------------------- capabilities (T3)

# What a capability may do, per operation: the capability of the world's call (claimed by
# agent:demo/bot) and of a turn of alice's conversation (claimed by the same runtime).
# Everything but the item's own operations and the function tools is PERMISSION_DENIED;
# the function tools act as the claimer (L1, L8) and see only the calls the item made:
# NOT_FOUND for the world's call (alice's), and for echo, which the bot may not call.
# fmt: off
CAPABILITY_EXPECTED: dict[str, tuple[str, str]] = {
    #                             execution turn
    "functions.ListFunctions":      (OK, OK),
    "functions.Call":               (NF, PD),  # a turn's Call must notify its conversation
    "functions.GetStatus":          (NF, NF),
    "functions.ReadFile":           (PD, NF),
    "functions.Reply":              (NF, NF),
    "functions.Cancel":             (PD, PD),
    "functions.DeclareFunction":    (PD, PD),
    "functions.RegisterTarget":     (PD, PD),
    "functions.ClaimExecution":     (PD, PD),
    "functions.Report":             (OK, PD),
    "functions.HeartbeatExecution": (OK, PD),
    "functions.ListCalls":          (PD, PD),
    "functions.ListTargets":        (PD, PD),
    "messaging.ListConversations":  (PD, PD),
    "messaging.ListTargets":        (PD, PD),
    "messaging.Read":               (PD, PD),
    "messaging.Send(inbox)":        (PD, PD),
    "messaging.GetTranscript":      (PD, OK),
    "messaging.SendMessage":        (PD, OK),
    "messaging.ClaimTurn":          (PD, PD),
    "messaging.EnqueueDelivery":    (PD, PD),
    "messaging.EnqueueDeliveries":  (PD, PD),
    "scheduler.CreateWakeUp":       (PD, OK),
    "scheduler.GetWakeUp":          (PD, OK),
    "scheduler.CancelWakeUp":       (PD, OK),
    "scheduler.GetSchedule":        (PD, PD),
    "scheduler.GetWebhook":         (PD, PD),
    "scheduler.Pause":              (PD, PD),
}
# fmt: on


async def capabilities(world: World, keys: KeyDirectory) -> dict[str, str]:
    """The world's execution capability (renewed by a heartbeat) and a turn's."""
    beat = await world.prepare["bot_f"].heartbeat_execution(world.ids["call"], lease_seconds=300)
    response = await world.stubs["messaging"].ClaimTurn(
        m.ClaimTurnRequest(targets=[CREW], lease_seconds=300),
        metadata=metadata("runtime", keys),
        timeout=10,
    )
    assert response.turn.conversation_id == world.ids["conversation"]
    assert beat.capability and response.turn.capability
    return {"execution": beat.capability, "turn": response.turn.capability}


@pytest.mark.reliability(
    scenario="Access matrix: capabilities (T3)",
    action=f"the {len(OPERATIONS)} operations with the capability of an execution and of "
    "a turn (the claimer's principal, signed by functions and messaging)",
    check="OK for the item's own operations only (report and heartbeat of its call; "
    "reply, transcript and wake-ups of its conversation) and the function tools as the "
    "claimer (NOT_FOUND for a call the item did not make), PERMISSION_DENIED for "
    "everything else",
)
async def test_access_matrix_of_capabilities_T3(world, signing_keys):
    """T3 L1 L8: each operation with an execution's and a turn's capability."""
    tokens = await capabilities(world, signing_keys)
    wrong = []
    for operation, expected in CAPABILITY_EXPECTED.items():
        for kind, code_expected in zip(("execution", "turn"), expected, strict=True):

            async def rpc(service: str, method: str, request: Any, token=tokens[kind]):
                try:
                    await getattr(world.stubs[service], method)(
                        request, metadata=((METADATA_KEY, token),), timeout=10
                    )
                except grpc.aio.AioRpcError as exc:
                    return exc.code().name, exc.details() or ""
                return "OK", ""

            code, details = await OPERATIONS[operation](world, rpc)
            if code != code_expected:
                wrong.append(f"{operation} with a {kind} capability: {code} ({details})")
    assert not wrong, "\n".join(wrong)


def test_capability_matrix_covers_every_operation_T3():
    """T3: one expectation per operation for each kind of capability."""
    assert set(CAPABILITY_EXPECTED) == set(OPERATIONS)


def _capability_appendix() -> str:
    """The capability columns (T3), for docs/reliability.md."""
    lines = [
        "",
        "Capabilities (T3): the capability of the call claimed by `agent:demo/bot`, and "
        "of its turn of alice's conversation.",
        "",
        "| operation | execution capability | turn capability |",
        "|---|---|---|",
    ]
    for operation, (execution, turn) in CAPABILITY_EXPECTED.items():
        lines.append(f"| {operation} | {execution} | {turn} |")
    return "\n".join(lines) + "\n"
