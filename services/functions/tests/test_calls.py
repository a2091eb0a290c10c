"""Calling functions: input checks, fresh executions, running limit, retries, access, cancel."""

from __future__ import annotations

import asyncio
import importlib.resources
import json
import uuid

import psycopg
import pytest
from psycopg.types.json import Jsonb

from agentworks.client import FunctionsClient
from agentworks.client.common import target_ref
from agentworks.client.functions import state_name
from agentworks.core import errors
from agentworks.functions.v1 import functions_pb2 as pb
from agentworks.server.testing import until
from agentworks_functions.server import READ_IN_PLACE_CHARS


async def count_calls(database_url: str) -> int:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        row = await (await conn.execute("SELECT count(*) FROM functions.calls")).fetchone()
    assert row is not None
    return row[0]


async def test_invalid_inputs_list_every_violation_and_create_nothing_F3_P6(
    clients, echo, database_url
):
    """F3 P6: missing, unknown and mistyped inputs are all listed; no call is created."""
    alice = await clients("user:alice")
    with pytest.raises(errors.InvalidArgument) as refused:
        await alice.call("crew:demo", echo, {"count": "three", "colour": "red", "size": 2})
    message = refused.value.message
    assert "(4 problems)" in message
    assert "inputs.text: missing (required)" in message
    assert "inputs.colour: unknown (not in the schema)" in message
    assert "inputs.size: unknown (not in the schema)" in message
    assert "inputs.count: expected integer, got string" in message
    assert "no call was created" in message

    with pytest.raises(errors.InvalidArgument, match="inputs are larger than 262144 bytes"):
        await alice.call("crew:demo", echo, {"text": "x" * 300_000})
    with pytest.raises(errors.InvalidArgument, match="notify_conversation_id is for internal"):
        await alice.call("crew:demo", echo, {"text": "x"}, notify_conversation_id=str(uuid.uuid4()))
    assert await count_calls(database_url) == 0


async def test_inputs_the_schema_does_not_name_are_refused_unless_the_owner_opens_them_F1_F3(
    clients, owner, demo, database_url
):
    """F1 F3: a schema that says nothing about other properties is stored and enforced
    with "unevaluatedProperties": false, so unknown inputs are refused; a key named by a
    subschema (allOf) is known; an owner's explicit "additionalProperties": true keeps
    inputs open; functions declared before the rule are closed by migration 0003."""
    plain = {"type": "object", "properties": {"a": {"type": "string"}}}
    composed = {
        "type": "object",
        "allOf": [{"properties": {"b": {"type": "integer"}}}],
        "properties": {"a": {"type": "string"}},
    }
    opened = {**plain, "additionalProperties": True}
    for name, schema in (("plain", plain), ("composed", composed), ("opened", opened)):
        await owner.declare_function(demo, name, input_schema=schema, allowed_callers=["user:*"])
    alice = await clients("user:alice")
    listed = {f.name: f for f in await alice.list_functions(demo)}
    assert json.loads(listed["plain"].input_schema_json)["unevaluatedProperties"] is False
    assert "unevaluatedProperties" not in json.loads(listed["opened"].input_schema_json)

    with pytest.raises(errors.InvalidArgument, match=r"inputs.z: unknown \(not in the schema\)"):
        await alice.call(demo, "plain", {"a": "x", "z": 1})
    with pytest.raises(errors.InvalidArgument) as refused:
        await alice.call(demo, "composed", {"a": "x", "b": 2, "z": 1})
    assert "(1 problem)" in refused.value.message and "inputs.z: unknown" in refused.value.message
    assert await count_calls(database_url) == 0
    await alice.call(demo, "composed", {"a": "x", "b": 2})
    await alice.call(demo, "opened", {"a": "x", "z": 1})

    # A function stored before the rule (its schema as declared then) is closed by 0003.
    migration = (
        importlib.resources.files("agentworks_functions.migrations")
        .joinpath("0003_closed_inputs.sql")
        .read_text()
    )
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(
            "UPDATE functions.functions SET input_schema = %s WHERE name = 'plain'",
            (Jsonb(plain),),
        )
        await conn.execute("SET search_path TO functions")
        await conn.execute(migration)
        [(stored,)] = await (
            await conn.execute("SELECT input_schema FROM functions WHERE name = 'plain'")
        ).fetchall()
    assert stored == {**plain, "unevaluatedProperties": False}


