"""Function tools through the gateway: the official MCP client over Streamable HTTP
(`functions`, legacy `get_crew_function_call`) and the owner's `/api` tools (G2, F1-F15).

A runtime (`agent:demo/bot`) runs the executions with plain FunctionsClient calls, so
each step the caller observes is one the test made happen.
"""

from __future__ import annotations

import asyncio
import base64
import json

from mcp import Client

from tests.fixtures.mcp_results import text_of

NOT_FOUND_TEXT = (
    "call {!r} not found: check the call_id (only the call's caller, the target's owner "
    "and the operator can see a call)"
)


async def tool_ok(mcp: Client, name: str, args: dict) -> dict:
    """Call an MCP tool that must succeed; its structured result."""
    result = await mcp.call_tool(name, args)
    assert not result.is_error, text_of(result)
    return result.structured_content


async def tool_error(mcp: Client, name: str, args: dict) -> tuple[str, str]:
    """Call an MCP tool that must be refused: (code, text), the text being the service's."""
    result = await mcp.call_tool(name, args)
    assert result.is_error, result.structured_content
    error = result.structured_content["error"]
    assert error["message"] == text_of(result)
    return error["code"], error["message"]


async def test_functions_tool_lists_calls_and_reads_a_call_over_mcp_G2_F2_F4_F6_F7_F8_F11(
    gateway, alice_token, demo, echo, runtime, mcp_session
):
    """G2 F2 F4 F6 F7 F8 F11: list, call (a retry recovers the call), status with both
    pagings, a question answered with reply, text and binary file pages, the legacy tool."""
    async with mcp_session(gateway.mcp_url, alice_token) as mcp:
        listed_tools = {t.name: t for t in (await mcp.list_tools()).tools}
        schema = listed_tools["functions"].input_schema
        actions = ["list", "call", "status", "read", "reply", "cancel"]
        assert schema["properties"]["action"]["enum"] == actions
        legacy = listed_tools["get_crew_function_call"].input_schema["properties"]
        assert set(schema["properties"]) >= set(legacy)

        listed = await tool_ok(mcp, "functions", {"action": "list", "crew": "demo"})
        assert listed["target"] == "crew:demo"
        (function,) = listed["functions"]
        assert function["name"] == "echo" and function["input_schema"]["required"] == ["text"]
        assert function["output_schema"] is None and function["starts_work"] is False

        call = {
            "action": "call",
            "crew": "demo",
            "function": "echo",
            "inputs": {"text": "hi", "count": 2},
            "submission_id": "try-1",
        }
        receipt = await tool_ok(mcp, "functions", call)
        call_id = receipt["call_id"]
        assert receipt == {
            "call_id": call_id,
            "status": "running",
            "output_folder": f".calls/{call_id}/",
            "created": True,
            "target": "crew:demo",
            "function": "echo",
        }
        assert await tool_ok(mcp, "functions", call) == {**receipt, "created": False}

        execution = await runtime.claim_execution([demo], wait_seconds=10)
        assert execution is not None and execution.call_id == call_id
        assert json.loads(execution.inputs_json) == {"text": "hi", "count": 2}
        await runtime.report(
            call_id,
            progress="halfway",
            messages=["one", "two"],
            events=[{"kind": "tool_call", "tool_name": "grep", "text": "searching"}],
            sequence=1,
        )
        notes = "héllo\n".encode() * 3
        blob = bytes(range(256)) * 40
        await runtime.upload_file(call_id, "notes.txt", notes)
        await runtime.upload_file(call_id, "out/blob.bin", blob)
        ask = asyncio.create_task(
            runtime.ask_input(call_id, "fmt", "Which format?", wait_seconds=20)
        )

        status = {"action": "status", "call_id": call_id}
        first = await tool_ok(mcp, "functions", {**status, "message_limit": 1})
        assert [m["text"] for m in first["messages"]] == ["one"] and first["next_after"] == 0
        assert first["progress"] == "halfway" and first["started"] is True
        assert [(e["kind"], e["tool_name"]) for e in first["events"]] == [("tool_call", "grep")]
        second = await tool_ok(mcp, "functions", {**status, "after": 0, "after_event": 0})
        assert [m["text"] for m in second["messages"]] == ["two"] and second["events"] == []
        page = {**status, "after": 1, "after_event": 0}
        while second["status"] != "waiting_for_input":  # long-polls, woken by the question
            second = await tool_ok(
                mcp, "functions", {**page, "wait_seconds": 10, "seen_version": second["version"]}
            )
        assert second["question"] == "Which format?"

        answered = await tool_ok(
            mcp, "functions", {"action": "reply", "call_id": call_id, "text": "csv"}
        )
        assert answered["status"] == "running" and answered["question"] is None
        async with asyncio.timeout(20):
            assert (await ask).reply == "csv"

        read = {"action": "read", "call_id": call_id}
        text = await tool_ok(mcp, "functions", {**read, "file": "notes.txt"})
        assert text["content"] == notes.decode() and text["next_offset"] is None
        assert "content_base64" not in text and text["size"] == len(notes)
        pages, offset = [], 0
        while offset is not None:
            got = await tool_ok(
                mcp, "functions", {**read, "file": "out/blob.bin", "offset": offset, "limit": 4096}
            )
            pages.append(base64.b64decode(got["content_base64"]))
            offset = got["next_offset"]
        assert b"".join(pages) == blob and len(pages) == 3

        legacy_file = await tool_ok(
            mcp,
            "get_crew_function_call",
            {"call_id": call_id, "file": "out/blob.bin", "offset": 10000},
        )
        assert base64.b64decode(legacy_file["content_base64"]) == blob[10000:]
        legacy_status = await tool_ok(
            mcp, "get_crew_function_call", {"call_id": call_id, "after": 0, "message_limit": 5}
        )
        assert [m["text"] for m in legacy_status["messages"]] == ["two"]

        await runtime.finish_execution(call_id, final_message="done: csv")
        final = await tool_ok(mcp, "functions", status)
        assert final["status"] == "completed" and final["answer"] == "done: csv"
        assert final["error"] is None and final["has_result"] is False and final["ended_at"]
        assert {f["name"]: (f["size"], f["text"]) for f in final["files"]} == {
            "notes.txt": (len(notes), True),
            "out/blob.bin": (len(blob), False),
        }
        assert final["caller"] == "user:alice"

        # A quick call in one tool call: the receipt waits for the end and carries it.
        async def run_next() -> None:
            execution = await runtime.claim_execution([demo], wait_seconds=10)
            await runtime.finish_execution(execution.call_id, final_message="quick")

        running = asyncio.create_task(run_next())
        quick = await tool_ok(
            mcp,
            "functions",
            {**call, "submission_id": "try-2", "inputs": {"text": "q"}, "wait_seconds": 10},
        )
        await running
        assert quick["status"] == "completed" and quick["created"] is True
        assert quick["outcome"]["answer"] == "quick"
        assert quick["outcome"]["call_id"] == quick["call_id"]


