"""Completion notices for internal callers, through a durable outbox (F13)."""

from __future__ import annotations

import asyncio
import gc
from datetime import timedelta

import psycopg
import pytest

from agentworks.client import MessagingClient
from agentworks.client.messaging import attributes_json
from agentworks.core import errors
from agentworks.messaging.v1 import messaging_pb2 as m
from agentworks.server.db import Database, migrate
from agentworks.server.testing import until
from agentworks_functions.models import Delivered, GaveUp, RetryLater
from agentworks_functions.notices import notice_outcome
from agentworks_functions.store import FunctionsStore
from agentworks_functions.store.notices import NOTICE_LOCK
from tests.fixtures.plans import sorted_plans


async def ended_calls(clients, echo, conversations: list[str], turn_caller) -> list[str]:
    """An agent's calls of echo from a turn of each conversation to notify (with that
    turn's capability, L6), each finished by the runtime (so each queued its completion
    notice); their ids in that order."""
    runtime = await clients("agent:demo/bot")
    call_ids = []
    for conversation in conversations:
        scout = turn_caller("agent:alpha/scout", conversation)
        call = await scout.call(
            "crew:demo", echo, {"text": "hi"}, notify_conversation_id=conversation
        )
        await runtime.claim_execution(["crew:demo"], wait_seconds=5)
        await runtime.finish_execution(call.call_id, final_message="echo: hi")
        call_ids.append(call.call_id)
    return call_ids


async def test_completion_notice_reaches_the_callers_conversation_exactly_once_F13_L9(
    messaging, identity, clients, echo, functions, start_functions, database_url, turn_caller
):
    """F13: an agent's call ends -> one function_completed delivery in its conversation,

    even when the replica that ended the call could not reach messaging and stopped
    (a crash between finishing and notifying), and two other replicas then race to send it.
    """
    ops = MessagingClient(messaging.address, identity=identity("user:ops", {"operator"}))
    alice = MessagingClient(messaging.address, identity=identity("user:alice"))
    scout_chat = MessagingClient(messaging.address, identity=identity("agent:alpha/scout"))
    try:
        await ops.register_target("crew:alpha", owner="user:owner")
        receipt = await alice.send("please get an echo", target="crew:alpha")
        turn = await scout_chat.claim_turn(["crew:alpha"], wait_seconds=5)
        assert turn is not None
        await scout_chat.complete_turn(turn.turn_id)

        # The agent calls a function and asks for the notice in its conversation.
        [call_id] = await ended_calls(clients, echo, [receipt.conversation_id], turn_caller)
        # This replica has no messaging (127.0.0.1:1): the notice stays in the outbox.
        await functions.stop(0)
        async with await psycopg.AsyncConnection.connect(database_url) as conn:
            row = await (
                await conn.execute("SELECT delivered_at, attempts FROM functions.notices")
            ).fetchone()
        assert row is not None
        assert row[0] is None

        for _ in range(2):
            await start_functions(FUNCTIONS_MESSAGING_ADDRESS=messaging.address)
        notice_turn = await scout_chat.claim_turn(["crew:alpha"], wait_seconds=20)
        assert notice_turn is not None
        [delivery] = notice_turn.deliveries
        assert delivery.kind == m.DELIVERY_KIND_FUNCTION_COMPLETED
        assert attributes_json(delivery)["call_id"] == call_id
        assert attributes_json(delivery)["status"] == "completed"
        # It names the tool the turn reads the call with, not a command (L9).
        assert call_id in delivery.text and "get_function_call" in delivery.text
        assert "functions status" not in delivery.text
        await scout_chat.complete_turn(notice_turn.turn_id)

        async with await psycopg.AsyncConnection.connect(database_url) as conn:
            row = await (
                await conn.execute(
                    "SELECT count(*) FROM messaging.deliveries WHERE kind = 'function_completed'"
                )
            ).fetchone()
            assert row is not None
            assert row[0] == 1
            row = await (
                await conn.execute("SELECT delivered_at FROM functions.notices")
            ).fetchone()
            assert row is not None
            assert row[0] is not None
    finally:
        for client in (ops, alice, scout_chat):
            await client.close()