async def test_refusals_name_the_place_and_how_to_list_callable_functions_F2_F3(
    clients, operator, owner, echo
):
    """F2 F3: a function that is not there (or not callable) says how to see the ones the
    caller may call, on the CLI, in the MCP tool and over gRPC; an input refused by a
    `false` schema is named by its place, like every other violation."""
    await operator.register_target("workflow:wf-1", owner="user:owner")
    alice = await clients("user:alice")
    for target, function, how in (
        ("crew:demo", "ghost", "`agentworks crews functions demo` (CLI), the `functions` tool "),
        ("crew:demo", "not a name!", "with action=list, crew=demo (MCP), or ListFunctions"),
        ("workflow:wf-1", "ghost", "`agentworks functions list --workflow wf-1` (CLI)"),
        ("workflow:wf-1", "ghost", "with action=list, workflow_id=wf-1 (MCP)"),
    ):
        with pytest.raises(errors.NotFound) as refused:
            await alice.call(target, function, {})
        message = refused.value.message
        assert f"function {function!r} not found on {target} (or you may not call it)" in message
        assert how in message, message

    closed = {
        "type": "object",
        "properties": {
            "x": False,
            "pair": {"type": "array", "prefixItems": [{"type": "string"}, False]},
        },
    }
    await owner.declare_function("crew:demo", "closed", input_schema=closed, allowed_callers=["*"])
    with pytest.raises(errors.InvalidArgument) as shut:
        await alice.call("crew:demo", "closed", {"x": 1, "pair": ["a", 2]})
    assert "(2 problems)" in shut.value.message
    assert "inputs.pair[1]: not allowed (the schema accepts no value here)" in shut.value.message
    assert "inputs.x: not allowed (the schema accepts no value here)" in shut.value.message


async def test_calls_are_checked_against_the_declaration_as_it_is_now_F1_F3(
    clients, owner, echo, echo_schema, start_functions, identity, database_url
):
    """F1 F3: after an owner re-declares or removes a function, through this replica or
    another, the next call is checked against what is declared now (the service keeps
    declarations it has read, and confirms them when it stores the call)."""
    other = await start_functions()  # a second replica: its declarations are its own
    alice = await clients("user:alice")
    elsewhere = await clients("user:alice", address=other.address)
    for caller in (alice, elsewhere):
        await caller.call("crew:demo", echo, {"text": "a", "count": 1})
    before = await count_calls(database_url)

    strict = {**echo_schema, "properties": {"text": {"type": "string"}}}
    await owner.declare_function("crew:demo", echo, input_schema=strict, allowed_callers=["user:*"])
    for caller in (alice, elsewhere):
        with pytest.raises(errors.InvalidArgument, match=r"inputs\.count: unknown"):
            await caller.call("crew:demo", echo, {"text": "a", "count": 1})
        await caller.call("crew:demo", echo, {"text": "a"})
    assert await count_calls(database_url) == before + 2

    await owner.declare_function(
        "crew:demo", echo, input_schema=strict, allowed_callers=["user:bob"]
    )
    for caller in (alice, elsewhere):
        with pytest.raises(errors.NotFound, match="not found on crew:demo"):
            await caller.call("crew:demo", echo, {"text": "a"})
    await owner.remove_function("crew:demo", echo)
    bob = await clients("user:bob")
    with pytest.raises(errors.NotFound, match="not found on crew:demo"):
        await bob.call("crew:demo", echo, {"text": "a"})
    assert await count_calls(database_url) == before + 2


async def test_each_call_gets_a_new_call_id_and_its_own_execution_and_folder_F4(
    clients, echo, runtime
):
    """F4: the same inputs twice are two calls, two executions, two output folders."""
    alice = await clients("user:alice")
    first = await alice.call("crew:demo", echo, {"text": "same", "count": 2})
    second = await alice.call("crew:demo", echo, {"text": "same", "count": 2})
    assert first.call_id != second.call_id
    assert {first.output_folder, second.output_folder} == {
        f".calls/{first.call_id}/",
        f".calls/{second.call_id}/",
    }
    claimed = [await runtime.claim_execution(["crew:demo"], wait_seconds=5) for _ in range(2)]
    assert [e.call_id for e in claimed] == [first.call_id, second.call_id]
    assert [e.output_folder for e in claimed] == [first.output_folder, second.output_folder]
    assert json.loads(claimed[0].inputs_json)["count"] == 2
    assert claimed[0].caller == "user:alice"
    assert await runtime.claim_execution(["crew:demo"]) is None


