"""The scheduler running in-process next to the root `messaging` fixture, plus clients.

Replicas (`start_scheduler`, from the root plugin `tests.fixtures.services`) share the
test's database and tick every 0.2 s. Tests wait on ticks
(`until(check, between=service.wait_ticks)`) and on messaging long-polls, never on the clock.
"""

from __future__ import annotations

import psycopg
import pytest

from agentworks.client import MessagingClient, SchedulerClient
from agentworks_scheduler.app import SchedulerRunning
from agentworks_scheduler.service import SchedulerService

CREW = "crew:demo"
BOT = "agent:demo/bot"


@pytest.fixture
async def scheduler(start_scheduler) -> SchedulerRunning:
    """The scheduler service, running in-process; `.address` is its host:port."""
    return await start_scheduler()


@pytest.fixture
def service(scheduler) -> SchedulerService:
    return scheduler.service


@pytest.fixture
async def clients(messaging, scheduler, identity):
    """`await clients.messaging(principal)` / `await clients.scheduler(principal, roles)`."""
    made: list[MessagingClient | SchedulerClient] = []

    class Clients:
        @staticmethod
        async def messaging(principal: str, roles: frozenset[str] | set[str] = frozenset()):
            client = MessagingClient(messaging.address, identity=identity(principal, roles))
            made.append(client)
            return client

        @staticmethod
        async def scheduler(
            principal: str, roles: frozenset[str] | set[str] = frozenset(), address: str = ""
        ):
            client = SchedulerClient(
                address or scheduler.address, identity=identity(principal, roles)
            )
            made.append(client)
            return client

    yield Clients
    for client in made:
        await client.close()


@pytest.fixture
async def demo(clients):
    """crew:demo registered in messaging, owned by user:owner."""
    ops = await clients.messaging("user:ops", {"operator"})
    await ops.register_target(CREW, owner="user:owner")
    return CREW


@pytest.fixture
async def bot(clients, demo):
    """The demo crew's agent, on messaging."""
    return await clients.messaging(BOT)


@pytest.fixture
async def alice(clients, demo):
    return await clients.messaging("user:alice")


@pytest.fixture
async def opened(alice, bot, demo):
    """The receipt of a conversation alice started with crew:demo, first turn handled."""
    receipt = await alice.send("hello", target=demo)
    turn = await bot.claim_turn([demo], wait_seconds=5)
    assert turn is not None and turn.conversation_id == receipt.conversation_id
    await bot.complete_turn(turn.turn_id)
    return receipt


@pytest.fixture
def conversation(opened) -> str:
    return opened.conversation_id


@pytest.fixture
async def sql(database_url):
    """`await sql(query, *params)` -> rows, on the test database (messaging + scheduler)."""
    conn = await psycopg.AsyncConnection.connect(database_url, autocommit=True)

    async def run(query: str, *params) -> list[tuple]:
        cur = await conn.execute(query, params)
        return await cur.fetchall() if cur.description else []

    yield run
    await conn.close()


@pytest.fixture
def deliveries(sql):
    """`await deliveries(conversation_id, kind)` -> [(idempotency_key, text, attributes)]."""

    async def rows(conversation_id: str, kind: str) -> list[tuple]:
        return await sql(
            "SELECT idempotency_key, text, attributes FROM messaging.deliveries "
            "WHERE conversation_id = %s AND kind = %s ORDER BY position",
            conversation_id,
            kind,
        )

    return rows
