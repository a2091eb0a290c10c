"""The execution protocol and the call record: claim, report, files, ask, finish (R1, F7-F12)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import time
import uuid

import psycopg
import pytest

from agentworks.client.common import target_ref
from agentworks.client.functions import call_result, page_bytes, state_name
from agentworks.core import errors
from agentworks.core.targets import TargetKey
from agentworks.functions.v1 import functions_pb2 as f
from agentworks.server.db import Database
from agentworks.server.testing import until
from agentworks_functions.store import FunctionsStore
from agentworks_functions.store.sql import _CLAIM_ONE
from tests.fixtures.plans import blocks_hit, prepare_generic


async def test_claim_long_poll_is_woken_by_a_new_call_R1(clients, echo, runtime):
    """R1: a waiting ClaimExecution returns as soon as a call arrives (LISTEN/NOTIFY)."""
    alice = await clients("user:alice")
    claim = asyncio.create_task(runtime.claim_execution(["crew:demo"], wait_seconds=20))
    await asyncio.sleep(0)  # let the claim reach the server before the call
    started = time.monotonic()
    receipt = await alice.call("crew:demo", echo, {"text": "wake up"})
    execution = await asyncio.wait_for(claim, 10)
    assert execution.call_id == receipt.call_id
    assert time.monotonic() - started < 5  # far below the 20 s wait: woken, not timed out
    stranger = await clients("agent:beta/bot")
    with pytest.raises(errors.PermissionDenied, match="may not run executions of crew:demo"):
        await stranger.claim_execution(["crew:demo"])


async def test_reports_that_arrive_out_of_order_are_all_kept_and_retries_are_not_F7(
    clients, echo, runtime
):
    """F7: reports sent concurrently can commit out of order; each is stored once (a
    retry is known by its exact sequence, not by being below the highest one), and the
    progress line is that of the highest sequence."""
    alice = await clients("user:alice")
    receipt = await alice.call("crew:demo", echo, {"text": "x"})
    call_id = receipt.call_id
    await runtime.claim_execution(["crew:demo"], wait_seconds=5)
    await runtime.report(call_id, progress="2 of 2", messages=["second"], sequence=2)
    await runtime.report(call_id, progress="1 of 2", messages=["first"], sequence=1)
    await runtime.report(call_id, messages=["first"], sequence=1)  # a retry: not stored
    await runtime.report(call_id, messages=["second"], sequence=2)  # a retry: not stored
    page = await alice.get_status(call_id, after=-1)
    assert [m.text for m in page.messages] == ["second", "first"]
    assert page.progress == "2 of 2"


async def test_a_runtime_gives_an_execution_up_interrupted_with_its_evidence_F12(
    clients, echo, runtime
):
    """F12: FinishExecution `interrupted` (a stopping runtime) ends the call
    `interrupted` with the reason, keeping its progress and messages; giving it up again
    is answered as done; `failed` and `interrupted` together are refused."""
    alice = await clients("user:alice")
    receipt = await alice.call("crew:demo", echo, {"text": "x"})
    call_id = receipt.call_id
    await runtime.claim_execution(["crew:demo"], wait_seconds=5)
    await runtime.report(call_id, progress="half", messages=["step 1 done"], sequence=1)
    with pytest.raises(errors.InvalidArgument, match="failed and interrupted are two endings"):
        await runtime.finish_execution(call_id, failed=True, interrupted=True)
    reason = "the runtime stopped (SIGTERM) before the execution ended; call again"
    done = await runtime.finish_execution(call_id, interrupted=True, error=reason)
    assert state_name(done.status) == "interrupted"
    again = await runtime.finish_execution(call_id, interrupted=True, error=reason)
    assert state_name(again.status) == "interrupted"
    with pytest.raises(errors.PreconditionFailed, match="interrupted"):
        await runtime.finish_execution(call_id, final_message="too late")
    status = await alice.get_status(call_id, after=-1)
    assert (state_name(status.status), status.error, status.progress) == (
        "interrupted",
        reason,
        "half",
    )
    assert [m.text for m in status.messages] == ["step 1 done"]


async def test_a_runtime_withdraws_a_question_it_stopped_waiting_for_F11(clients, echo, runtime):
    """F11: a runtime whose ask timed out withdraws the question: the call is running
    again, its status no longer shows it, a reply is refused, and a new question can be
    asked (it used to be refused while the old one stayed pending). Withdrawing after a
    reply came returns the reply."""
    alice = await clients("user:alice")
    receipt = await alice.call("crew:demo", echo, {"text": "x"})
    call_id = receipt.call_id
    await runtime.claim_execution(["crew:demo"], wait_seconds=5)
    await runtime.ask_input(call_id, "ask-1", "Deploy now?")
    assert (await alice.get_status(call_id)).question == "Deploy now?"
    withdrawn = await runtime.ask_input(call_id, "ask-1", "", withdraw=True)
    assert (withdrawn.answered, state_name(withdrawn.status)) == (False, "running")
    status = await alice.get_status(call_id)
    assert (state_name(status.status), status.question) == ("running", "")
    with pytest.raises(errors.PreconditionFailed, match="is not waiting for input") as no_q:
        await alice.reply(call_id, "yes")
    # Over gRPC the refusals carry their reasons (P6): a program branches on them.
    assert (no_q.value.reason, no_q.value.metadata) == (
        "NO_PENDING_QUESTION",
        {"call_id": call_id, "status": "running"},
    )
    with pytest.raises(
        errors.PreconditionFailed, match="was withdrawn; ask again with a new"
    ) as withdrawn_q:
        await runtime.ask_input(call_id, "ask-1", "Deploy now?")
    assert (withdrawn_q.value.reason, withdrawn_q.value.metadata) == (
        "QUESTION_WITHDRAWN",
        {"call_id": call_id, "ask_id": "ask-1"},
    )
    with pytest.raises(errors.NotFound, match="has no question 'ask-9'"):
        await runtime.ask_input(call_id, "ask-9", "", withdraw=True)

    await runtime.ask_input(call_id, "ask-2", "Deploy tomorrow?")
    assert (await alice.get_status(call_id)).question == "Deploy tomorrow?"
    await alice.reply(call_id, "tomorrow it is")
    late = await runtime.ask_input(call_id, "ask-2", "", withdraw=True)
    assert (late.answered, late.reply, state_name(late.status)) == (
        True,
        "tomorrow it is",
        "running",
    )


async def test_status_pages_messages_and_events_without_raw_tool_data_F7(clients, echo, runtime):
    """F7: messages page by after/next_after, events by after_event/next_after_event."""
    alice = await clients("user:alice")
    receipt = await alice.call("crew:demo", echo, {"text": "x"})
    call_id = receipt.call_id
    await runtime.claim_execution(["crew:demo"], wait_seconds=5)
    await runtime.report(call_id, progress="1/3", messages=[f"m{i}" for i in range(5)], sequence=1)
    await runtime.report(
        call_id,
        events=[
            {"kind": "assistant", "text": "I will search"},
            {"kind": "tool_call", "tool_name": "search", "text": '{"query": "secret args"}'},
            {"kind": "tool_result", "tool_name": "search", "text": "raw secret result"},
        ],
        sequence=2,
    )
    await runtime.report(call_id, messages=["m0 again?"], sequence=2)  # a retry: not stored

    page = await alice.get_status(call_id, after=-1, message_limit=2, event_limit=2)
    assert page.progress == "1/3" and state_name(page.status) == "running" and page.started
    assert [(m.index, m.text) for m in page.messages] == [(0, "m0"), (1, "m1")]
    assert page.next_after == 1
    assert [(e.index, e.kind, e.text, e.tool_name) for e in page.events] == [
        (0, "assistant", "I will search", ""),
        (1, "tool_call", "", "search"),
    ]
    page = await alice.get_status(
        call_id, after=page.next_after, message_limit=10, after_event=page.next_after_event
    )
    assert [m.text for m in page.messages] == ["m2", "m3", "m4"] and page.next_after == 4
    assert [(e.kind, e.text) for e in page.events] == [("tool_result", "")]
    assert "secret" not in str(page)
    empty = await alice.get_status(call_id, after=4, after_event=2)
    assert empty.messages == [] and empty.next_after == 4 and empty.next_after_event == 2
    for bad in ({"after": -2}, {"message_limit": 500}, {"wait_seconds": 26}):
        with pytest.raises(errors.InvalidArgument):
            await alice.get_status(call_id, **bad)


async def test_progress_and_a_pending_question_never_complete_a_call_F9_F11(
    clients, owner, echo, runtime
):
    """F9 F11: progress and a question leave the call open; the reply lets it go on."""
    alice = await clients("user:alice")
    receipt = await alice.call("crew:demo", echo, {"text": "x"})
    call_id = receipt.call_id
    await runtime.claim_execution(["crew:demo"], wait_seconds=5)
    await runtime.report(call_id, progress="almost done", messages=["99%"])
    with pytest.raises(errors.PreconditionFailed, match="not waiting for input"):
        await alice.reply(call_id, "too early")

    asked = await runtime.ask_input(call_id, "ask-1", "Which colour?", wait_seconds=0)
    assert not asked.answered and state_name(asked.status) == "waiting_for_input"
    status = await alice.get_status(call_id)
    assert state_name(status.status) == "waiting_for_input" and status.question == "Which colour?"
    # Reads change nothing (F11): the version stays.
    assert (await owner.get_status(call_id)).version == status.version

    waiting = asyncio.create_task(
        runtime.ask_input(call_id, "ask-1", "Which colour?", wait_seconds=20)
    )
    answered = await owner.reply(call_id, "blue")
    assert state_name(answered.status) == "running" and answered.question == ""
    reply = await asyncio.wait_for(waiting, 10)
    assert reply.answered and reply.reply == "blue"
    # Asking again with the same ask_id returns the same answer, no new question.
    assert (await runtime.ask_input(call_id, "ask-1", "Which colour?")).reply == "blue"
    assert state_name((await alice.get_status(call_id)).status) == "running"

    await runtime.finish_execution(call_id, final_message="painted it blue")
    final = await alice.get_status(call_id)
    assert state_name(final.status) == "completed" and final.answer == "painted it blue"
    assert not final.result_json


async def test_status_long_poll_returns_on_the_next_change_F7(clients, echo, runtime):
    """F7: status with wait_seconds waits for a change instead of the caller sleeping."""
    alice = await clients("user:alice")
    receipt = await alice.call("crew:demo", echo, {"text": "x"})
    first = await alice.get_status(receipt.call_id)
    waiting = asyncio.create_task(
        alice.get_status(receipt.call_id, wait_seconds=20, seen_version=first.version)
    )
    await runtime.claim_execution(["crew:demo"], wait_seconds=5)
    changed = await asyncio.wait_for(waiting, 10)
    assert changed.started and changed.version > first.version


async def test_files_read_back_in_bounded_pages_byte_exact_F8_P6(clients, echo, runtime):
    """F8: a 5 MiB binary file reads back byte-exact in pages; text pages stay valid UTF-8."""
    alice = await clients("user:alice")
    receipt = await alice.call("crew:demo", echo, {"text": "x"})
    call_id = receipt.call_id
    await runtime.claim_execution(["crew:demo"], wait_seconds=5)
    blob = os.urandom(5 * 1024 * 1024 + 123)
    info = await runtime.upload_file(call_id, "data/blob.bin", blob)
    assert info.size == len(blob) and not info.text
    text = "héllo wörld ✓ " * 40
    await runtime.upload_file(call_id, "notes.txt", text.encode())

    status = await alice.get_status(call_id)
    assert {(f.name, f.size, f.text) for f in status.files} == {
        ("data/blob.bin", len(blob), False),
        ("notes.txt", len(text.encode()), True),
    }

    data, offset, pages = bytearray(), 0, 0
    while True:
        page = await alice.read_file(call_id, "data/blob.bin", offset=offset, limit=1024 * 1024)
        assert page.WhichOneof("data") == "content_base64" and page.size == len(blob)
        data += base64.b64decode(page.content_base64)
        pages += 1
        if not page.HasField("next_offset"):
            break
        offset = page.next_offset
    assert bytes(data) == blob and pages == 6

    collected, offset = "", 0
    while True:  # 7-byte pages split multi-byte characters: each page is trimmed to whole ones
        page = await alice.read_file(call_id, f".calls/{call_id}/notes.txt", offset=offset, limit=7)
        assert page.WhichOneof("data") == "content"
        collected += page.content
        if not page.HasField("next_offset"):
            break
        offset = page.next_offset
    assert collected == text
    assert (
        page_bytes(await alice.read_file(call_id, "notes.txt", offset=0, limit=3)) == b"h\xc3\xa9"
    )

    for bad in ("../etc/passwd", "/etc/passwd", "data/../../x", "a\\b", "./notes.txt"):
        with pytest.raises(errors.InvalidArgument, match="not a path inside"):
            await alice.read_file(call_id, bad)
        with pytest.raises(errors.InvalidArgument):
            await runtime.upload_file(call_id, bad, b"x")
    with pytest.raises(errors.InvalidArgument, match="between 1 and 1048576"):
        await alice.read_file(call_id, "notes.txt", limit=2 * 1024 * 1024)
    with pytest.raises(errors.InvalidArgument, match="past the end"):
        await alice.read_file(call_id, "notes.txt", offset=10**9)
    with pytest.raises(errors.NotFound, match="status lists the call's files"):
        await alice.read_file(call_id, "missing.txt")


async def test_output_schema_correction_turn_is_taken_once_and_only_once_F10(
    clients, summarize, runtime
):
    """F10: missing result -> one correction turn; still invalid -> failed, final text kept."""
    alice = await clients("user:alice")
    receipt = await alice.call("crew:demo", summarize, {"text": "x"})
    call_id = receipt.call_id
    await runtime.claim_execution(["crew:demo"], wait_seconds=5)

    first = await runtime.finish_execution(call_id, final_message="here you go")
    assert first.correction_requested and state_name(first.status) == "running"
    assert "FUNCTION_RESULT_FILE" in first.correction_prompt
    assert "was not written" in first.correction_prompt
    # A retried first finish gets the same answer: still one correction turn.
    retried = await runtime.finish_execution(call_id, final_message="here you go")
    assert retried.correction_requested and retried.correction_prompt == first.correction_prompt
    status = await alice.get_status(call_id)
    assert state_name(status.status) == "running" and status.correction_turn
    assert [e.kind for e in status.events] == ["correction"]

    await runtime.upload_file(call_id, "result.json", b'{"summary": 1}')
    second = await runtime.finish_execution(
        call_id, final_message="still not JSON", correction_round=1
    )
    assert state_name(second.status) == "failed" and not second.correction_requested
    status = await alice.get_status(call_id)
    assert state_name(status.status) == "failed" and status.answer == "still not JSON"
    assert "after the correction turn" in status.error
    assert "result.summary: expected string, got integer" in status.error
    assert "result.words: missing (required)" in status.error
    assert [e.kind for e in status.events] == ["correction"]
    assert not status.result_json


async def test_correction_turn_then_valid_result_or_valid_final_message_completes_F10(
    clients, summarize, runtime
):
    """F10: a corrected result completes; so does a final message that is valid JSON."""
    alice = await clients("user:alice")
    fixed = await alice.call("crew:demo", summarize, {"text": "a"})
    fallback = await alice.call("crew:demo", summarize, {"text": "b"})
    for _ in range(2):
        await runtime.claim_execution(["crew:demo"], wait_seconds=5)

    await runtime.upload_file(fixed.call_id, "result.json", b"not json")
    first = await runtime.finish_execution(fixed.call_id, final_message="done")
    assert first.correction_requested and "not valid JSON" in first.correction_prompt
    await runtime.upload_file(fixed.call_id, "result.json", b'{"summary": "a", "words": 1}')
    fixed_finish = await runtime.finish_execution(
        fixed.call_id, final_message="done", correction_round=1
    )
    assert state_name(fixed_finish.status) == "completed"
    assert call_result(await alice.get_status(fixed.call_id)) == {"summary": "a", "words": 1}

    assert (await runtime.finish_execution(fallback.call_id)).correction_requested
    final = '{"summary": "from the message", "words": 3}'
    done = await runtime.finish_execution(fallback.call_id, final_message=final, correction_round=1)
    assert state_name(done.status) == "completed"
    status = await alice.get_status(fallback.call_id)
    assert call_result(status) == {"summary": "from the message", "words": 3}
    assert status.answer == final


async def test_an_execution_failure_gets_no_correction_turn_F10(clients, summarize, runtime):
    """F10: a failed execution stays a failure, even with a missing result."""
    alice = await clients("user:alice")
    receipt = await alice.call("crew:demo", summarize, {"text": "x"})
    await runtime.claim_execution(["crew:demo"], wait_seconds=5)
    done = await runtime.finish_execution(
        receipt.call_id, failed=True, final_message="partial", error="tool crashed"
    )
    assert state_name(done.status) == "failed" and not done.correction_requested
    status = await alice.get_status(receipt.call_id)
    assert (state_name(status.status), status.error, status.answer) == (
        "failed",
        "tool crashed",
        "partial",
    )
    assert not status.correction_turn


async def test_a_retried_finish_gets_the_same_answer_and_a_different_one_is_refused_R1_F10(
    clients, echo, summarize, runtime
):
    """R1 F10: finishing an ended call again with the same outcome (its first answer was
    lost) answers as the first did; a finish that differs (another final message, a
    failure after a success, another error) is refused with FAILED_PRECONDITION and
    changes nothing."""
    alice = await clients("user:alice")
    done = await alice.call("crew:demo", echo, {"text": "1"})
    broken = await alice.call("crew:demo", summarize, {"text": "2"})
    for _ in range(2):
        await runtime.claim_execution(["crew:demo"], wait_seconds=5)
    await runtime.finish_execution(done.call_id, final_message="first")
    await runtime.finish_execution(broken.call_id, failed=True, error="tool crashed")
    assert state_name(
        (await runtime.finish_execution(done.call_id, final_message="first")).status
    ) == ("completed")
    again = await runtime.finish_execution(broken.call_id, failed=True, error="tool crashed")
    assert state_name(again.status) == "failed"
    for call_id, conflicting in (
        (done.call_id, {"final_message": "second"}),
        (done.call_id, {"failed": True, "final_message": "first", "error": "boom"}),
        (broken.call_id, {"failed": True, "error": "another cause"}),
        (broken.call_id, {"final_message": ""}),
    ):
        with pytest.raises(errors.PreconditionFailed, match="by another finish") as refused:
            await runtime.finish_execution(call_id, **conflicting)
        assert "was not applied" in refused.value.message
    first, second = await alice.get_status(done.call_id), await alice.get_status(broken.call_id)
    assert (state_name(first.status), first.answer, first.error) == ("completed", "first", "")
    assert (state_name(second.status), second.error) == ("failed", "tool crashed")


async def test_a_lost_lease_ends_interrupted_with_saved_evidence_never_restarted_F12(
    clients, echo, runtime
):
    """F12: a runtime that stops renewing its lease -> interrupted; evidence stays readable."""
    alice = await clients("user:alice")
    receipt = await alice.call("crew:demo", echo, {"text": "x"})
    call_id = receipt.call_id
    await runtime.claim_execution(["crew:demo"], wait_seconds=5, lease_seconds=1)
    await runtime.report(call_id, progress="halfway", messages=["did step 1"])
    await runtime.upload_file(call_id, "partial.csv", b"a,b\n1,2\n")

    status = await alice.wait(call_id, timeout=20)  # long-polls; the sweeper interrupts it
    assert (
        state_name(status.status) == "interrupted" and "stopped renewing its lease" in status.error
    )
    assert status.progress == "halfway"
    assert [m.text for m in (await alice.get_status(call_id)).messages] == ["did step 1"]
    assert await alice.read_file_bytes(call_id, "partial.csv") == b"a,b\n1,2\n"
    with pytest.raises(errors.PreconditionFailed, match="recorded as interrupted"):
        await runtime.heartbeat_execution(call_id)
    with pytest.raises(errors.PreconditionFailed, match="recorded as interrupted"):
        await runtime.finish_execution(call_id, final_message="too late")
    assert await runtime.claim_execution(["crew:demo"]) is None  # never restarted


async def test_completed_calls_stay_readable_after_a_restart_F12(
    clients, echo, runtime, functions, start_functions, identity
):
    """F12: a completed call, its messages and files survive the service restarting."""
    alice = await clients("user:alice")
    receipt = await alice.call("crew:demo", echo, {"text": "x"})
    await runtime.claim_execution(["crew:demo"], wait_seconds=5)
    await runtime.report(receipt.call_id, messages=["working"])
    await runtime.upload_file(receipt.call_id, "out.txt", b"kept")
    await runtime.finish_execution(receipt.call_id, final_message="finished")
    await functions.stop(0)

    restarted = await start_functions()
    again = await clients("user:alice", address=restarted.address)
    status = await again.get_status(receipt.call_id)
    assert (state_name(status.status), status.answer) == ("completed", "finished")
    assert [m.text for m in status.messages] == ["working"]
    assert await again.read_file_bytes(receipt.call_id, "out.txt") == b"kept"


async def test_a_starts_work_function_completes_with_its_start_receipt_F9(
    clients, owner, demo, runtime
):
    """F9: a function declared to start work completes when the work is started."""
    await owner.declare_function(
        demo, "deploy", input_schema={"type": "object"}, starts_work=True, allowed_callers=["*"]
    )
    alice = await clients("user:alice")
    receipt = await alice.call(demo, "deploy", {})
    execution = await runtime.claim_execution([demo], wait_seconds=5)
    assert execution.starts_work
    await runtime.finish_execution(receipt.call_id, final_message="deployment 42 started")
    status = await alice.get_status(receipt.call_id)
    assert (state_name(status.status), status.answer) == ("completed", "deployment 42 started")


async def test_a_start_receipt_says_so_in_status_and_notice_L7_F9_F13(
    clients, owner, demo, runtime, turn_caller, database_url
):
    """L7/F9/F13: an agent calls a `starts_work` function from a turn; it completes with
    its start receipt. Its status says `starts_work` (a completed one is a start
    receipt), and its completion notice's text and attributes say it returned a start
    receipt, not finished work; a function that does not start work says neither."""
    await owner.declare_function(
        demo, "deploy", input_schema={"type": "object"}, starts_work=True, allowed_callers=["*"]
    )
    await owner.declare_function(
        demo, "build", input_schema={"type": "object"}, allowed_callers=["*"]
    )
    conversation = str(uuid.uuid4())
    agent = turn_caller("agent:alpha/scout", conversation)
    ended = {}
    for function in ("deploy", "build"):
        receipt = await agent.call(demo, function, {}, notify_conversation_id=conversation)
        await runtime.claim_execution([demo], wait_seconds=5)
        await runtime.finish_execution(receipt.call_id, final_message=f"{function} 42 started")
        ended[function] = receipt.call_id
    scout = await clients("agent:alpha/scout")
    deploy = await scout.get_status(ended["deploy"])
    build = await scout.get_status(ended["build"])
    assert state_name(deploy.status) == state_name(build.status) == "completed"
    assert deploy.starts_work and not build.starts_work
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        rows = await (
            await conn.execute("SELECT call_id::text, text, attributes FROM functions.notices")
        ).fetchall()
    notices = {call_id: (text, attributes) for call_id, text, attributes in rows}
    text, attributes = notices[ended["deploy"]]
    assert "ended: completed (it returned a start receipt: the function only starts work" in text
    assert attributes["start_receipt"] is True and attributes["status"] == "completed"
    text, attributes = notices[ended["build"]]
    assert "start receipt" not in text and attributes["start_receipt"] is False


async def test_workflow_function_calls_record_a_run_with_step_history_F14(clients, operator, owner):
    """F14: each call is a new run with its steps; workflow callers scope retry ids."""
    wf = "workflow:wf-build"
    await operator.register_target(wf, owner="user:owner")
    await owner.declare_function(
        wf,
        "build",
        input_schema={"type": "object", "properties": {"branch": {"type": "string"}}},
        allowed_callers=["workflow:*", "user:*"],
        workflow={
            "route": "ci/build",
            "allowed_groups": ["builders"],
            "variables": [
                {"name": "branch", "type": "string", "required": True},
                {"name": "retries", "type": "integer", "default": 2},
            ],
        },
    )
    caller = await clients("workflow:wf-release")
    with pytest.raises(errors.InvalidArgument, match=r"inputs\.branch: missing"):
        await caller.call(wf, "build", {})
    source = {"run_id": "run-7", "step": "build-step", "group": "g1"}
    first = await caller.call(wf, "build", {"branch": "main"}, submission_id="s1", source=source)
    same = await caller.call(wf, "build", {"branch": "main"}, submission_id="s1", source=source)
    other_step = await caller.call(
        wf, "build", {"branch": "main"}, submission_id="s1", source={**source, "step": "deploy"}
    )
    assert same.call_id == first.call_id and other_step.call_id != first.call_id
    alice = await clients("user:alice")
    with pytest.raises(errors.InvalidArgument, match="only for workflow callers"):
        await alice.call(wf, "build", {"branch": "x"}, source=source)

    runner = await clients("workflow:wf-build")
    execution = await runner.claim_execution([wf], wait_seconds=5)
    assert execution.call_id == first.call_id and execution.run_id
    assert execution.workflow.route == "ci/build"
    assert json.loads(execution.variables_json) == {"branch": "main", "retries": 2}
    with pytest.raises(errors.InvalidArgument, match="not among this function's allowed groups"):
        await runner.report(first.call_id, steps=[{"step": "x", "status": "started"}])
    await runner.report(
        first.call_id,
        steps=[
            {"step": "checkout", "group": "builders", "status": "completed"},
            {"step": "compile", "group": "builders", "status": "failed", "detail": "exit 2"},
        ],
    )
    await runner.finish_execution(first.call_id, failed=True, error="compile failed (exit 2)")
    status = await caller.get_status(first.call_id)
    assert state_name(status.status) == "failed" and status.error == "compile failed (exit 2)"
    assert status.run.run_id == execution.run_id and status.run.route == "ci/build"
    assert [(s.step, s.status) for s in status.run.steps] == [
        ("checkout", "completed"),
        ("compile", "failed"),
    ]
    assert status.source.run_id == "run-7" and status.caller == "workflow:wf-release"
    second = await runner.claim_execution([wf], wait_seconds=5)
    assert second.call_id == other_step.call_id and second.run_id != execution.run_id


async def test_a_retry_key_race_quotes_the_callers_own_submission_id_F6_F14(
    clients, echo, database_url
):
    """F6, F14: a twin that loses the insert race with other inputs is refused, naming the
    caller's submission_id, not the run/step/group key it is stored under."""
    db = Database(database_url, pool_size=1)
    await db.start()
    try:
        store = FunctionsStore(db, default_running_limit=10)
        _, declared, _ = await store.function_for_call(TargetKey("crew", "demo"), echo)
        assert declared is not None

        async def create(request_hash: str):
            return await store.create_call(
                call_id=uuid.uuid4(),
                function=declared,
                caller="workflow:wf-release",
                inputs={"text": request_hash},
                variables=None,
                source=None,
                submission_key="run-7/build-step/g1/s1",
                request_hash=request_hash,
                notify_conversation_id=None,
                submission_id="s1",
            )

        first = await create("a")
        assert first.created and not (await create("a")).created  # the twin recovers it
        with pytest.raises(errors.Conflict) as refused:
            await create("b")
        assert "submission_id 's1' was already used" in refused.value.message
        assert "run-7" not in refused.value.message
    finally:
        await db.close()


