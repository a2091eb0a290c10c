"""Every check of a functions request has a cost bound that counts what it really costs,
costly checks run in worker processes with a hard deadline, and one tenant's attack does
not slow another tenant (B1, B2, B5, B7, B8, B10; issues 35 and 43).

The services run as their own processes (`service_process`), so a check that held the
serving process would show up as the victim's latency, not as a hung test.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from typing import Any

import pytest

from agentworks.client import FunctionsClient
from agentworks.client.common import target_ref
from agentworks.core.errors import Busy, InvalidArgument, Reason
from agentworks.core.limits import MAX_INPUTS_BYTES
from agentworks.functions.v1 import functions_pb2 as f
from agentworks_functions.jsonin import MAX_INTEGER_DIGITS
from agentworks_functions.schemas import (
    MAX_VALUE_STEPS,
    CheckDeadline,
    CheckPool,
    check_schema,
    violations,
)
from agentworks_functions.schemas.validation import MAX_ERRORS
from services.functions.tests.test_schema_budget import CONTAINS_MANY, nested_any_of
from tests.fixtures.neighbours import Victim, assert_unharmed, attacker

# Issue 35: 300 items took 7.2 s, 60,000 froze the service for 6.9 minutes (RSS 1.41 GB):
# each item was compared with each of 9,000 members, and each refusal quoted the enum.
ENUM_BOMB = {
    "type": "object",
    "properties": {"xs": {"type": "array", "items": {"enum": list(range(9000))}}},
}
ENUM_INPUTS = {"xs": [-1] * 60_000}
# Issue 43: anyOf x 6 over 36k nulls reached the step budget after about 2 s per call, in
# a thread holding the interpreter's lock.
ANY_OF_6 = {
    "type": "object",
    "properties": {
        "xs": {
            "type": "array",
            "items": {
                "anyOf": [{"type": t} for t in ("string", "integer", "boolean", "object", "array")]
                + [{"type": "number", "minimum": 0}]
            },
        }
    },
}
ANY_OF_INPUTS = {"xs": [None] * 36_000}
# Issue 35: uniqueItems over 30,000 small arrays: accepted after 3.2 s.
UNIQUE = {"type": "object", "properties": {"xs": {"type": "array", "uniqueItems": True}}}
UNIQUE_INPUTS = {"xs": [[n] for n in range(30_000)]}
UNIQUE_ATTACK = {"xs": [*UNIQUE_INPUTS["xs"], [7]]}  # refused at the end: the most work
PLAIN = {"type": "object", "properties": {"n": {"type": "integer"}}}


def test_enum_const_and_unique_items_cost_what_they_really_cost_B1():
    """B1: an enum is one hash of the value (60,000 items against 9,000 members in well
    under a second, each refusal quoting the enum in part, at most MAX_ERRORS kept);
    uniqueItems over 30,000 small arrays is linear; a large const and a large enum
    member still compare by value."""
    started = time.process_time()  # CPU time: a busy machine does not inflate it
    problems = violations(ENUM_BOMB, ENUM_INPUTS)
    elapsed = time.process_time() - started
    assert elapsed < 1.5, f"{elapsed:.2f} s of CPU"
    assert len(problems) == MAX_ERRORS + 1
    assert problems[-1] == f"inputs: the check stopped after {MAX_ERRORS} problems"
    assert problems[0].startswith("inputs.xs[0]: -1 is not one of [0, 1, 2, ")
    assert problems[0].endswith("... (9000 values)")
    assert max(len(p) for p in problems) < 300
    assert violations(ENUM_BOMB, {"xs": [0, 8999, 17]}) == []
    [problem] = violations(ENUM_BOMB, {"xs": [1.0, True]})  # 1.0 is 1; true is not
    assert problem.startswith("inputs.xs[1]: True is not one of [0, 1, 2, 3, ")
    members = {"type": "object", "properties": {"o": {"enum": [{"a": [1, 2]}, "x"]}}}
    assert violations(members, {"o": {"a": [1.0, 2]}}) == []
    assert len(violations(members, {"o": {"a": [1, 2, 3]}})) == 1
    assert len(violations(members, {"o": list(range(10_000))})) == 1  # larger: no hash

    started = time.monotonic()
    assert violations(UNIQUE, UNIQUE_INPUTS) == []
    assert time.monotonic() - started < 1.0
    const = {"type": "object", "properties": {"c": {"const": {"k": list(range(50))}}}}
    assert violations(const, {"c": {"k": list(range(50))}}) == []
    assert violations(const, {"c": {"k": [0]}})[0].startswith("inputs.c: {'k': [0, 1, 2, ")


def test_a_schema_whose_cost_multiplies_is_refused_at_declaration_naming_the_keyword_B1():
    """B1: the static bound (steps for one value of an input, through every combinator)
    refuses nested anyOf through $ref at declaration, naming the place and the keyword;
    ordinary and recursive schemas, a 9,000-member enum and 6 alternatives pass."""
    with pytest.raises(InvalidArgument) as refused:
        check_schema(nested_any_of(17), "input_schema", require_object=True)
    message = refused.value.message
    assert message.startswith("input_schema at $defs/d6/anyOf: checking one value of an input")
    assert f"the limit is {MAX_VALUE_STEPS:,} steps per value" in message
    wide = {"type": "object", "properties": {"c": {"const": list(range(MAX_VALUE_STEPS))}}}
    with pytest.raises(InvalidArgument) as refused:
        check_schema(wide, "input_schema", require_object=True)
    assert refused.value.message.startswith("input_schema at properties/c/const: ")
    tree = {
        "type": "object",
        "$defs": {
            "node": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                },
            }
        },
        "properties": {"root": {"$ref": "#/$defs/node"}},
    }
    for schema in (ENUM_BOMB, ANY_OF_6, UNIQUE, PLAIN, tree, nested_any_of(8)):
        assert check_schema(schema, "input_schema", require_object=True) is schema


def test_integers_past_the_stated_bound_are_refused_in_our_words_B10():
    """B10: an integer of more digits than the stated bound is refused saying the bound,
    not Python's advice about sys.set_int_max_str_digits."""
    from agentworks_functions.jsonin import loads_object_sized
    from agentworks_functions.schemas import result_problems

    text = '{"n": ' + "9" * (MAX_INTEGER_DIGITS + 1) + "}"
    with pytest.raises(InvalidArgument) as refused:
        loads_object_sized(text, "inputs", MAX_INPUTS_BYTES)
    assert refused.value.message == (
        f"inputs holds an integer of {MAX_INTEGER_DIGITS + 1} digits; numbers have at most "
        f"{MAX_INTEGER_DIGITS} digits (send a longer number as a string)"
    )
    _, problems = result_problems({}, text.encode())
    assert problems == [
        f"the result file is not valid JSON: it holds an integer of {MAX_INTEGER_DIGITS + 1} "
        f"digits; numbers have at most {MAX_INTEGER_DIGITS} digits (send a longer number as "
        "a string)"
    ]
    assert loads_object_sized('{"n": ' + "9" * MAX_INTEGER_DIGITS + "}", "inputs", 10**6)