async def test_legacy_tool_takes_the_status_and_read_target_fields_G2_F7_F8(
    gateway, alice_token, demo, echo, runtime, mcp_session
):
    """G2 F7 F8: the legacy get_crew_function_call takes what functions action=status and
    action=read take: an optional crew or workflow_id (at most one), checked against the
    call, refused with the text functions gives."""
    async with mcp_session(gateway.mcp_url, alice_token) as mcp:
        listed_tools = {t.name: t for t in (await mcp.list_tools()).tools}
        legacy = listed_tools["get_crew_function_call"].input_schema["properties"]
        assert {"crew", "workflow_id"} <= set(legacy)

        receipt = await tool_ok(
            mcp,
            "functions",
            {"action": "call", "crew": "demo", "function": "echo", "inputs": {"text": "hi"}},
        )
        call_id = receipt["call_id"]
        execution = await runtime.claim_execution([demo], wait_seconds=10)
        assert execution is not None and execution.call_id == call_id
        await runtime.report(call_id, progress="halfway", messages=["one"], sequence=1)
        await runtime.upload_file(call_id, "notes.txt", b"notes\n")

        status = await tool_ok(mcp, "get_crew_function_call", {"call_id": call_id, "crew": "demo"})
        assert status["call_id"] == call_id and status["target"] == "crew:demo"
        assert status["progress"] == "halfway"
        assert status == await tool_ok(
            mcp, "functions", {"action": "status", "call_id": call_id, "crew": "demo"}
        )

        for wrong in ({"crew": "other"}, {"workflow_id": "wf-9"}):
            refused = await tool_error(mcp, "get_crew_function_call", {"call_id": call_id, **wrong})
            assert refused == await tool_error(
                mcp, "functions", {"action": "status", "call_id": call_id, **wrong}
            )
            target = f"crew:{wrong['crew']}" if "crew" in wrong else "workflow:wf-9"
            assert refused == (
                "NOT_FOUND",
                f"call {call_id!r} is not a call of {target}; check the call_id and the crew "
                "or workflow_id (or leave them out: the call_id is enough)",
            )

        page = await tool_ok(
            mcp, "get_crew_function_call", {"call_id": call_id, "file": "notes.txt", "crew": "demo"}
        )
        assert page["file"] == "notes.txt" and page["content"] == "notes\n"
        assert page == await tool_ok(
            mcp, "functions", {"action": "read", "call_id": call_id, "file": "notes.txt"}
        )
        read = {"call_id": call_id, "file": "notes.txt", "crew": "other"}
        assert await tool_error(mcp, "get_crew_function_call", read) == await tool_error(
            mcp, "functions", {"action": "read", **read}
        )

        code, text = await tool_error(
            mcp, "get_crew_function_call", {"call_id": call_id, "crew": "demo", "workflow_id": "w"}
        )
        assert code == "INVALID_ARGUMENT"
        assert text == (
            "invalid arguments for get_crew_function_call: this tool takes at most one of "
            "crew or workflow_id (got crew, workflow_id)"
        )
        code, text = await tool_error(
            mcp, "get_crew_function_call", {"call_id": call_id, "file": "notes.txt", "after": 0}
        )
        assert text.endswith(
            "a read (with file) does not take after; it takes call_id, file, offset, limit, "
            "crew, workflow_id"
        )
        await runtime.finish_execution(call_id, final_message="done")