async def test_running_limit_refuses_at_once_with_busy_and_no_queue_F5(
    clients, operator, echo, runtime, database_url
):
    """F5: at the limit a call is refused with RESOURCE_EXHAUSTED naming the limit."""
    await operator.register_target("crew:demo", owner="user:owner", running_limit=2)
    alice = await clients("user:alice")
    first = await alice.call("crew:demo", echo, {"text": "1"})
    await alice.call("crew:demo", echo, {"text": "2"})
    with pytest.raises(errors.Busy) as refused:
        await alice.call("crew:demo", echo, {"text": "3"})
    assert "busy" in refused.value.message and "running limit is 2" in refused.value.message
    assert await count_calls(database_url) == 2

    execution = await runtime.claim_execution(["crew:demo"], wait_seconds=5)
    assert execution.call_id == first.call_id
    await runtime.finish_execution(first.call_id, final_message="done")
    third = await alice.call("crew:demo", echo, {"text": "3"})
    assert third.created


async def test_submission_id_recovers_the_call_even_when_busy_and_refuses_new_inputs_F6(
    clients, operator, owner, echo, echo_schema, runtime
):
    """F6: same key -> same call_id whatever its state; same key, other inputs or another
    function -> refused, saying which."""
    await operator.register_target("crew:demo", owner="user:owner", running_limit=1)
    await owner.declare_function(
        "crew:demo", "shout", input_schema=echo_schema, allowed_callers=["user:*"]
    )
    alice = await clients("user:alice")
    bob = await clients("user:bob")
    receipt = await alice.call("crew:demo", echo, {"text": "a"}, submission_id="k1")
    again = await alice.call("crew:demo", echo, {"text": "a"}, submission_id="k1")
    assert again.call_id == receipt.call_id and receipt.created and not again.created
    with pytest.raises(errors.Busy):
        await alice.call("crew:demo", echo, {"text": "b"}, submission_id="k2")
    with pytest.raises(errors.Busy):  # keys are per caller: bob's k1 is a new call
        await bob.call("crew:demo", echo, {"text": "a"}, submission_id="k1")
    used = "already used for a call of a different function or with different inputs"
    with pytest.raises(errors.Conflict, match=used):
        await alice.call("crew:demo", echo, {"text": "other"}, submission_id="k1")
    with pytest.raises(errors.Conflict, match=used):  # the same inputs, another function
        await alice.call("crew:demo", "shout", {"text": "a"}, submission_id="k1")

    await runtime.claim_execution(["crew:demo"], wait_seconds=5)
    await runtime.finish_execution(receipt.call_id, final_message="done")
    later = await alice.call("crew:demo", echo, {"text": "a"}, submission_id="k1")
    assert later.call_id == receipt.call_id and state_name(later.status) == "completed"


async def test_a_fresh_retry_key_is_refused_at_once_when_busy_and_a_retry_gets_its_call_F5_F6(
    clients, operator, echo, database_url
):
    """F5 F6: a key its caller vouches is fresh (the gateway's own, for a waiting call)
    is refused busy from the first read, without queueing for the target's lock; asked
    again as a retry, the key gets the call it made, even at the limit."""
    await operator.register_target("crew:demo", owner="user:owner", running_limit=1)
    alice = await clients("user:alice")
    first = await alice.call("crew:demo", echo, {"text": "1"}, submission_id="g1")
    again = await alice.call(
        "crew:demo", echo, {"text": "1"}, submission_id="g1", fresh_submission_id=False
    )
    assert again.call_id == first.call_id and not again.created

    # Another session holds the target's row lock, as a Call being accepted does.
    async with await psycopg.AsyncConnection.connect(database_url) as holder:
        await holder.execute(
            "SELECT 1 FROM functions.targets WHERE kind = 'crew' AND name = 'demo' FOR UPDATE"
        )
        with pytest.raises(errors.Busy, match="running limit is 1"):
            await asyncio.wait_for(
                alice.call(
                    "crew:demo", echo, {"text": "2"}, submission_id="g2", fresh_submission_id=True
                ),
                timeout=5,  # queued behind the lock it would wait until the holder ends
            )
        # A key not vouched fresh may be a retry whose call is being stored: it waits.
        retry = asyncio.ensure_future(
            alice.call("crew:demo", echo, {"text": "2"}, submission_id="g2")
        )

        async def queued() -> bool:  # a session of this database waits for the row lock
            cursor = await holder.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            return (await cursor.fetchall())[0][0] >= 1

        await until(queued, 5)
        assert not retry.done()
    with pytest.raises(errors.Busy):  # the holder is gone: over the limit all the same
        await retry
    assert await count_calls(database_url) == 1