# ------------------------------------------------------------------ against a process


async def _started(
    service_process, database_url, identity, bombs: dict[str, dict[str, Any]], **env: str
) -> tuple[Any, Callable[..., FunctionsClient]]:
    """A functions process (with `env`), a client maker for it, and its targets:
    crew:evil (mallory's, declaring each of `bombs`) and crew:demo (the owner's `echo`)."""
    proc = service_process(
        "agentworks_functions",
        "FUNCTIONS",
        database_url,
        FUNCTIONS_MESSAGING_ADDRESS="127.0.0.1:1",
        **env,
    )

    def client(principal: str, roles: frozenset[str] = frozenset()) -> FunctionsClient:
        return FunctionsClient(proc.address, identity=identity(principal, roles), timeout=30)

    ops = client("user:ops", frozenset({"operator"}))
    owner = client("user:owner")
    mallory = client("user:mallory")
    async with ops, owner, mallory:
        await ops.register_target("crew:evil", owner="user:mallory")
        await ops.register_target("crew:demo", owner="user:owner", running_limit=1000)
        for name, schema in bombs.items():
            await mallory.declare_function(
                "crew:evil", name, input_schema=schema, allowed_callers=["*"]
            )
        await owner.declare_function("crew:demo", "echo", input_schema=PLAIN, allowed_callers=["*"])
    return proc, client


def _raw_call(target: str, function: str, inputs_json: str) -> f.CallRequest:
    return f.CallRequest(target=target_ref(target), function=function, inputs_json=inputs_json)