async def test_functions_tool_refusals_carry_the_services_text_G2_F3_F5_F15_A3(
    gateway, api, operator_token, alice_token, make_token, demo, echo, mcp_session
):
    """G2 F3 F5 F15 A3: invalid inputs list every violation and take no slot; a full target
    is busy (the text names the limit); strangers get NOT_FOUND; cancel ends a call."""
    limited = await api(operator_token).post(
        "/api/v1/tools/targets",
        json={"action": "set_limit", "target": "crew:demo", "running_limit": 1},
    )
    assert limited.status_code == 200, limited.text
    assert limited.json()["running_limit"] == 1
    bob_token = await make_token("user:bob")
    call = {"action": "call", "crew": "demo", "function": "echo"}

    async with mcp_session(gateway.mcp_url, alice_token) as mcp:
        code, text = await tool_error(
            mcp, "functions", {**call, "inputs": {"count": "two", "colour": "red"}}
        )
        assert code == "INVALID_ARGUMENT"
        assert text.startswith("inputs for crew:demo echo are invalid (3 problems)")
        for problem in (
            "inputs.text: missing (required)",
            "inputs.colour: unknown (not in the schema)",
            "inputs.count: expected integer, got string",
        ):
            assert problem in text

        receipt = await tool_ok(mcp, "functions", {**call, "inputs": {"text": "a"}})
        call_id = receipt["call_id"]  # the invalid call took no slot of the limit of 1
        code, text = await tool_error(mcp, "functions", {**call, "inputs": {"text": "b"}})
        assert code == "RESOURCE_EXHAUSTED"
        assert text.startswith("busy: crew:demo is running 1 calls and its running limit is 1")
        # A waiting call (the gateway adds its own retry key, vouched fresh) is busy too.
        code, text = await tool_error(
            mcp, "functions", {**call, "inputs": {"text": "b"}, "wait_seconds": 5}
        )
        assert code == "RESOURCE_EXHAUSTED" and text.startswith("busy: crew:demo")

        code, text = await tool_error(
            mcp, "functions", {"action": "status", "call_id": call_id, "function": "echo"}
        )
        assert code == "INVALID_ARGUMENT"
        assert text == (
            "invalid arguments for functions: action 'status' does not take function; it "
            "takes call_id, after, message_limit, after_event, event_limit, wait_seconds, "
            "seen_version, crew, workflow_id"
        )
        # A target given with the call_id must be the call's own (the seed's
        # `functions call-status --workflow <id>`).
        mine = await tool_ok(
            mcp, "functions", {"action": "status", "call_id": call_id, "crew": "demo"}
        )
        assert mine["call_id"] == call_id
        code, text = await tool_error(
            mcp, "functions", {"action": "cancel", "call_id": call_id, "workflow_id": "wf-9"}
        )
        assert code == "NOT_FOUND" and "is not a call of workflow:wf-9" in text
        code, text = await tool_error(mcp, "functions", {"action": "list"})
        assert text.endswith("action 'list' needs exactly one of crew or workflow_id")
        code, text = await tool_error(mcp, "functions", {"action": "list", "workflow_id": "nope"})
        assert code == "NOT_FOUND"
        code, text = await tool_error(mcp, "get_crew_function_call", {"call_id": "x", "limit": 9})
        assert text == "invalid arguments for get_crew_function_call: limit needs file too"

        code, text = await tool_error(
            mcp, "functions", {"action": "reply", "call_id": call_id, "text": "hm"}
        )
        assert code == "FAILED_PRECONDITION"

    async with mcp_session(gateway.mcp_url, bob_token) as stranger:
        for args in (
            {"action": "status", "call_id": call_id},
            {"action": "read", "call_id": call_id, "file": "x.txt"},
            {"action": "reply", "call_id": call_id, "text": "hi"},
            {"action": "cancel", "call_id": call_id},
        ):
            assert await tool_error(stranger, "functions", args) == (
                "NOT_FOUND",
                NOT_FOUND_TEXT.format(call_id),
            )
        assert await tool_error(stranger, "get_crew_function_call", {"call_id": call_id}) == (
            "NOT_FOUND",
            NOT_FOUND_TEXT.format(call_id),
        )

    async with mcp_session(gateway.mcp_url, alice_token) as mcp:
        cancelled = await tool_ok(mcp, "functions", {"action": "cancel", "call_id": call_id})
        assert cancelled["status"] == "cancelled" and cancelled["ended_at"]
        assert cancelled["error"] == "cancelled by user:alice"
        repeated = await tool_ok(mcp, "functions", {"action": "cancel", "call_id": call_id})
        assert repeated["status"] == "cancelled"  # cancelling is idempotent
        again = await tool_ok(mcp, "functions", {**call, "inputs": {"text": "c"}})
        assert again["created"] and again["call_id"] != call_id  # the slot is free again


