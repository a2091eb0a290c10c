"""Declaring, updating, removing and listing functions (F1, F2, A3, P1, P6)."""

from __future__ import annotations

import json

import psycopg
import pytest
import sqlalchemy as sa

from agentworks.client.functions import state_name
from agentworks.core import errors

ECHO_SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
}


def nested(depth: int) -> dict:
    """A JSON object nested `depth` deep: {"a": {"a": ... {} ...}} (`{}` is 1 deep)."""
    value: dict = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


# 25 levels of objects: one more than JSON may nest (MAX_JSON_DEPTH).
TOO_DEEP = {"type": "object", "properties": {"a": {"const": nested(22)}}}
# A $ref that leads back to itself: validating anything against it would never end.
LOOP = {
    "type": "object",
    "$defs": {"a": {"$ref": "#/$defs/a"}},
    "properties": {"x": {"$ref": "#/$defs/a"}},
}


async def test_owner_declares_updates_and_removes_a_function_F1(owner, demo):
    """F1: the owner declares a function, redeclaring updates it, removing deletes it."""
    first = await owner.declare_function(
        demo, "echo", description="v1", input_schema=ECHO_SCHEMA, starts_work=True
    )
    assert first.name == "echo" and first.starts_work and first.description == "v1"
    assert json.loads(first.input_schema_json)["required"] == ["text"]
    second = await owner.declare_function(demo, "echo", description="v2", input_schema=ECHO_SCHEMA)
    assert second.description == "v2" and not second.starts_work
    assert second.created_at == first.created_at and second.updated_at != first.updated_at
    assert [f.description for f in await owner.list_functions(demo)] == ["v2"]

    await owner.remove_function(demo, "echo")
    assert await owner.list_functions(demo) == []
    with pytest.raises(errors.NotFound, match="not found"):
        await owner.remove_function(demo, "echo")


async def test_only_the_owner_may_declare_or_remove_A3_F1(clients, owner, demo, echo):
    """F1 A3: anyone but the owner is refused, and nothing changes."""
    mallory = await clients("user:mallory")
    operator = await clients("user:ops2", {"operator"})
    for intruder in (mallory, operator):
        with pytest.raises(errors.PermissionDenied, match=r"only the owner of crew:demo"):
            await intruder.declare_function(demo, "evil", input_schema=ECHO_SCHEMA)
        with pytest.raises(errors.PermissionDenied):
            await intruder.remove_function(demo, "echo")
    assert [f.name for f in await owner.list_functions(demo)] == ["echo"]


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"input_schema": {"type": "banana"}}, "not a valid JSON Schema 2020-12"),
        ({"input_schema": {"type": "string"}}, 'must describe an object ("type": "object")'),
        (
            {"input_schema": {"$schema": "http://json-schema.org/draft-07/schema#"}},
            "only JSON Schema 2020-12",
        ),
        (
            {"input_schema": ECHO_SCHEMA, "output_schema": {"properties": {"a": {"minimum": "x"}}}},
            "output_schema is not a valid JSON Schema 2020-12 at properties/a/minimum",
        ),
        ({"input_schema": ECHO_SCHEMA, "allowed_callers": ["bob"]}, "not principals or patterns"),
        ({"input_schema": ECHO_SCHEMA, "description": "x" * 5000}, "limit is 4096 bytes"),
        ({"input_schema": {"type": "object", "description": "y" * 70000}}, "larger than 65536"),
        ({"input_schema": TOO_DEEP}, "input_schema nests objects and arrays more than 24 deep"),
        (
            {"input_schema": ECHO_SCHEMA, "output_schema": TOO_DEEP},
            "output_schema nests objects and arrays more than 24 deep",
        ),
        ({"input_schema": LOOP}, "input_schema has references that loop forever"),
        (
            {"input_schema": ECHO_SCHEMA, "output_schema": LOOP},
            "output_schema has references that loop forever",
        ),
    ],
)
async def test_schemas_and_fields_are_checked_at_declaration_F1_P6(owner, demo, kwargs, fragment):
    """F1 P6: a bad schema, caller pattern or size is refused saying what to fix; none stored."""
    with pytest.raises(errors.InvalidArgument) as refused:
        await owner.declare_function(demo, "bad", **kwargs)
    assert fragment in refused.value.message
    assert await owner.list_functions(demo) == []