@pytest.mark.alone
@pytest.mark.reliability(
    scenario="Schema bombs: a 9,000-member enum, anyOf x 6 and uniqueItems on the largest "
    "inputs allowed (B1, B2, B5; issue 35 item 1, issue 43 item 4)",
    action="an attacker calls functions of its own declared with each schema (60,000 items "
    "against the enum, 36,000 nulls against anyOf x 6, 30,000 small arrays for uniqueItems) "
    "once each; then two attackers in a process of their own send the enum and anyOf bombs "
    "again and again while another tenant lists functions and calls a plain one",
    check="each attack answered in < 3 s (refused INVALID_ARGUMENT listing at most 1,000 "
    "problems, or accepted; Busy past one worker per principal); the victim's p99 within "
    "3x its calm p99 or 200 ms (known gap: two checks at their deadline on both cores), "
    "none over 1 s, none refused. Before: the enum froze the service "
    "for minutes and anyOf x 6 cut the victim from 375 requests to 45",
)
@pytest.mark.timeout(90)
async def test_schema_bombs_do_not_slow_another_tenant_B1_B2_B5(
    service_process, database_url, identity, tmp_path
):
    proc, client = await _started(
        service_process,
        database_url,
        identity,
        {"enum": ENUM_BOMB, "anyof": ANY_OF_6, "unique": UNIQUE},
        # the victim calls back to back, faster than the default creation share allows
        AGENTWORKS_PRINCIPAL_SHARES=json.dumps({"user:alice": {"creates_per_second": 10_000}}),
    )
    bombs = [
        ("enum", json.dumps(ENUM_INPUTS)),
        ("anyof", json.dumps(ANY_OF_INPUTS)),
        ("unique", json.dumps(UNIQUE_ATTACK)),
    ]
    async with (
        client("user:mallory") as mallory,
        client("user:alice") as alice,
    ):
        # Each bomb alone: answered in seconds, not minutes.
        for function, text in bombs:
            started = time.monotonic()
            try:
                await mallory._unary("Call", _raw_call("crew:evil", function, text))
            except InvalidArgument as exc:
                assert f"inputs for crew:evil {function}" in exc.message
                assert len(exc.message) < 20_000
            assert time.monotonic() - started < 3.0, function

        async def victim_request() -> None:
            await alice.list_functions("crew:demo")
            await alice.call("crew:demo", "echo", {"n": 1})

        victim = Victim(victim_request)
        calm = await victim.measure(seconds=1.5)
        # The attackers are a process of their own, as they would be: their side of the
        # 0.3-0.5 MB requests is not in this process, where the victim is timed.
        folder = tmp_path / "bombs"
        folder.mkdir()
        # The bombs that are refused; a valid 30,000-array input is accepted, and such
        # calls cost what valid large inputs cost (docs/reliability.md, known).
        for function, text in bombs[:2]:
            (folder / function).write_bytes(
                _raw_call("crew:evil", function, text).SerializeToString()
            )
        tokens = [identity(p).token() for p in ("user:mallory", "user:trudy")]
        async with attacker(BOMBER, proc.address, str(folder), *tokens) as attackers:
            loud = await victim.measure_under(calm, seconds=3, floor=0.2)
        answers = [line.split() for line in attackers.lines]
        assert len(answers) >= 4, answers
        # Refused (INVALID_ARGUMENT), accepted, or Busy past one worker per principal;
        # each in at most a deadline and a wait for a worker.
        assert {code for code, _ in answers} <= {"INVALID_ARGUMENT", "OK", "RESOURCE_EXHAUSTED"}, (
            answers
        )
        assert max(float(seconds) for _, seconds in answers) < 3.0 + 2.0, answers
        # Known gap (docs/reliability.md): with two checks running to their deadline on
        # both cores, the victim's p99 is at most ~150 ms here, not always 3x calm.
        assert_unharmed(calm, loud, "schema bombs", floor=0.2)


# Two attackers (one principal each, each holding its one check worker at a time) send
# the bombs' Call requests again and again; each answer as "CODE seconds" on a line.
BOMBER = """
import pathlib, sys, threading, time, grpc
address, folder, *tokens = sys.argv[1:]
bodies = [p.read_bytes() for p in sorted(pathlib.Path(folder).iterdir())]
channel = grpc.insecure_channel(address, options=[("grpc.max_send_message_length", 8 << 20)])
call = channel.unary_unary("/agentworks.functions.v1.FunctionsService/Call",
                           request_serializer=bytes, response_deserializer=bytes)
lock = threading.Lock()
def attack(token):
    n = 0
    while True:
        n += 1
        started = time.monotonic()
        try:
            call(bodies[n % len(bodies)], metadata=(("x-agentworks-identity", token),),
                 timeout=30)
            code = "OK"
        except grpc.RpcError as exc:
            code = exc.code().name
            if code == "RESOURCE_EXHAUSTED":
                time.sleep(0.05)
        with lock:
            print(code, round(time.monotonic() - started, 3), flush=True)
threads = [threading.Thread(target=attack, args=(t,), daemon=True) for t in tokens]
for t in threads:
    t.start()
for t in threads:
    t.join()
"""