async def test_status_wait_until_ended_sleeps_through_progress_and_wakes_at_the_end_F7_F11(
    clients, echo, runtime, functions
):
    """F7, F11: `until_ended` holds the read through messages and events, not past the end."""
    alice = await clients("user:alice")
    listener = functions.database.listener
    call_id = (await alice.call("crew:demo", echo, {"text": "x"})).call_id
    await runtime.claim_execution(["crew:demo"], wait_seconds=5)

    # Open for the whole wait: returns at the deadline, still running, not before.
    started = time.monotonic()
    waiting = asyncio.create_task(alice.get_status(call_id, wait_seconds=2, until_ended=True))
    await until(lambda: listener.waiting >= 1)  # the read is parked in its long-poll
    await runtime.report(call_id, progress="1/2", messages=["working"], sequence=1)
    status = await waiting
    assert state_name(status.status) == "running" and time.monotonic() - started >= 1.9

    # Woken by the end, not by the progress before it.
    waiting = asyncio.create_task(alice.get_status(call_id, wait_seconds=20, until_ended=True))
    await until(lambda: listener.waiting >= 1)
    await runtime.report(call_id, events=[{"kind": "assistant", "text": "nearly"}], sequence=2)
    await asyncio.sleep(0.3)  # time for a wrong wake-up to end the read: it must not
    assert not waiting.done()
    started = time.monotonic()
    await runtime.finish_execution(call_id, final_message="done")
    status = await asyncio.wait_for(waiting, 10)
    assert state_name(status.status) == "completed" and time.monotonic() - started < 5
    # The client's wait() is that one request.
    assert state_name((await alice.wait(call_id, timeout=5)).status) == "completed"