async def test_notices_sent_together_succeed_or_fail_each_on_its_own_F13(
    messaging, identity, clients, echo, functions, start_functions, database_url, turn_caller
):
    """F13: due notices go to messaging in one request; one for a conversation messaging
    does not know is recorded as failed and not retried, the others are delivered."""
    ops = MessagingClient(messaging.address, identity=identity("user:ops", {"operator"}))
    alice = MessagingClient(messaging.address, identity=identity("user:alice"))
    try:
        await ops.register_target("crew:alpha", owner="user:owner")
        known = (await alice.send("echo twice", target="crew:alpha")).conversation_id
        unknown = "00000000-0000-4000-8000-000000000000"
        conversations = [known, unknown, known]
        call_ids = await ended_calls(clients, echo, conversations, turn_caller)
        calls = dict(zip(call_ids, conversations, strict=True))
        # This replica has no messaging: the three notices wait in the outbox together.
        await functions.stop(0)
        await start_functions(FUNCTIONS_MESSAGING_ADDRESS=messaging.address)

        async with await psycopg.AsyncConnection.connect(database_url) as conn:

            async def settled() -> list[tuple] | None:
                rows = await (
                    await conn.execute(
                        "SELECT call_id::text, delivered_at IS NOT NULL, failed_at IS NOT NULL, "
                        "last_error_code FROM functions.notices"
                    )
                ).fetchall()
                ended = all(delivered or failed for _, delivered, failed, _ in rows)
                return rows if ended else None

            rows = await until(settled, 10, what="every notice delivered or failed")
            for call_id, delivered, failed, code in rows:
                if calls[call_id] == known:
                    assert (delivered, failed, code) == (True, False, None)
                else:
                    assert (delivered, failed, code) == (False, True, "NOT_FOUND")
            count = await (
                await conn.execute(
                    "SELECT count(*) FROM messaging.deliveries "
                    "WHERE kind = 'function_completed' AND conversation_id = %s",
                    (known,),
                )
            ).fetchone()
            assert count is not None
            assert count[0] == 2
    finally:
        for client in (ops, alice):
            await client.close()


async def test_a_batch_of_notices_records_each_outcome_and_backs_off_retries_F13(
    clients, echo, functions, database_url, turn_caller
):
    """F13: one sent batch records per notice delivered, failed for good, or due again
    after a backoff that doubles with each attempt; a notice not yet due is not sent."""
    order = await ended_calls(
        clients, echo, ["00000000-0000-4000-8000-00000000000a"] * 3, turn_caller
    )
    # The service's own sender has no messaging; stop it so that only this store sends.
    await functions.stop(0)
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(
            "UPDATE functions.notices SET attempts = 0, last_error = NULL, "
            "next_attempt_at = now() - interval '1 second'"
        )

    answers = dict(
        zip(
            order,
            [
                Delivered(),
                GaveUp("NOT_FOUND", "no such conversation"),
                RetryLater("UNAVAILABLE", "away", "MESSAGING_DOWN"),
            ],
            strict=True,
        )
    )
    sent: list[list[str]] = []

    async def send(notices):
        sent.append([n.call_id for n in notices])
        return [answers[n.call_id] for n in notices]

    db = Database(database_url, pool_size=2)
    await db.start()
    try:
        store = FunctionsStore(db, default_running_limit=10)
        retry_after = timedelta(seconds=30)
        assert await store.deliver_notices(send, retry_after=retry_after) == 3
        assert sorted(sent[0]) == sorted(order)
        # Nothing is due now: the transient failure waits out its backoff.
        assert await store.deliver_notices(send, retry_after=retry_after) == 0

        query = (
            "SELECT call_id::text, attempts, delivered_at IS NOT NULL, failed_at IS NOT NULL, "
            "last_error_code, last_error_reason, last_error, "
            "extract(epoch FROM next_attempt_at - now()) FROM functions.notices"
        )
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            rows = {r[0]: r[1:] for r in await (await conn.execute(query)).fetchall()}
            delivered, failed, again = (rows[c] for c in order)
            assert delivered[:6] == (1, True, False, None, None, None)
            assert failed[:6] == (1, False, True, "NOT_FOUND", None, "no such conversation")
            assert again[:6] == (1, False, False, "UNAVAILABLE", "MESSAGING_DOWN", "away")
            assert 25 < again[6] <= 30

            # Due again: the second attempt fails too and waits twice as long.
            await conn.execute(
                "UPDATE functions.notices SET next_attempt_at = now() WHERE call_id = %s",
                (order[2],),
            )
            assert await store.deliver_notices(send, retry_after=retry_after) == 1
            assert sent[-1] == [order[2]]
            rows = {r[0]: r[1:] for r in await (await conn.execute(query)).fetchall()}
            assert rows[order[2]][:6] == (2, False, False, "UNAVAILABLE", "MESSAGING_DOWN", "away")
            assert 55 < rows[order[2]][6] <= 60
            assert rows[order[0]][0] == rows[order[1]][0] == 1
    finally:
        await db.close()


