"""The whole contract through two replicas of every service (P3, P5).

Each client holds one round-robin channel over both replicas of a service
(`host:a,host:b`), so consecutive calls land on different processes' code paths,
listeners and pools, coordinated only through PostgreSQL.
"""

from __future__ import annotations

import asyncio

import pytest

from agentworks.client import FunctionsClient, MessagingClient, SchedulerClient
from agentworks.client.functions import state_name
from agentworks.core.capability_identity import CapabilityIdentity
from agentworks.core.errors import Busy
from agentworks.messaging.v1 import messaging_pb2 as pb
from agentworks.server.testing import service_env

pytestmark = pytest.mark.timeout(120)


async def start_pair(module: str, prefix: str, env: dict[str, str]) -> list:
    import importlib

    config_mod = importlib.import_module(f"{module}.config")
    app_mod = importlib.import_module(f"{module}.app")
    return [await app_mod.start(config_mod.Config.from_env(dict(env))) for _ in range(2)]


@pytest.fixture
async def suite(database_url, signing_keys):
    """Two replicas each of messaging, functions and scheduler; their address lists."""
    running = []
    try:
        messaging = await start_pair(
            "agentworks_messaging",
            "MESSAGING",
            service_env(database_url, signing_keys, "MESSAGING", MESSAGING_SWEEP_SECONDS="0.2"),
        )
        running += messaging
        messaging_addresses = ",".join(r.address for r in messaging)
        functions = await start_pair(
            "agentworks_functions",
            "FUNCTIONS",
            service_env(
                database_url,
                signing_keys,
                "FUNCTIONS",
                FUNCTIONS_MESSAGING_ADDRESS=messaging_addresses,
                FUNCTIONS_NOTICE_RETRY_SECONDS="0.2",
                FUNCTIONS_SWEEP_SECONDS="0.2",
            ),
        )
        running += functions
        scheduler = await start_pair(
            "agentworks_scheduler",
            "SCHEDULER",
            service_env(
                database_url,
                signing_keys,
                "SCHEDULER",
                SCHEDULER_MESSAGING_ADDRESS=messaging_addresses,
                SCHEDULER_TICK_SECONDS="0.2",
            ),
        )
        running += scheduler
        yield {
            "messaging": messaging_addresses,
            "functions": ",".join(r.address for r in functions),
            "scheduler": ",".join(r.address for r in scheduler),
        }
    finally:
        for r in running:
            await r.stop(0)


async def test_the_contract_holds_across_two_replicas_of_everything_P3_P5_C10_F5_S6(
    suite, identity
):
    """P3 P5 C4 C7 C10 F5 F6 F13 S2 S6: sends, dedup, long-poll reads, turns, calls at a
    running limit, completion notices and a wake-up, all through round-robin channels."""

    def m(principal, roles=frozenset()):
        return MessagingClient(suite["messaging"], identity=identity(principal, roles))

    def f(principal, roles=frozenset()):
        return FunctionsClient(suite["functions"], identity=identity(principal, roles))

    async with (
        m("user:ops", {"operator"}) as ops_m,
        f("user:ops", {"operator"}) as ops_f,
        f("user:owner") as owner_f,
        m("user:alice") as alice,
        m("agent:demo/bot") as bot,
        f("agent:demo/bot") as runtime,
        SchedulerClient(suite["scheduler"], identity=identity("agent:demo/bot")) as bot_s,
    ):
        await ops_m.register_target("crew:demo", owner="user:owner")
        await ops_f.register_target("crew:demo", owner="user:owner", running_limit=2)
        await owner_f.declare_function(
            "crew:demo",
            "echo",
            input_schema={
                "type": "object",
                "properties": {"x": {"type": "integer"}},
                "required": ["x"],
                "additionalProperties": False,
            },
            allowed_callers=["agent:demo/*", "user:*"],
        )

        # Conversations: retries deduplicated whichever replica takes them (C4).
        receipts = await asyncio.gather(
            *(alice.send("hello", target="crew:demo", submission_id="r-1") for _ in range(10))
        )
        assert len({r.message_id for r in receipts}) == 1
        receipt = receipts[0]

        # A reader long-polls (some replica) while the reply goes through another (C7).
        waiting = asyncio.create_task(alice.read(receipt.inbox_id, wait_seconds=20))
        turn = await bot.claim_turn(["crew:demo"], wait_seconds=10)
        assert [d.message.text for d in turn.deliveries] == ["hello"]
        assert await bot.claim_turn(["crew:demo"]) is None  # one turn at a time (C10)
        await bot.send_message(turn.reply_inbox_id, "hi")
        # The agent calls from its turn, with the turn's capability: the one identity
        # that may have the notices come to this conversation (L6).
        agent_caller = FunctionsClient(
            suite["functions"], identity=CapabilityIdentity(turn.capability)
        )
        await bot.complete_turn(turn.turn_id)
        page = await asyncio.wait_for(waiting, 25)
        assert [msg.text for msg in page.messages] == ["hi"]

        # Functions: the running limit is exact across replicas (F5) and a retry recovers
        # its call even while busy (F6).
        results = await asyncio.gather(
            *(
                agent_caller.call(
                    "crew:demo",
                    "echo",
                    {"x": i},
                    submission_id=f"c-{i}",
                    notify_conversation_id=receipt.conversation_id,
                )
                for i in range(8)
            ),
            return_exceptions=True,
        )
        accepted = [r for r in results if not isinstance(r, BaseException)]
        assert len(accepted) == 2
        assert all(isinstance(r, Busy) for r in results if isinstance(r, Exception))
        first_index = next(i for i, r in enumerate(results) if not isinstance(r, Exception))
        again = await agent_caller.call(
            "crew:demo",
            "echo",
            {"x": first_index},
            submission_id=f"c-{first_index}",
            notify_conversation_id=receipt.conversation_id,
        )
        assert again.call_id == accepted[0].call_id
        await agent_caller.close()

        # A runtime finishes both executions through either replica.
        for _ in accepted:
            execution = await runtime.claim_execution(["crew:demo"], wait_seconds=10)
            assert execution is not None
            await runtime.finish_execution(execution.call_id, final_message="done")
        for r in accepted:
            status = await runtime.wait(r.call_id, timeout=20)
            assert state_name(status.status) == "completed" and status.answer == "done"

        # The completion notices (F13) and a wake-up (S2) arrive in the conversation's
        # turn queue, each exactly once (S6).
        await bot_s.create_wake_up(receipt.conversation_id, delay_seconds=0, note="check")
        kinds: list[int] = []
        for _ in range(50):
            turn = await bot.claim_turn(["crew:demo"], wait_seconds=5)
            if turn is None:
                break
            kinds += [d.kind for d in turn.deliveries]
            await bot.complete_turn(turn.turn_id)
            if len(kinds) >= 3:
                break
        assert sorted(kinds) == sorted(
            [pb.DELIVERY_KIND_FUNCTION_COMPLETED] * 2 + [pb.DELIVERY_KIND_WAKE_UP]
        )
        assert await bot.claim_turn(["crew:demo"], wait_seconds=1) is None