async def test_a_call_can_wait_for_its_own_end_F4_F7(
    clients, echo, runtime, database_url, functions
):
    """F4 F7: Call with wait_seconds returns the ended call as its outcome, in one request;
    still open at the deadline, the receipt alone; a bad wait stores nothing."""
    alice = await clients("user:alice")
    listener = functions.database.listener

    async def run_one() -> None:
        execution = await runtime.claim_execution(["crew:demo"], wait_seconds=10)
        await runtime.finish_execution(execution.call_id, final_message="echo: hi")

    worker = asyncio.create_task(run_one())
    receipt = await alice.call("crew:demo", echo, {"text": "hi"}, wait_seconds=10)
    await worker
    assert receipt.HasField("outcome") and state_name(receipt.status) == "completed"
    assert receipt.outcome.call_id == receipt.call_id
    assert receipt.outcome.answer == "echo: hi"

    started = time.monotonic()
    pending = await alice.call("crew:demo", echo, {"text": "nobody runs me"}, wait_seconds=1)
    assert not pending.HasField("outcome") and state_name(pending.status) == "running"
    assert time.monotonic() - started >= 0.9
    await alice.cancel(pending.call_id)

    # A retry with the same key waits for the first call's end: one call, one outcome.
    def keyed() -> asyncio.Task:
        return asyncio.create_task(
            alice.call("crew:demo", echo, {"text": "k"}, submission_id="k1", wait_seconds=10)
        )

    first = keyed()
    execution = await runtime.claim_execution(["crew:demo"], wait_seconds=10)
    second = keyed()
    await until(lambda: listener.waiting >= 2)  # both parked, waiting for the one end
    assert not first.done() and not second.done()
    await runtime.finish_execution(execution.call_id, final_message="echo: k")
    for receipt in await asyncio.wait_for(asyncio.gather(first, second), 10):
        assert receipt.call_id == execution.call_id and receipt.outcome.answer == "echo: k"

    # Any end ends the wait: here the caller's own cancel, from elsewhere.
    waiting = asyncio.create_task(alice.call("crew:demo", echo, {"text": "c"}, wait_seconds=10))
    execution = await runtime.claim_execution(["crew:demo"], wait_seconds=10)
    await alice.cancel(execution.call_id)
    receipt = await asyncio.wait_for(waiting, 5)
    assert (
        state_name(receipt.status) == "cancelled"
        and state_name(receipt.outcome.status) == "cancelled"
    )

    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        before = await (await conn.execute("SELECT count(*) FROM functions.calls")).fetchone()
        with pytest.raises(errors.InvalidArgument, match="wait_seconds must be between 0 and 25"):
            await alice.call("crew:demo", echo, {"text": "x"}, wait_seconds=26)
        after = await (await conn.execute("SELECT count(*) FROM functions.calls")).fetchone()
    assert before == after