async def test_only_caller_and_owner_see_a_call_everyone_else_gets_not_found_A3(
    clients, owner, echo, runtime
):
    """A3: a stranger (or a guessed call_id) gets NOT_FOUND for status, read, reply, cancel."""
    alice = await clients("user:alice")
    receipt = await alice.call("crew:demo", echo, {"text": "secret"})
    await runtime.claim_execution(["crew:demo"], wait_seconds=5)
    await runtime.upload_file(receipt.call_id, "out.txt", b"private")

    assert (await alice.get_status(receipt.call_id)).call_id == receipt.call_id
    assert (await owner.get_status(receipt.call_id)).caller == "user:alice"
    mallory = await clients("user:mallory")
    for call_id in (receipt.call_id, str(uuid.uuid4()), "not-a-uuid"):
        for attempt in (
            mallory.get_status(call_id),
            mallory.read_file(call_id, "out.txt"),
            mallory.reply(call_id, "hi"),
            mallory.cancel(call_id),
        ):
            with pytest.raises(errors.NotFound, match="not found"):
                await attempt
    # The runtime runs the execution but is neither caller nor owner: it cannot read it.
    with pytest.raises(errors.NotFound):
        await runtime.get_status(receipt.call_id)
    assert state_name((await alice.get_status(receipt.call_id)).status) == "running"


async def test_caller_or_owner_cancels_an_open_call_and_the_runtime_learns_it_F15(
    clients, owner, echo, runtime
):
    """F15: cancel ends the call `cancelled`; heartbeat, report and finish then say so."""
    alice = await clients("user:alice")
    unclaimed = await alice.call("crew:demo", echo, {"text": "1"})
    claimed = await alice.call("crew:demo", echo, {"text": "2"})
    assert state_name((await alice.cancel(unclaimed.call_id)).status) == "cancelled"
    execution = await runtime.claim_execution(["crew:demo"], wait_seconds=5)
    assert execution.call_id == claimed.call_id  # the cancelled one is never handed out

    status = await owner.cancel(claimed.call_id)
    assert state_name(status.status) == "cancelled" and status.error == "cancelled by user:owner"
    assert state_name((await runtime.heartbeat_execution(claimed.call_id)).status) == "cancelled"
    assert (
        state_name((await runtime.report(claimed.call_id, messages=["late"])).status) == "cancelled"
    )
    assert state_name(
        (await runtime.finish_execution(claimed.call_id, final_message="x")).status
    ) == ("cancelled")
    again = await alice.cancel(claimed.call_id)
    assert state_name(again.status) == "cancelled" and not again.messages and again.answer == ""

    done = await alice.call("crew:demo", echo, {"text": "3"})
    await runtime.claim_execution(["crew:demo"], wait_seconds=5)
    await runtime.finish_execution(done.call_id, final_message="ok")
    with pytest.raises(errors.PreconditionFailed, match="already ended"):
        await alice.cancel(done.call_id)


async def test_a_call_no_runtime_claims_ends_interrupted_and_frees_its_slot_F5_F12(
    start_functions, identity, echo_schema
):
    """F5 F12: with no runtime serving the target, a call does not hold its running slot
    forever: after FUNCTIONS_CLAIM_TIMEOUT_SECONDS it ends interrupted, saying why."""
    replica = await start_functions(FUNCTIONS_CLAIM_TIMEOUT_SECONDS="1")
    ops = FunctionsClient(replica.address, identity=identity("user:ops", {"operator"}))
    owner = FunctionsClient(replica.address, identity=identity("user:owner"))
    alice = FunctionsClient(replica.address, identity=identity("user:alice"))
    try:
        await ops.register_target("crew:idle", owner="user:owner", running_limit=1)
        await owner.declare_function(
            "crew:idle", "echo", input_schema=echo_schema, allowed_callers=["user:*"]
        )
        first = await alice.call("crew:idle", "echo", {"text": "anyone there?"})
        with pytest.raises(errors.Busy):
            await alice.call("crew:idle", "echo", {"text": "me too"})
        status = await alice.wait(first.call_id, timeout=15)
        assert state_name(status.status) == "interrupted"
        assert "no runtime claimed the call within 1 s" in status.error
        assert not status.started  # it never ran
        second = await alice.call("crew:idle", "echo", {"text": "again"})  # the slot is free
        assert state_name(second.status) == "running"
    finally:
        for client in (ops, owner, alice):
            await client.close()