async def test_no_transaction_is_open_while_notices_are_sent_and_a_claim_is_not_sent_twice_F13(
    clients, echo, functions, database_url, turn_caller
):
    """F13: notices are claimed in a short transaction and sent with none open (a slow
    messaging service holds no row lock and no connection in a transaction); while one
    replica sends a batch, another finds nothing to send, and after the send the
    outcome is recorded."""
    [call_id] = await ended_calls(
        clients, echo, ["00000000-0000-4000-8000-00000000000b"], turn_caller
    )
    await functions.stop(0)  # only the stores below send
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute("UPDATE functions.notices SET next_attempt_at = now()")

    db = Database(database_url, pool_size=4)
    await db.start()
    seen_while_sending: list[object] = []
    try:
        store = FunctionsStore(db, default_running_limit=10)
        other = FunctionsStore(db, default_running_limit=10)

        async def send(notices):
            async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
                # NOWAIT: a lock still held by an open claim transaction would refuse.
                locked = await (
                    await conn.execute(
                        "SELECT call_id FROM functions.notices WHERE call_id = %s "
                        "FOR UPDATE NOWAIT",
                        (call_id,),
                    )
                ).fetchall()
                seen_while_sending.append(len(locked))
                in_transaction = await (
                    await conn.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                        " AND state LIKE 'idle in transaction%'"
                    )
                ).fetchone()
                assert in_transaction is not None
                seen_while_sending.append(in_transaction[0])
            seen_while_sending.append(await other.deliver_notices(send, retry_after=timedelta(1)))
            return [Delivered() for _ in notices]

        assert await store.deliver_notices(send, retry_after=timedelta(seconds=30)) == 1
        assert seen_while_sending == [1, 0, 0]
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            row = await (
                await conn.execute(
                    "SELECT attempts, delivered_at IS NOT NULL FROM functions.notices "
                    "WHERE call_id = %s",
                    (call_id,),
                )
            ).fetchone()
        assert row == (1, True)
    finally:
        await db.close()


def test_messaging_refusals_that_every_retry_would_get_give_up_and_the_rest_retry_F13():
    """F13: a notice messaging took is delivered; one refused as INVALID_ARGUMENT,
    NOT_FOUND or ALREADY_EXISTS gives up (every retry would get the same answer); any
    other error (unreachable, busy, unauthenticated, a bug) is tried again later. The
    outcome keeps the status code's name, the message and the ErrorInfo reason."""
    assert notice_outcome(m.EnqueueDeliveryResponse()) == Delivered()
    for final in (errors.InvalidArgument, errors.NotFound, errors.Conflict):
        outcome = notice_outcome(final("no", reason="WHY"))
        assert outcome == GaveUp(final.code.name, "no", "WHY")
    for error in (
        errors.Unavailable,
        errors.Busy,
        errors.DeadlineExceeded,
        errors.Unauthenticated,
        errors.PermissionDenied,
        errors.PreconditionFailed,
        errors.Internal,
    ):
        assert notice_outcome(error("later")) == RetryLater(error.code.name, "later", "")


async def test_failures_recorded_as_prefixed_strings_move_to_the_typed_columns_F13(
    clients, echo, functions, database_url, turn_caller
):
    """F13: the migration that adds the typed columns moves a notice's code out of the
    old "permanent: CODE: message" / "retry: CODE: message" strings, keeping the message;
    any other text stays as it was, with no code."""
    order = await ended_calls(
        clients, echo, ["00000000-0000-4000-8000-00000000000c"] * 3, turn_caller
    )
    await functions.stop(0)
    old = [
        "permanent: NOT_FOUND: no such conversation",
        "retry: UNAVAILABLE: connection refused",
        "the messaging service is away",
    ]
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        # The schema as it was before the migration, holding the old strings.
        await conn.execute(
            "ALTER TABLE functions.notices DROP COLUMN last_error_code, "
            "DROP COLUMN last_error_reason"
        )
        await conn.execute("DELETE FROM functions.schema_migrations WHERE name = 'notice_outcomes'")
        for call_id, error in zip(order, old, strict=True):
            await conn.execute(
                "UPDATE functions.notices SET last_error = %s WHERE call_id = %s",
                (error, call_id),
            )

    assert await asyncio.to_thread(
        migrate, database_url, "functions", "agentworks_functions.migrations"
    ) == [6]

    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        rows = await (
            await conn.execute(
                "SELECT call_id::text, last_error_code, last_error_reason, last_error "
                "FROM functions.notices"
            )
        ).fetchall()
    found = {r[0]: r[1:] for r in rows}
    assert [found[c] for c in order] == [
        ("NOT_FOUND", None, "no such conversation"),
        ("UNAVAILABLE", None, "connection refused"),
        (None, None, "the messaging service is away"),
    ]