async def test_a_finish_can_claim_the_next_execution_R1_F10(
    clients, echo, summarize, runtime, database_url
):
    """R1 F10: FinishExecution with claim_next ends the call and claims the next queued one;
    none after a correction request or when none is queued; a bad claim_next ends nothing."""
    alice = await clients("user:alice")
    first = await alice.call("crew:demo", echo, {"text": "1"})
    second = await alice.call("crew:demo", echo, {"text": "2"})
    execution = await runtime.claim_execution(["crew:demo"], wait_seconds=5)
    assert execution.call_id == first.call_id

    async def open_calls() -> int:
        async with await psycopg.AsyncConnection.connect(database_url) as conn:
            row = await (
                await conn.execute("SELECT count(*) FROM functions.calls WHERE status = 'running'")
            ).fetchone()
        assert row is not None
        return row[0]

    before = await open_calls()
    for bad, problem in (
        ({"claim_next": ["crew:other"]}, errors.PermissionDenied),
        ({"claim_next": ["crew:demo"], "wait_seconds": 5}, errors.InvalidArgument),
    ):
        with pytest.raises(problem):
            await finish_claiming(runtime, first.call_id, **bad)
        assert await open_calls() == before

    response = await finish_claiming(runtime, first.call_id, claim_next=["crew:demo"])
    assert state_name(response.status) == "completed"
    assert response.HasField("next") and response.next.call_id == second.call_id
    assert json.loads(response.next.inputs_json)["text"] == "2"
    assert (await alice.get_status(second.call_id)).started

    response = await finish_claiming(runtime, second.call_id, claim_next=["crew:demo"])
    assert state_name(response.status) == "completed" and not response.HasField("next")
    # A retried finish (its answer was lost) still claims what is queued now.
    third = await alice.call("crew:demo", echo, {"text": "3"})
    response = await finish_claiming(runtime, second.call_id, claim_next=["crew:demo"])
    assert state_name(response.status) == "completed" and response.next.call_id == third.call_id
    await runtime.finish_execution(third.call_id, final_message="done")

    # A correction request keeps the execution: nothing else is claimed with it.
    asked = await alice.call("crew:demo", summarize, {"text": "a b c"})
    queued = await alice.call("crew:demo", echo, {"text": "4"})
    execution = await runtime.claim_execution(["crew:demo"], wait_seconds=5)
    assert execution.call_id == asked.call_id
    response = await finish_claiming(runtime, asked.call_id, claim_next=["crew:demo"])
    assert response.correction_requested and not response.HasField("next")
    execution = await runtime.claim_execution(["crew:demo"], wait_seconds=5)
    assert execution.call_id == queued.call_id