async def test_targets_register_with_functions_and_owners_declare_over_the_api_F1_F5_C1(
    gateway, api, operator_token, make_token
):
    """F1 F5 C1: register writes messaging and functions (running limit); set_limit changes
    it; the owner declares and removes functions (`declarations`); others may not."""
    ops = api(operator_token)
    owner = api(await make_token("user:dana"))
    targets = "/api/v1/tools/targets"
    registered = await ops.post(
        targets,
        json={
            "action": "register",
            "target": "workflow:wf-1",
            "owner": "user:dana",
            "running_limit": 3,
        },
    )
    assert registered.status_code == 200, registered.text
    assert registered.json()["running_limit"] == 3
    assert registered.json()["effective_running_limit"] == 3
    default = await ops.post(targets, json={"action": "set_limit", "target": "workflow:wf-1",
                                            "running_limit": 0})  # fmt: skip
    assert default.json()["running_limit"] == 0 and default.json()["effective_running_limit"] == 4
    got = await ops.post(targets, json={"action": "get", "target": "workflow:wf-1"})
    assert got.json()["owner"] == "user:dana" and got.json()["effective_running_limit"] == 4
    refused = await owner.post(
        targets, json={"action": "set_limit", "target": "workflow:wf-1", "running_limit": 9}
    )
    assert refused.status_code == 403

    declarations = "/api/v1/tools/declarations"
    declaration = {
        "action": "declare",
        "target": "workflow:wf-1",
        "name": "report",
        "description": "Write the regional report.",
        "input_schema": {"type": "object", "properties": {"region": {"type": "string"}}},
        "allowed_callers": ["user:*"],
        "workflow": {
            "route": "reports/regional",
            "allowed_groups": ["draft"],
            "variables": [{"name": "region", "type": "string", "required": True}],
        },
    }
    declared = await owner.post(declarations, json=declaration)
    assert declared.status_code == 200, declared.text
    assert declared.json()["workflow"]["variables"] == [
        {"name": "region", "type": "string", "required": True}
    ]
    by_operator = await ops.post(declarations, json=declaration)
    assert by_operator.status_code == 403
    assert "only the owner of workflow:wf-1 (user:dana)" in by_operator.json()["error"]["message"]
    bad = await owner.post(
        declarations, json={**declaration, "input_schema": {"type": "object", "minimum": "x"}}
    )
    assert bad.status_code == 400 and "input_schema" in bad.json()["error"]["message"]

    removed = await owner.post(
        declarations, json={"action": "remove", "target": "workflow:wf-1", "name": "report"}
    )
    assert removed.json() == {"removed": True, "target": "workflow:wf-1", "name": "report"}
    again = await owner.post(
        declarations, json={"action": "remove", "target": "workflow:wf-1", "name": "report"}
    )
    assert again.status_code == 404