async def test_an_outbox_worker_cancelled_while_releasing_its_locks_leaves_no_task_behind_F13_P4(
    clients, echo, functions, database_url, turn_caller
):
    """F13 P4: a stopping service cancels the outbox worker; cancelled just as it
    releases the notices' advisory locks, it leaves no statement running on a connection
    the pool then closes (that task's error was logged at every such stop: "Task
    exception was never retrieved ... connection pointer is NULL"), its locks are
    released, and the notice is sent on the next attempt."""
    await ended_calls(clients, echo, ["00000000-0000-4000-8000-00000000000c"], turn_caller)
    await functions.stop(0)  # only the store below sends
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute("UPDATE functions.notices SET next_attempt_at = now()")

    loop = asyncio.get_running_loop()
    unhandled: list[dict] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: unhandled.append(context))
    db = Database(database_url, pool_size=2)
    await db.start()
    try:
        store = FunctionsStore(db, default_running_limit=10)

        async def send_then_stop(notices):
            # The cancel lands at the next await: the release of the locks.
            loop.call_soon(worker.cancel)
            raise RuntimeError("messaging went away")

        worker = asyncio.create_task(
            store.deliver_notices(send_then_stop, retry_after=timedelta(seconds=30))
        )
        with pytest.raises(asyncio.CancelledError):
            await worker
        # Time for a leftover task to fail unobserved, if there were one: the absence is
        # what is tested, so no condition can be awaited instead.
        await asyncio.sleep(0.3)
        gc.collect()
        assert unhandled == []
        assert [t for t in asyncio.all_tasks() if "execute" in repr(t.get_coro())] == []

        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:

            async def advisory_locks_gone() -> bool:
                cursor = await conn.execute(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
                )
                return await cursor.fetchall() == [(0,)]

            # the closed session's locks go when its backend exits
            await until(advisory_locks_gone, 5, what="no advisory lock left")

        async def send(notices):
            return [Delivered() for _ in notices]

        assert await store.deliver_notices(send, retry_after=timedelta(seconds=30)) == 1
        assert db.pool.checked_out == 0
    finally:
        loop.set_exception_handler(previous)
        await db.close()


async def test_a_backlog_of_due_notices_takes_only_a_batch_of_locks_F13(
    clients, echo, functions, database_url, turn_caller
):
    """F13: with 3,000 notices due at once (messaging back after an outage), a send
    locks one batch, not the backlog: a lock per due notice would fill PostgreSQL's
    shared lock table, and then every connection to the server fails with 'out of
    shared memory'."""
    [call_id] = await ended_calls(
        clients, echo, ["00000000-0000-4000-8000-00000000000c"], turn_caller
    )
    await functions.stop(0)  # only the store below sends
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        # 3,000 more ended calls like the first, each with a due notice.
        await conn.execute(
            "INSERT INTO functions.calls SELECT (jsonb_populate_record(NULL::functions.calls, "
            "to_jsonb(c) || jsonb_build_object('id', gen_random_uuid(), "
            "'submission_key', NULL, 'end_seq', NULL))).* "
            "FROM functions.calls c, generate_series(1, 3000) "
            "WHERE c.id = %s",
            (call_id,),
        )
        await conn.execute(
            "INSERT INTO functions.notices (call_id, conversation_id, text, attributes) "
            "SELECT id, '00000000-0000-4000-8000-00000000000c', 'ended', '{}' "
            "FROM functions.calls WHERE id <> %s",
            (call_id,),
        )
        await conn.execute("UPDATE functions.notices SET next_attempt_at = now()")
        await conn.execute("ANALYZE functions.notices")  # as autovacuum would, by then

    held: list[int] = []

    async def send(notices):
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            [(locks,)] = await (
                await conn.execute(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = %s",
                    (NOTICE_LOCK,),
                )
            ).fetchall()
        held.append(locks)
        return [Delivered() for _ in notices]

    # Whatever plan PostgreSQL picks: here it scans and sorts every due notice.
    db = Database(sorted_plans(database_url), pool_size=2)
    await db.start()
    try:
        store = FunctionsStore(db, default_running_limit=10)
        assert await store.deliver_notices(send, retry_after=timedelta(1), batch=100) == 100
        assert held == [100]
    finally:
        await db.close()
