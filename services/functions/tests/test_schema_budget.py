"""Every input and result check has a bounded cost, so one caller's check can slow only
that caller (P6, F3, F10; issue 26).

JSON Schema validation is pure Python. An owner could declare a schema whose check takes
minutes on an input the size limits allow: `anyOf` nested through `$ref` doubles the work
per level, and `contains` over hundreds of `const` values on 20,000 items is ten million
comparisons (46 s and 6 minutes on the event loop, during which another tenant's call
lost its lease). A check now has a step budget (patterns.STEP_BUDGET) and such schemas
are checked in a worker process of the check pool (schemas.pool).
"""

from __future__ import annotations

import asyncio
from typing import Any

import psutil
import pytest

from agentworks.client import FunctionsClient
from agentworks.core.errors import InvalidArgument
from agentworks.server.testing import until
from agentworks_functions.patterns import STEP_BUDGET
from agentworks_functions.schemas import violations


def nested_any_of(levels: int) -> dict[str, Any]:
    """`anyOf` of two `$ref`s to the next level, `levels` deep: 2^levels paths."""
    defs: dict[str, Any] = {}
    for i in range(levels):
        last = i == levels - 1
        branch = (
            [{"type": "string"}, {"type": "number"}]
            if last
            else [
                {"$ref": f"#/$defs/d{i + 1}"},
                {"$ref": f"#/$defs/d{i + 1}"},
            ]
        )
        defs[f"d{i}"] = {"anyOf": branch}
    return {"type": "object", "$defs": defs, "properties": {"a": {"$ref": "#/$defs/d0"}}}


CONTAINS_MANY = {
    "type": "object",
    "properties": {
        "xs": {"type": "array", "contains": {"anyOf": [{"const": i} for i in range(500)]}}
    },
}
TOO_COSTLY = "too costly to check: the check passed"


@pytest.mark.timeout(60)
def test_a_check_that_would_take_minutes_stops_at_its_step_budget_P6_F3():
    """P6 F3: nested anyOf through $ref and contains over 500 consts on 20,000 items stop
    with one problem that says why and what to do; an ordinary check of the same size
    (20,000 strings) is well within the budget and passes."""
    for schema, inputs in (
        (nested_any_of(17), {"a": None}),
        (CONTAINS_MANY, {"xs": [-1] * 20_000}),
    ):
        [problem] = violations(schema, inputs)
        assert problem.startswith(f"inputs: {TOO_COSTLY} {STEP_BUDGET} schema steps")
        assert "ask the function's owner for a simpler schema" in problem
    ordinary = {
        "type": "object",
        "properties": {"xs": {"type": "array", "items": {"type": "string"}}},
    }
    assert violations(ordinary, {"xs": ["a"] * 20_000}) == []
    assert violations(nested_any_of(3), {"a": "x"}) == []
    assert violations(CONTAINS_MANY, {"xs": [-1] * 100 + [7]}) == []


@pytest.mark.timeout(120)
async def test_a_costly_check_slows_only_its_caller_P6_F3(service_process, database_url, identity):
    """P6 F3: while hostile calls are being checked, another tenant's calls are answered
    (their checks do not wait behind the hostile ones), and each hostile call is refused
    INVALID_ARGUMENT saying the check was too costly; nothing is created. The service runs
    as its own process, so a blocked event loop would show up as a missed deadline."""
    proc = service_process(
        "agentworks_functions", "FUNCTIONS", database_url, FUNCTIONS_MESSAGING_ADDRESS="127.0.0.1:1"
    )

    def client(principal: str, roles: frozenset[str] = frozenset()) -> FunctionsClient:
        return FunctionsClient(proc.address, identity=identity(principal, roles), timeout=60)

    async with (
        client("user:ops", frozenset({"operator"})) as ops,
        client("user:mallory") as mallory,
        client("user:trudy") as trudy,
        client("user:owner") as owner,
        client("user:alice") as alice,
    ):
        await ops.register_target("crew:evil", owner="user:mallory")
        await ops.register_target("crew:demo", owner="user:owner")
        await mallory.declare_function(
            "crew:evil", "slow", input_schema=CONTAINS_MANY, allowed_callers=["*"]
        )
        await owner.declare_function(
            "crew:demo",
            "echo",
            input_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
            allowed_callers=["*"],
        )
        hostile = [  # two principals: one holds at most one check worker at once (B2)
            asyncio.create_task(attacker.call("crew:evil", "slow", {"xs": [-1] * 20_000}))
            for attacker in (mallory, trudy)
        ]
        # The hostile checks are under way: the service started its check workers for them.
        workers = psutil.Process(proc.process.pid).children
        await until(lambda: len(workers()) >= 2, 10, what="two check workers run")
        for n in range(3):
            receipt = await asyncio.wait_for(alice.call("crew:demo", "echo", {"n": n}), 5)
            assert receipt.call_id
        assert not all(task.done() for task in hostile), "the hostile checks ended first"
        for task in hostile:
            with pytest.raises(InvalidArgument) as refused:
                await task
            assert TOO_COSTLY in refused.value.message or (
                "the check ran past its deadline" in refused.value.message
            )
            assert "no call was created" in refused.value.message