async def test_the_operator_reads_and_cancels_anyones_call_but_not_its_files_or_question_A3_F15(
    clients, operator, echo, runtime
):
    """A3 F15 V1 (issue 25's story): the operator, who lists every call, reads the status
    of and cancels a call left open by someone else, freeing its slot; it may not answer
    the call's question nor read its files (PERMISSION_DENIED, saying who may). A plain
    user still gets NOT_FOUND for status and cancel of another's call."""
    alice = await clients("user:alice")
    stuck = await alice.call("crew:demo", echo, {"text": "left by Ctrl-C"})
    await runtime.claim_execution(["crew:demo"], wait_seconds=5)
    await runtime.upload_file(stuck.call_id, "out.txt", b"private")
    await runtime.ask_input(stuck.call_id, "q1", "go on?")

    mallory = await clients("user:mallory")
    for attempt in (mallory.get_status(stuck.call_id), mallory.cancel(stuck.call_id)):
        with pytest.raises(errors.NotFound, match="not found"):
            await attempt

    seen = await operator.get_status(stuck.call_id)
    assert seen.caller == "user:alice" and state_name(seen.status) == "waiting_for_input"
    assert seen.question == "go on?" and [f.name for f in seen.files] == ["out.txt"]
    for attempt, act in (
        (operator.read_file(stuck.call_id, "out.txt"), "read its files"),
        (operator.reply(stuck.call_id, "yes"), "answer its question"),
    ):
        with pytest.raises(errors.PermissionDenied, match=f"user:owner\\) may {act}"):
            await attempt
    with pytest.raises(errors.NotFound, match="not found"):  # a guessed id: still nothing
        await operator.get_status(str(uuid.uuid4()))

    status = await operator.cancel(stuck.call_id)
    assert state_name(status.status) == "cancelled" and status.error == "cancelled by user:ops"
    assert state_name((await alice.get_status(stuck.call_id)).status) == "cancelled"
    (target,) = (await operator.list_targets()).targets
    assert target.running == 0
    with pytest.raises(errors.NotFound, match="not found"):
        await mallory.get_status(stuck.call_id)


async def test_a_retry_key_matches_the_same_inputs_read_in_place_or_by_a_check_worker_F6_B8(
    clients, echo
):
    """F6 B8: a Call's inputs up to 16 KiB are read where it is served, longer ones by a
    check worker first; a retry key's hash is of the inputs read, not of their text, so
    the same inputs recover the same call whichever way they were read, and other long
    inputs under the key are refused."""

    def request(text: str, key: str) -> pb.CallRequest:
        return pb.CallRequest(
            target=target_ref("crew:demo"), function=echo, inputs_json=text, submission_id=key
        )

    alice = await clients("user:alice")
    value = json.dumps("x" * (READ_IN_PLACE_CHARS // 2))
    short = '{"text":' + value + "}"
    long = '{"text":' + " " * READ_IN_PLACE_CHARS + value + "}"  # the same inputs, spaced
    assert len(short) <= READ_IN_PLACE_CHARS < len(long)
    first = await alice._unary("Call", request(short, "r1"))
    again = await alice._unary("Call", request(long, "r1"))
    assert again.call_id == first.call_id
    later = await alice._unary("Call", request(long, "r2"))  # read by a worker first
    assert later.call_id != first.call_id
    assert (await alice._unary("Call", request(short, "r2"))).call_id == later.call_id
    other = '{"text":' + " " * READ_IN_PLACE_CHARS + json.dumps("y") + "}"
    with pytest.raises(errors.Conflict, match="with different inputs"):
        await alice._unary("Call", request(other, "r1"))