async def test_a_start_receipt_says_so_in_the_mcp_status_L7_F9(
    gateway, alice_token, demo, deploy, echo, runtime, mcp_session
):
    """L7/F9: over MCP, a completed call of a `starts_work` function says
    `start_receipt: true` with a note that the work itself is not finished; a completed
    call of another function says `start_receipt: false` and has no note."""
    async with mcp_session(gateway.mcp_url, alice_token) as mcp:
        ended = {}
        for function in ("deploy", "echo"):
            inputs = {} if function == "deploy" else {"text": "x"}
            receipt = await tool_ok(
                mcp,
                "functions",
                {"action": "call", "crew": "demo", "function": function, "inputs": inputs},
            )
            execution = await runtime.claim_execution([demo], wait_seconds=10)
            await runtime.finish_execution(execution.call_id, final_message="deployment 7 started")
            ended[function] = await tool_ok(
                mcp, "functions", {"action": "status", "call_id": receipt["call_id"]}
            )
    started, finished = ended["deploy"], ended["echo"]
    assert started["status"] == finished["status"] == "completed"
    assert started["starts_work"] is True and started["start_receipt"] is True
    assert started["note"] == (
        "it returned a start receipt: the function only starts work, and the work itself "
        "is not finished"
    )
    assert started["answer"] == "deployment 7 started"
    assert finished["start_receipt"] is False and "note" not in finished