SLOW = CONTAINS_MANY  # in the pool; the step budget would end it after seconds


@pytest.mark.alone
@pytest.mark.reliability(
    scenario="A check past its deadline, and one caller's checks at once (B2, B7)",
    action="with FUNCTIONS_CHECK_DEADLINE_SECONDS=0.3, a caller's input costs seconds to "
    "check (contains over 500 consts on 20,000 items); the same caller sends two at once",
    check="refused INVALID_ARGUMENT reason CHECK_BUDGET saying the check ran past its "
    "deadline within ~1 s, its worker killed and replaced (the next check works); the "
    "second at once is RESOURCE_EXHAUSTED with a retry delay (one worker per principal)",
)
@pytest.mark.timeout(60)
async def test_a_check_past_its_deadline_is_stopped_and_refused_B2_B7(
    service_process, database_url, identity
):
    _, client = await _started(
        service_process,
        database_url,
        identity,
        {"slow": SLOW, "anyof": ANY_OF_6},
        FUNCTIONS_CHECK_DEADLINE_SECONDS="0.3",
    )
    async with client("user:mallory") as mallory:
        for _ in range(2):  # the second runs on the worker that replaced the killed one
            started = time.monotonic()
            with pytest.raises(InvalidArgument) as refused:
                await mallory.call("crew:evil", "slow", {"xs": [-1] * 20_000})
            assert time.monotonic() - started < 1.5
            assert refused.value.reason == Reason.CHECK_BUDGET
            assert "the check ran past its deadline of 0.3 s and was stopped" in (
                refused.value.message
            )
        assert (await mallory.call("crew:evil", "anyof", {"xs": ["a"] * 2000})).call_id

        results = await asyncio.gather(
            *(mallory.call("crew:evil", "slow", {"xs": [-1] * 20_000}) for _ in range(2)),
            return_exceptions=True,
        )
        busy = [r for r in results if isinstance(r, Busy)]
        assert len(busy) == 1, results
        assert busy[0].reason == Reason.PRINCIPAL_SHARE
        assert busy[0].retry_after == pytest.approx(0.3)


@pytest.mark.alone
@pytest.mark.reliability(
    scenario="Huge Call inputs over gRPC, measured before they are read (B8, B10)",
    action="a caller sends Call with 7 MB of inputs_json (3.5 million items, under the 8 MiB "
    "gRPC cap), one after another, while another tenant lists functions and calls; and an "
    "integer of 5,000 digits",
    check="each refused by gRPC from its length prefix (past the 4 MiB functions receives), "
    "and 0.4 MB inputs from their size before parsing, naming the field and the limit, in "
    "< 1 s; the victim's p99 within 3x calm, none over 1 s, none refused; the long integer "
    "refused saying the bound. Before: parsed first (victim p99 0.095 -> 1.41 s)",
)
@pytest.mark.timeout(60)
async def test_huge_inputs_are_refused_from_their_size_before_parsing_B8_B10(
    service_process, database_url, identity, tmp_path
):
    proc, client = await _started(service_process, database_url, identity, {})
    huge = '{"xs": [' + ",".join(["0"] * 3_500_000) + "]}"
    async with client("user:mallory") as mallory, client("user:alice") as alice:
        # Past the 4 MiB the service receives: refused by gRPC from the length prefix.
        with pytest.raises(InvalidArgument) as refused:
            await mallory._unary("Call", _raw_call("crew:demo", "echo", huge))
        assert "Call's request is larger than the functions service receives" in (
            refused.value.message
        )
        # Under it but past the inputs' limit: refused from its size, before parsing.
        big = '{"xs": [' + ",".join(["0"] * 200_000) + "]}"
        with pytest.raises(InvalidArgument) as refused:
            await mallory._unary("Call", _raw_call("crew:demo", "echo", big))
        assert refused.value.message == (
            f"inputs are larger than {MAX_INPUTS_BYTES} bytes as JSON ({len(big)} bytes, "
            "refused before reading it)"
        )
        long_number = '{"n": ' + "7" * 5000 + "}"
        with pytest.raises(InvalidArgument) as refused:
            await mallory._unary("Call", _raw_call("crew:demo", "echo", long_number))
        assert "set_int_max_str_digits" not in refused.value.message
        assert f"numbers have at most {MAX_INTEGER_DIGITS} digits" in refused.value.message

        async def victim_request() -> None:
            await alice.list_functions("crew:demo")
            await alice.call("crew:demo", "echo", {"n": 1})

        victim = Victim(victim_request)
        calm = await victim.measure(seconds=1.0)
        folder = tmp_path / "huge"
        folder.mkdir()
        (folder / "call").write_bytes(_raw_call("crew:demo", "echo", huge).SerializeToString())
        token = identity("user:mallory").token()
        async with attacker(BOMBER, proc.address, str(folder), token) as attack:
            loud = await victim.measure_under(calm, seconds=2.0)
        answers = [line.split() for line in attack.lines]
        assert len(answers) >= 4, answers
        assert {code for code, _ in answers} == {"RESOURCE_EXHAUSTED"}, answers[:3]
        assert_unharmed(calm, loud, "7 MB inputs")