async def finish_claiming(runtime, call_id, *, claim_next, wait_seconds=0):
    """FinishExecution with a claim_next, built by hand to reach the wait_seconds field."""
    targets = [target_ref(t) for t in claim_next]
    request = f.FinishExecutionRequest(call_id=call_id, final_message="done")
    request.claim_next.CopyFrom(f.ClaimExecutionRequest(targets=targets, wait_seconds=wait_seconds))
    return await runtime._unary("FinishExecution", request)


def nested(depth: int) -> dict:
    """A JSON object nested `depth` deep: {"a": {"a": ... {} ...}} (`{}` is 1 deep)."""
    value: dict = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


async def test_a_result_too_deep_to_send_back_is_refused_and_statuses_stay_readable_F10_P6(
    clients, owner, demo, runtime
):
    """F10 P6: a result nested deeper than 24 levels (the stated JSON depth limit) is a
    result problem like invalid JSON:
    the one correction turn names it, then the call fails saying so. It is never stored,
    so every status stays readable (it used to complete, then answer nothing). A result
    the database cannot store (NaN, NUL) or Python cannot parse (nested 100,000 deep)
    gets the correction turn too, never INTERNAL; 24 levels complete and read back."""
    await owner.declare_function(
        demo, "anyjson", input_schema={"type": "object"}, output_schema={"type": "object"}
    )
    deep = json.dumps(nested(48))
    receipt = await owner.call(demo, "anyjson", {})
    call_id = receipt.call_id
    await runtime.claim_execution([demo], wait_seconds=5)
    await runtime.upload_file(call_id, "result.json", deep.encode())
    first = await runtime.finish_execution(call_id, final_message="done")
    assert first.correction_requested and state_name(first.status) == "running"
    too_deep = "result nests objects and arrays more than 24 deep; flatten it"
    assert too_deep in first.correction_prompt
    assert state_name((await owner.get_status(call_id)).status) == "running"
    # Still too deep after the correction, and so is the final message's JSON: failed.
    second = await runtime.finish_execution(call_id, final_message=deep, correction_round=1)
    assert state_name(second.status) == "failed"
    status = await owner.get_status(call_id)
    assert state_name(status.status) == "failed" and too_deep in status.error
    assert not status.result_json and status.answer == deep

    for raw, problem in (
        (b'{"a": NaN}', "result.a: nan is not a finite number"),
        (b'{"a": "x\\u0000"}', "result.a contains a NUL character"),
        (b"[" * 100_000 + b"]" * 100_000, "nests objects and arrays too deep to read"),
    ):
        receipt = await owner.call(demo, "anyjson", {})
        await runtime.claim_execution([demo], wait_seconds=5)
        await runtime.upload_file(receipt.call_id, "result.json", raw)
        refused = await runtime.finish_execution(receipt.call_id, final_message="done")
        assert refused.correction_requested and problem in refused.correction_prompt, raw[:20]

    receipt = await owner.call(demo, "anyjson", {})
    await runtime.claim_execution([demo], wait_seconds=5)
    await runtime.upload_file(receipt.call_id, "result.json", json.dumps(nested(24)).encode())
    done = await runtime.finish_execution(receipt.call_id, final_message="done")
    assert state_name(done.status) == "completed"
    assert call_result(await owner.get_status(receipt.call_id)) == nested(24)