async def test_list_shows_only_functions_the_caller_may_invoke_F2_A3(clients, owner, demo):
    """F2 A3: exact principals and the documented patterns decide who sees a function."""
    allowed = {
        "only_bob": ["user:bob"],
        "any_user": ["user:*"],
        "alpha_agents": ["agent:alpha/*"],
        "everyone": ["*"],
        "owner_only": [],
    }
    for name, callers in allowed.items():
        await owner.declare_function(
            demo, name, input_schema={"type": "object"}, allowed_callers=callers
        )

    async def visible(principal: str) -> set[str]:
        return {f.name for f in await (await clients(principal)).list_functions(demo)}

    assert await visible("user:owner") == set(allowed)
    assert await visible("user:bob") == {"only_bob", "any_user", "everyone"}
    assert await visible("user:carol") == {"any_user", "everyone"}
    assert await visible("agent:alpha/scout") == {"alpha_agents", "everyone"}
    assert await visible("agent:beta/scout") == {"everyone"}
    assert await visible("workflow:wf-1") == {"everyone"}

    carol = await clients("user:carol")
    with pytest.raises(errors.NotFound, match="or you may not call it"):
        await carol.call(demo, "only_bob", {})


async def test_a_function_named_ask_is_an_ordinary_function_F1_F2(clients, owner, demo, runtime):
    """F1 F2: no built-in ask is listed; a declared `ask` is listed and called like any other."""
    alice = await clients("user:alice")
    assert await alice.list_functions(demo) == []
    await owner.declare_function(
        demo, "ask", input_schema={"type": "object"}, allowed_callers=["user:*"]
    )
    assert [f.name for f in await alice.list_functions(demo)] == ["ask"]
    receipt = await alice.call(demo, "ask", {})
    execution = await runtime.claim_execution([demo], wait_seconds=5)
    assert execution.function == "ask" and execution.call_id == receipt.call_id


async def test_workflow_functions_declare_route_groups_and_typed_variables_F1_F14(
    operator, owner, demo
):
    """F1 F14: workflow functions need a route; variables are typed and checked."""
    wf = "workflow:wf-build"
    await operator.register_target(wf, owner="user:owner")
    schema = {
        "type": "object",
        "properties": {"branch": {"type": "string"}, "retries": {"type": "integer"}},
        "required": ["branch"],
    }
    refusals = [
        (None, "needs workflow.route"),
        ({"route": "bad route!"}, "workflow.route"),
        ({"route": "build", "variables": [{"name": "x", "type": "date"}]}, "is not one of"),
        (
            {"route": "build", "variables": [{"name": "x", "type": "integer", "default": "a"}]},
            "default is string, but the variable is integer",
        ),
        (
            {"route": "build", "variables": [{"name": "branch", "type": "integer"}]},
            "input_schema declares 'branch' as string",
        ),
    ]
    for binding, fragment in refusals:
        with pytest.raises(errors.InvalidArgument, match=fragment):
            await owner.declare_function(wf, "build", input_schema=schema, workflow=binding)
    with pytest.raises(errors.InvalidArgument, match="only for functions of workflow targets"):
        await owner.declare_function(demo, "build", input_schema=schema, workflow={"route": "x"})

    declared = await owner.declare_function(
        wf,
        "build",
        input_schema=schema,
        workflow={
            "route": "ci/build",
            "allowed_groups": ["builders"],
            "variables": [
                {"name": "branch", "type": "string", "required": True},
                {"name": "retries", "type": "integer", "default": 2},
            ],
        },
    )
    assert declared.workflow.route == "ci/build"
    assert list(declared.workflow.allowed_groups) == ["builders"]
    assert [(v.name, v.type) for v in declared.workflow.variables] == [
        ("branch", "string"),
        ("retries", "integer"),
    ]
    assert declared.workflow.variables[1].default_json == "2"  # an integer stays one
    assert declared.workflow.variables[0].default_json == ""


async def test_registering_targets_needs_the_operator_role(clients, operator):
    """Targets are registered by operators with an owner and a running limit (F5)."""
    alice = await clients("user:alice")
    with pytest.raises(errors.PermissionDenied, match="operator role"):
        await alice.register_target("crew:x", owner="user:alice")
    with pytest.raises(errors.InvalidArgument, match="running_limit must be"):
        await operator.register_target("crew:x", owner="user:alice", running_limit=5000)
    with pytest.raises(errors.InvalidArgument, match="is not a principal"):
        await operator.register_target("crew:x", owner="alice")
    target = await operator.register_target("crew:x", owner="user:alice")
    assert target.running_limit == 0 and target.effective_running_limit == 4