@pytest.mark.alone
@pytest.mark.reliability(
    scenario="One principal's call rate and long-polls in functions (B7)",
    action="with AGENTWORKS_PRINCIPAL_SHARES giving user:flood 3 calls of burst and 2 "
    "long-polls, it calls 5 times at once and opens 3 GetStatus waits",
    check="past the burst Call is RESOURCE_EXHAUSTED reason PRINCIPAL_SHARE with a retry "
    "delay, nothing stored; the third wait likewise; another principal is not limited",
)
@pytest.mark.timeout(60)
async def test_calls_take_a_creation_and_waits_hold_a_share_B7(
    service_process, database_url, identity
):
    shares = {"user:flood": {"creates_per_second": 0.5, "burst": 3, "waits": 2}}
    _, client = await _started(
        service_process, database_url, identity, {}, AGENTWORKS_PRINCIPAL_SHARES=json.dumps(shares)
    )
    async with client("user:flood") as flood, client("user:alice") as alice:
        results = await asyncio.gather(
            *(flood.call("crew:demo", "echo", {"n": n}) for n in range(5)),
            return_exceptions=True,
        )
        made = [r for r in results if not isinstance(r, BaseException)]
        busy = [r for r in results if isinstance(r, Busy)]
        assert len(made) == 3 and len(busy) == 2, results
        assert busy[0].reason == Reason.PRINCIPAL_SHARE
        assert busy[0].retry_after is not None and 0 < busy[0].retry_after <= 2.0
        assert "calls per second" in busy[0].message
        listed = await flood.list_calls(target="crew:demo")
        assert len(listed.calls) == 3  # nothing stored for the refused ones
        for n in range(5):  # another principal is not limited by flood's share
            assert (await alice.call("crew:demo", "echo", {"n": n})).call_id

        call_id = made[0].call_id
        waits = [asyncio.create_task(flood.get_status(call_id, wait_seconds=3)) for _ in range(2)]
        await asyncio.sleep(0.3)  # both waiting
        with pytest.raises(Busy) as refused:
            await flood.get_status(call_id, wait_seconds=3)
        assert refused.value.reason == Reason.PRINCIPAL_SHARE
        assert (await flood.get_status(call_id)).call_id == call_id  # no wait: fine
        for task in waits:
            task.cancel()
        await asyncio.gather(*waits, return_exceptions=True)


@pytest.mark.timeout(30)
async def test_the_pool_replaces_a_stopped_worker_and_ends_with_its_service_B2():
    """B2: the check pool's workers start when first needed, one past its deadline is
    killed and replaced, and every one ends with `stop` (no process left behind)."""
    pool = CheckPool(workers=1, deadline=0.5)
    assert pool.processes == []
    assert await pool.run("user:a", sorted, [3, 1, 2]) == [1, 2, 3]
    first = pool.processes
    with pytest.raises(CheckDeadline):
        await pool.run("user:a", time.sleep, 5)
    assert await pool.run("user:a", sorted, [2, 1]) == [1, 2]  # on a new worker
    second = pool.processes
    assert len(first) == len(second) == 1 and first != second
    await pool.stop()
    for pid in first + second:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
