"""The A2A round trip: a2a-sdk's client -> our gateway's A2A binding (X1-X3) beside
a2a-sdk's client -> a2a-sdk's own server (bench/a2a_server.py), in the same run.

Ours: a conversation message (`SendStreamingMessage`, no skill) to crew:bench through
the gateway, a runtime's turn replies once, and the reply arrives on the stream as the
task's status update; the client then closes the stream. Theirs: `message/send` to the
a2a-sdk agent whose executor replies and completes the task in its DatabaseTaskStore.
Each caller keeps one conversation (one context) and sends into it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator

import httpx

from agentworks.client import FunctionsClient, MessagingClient
from agentworks.core.identity import Minter
from agentworks.runtime.turns import TurnContext, TurnWorker
from agentworks_gateway.tokens import ensure_token, new_token
from bench.conversation import (
    Figures,
    RoundTrip,
    a2a_available,
    a2a_system,
    closed_loop,
    measure,
    peer_database,
)
from bench.functions import CpuMeter
from bench.gateway import start_gateway
from bench.harness import Processes, Report, Row, median, percentile

TARGET = "crew:bench"
RUNTIMES = 4
CONCURRENCY = 8
ROUNDS = 3


@contextlib.asynccontextmanager
async def our_system(procs: Processes) -> AsyncIterator[RoundTrip]:
    from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
    from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest

    messaging = procs.start("agentworks_messaging", "MESSAGING")
    functions = procs.start(
        "agentworks_functions", "FUNCTIONS", FUNCTIONS_MESSAGING_ADDRESS=messaging
    )
    ops = Minter("user:ops", procs.key, roles={"operator"})
    async with (
        MessagingClient(messaging, identity=ops) as m,
        FunctionsClient(functions, identity=ops) as f,
    ):
        await m.register_target(TARGET, owner="user:owner")
        await f.register_target(TARGET, owner="user:owner")
    os.environ["GATEWAY_FUNCTIONS_ADDRESS"] = functions  # start_gateway passes os.environ on
    try:
        url = await asyncio.to_thread(start_gateway, procs, messaging)
    finally:
        del os.environ["GATEWAY_FUNCTIONS_ADDRESS"]
    token = new_token()
    await asyncio.to_thread(ensure_token, procs.database_url, token, "user:a2a-bench", set(), "b")

    async def reply(ctx: TurnContext) -> None:
        await ctx.send_message("benchmark reply", end_turn=True)

    workers = [
        TurnWorker(messaging, Minter(f"agent:bench/runtime-{i}", procs.key), [TARGET], reply)
        for i in range(RUNTIMES)
    ]
    tasks = [asyncio.create_task(w.run()) for w in workers]
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(timeout=60, limits=limits, headers=headers) as http:
        card = await A2ACardResolver(http, f"{url}/a2a/crew/bench").get_agent_card()
        client = ClientFactory(ClientConfig(streaming=True, httpx_client=http)).create(card)
        contexts: dict[int, str] = {}

        async def round_trip(slot: int) -> None:
            message = Message(
                role=Role.ROLE_USER,
                message_id=str(uuid.uuid4()),
                context_id=contexts.get(slot, ""),
                parts=[Part(text="benchmark message")],
            )
            stream = client.send_message(SendMessageRequest(message=message))
            try:
                async for event in stream:
                    if event.HasField("task"):
                        contexts[slot] = event.task.context_id
                    elif event.status_update.status.message.parts:
                        return
            finally:
                await stream.aclose()
            raise RuntimeError("the A2A stream ended without the reply")

        try:
            yield round_trip
        finally:
            for w in workers:
                w.stop()
            await asyncio.wait(tasks, timeout=30)


async def a2a_round_trip(procs: Processes, report: Report, seconds: float) -> None:
    """a2a-sdk's client: our gateway's conversation skill vs a2a-sdk's own server."""
    if not a2a_available():
        report.notes.append("a2a-sdk's server extras are not installed: the A2A row was skipped.")
        return
    ours, theirs = Figures(), Figures()
    peer_url = peer_database(procs)
    async with contextlib.AsyncExitStack() as stack:
        our_trip = await stack.enter_async_context(our_system(procs))
        their_trip = await stack.enter_async_context(a2a_system(procs, peer_url))
        meter = CpuMeter(procs.database_url, [c.pid for c in procs.children])
        # One trip alone first: a2a-sdk's DatabaseTaskStore creates its tables on first
        # use, and 32 first requests at once race to create them (a UniqueViolation).
        await their_trip(0)
        await closed_loop(our_trip, CONCURRENCY, 1.0)
        await closed_loop(their_trip, CONCURRENCY, 1.0)
        for _ in range(ROUNDS):
            await measure(our_trip, ours, meter, CONCURRENCY, seconds / ROUNDS)
            await measure(their_trip, theirs, meter, CONCURRENCY, seconds / ROUNDS)
    scenario = f"A2A round trip, a2a-sdk client, {CONCURRENCY} callers"
    baseline = "a2a-sdk 1.3 server, DatabaseTaskStore: message/send -> reply"
    for pct in (50, 99):
        report.add(
            Row(
                scenario,
                f"message -> agent reply, p{pct}",
                percentile(ours.latencies, pct),
                "ms",
                baseline,
                percentile(theirs.latencies, pct),
            )
        )
    report.add(
        Row(
            scenario,
            "round trips per second (median of rounds)",
            median(ours.throughputs),
            "trips/s",
            baseline,
            median(theirs.throughputs),
            "≥ 1.0 x a2a-sdk",
            median(ours.throughputs) >= median(theirs.throughputs),
        )
    )
    report.add(
        Row(
            scenario,
            "CPU per round trip (bench + services + PostgreSQL)",
            median(ours.cpu),
            "ms",
            baseline,
            median(theirs.cpu),
        )
    )
    report.notes.append(
        "A2A round trip: a2a-sdk 1.3's own client (JSON-RPC over httpx) against our "
        "gateway's A2A binding and against a2a-sdk's own server in the same run. Ours: "
        "a conversation message (`SendStreamingMessage`, no skill) into the caller's "
        f"conversation through the gateway, one of {RUNTIMES} SDK turn workers replies, "
        "and the reply arrives on the stream as a status update (the gateway reads it "
        "from messaging's Subscribe stream); the client then closes the stream. Theirs: "
        "`message/send` to bench/a2a_server.py, whose executor replies and completes the "
        f"task in its DatabaseTaskStore. {ROUNDS} alternating rounds, medians."
    )