async def test_refusals_of_an_ended_call_carry_a_machine_readable_reason_F12_F15_F5(
    clients, runtime, echo, operator
):
    """F12, F15, F5: a runtime tells a cancel from a lost lease (and a full target from a
    bad request) by the refusal's ErrorInfo reason, never by its words: reports to a
    cancelled call say CALL_CANCELLED, to an interrupted one LEASE_LOST, to a completed
    one CALL_ENDED; a call over the running limit is refused RUNNING_LIMIT."""
    alice = await clients("user:alice")
    reasons = {}
    for ending in ("cancel", "interrupt", "complete"):
        call_id = (await alice.call("crew:demo", echo, {"text": ending})).call_id
        await runtime.claim_execution(["crew:demo"], wait_seconds=5)
        if ending == "cancel":
            await alice.cancel(call_id)
        elif ending == "interrupt":
            await runtime.finish_execution(call_id, interrupted=True, error="stopping")
        else:
            await runtime.finish_execution(call_id, final_message="done")
        with pytest.raises(errors.PreconditionFailed) as refused:
            await runtime.upload_file(call_id, "late.txt", b"late")
        reasons[ending] = refused.value.reason
    assert reasons == {
        "cancel": errors.Reason.CALL_CANCELLED,
        "interrupt": errors.Reason.LEASE_LOST,
        "complete": errors.Reason.CALL_ENDED,
    }

    await operator.register_target("crew:demo", owner="user:owner", running_limit=1)
    await alice.call("crew:demo", echo, {"text": "holds the one slot"})
    with pytest.raises(errors.Busy) as busy:
        await alice.call("crew:demo", echo, {"text": "one too many"})
    assert busy.value.reason == errors.Reason.RUNNING_LIMIT