async def test_tables_match_the_migrations_P1(database_url):
    """P1: tables.py describes exactly the schema migrations/ creates."""
    from agentworks_functions import tables

    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = 'functions' AND table_name <> 'schema_migrations'"
        ).fetchall()
    in_database = {(t, c) for t, c in rows}
    in_code = {(t.name, c.name) for t in tables.metadata.tables.values() for c in t.columns}
    assert in_database == in_code
    assert all(isinstance(t, sa.Table) for t in tables.metadata.tables.values())


async def test_reference_cycles_are_refused_and_recursive_schemas_still_validate_F1_F3_F10(
    owner, demo, runtime, database_url
):
    """F1 F3 F10: a $ref chain that comes back to a schema without applying to a part of
    the value ($ref, allOf, not, if, dependentSchemas...) would make validation recurse
    forever (INTERNAL at every call): it is refused at declaration, naming the loop.
    One declared before this check is refused clearly at call time (inputs) or fails the
    result check (outputs), never INTERNAL. Recursion through properties or items ends
    with the value and stays accepted."""
    loops = {
        "#/$defs/a → #/$defs/a": LOOP,
        "#/$defs/a → #/$defs/a/allOf/0 → #/$defs/b → #/$defs/b/not → #/$defs/a": {
            "type": "object",
            "$defs": {
                "a": {"allOf": [{"$ref": "#/$defs/b"}]},
                "b": {"not": {"$ref": "#/$defs/a"}},
            },
            "properties": {"x": {"$ref": "#/$defs/a"}},
        },
        "# → #/if → #": {"type": "object", "if": {"$ref": "#"}},
        "# → #/dependentSchemas/k → #": {
            "type": "object",
            "dependentSchemas": {"k": {"$ref": "#"}},
        },
    }
    for loop, schema in loops.items():
        for fields in (
            {"input_schema": schema},
            {"input_schema": ECHO_SCHEMA, "output_schema": schema},
        ):
            with pytest.raises(errors.InvalidArgument) as refused:
                await owner.declare_function(demo, "loop", **fields)
            assert f"has references that loop forever: {loop}." in refused.value.message
    assert await owner.list_functions(demo) == []

    # Declared before reference cycles were refused (written to the table directly).
    with psycopg.connect(database_url) as conn:
        for name, input_schema, output_schema in (
            ("legacy_in", LOOP, None),
            ("legacy_out", ECHO_SCHEMA, LOOP),
        ):
            conn.execute(
                "INSERT INTO functions.functions (target_kind, target_name, name, input_schema,"
                " output_schema) VALUES ('crew', 'demo', %s, %s, %s)",
                (name, json.dumps(input_schema), output_schema and json.dumps(output_schema)),
            )
    unchecked = "cannot be checked: the schema's references loop or nest too deep"
    with pytest.raises(errors.InvalidArgument, match=f"inputs: {unchecked}"):
        await owner.call(demo, "legacy_in", {"x": 1})
    receipt = await owner.call(demo, "legacy_out", {"text": "t"})
    await runtime.claim_execution([demo], wait_seconds=5)
    await runtime.upload_file(receipt.call_id, "result.json", b'{"x": 1}')
    first = await runtime.finish_execution(receipt.call_id, final_message="done")
    assert first.correction_requested and f"result: {unchecked}" in first.correction_prompt
    # The final message is JSON, but it cannot be checked either: failed.
    second = await runtime.finish_execution(
        receipt.call_id, final_message='{"x": 1}', correction_round=1
    )
    assert state_name(second.status) == "failed"
    assert f"result: {unchecked}" in (await owner.get_status(receipt.call_id)).error

    tree = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "children": {"type": "array", "items": {"$ref": "#"}},
        },
        "required": ["name"],
    }
    await owner.declare_function(demo, "tree", input_schema=tree, output_schema=tree)
    leaf = {"name": "leaf"}
    await owner.call(
        demo, "tree", {"name": "root", "children": [{"name": "a", "children": [leaf]}]}
    )
    with pytest.raises(
        errors.InvalidArgument,
        match=r"inputs\.children\[0\]\.children\[0\]\.name: expected string, got integer",
    ):
        await owner.call(
            demo, "tree", {"name": "r", "children": [{"name": "a", "children": [{"name": 1}]}]}
        )