async def test_a_claim_reads_a_few_rows_however_long_the_targets_history_R1(
    clients, echo, runtime, database_url
):
    """R1: a claim of the oldest unclaimed call reads a few rows, not the target's ended
    calls. A replica's prepared claim gets its generic plan once, maybe while calls is
    small (a new database), and keeps it until the table is analyzed; made then, the old
    claim could scan the listing index by target (the same columns and order as its own)
    and read every ended call of the target, oldest first, on every claim."""
    types = {"claim_kind": "text", "claim_name": "text", "runtime": "text", "lease": "interval"}
    args = {
        "claim_kind": "crew",
        "claim_name": "demo",
        "runtime": "agent:demo/bot",
        "lease": "30 seconds",
    }
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        execute = await prepare_generic(conn, _CLAIM_ONE, types, args)
        alice = await clients("user:alice")
        first = await alice.call("crew:demo", echo, {"text": "history"})
        await runtime.claim_execution(["crew:demo"], wait_seconds=5)
        await runtime.finish_execution(first.call_id, final_message="done")
        await conn.execute(execute)  # the plan, made while calls is small
        # 2,000 more ended calls of the target, all older than the one waiting.
        await conn.execute(
            "INSERT INTO functions.calls SELECT (jsonb_populate_record(NULL::functions.calls, "
            "to_jsonb(c) || jsonb_build_object('id', gen_random_uuid(), 'submission_key', "
            "NULL, 'end_seq', NULL, 'created_at', now() - interval '1 hour'))).* "
            "FROM functions.calls c, generate_series(1, 2000) WHERE c.id = %s",
            (first.call_id,),
        )
        waiting = await alice.call("crew:demo", echo, {"text": "waiting"})
        async with conn.transaction(force_rollback=True):
            blocks, plan = await blocks_hit(conn, execute)
            [(claimed,)] = await (
                await conn.execute(
                    "SELECT runtime FROM functions.calls WHERE id = %s", (waiting.call_id,)
                )
            ).fetchall()
    assert claimed == "agent:demo/bot"  # the claim took the call waiting
    assert blocks < 100, plan  # not 2,000 ended calls' rows
