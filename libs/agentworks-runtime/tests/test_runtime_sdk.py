"""The runtime SDK (ExecutionWorker) and the demo crew's functions against the real service."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import textwrap

import pytest
import structlog.testing
from prometheus_client import REGISTRY

from agentworks.client.functions import FunctionsClient, call_result, state_name
from agentworks.core import errors
from agentworks.functions.v1 import functions_pb2 as f
from agentworks.runtime.executions import (
    ExecutionContext,
    ExecutionOutcome,
    ExecutionWorker,
    clean_text,
)
from agentworks_dev import demo_functions


@contextlib.asynccontextmanager
async def worker(functions, identity, handler, root, **kwargs):
    """An ExecutionWorker for crew:demo running in the background; yields its outcomes."""
    outcomes: asyncio.Queue[ExecutionOutcome] = asyncio.Queue()
    running = ExecutionWorker(
        functions.address,
        identity("agent:demo/demo-bot"),
        ["crew:demo"],
        handler,
        root=root,
        wait_seconds=5,
        on_finished=outcomes.put_nowait,
        **kwargs,
    )
    task = asyncio.create_task(running.run())
    try:
        yield outcomes
    finally:
        running.stop()
        await asyncio.wait_for(task, 15)


async def test_demo_functions_run_through_the_sdk_R2_F9_F10_F11(
    functions, identity, clients, owner, demo, tmp_path
):
    """R2 F9 F10 F11: the demo crew's plain, schema and human-input functions end to end."""
    declared = await demo_functions.declare_demo_functions(owner)
    assert [f.name for f in declared] == ["hello", "word_count", "confirm"]
    alice = await clients("user:alice")
    async with worker(functions, identity, demo_functions.HANDLERS, tmp_path):
        hello = await alice.call(demo, "hello", {"name": "Ada"})
        status = await alice.wait(hello.call_id, timeout=20)
        assert (state_name(status.status), status.answer) == ("completed", "Hello, Ada!")

        counted = await alice.call(demo, "word_count", {"text": "the cat and the hat"})
        status = await alice.wait(counted.call_id, timeout=20)
        assert state_name(status.status) == "completed", status.error
        assert call_result(status) == {
            "words": 5,
            "characters": 19,
            "top": ["the", "cat", "and", "hat"],
        }
        assert {f.name for f in status.files} == {"result.json", "words.txt"}
        assert (await alice.read_file_bytes(counted.call_id, "words.txt")).startswith(b"the\ncat")
        assert (tmp_path / ".calls" / counted.call_id / "words.txt").exists()

        confirm = await alice.call(demo, "confirm", {"action": "ship it"})
        asking = await alice.wait(confirm.call_id, until={"waiting_for_input"}, timeout=20)
        assert asking.question == "Should I go ahead with: ship it? (yes/no)"
        await alice.reply(confirm.call_id, "yes")
        status = await alice.wait(confirm.call_id, timeout=20)
        assert (state_name(status.status), status.answer) == ("completed", "Confirmed: ship it")
        assert [m.text for m in status.messages] == ["the caller answered: yes"]


def requests(method: str, *codes: str) -> float:
    """`method` requests this process's functions service has answered so far with one
    of `codes` (its metrics)."""
    from agentworks.server.metrics import GRPC_CODES

    return sum(
        REGISTRY.get_sample_value(
            "grpc_server_handled_total",
            {
                "grpc_type": "unary",
                "grpc_service": "agentworks.functions.v1.FunctionsService",
                "grpc_method": method,
                "grpc_code": GRPC_CODES[code],
            },
        )
        or 0.0
        for code in codes
    )


def claims() -> float:
    """ClaimExecution requests this process has answered so far (its metrics)."""
    return requests("ClaimExecution", "OK", "CANCELLED")


async def test_sdk_runs_queued_calls_claimed_by_its_finishes_R1(
    functions, identity, clients, echo, tmp_path
):
    """R1: while calls are queued, each finish claims the next: no ClaimExecution each."""
    gate = asyncio.Event()

    async def handler(ctx: ExecutionContext) -> str:
        await gate.wait()  # the first execution waits until every call is queued
        return f"echo: {ctx.inputs['text']}"

    alice = await clients("user:alice")
    before = claims()
    async with worker(functions, identity, handler, tmp_path, concurrency=1) as outcomes:
        # As many calls as the running limit allows.
        receipts = [await alice.call("crew:demo", echo, {"text": str(n)}) for n in range(4)]
        gate.set()
        done = [await asyncio.wait_for(outcomes.get(), 20) for _ in receipts]
        assert [o.call_id for o in done] == [r.call_id for r in receipts]
        assert {o.status for o in done} == {"completed"}
    # The first claim, and the one that waited after the last finish found nothing.
    assert claims() - before <= 2


async def test_sdk_takes_the_correction_turn_in_the_same_execution_F10(
    functions, identity, clients, summarize, tmp_path
):
    """F10: the SDK runs the handler again with the correction prompt, then finishes."""
    rounds: list[str] = []

    async def handler(ctx: ExecutionContext) -> str:
        rounds.append(ctx.correction_prompt)
        if ctx.is_correction:
            ctx.write_result({"summary": ctx.inputs["text"], "words": 1})
        else:
            ctx.write_result({"summary": "oops"})
        return "done"

    alice = await clients("user:alice")
    async with worker(functions, identity, handler, tmp_path) as outcomes:
        receipt = await alice.call("crew:demo", summarize, {"text": "fixed"})
        outcome = await asyncio.wait_for(outcomes.get(), 20)
    assert outcome.status == "completed" and outcome.corrected
    assert rounds[0] == "" and "result.words: missing (required)" in rounds[1]
    status = await alice.get_status(receipt.call_id)
    assert call_result(status) == {"summary": "fixed", "words": 1} and status.correction_turn


async def test_sdk_handler_failure_and_cancel_F10_F15(functions, identity, clients, echo, tmp_path):
    """F10 F15: a raising handler fails the call; a cancel stops a running handler."""
    started = asyncio.Event()

    async def handler(ctx: ExecutionContext) -> str:
        if ctx.inputs["text"] == "boom":
            raise RuntimeError("the tool exploded")
        started.set()
        await asyncio.Event().wait()  # works until cancelled
        return "never"

    alice = await clients("user:alice")
    async with worker(functions, identity, handler, tmp_path, lease_seconds=3) as outcomes:
        boom = await alice.call("crew:demo", echo, {"text": "boom"})
        assert (await asyncio.wait_for(outcomes.get(), 20)).status == "failed"
        status = await alice.get_status(boom.call_id)
        assert status.error == "RuntimeError: the tool exploded" and not status.correction_turn

        slow = await alice.call("crew:demo", echo, {"text": "slow"})
        await asyncio.wait_for(started.wait(), 20)
        await alice.cancel(slow.call_id)
        outcome = await asyncio.wait_for(outcomes.get(), 20)
        assert (outcome.call_id, outcome.status) == (slow.call_id, "cancelled")


async def test_sdk_keeps_every_message_a_handler_reports_from_many_tasks_at_once_F7_R1(
    functions, identity, clients, echo, tmp_path
):
    """F7 R1: a handler reporting from 30 tasks at once loses none of it, and the
    messages are stored in the order the handler made them."""

    async def handler(ctx: ExecutionContext) -> str:
        await asyncio.gather(*(ctx.message(f"m{i}") for i in range(30)))
        return "done"

    alice = await clients("user:alice")
    async with worker(functions, identity, handler, tmp_path) as outcomes:
        receipt = await alice.call("crew:demo", echo, {"text": "many"})
        assert (await asyncio.wait_for(outcomes.get(), 20)).status == "completed"
    status = await alice.get_status(receipt.call_id, after=-1, message_limit=100)
    assert [m.text for m in status.messages] == [f"m{i}" for i in range(30)]


async def test_waiting_for_a_status_makes_one_request_per_change_not_a_spin_F7_F11(
    clients, echo, runtime
):
    """F7 F11: `wait(until={"waiting_for_input"})` on a running call that has a message
    long-polls for a change; it used to ask again at once, hundreds of times a second,
    because the message stayed "new" after its cursor."""
    alice = await clients("user:alice")
    receipt = await alice.call("crew:demo", echo, {"text": "x"})
    await runtime.claim_execution(["crew:demo"], wait_seconds=5)
    await runtime.report(receipt.call_id, messages=["working"], sequence=1)
    before = requests("GetStatus", "OK")
    with pytest.raises(errors.DeadlineExceeded, match="still running after 2"):
        await alice.wait(receipt.call_id, until={"waiting_for_input"}, timeout=2)
    assert requests("GetStatus", "OK") - before <= 3

    async def ask_soon() -> None:
        await asyncio.sleep(0.5)
        await runtime.ask_input(receipt.call_id, "a1", "go on?")

    asking, _ = await asyncio.gather(
        alice.wait(receipt.call_id, until={"waiting_for_input"}, timeout=10), ask_soon()
    )
    assert state_name(asking.status) == "waiting_for_input" and asking.question == "go on?"


async def test_a_worker_runs_as_many_calls_at_once_as_its_targets_limits_allow_F5_R1(
    functions, identity, clients, operator, echo, tmp_path
):
    """F5 R1: calls run in parallel by default, so a worker without a configured
    concurrency reads its target's running limit and runs that many at once; one at a
    time, the others waited, accepted and unclaimed, behind the first."""
    await operator.register_target("crew:demo", owner="user:owner", running_limit=3)
    running: set[str] = set()
    all_running = asyncio.Event()
    release = asyncio.Event()

    async def handler(ctx: ExecutionContext) -> str:
        running.add(ctx.call_id)
        if len(running) == 3:
            all_running.set()
        await release.wait()
        return "done"

    alice = await clients("user:alice")
    async with worker(functions, identity, handler, tmp_path) as outcomes:
        calls = [await alice.call("crew:demo", echo, {"text": str(n)}) for n in range(3)]
        await asyncio.wait_for(all_running.wait(), 20)
        assert running == {c.call_id for c in calls}
        release.set()
        for _ in calls:
            assert (await asyncio.wait_for(outcomes.get(), 20)).status == "completed"


async def test_an_ask_that_timed_out_is_withdrawn_and_the_next_ask_works_F11_R1(
    functions, identity, clients, echo, tmp_path
):
    """F11 R1: `ctx.ask(timeout=...)` that gets no reply withdraws its question, so the
    status stops showing it and the handler can ask another; a second ask used to be
    refused and the worker took it for a lost lease (the call ended interrupted)."""

    async def handler(ctx: ExecutionContext) -> str:
        try:
            await ctx.ask("first?", timeout=1)
        except TimeoutError:
            await ctx.message("no answer to the first")
        return "got " + await ctx.ask("second?")

    alice = await clients("user:alice")
    async with worker(functions, identity, handler, tmp_path) as outcomes:
        receipt = await alice.call("crew:demo", echo, {"text": "x"})
        deadline = asyncio.get_running_loop().time() + 20
        while (status := await alice.get_status(receipt.call_id)).question != "second?":
            assert asyncio.get_running_loop().time() < deadline, status
            await asyncio.sleep(0.1)
        await alice.reply(receipt.call_id, "yes")
        assert (await asyncio.wait_for(outcomes.get(), 20)).status == "completed"
    status = await alice.get_status(receipt.call_id, after=-1)
    assert status.answer == "got yes"
    assert [m.text for m in status.messages] == ["no answer to the first"]


async def test_an_upload_that_finds_the_call_cancelled_stops_the_handler_as_cancelled_F15(
    functions, identity, clients, echo, tmp_path
):
    """F15: UploadFile answers a cancelled call with FAILED_PRECONDITION ("has already
    ended (cancelled)"); the SDK records the handler's end as cancelled, not as a lost
    lease."""
    started, proceed = asyncio.Event(), asyncio.Event()

    async def handler(ctx: ExecutionContext) -> str:
        started.set()
        await proceed.wait()
        await ctx.upload_file("late.txt", b"after the cancel")
        return "never"

    alice = await clients("user:alice")
    async with worker(functions, identity, handler, tmp_path, lease_seconds=60) as outcomes:
        receipt = await alice.call("crew:demo", echo, {"text": "x"})
        await asyncio.wait_for(started.wait(), 20)
        await alice.cancel(receipt.call_id)
        proceed.set()
        outcome = await asyncio.wait_for(outcomes.get(), 20)
    assert (outcome.call_id, outcome.status) == (receipt.call_id, "cancelled")


def _nested(depth: int) -> object:
    value: object = "bottom"
    for _ in range(depth):
        value = {"a": value}
    return value


async def test_sdk_fails_a_call_whose_answer_the_service_refuses_and_keeps_serving_R1_F10(
    functions, identity, clients, echo, tmp_path
):
    """R1 F10: an answer FinishExecution refuses (too big, NUL) or that cannot be sent
    (not JSON, nested too deep, a lone surrogate), or a huge exception message, fails
    that call with the reason; the worker serves on, and the refused finish still claims
    the next queued call (claim_next)."""
    gate = asyncio.Event()

    async def handler(ctx: ExecutionContext) -> object:
        await gate.wait()  # the first execution waits until every call is queued
        text = ctx.inputs["text"]
        if text == "big":
            return "x" * 300_000
        if text == "nul":
            return "a\x00b"
        if text == "raise":
            raise RuntimeError("y" * 20_000 + "\x00")
        if text == "bytes":
            return b"not json"
        if text == "deep":
            return _nested(40)
        if text == "surrogate":
            return "a\udcffb"  # a lone surrogate: protobuf cannot encode it
        return f"echo: {text}"

    unreportable = "the handler's answer could not be reported: "
    expected = {
        "big": unreportable + "final_message is 300000 bytes; the limit is 262144 bytes",
        "nul": unreportable + "final_message contains a NUL character",
        "bytes": unreportable + "TypeError: Object of type bytes is not JSON serializable",
        "deep": unreportable + "the handler's return value nests objects and arrays more "
        "than 24 deep",
        "surrogate": unreportable + "UnicodeEncodeError: 'utf-8' codec can't encode",
        "raise": "RuntimeError: yyyyy",
    }
    alice = await clients("user:alice")
    # One at a time, so that each finish claims the next (claim_next).
    async with worker(
        functions, identity, handler, tmp_path, lease_seconds=3, concurrency=1
    ) as outcomes:
        for batch in (["big", "nul", "bytes", "ok"], ["deep", "surrogate", "ok", "raise"]):
            gate.clear()
            before = claims()
            # At most as many calls as the running limit (4) allows.
            receipts = [await alice.call("crew:demo", echo, {"text": t}) for t in batch]
            gate.set()
            done = [await asyncio.wait_for(outcomes.get(), 20) for _ in receipts]
            assert [o.call_id for o in done] == [r.call_id for r in receipts]
            # The first claim and the one after the last finish: the others were claimed
            # by the finishes, refused ones included.
            assert claims() - before <= 2
            for text, receipt in zip(batch, receipts, strict=True):
                status = await alice.get_status(receipt.call_id)
                if text == "ok":
                    assert (state_name(status.status), status.answer) == ("completed", "echo: ok")
                    continue
                assert state_name(status.status) == "failed" and not status.correction_turn, (
                    text,
                    status,
                )
                assert status.error.startswith(expected[text]), (text, status.error[:300])
                assert len(status.error.encode()) <= 16 * 1024 and "\x00" not in status.error
                if text == "raise":  # a huge exception message is cut to fit
                    assert status.error.endswith("bytes in all]")


async def test_sdk_replaces_nul_characters_in_the_free_text_a_handler_sends_R1_F7_F11_F14(
    functions, identity, clients, operator, owner, tmp_path
):
    """R1 F7 F11 F14: progress, message and event text, a step's detail and a question
    with NUL characters (or a lone surrogate) reach the service with U+FFFD, as the
    runner's output does, instead of being refused; a message the handler passed is not
    changed in place; names are not touched; the call completes."""
    wf = "workflow:wf-build"
    await operator.register_target(wf, owner="user:owner")
    await owner.declare_function(
        wf,
        "build",
        input_schema={"type": "object"},
        allowed_callers=["user:*"],
        workflow={"route": "ci/build", "allowed_groups": ["builders"]},
    )
    note = f.ExecutionMessage(role="note", text="c\x00d")

    async def handler(ctx: ExecutionContext) -> str:
        await ctx.progress("half\x00way")
        await ctx.message("a\x00b")
        await ctx.message("file \udcff.txt", role="tool")  # undecodable bytes in a name
        await ctx.report(messages=[note], events=[{"kind": "assistant", "text": "e\x00f"}])
        await ctx.event("assistant", "g\x00h")
        await ctx.step("compile", "failed", group="builders", detail="exit\x002")
        return "done: " + await ctx.ask("go\x00on?")

    alice = await clients("user:alice")
    outcomes: asyncio.Queue[ExecutionOutcome] = asyncio.Queue()
    running = ExecutionWorker(
        functions.address,
        identity(wf),
        [wf],
        handler,
        root=tmp_path,
        wait_seconds=5,
        on_finished=outcomes.put_nowait,
    )
    task = asyncio.create_task(running.run())
    try:
        receipt = await alice.call(wf, "build", {})
        asking = await alice.wait(receipt.call_id, until={"waiting_for_input"}, timeout=20)
        assert (asking.question, asking.progress) == ("go\ufffdon?", "half\ufffdway")
        await alice.reply(receipt.call_id, "yes")
        assert (await asyncio.wait_for(outcomes.get(), 20)).status == "completed"
    finally:
        running.stop()
        await asyncio.wait_for(task, 15)
    status = await alice.get_status(receipt.call_id)
    assert (state_name(status.status), status.answer) == ("completed", "done: yes")
    assert [(m.role, m.text) for m in status.messages] == [
        ("assistant", "a\ufffdb"),
        ("tool", "file \ufffd.txt"),
        ("note", "c\ufffdd"),
    ]
    assert [e.text for e in status.events] == ["e\ufffdf", "g\ufffdh"]
    assert [(s.step, s.group, s.detail) for s in status.run.steps] == [
        ("compile", "builders", "exit\ufffd2")
    ]
    assert note.text == "c\x00d"
    # The one helper the runner's output goes through as well.
    assert clean_text("x\x00y\udcffz\u00e9") == "x\ufffdy\ufffdz\u00e9"


async def test_worker_logs_and_serves_on_when_the_service_refuses_both_finishes_R1_F12(
    functions, identity, clients, echo, tmp_path, monkeypatch
):
    """R1 F12: when FinishExecution refuses the outcome and then the failure reporting
    it, the worker logs it (execution.finish_refused twice, execution.unreported), stops
    renewing the lease, neither crashes nor retries in a loop, and serves the next call;
    the lease expires and the call ends `interrupted`.

    With this service and this SDK both finishes are never refused (the SDK fits the
    error to the limits the service states); a service with stricter limits (an older or
    newer version) would. So this test runs the real service with a 40-byte error limit
    (the proto's rule is larger; a stricter service is stood in for at its finish).
    """
    from agentworks.core.errors import InvalidArgument
    from agentworks_functions.service.finishing import Finishing

    finish = Finishing.finish

    async def stricter(self, identity, **kwargs):
        if len(kwargs["error"].encode()) > 40:
            size = len(kwargs["error"].encode())
            raise InvalidArgument(f"error is {size} bytes; the limit is 40 bytes")
        return await finish(self, identity, **kwargs)

    monkeypatch.setattr(Finishing, "finish", stricter)

    async def handler(ctx: ExecutionContext) -> str:
        if ctx.inputs["text"] == "boom":
            raise RuntimeError("the tool exploded, with a long story to tell")
        return "ok"

    alice = await clients("user:alice")
    refused_before = requests("FinishExecution", "INVALID_ARGUMENT")
    with structlog.testing.capture_logs() as logs:
        async with worker(functions, identity, handler, tmp_path, lease_seconds=3) as outcomes:
            boom = await alice.call("crew:demo", echo, {"text": "boom"})
            outcome = await asyncio.wait_for(outcomes.get(), 20)
            assert (outcome.call_id, outcome.status) == (boom.call_id, "unreported")
            assert requests("FinishExecution", "INVALID_ARGUMENT") - refused_before == 2
            # Neither a crash nor a loop: a second later, no more finishes and at most
            # one more claim (a long poll), and the next call is served.
            finishes, claimed = requests("FinishExecution", "OK", "INVALID_ARGUMENT"), claims()
            await asyncio.sleep(1)
            assert requests("FinishExecution", "OK", "INVALID_ARGUMENT") == finishes
            assert claims() - claimed <= 1
            ok = await alice.call("crew:demo", echo, {"text": "ok"})
            assert (await asyncio.wait_for(outcomes.get(), 20)).status == "completed"
            status = await alice.wait(boom.call_id, timeout=20)
            assert state_name(status.status) == "interrupted", status
    assert (await alice.get_status(ok.call_id)).answer == "ok"
    events = [e for e in logs if e.get("call_id") == boom.call_id]
    refusals = [e for e in events if e["event"] == "execution.finish_refused"]
    assert [e["failed"] for e in refusals] == [True, True]
    assert "the limit is 40 bytes" in refusals[1]["error"]
    assert any(e["event"] == "execution.unreported" and e["log_level"] == "error" for e in events)


RUNTIME_SCRIPT = textwrap.dedent(
    """
    import asyncio, os, sys
    from agentworks.core.identity import Minter
    from agentworks.core.keys import signing_key_from_env
    from agentworks.runtime.executions import ExecutionWorker

    async def handler(ctx):
        await ctx.message("step 1 done")
        await ctx.upload_file("partial.txt", b"half of the work")
        await asyncio.Event().wait()  # busy until killed

    worker = ExecutionWorker(
        os.environ["FUNCTIONS_ADDRESS"],
        Minter("agent:demo/bot", signing_key_from_env()),
        ["crew:demo"], handler, root=sys.argv[1], lease_seconds=2, wait_seconds=10,
    )
    asyncio.run(worker.run())
    """
)


async def test_a_killed_runtime_leaves_an_interrupted_call_with_its_evidence_F12_R1(
    functions, signing_keys, clients, echo, tmp_path
):
    """F12 R1: `kill -9` of a runtime process -> interrupted; messages and files readable."""
    script = tmp_path / "runtime.py"
    script.write_text(RUNTIME_SCRIPT)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        str(tmp_path),
        env={
            **os.environ,
            "FUNCTIONS_ADDRESS": functions.address,
            **signing_keys.env("gateway"),
        },
    )
    try:
        alice = await clients("user:alice")
        receipt = await alice.call("crew:demo", echo, {"text": "x"})

        async def uploaded():
            status = await alice.get_status(receipt.call_id)
            while not status.files:  # long-poll until the runtime has uploaded its file
                assert state_name(status.status) == "running" and process.returncode is None
                status = await alice.get_status(
                    receipt.call_id, wait_seconds=5, seen_version=status.version
                )

        await asyncio.wait_for(uploaded(), 30)
        process.send_signal(signal.SIGKILL)
        await process.wait()

        status = await alice.wait(receipt.call_id, timeout=20)
        assert state_name(status.status) == "interrupted"
        assert [m.text for m in status.messages] == ["step 1 done"]
        assert await alice.read_file_bytes(receipt.call_id, "partial.txt") == b"half of the work"
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


class CountingClient(FunctionsClient):
    """The runtime's client, counting the files it uploads (by name)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.uploads: list[str] = []

    async def upload_file(self, call_id, name, data, **kwargs):
        self.uploads.append(name)
        return await super().upload_file(call_id, name, data, **kwargs)


async def test_sdk_uploads_what_a_handler_leaves_in_its_output_folder_once_F4_R1(
    functions, identity, clients, echo, tmp_path
):
    """F4 R1: files a handler leaves in ctx.output_dir are uploaded when it ends, whether
    it succeeds or fails; symlinks are not; a file it uploaded itself is sent again only
    when it changed since."""

    async def handler(ctx: ExecutionContext) -> str:
        out = ctx.output_dir
        (out / "own.txt").write_text("uploaded by the handler")
        await ctx.upload_file("own.txt")
        (out / "changed.txt").write_text("first")
        await ctx.upload_file("changed.txt")
        (out / "changed.txt").write_text("second, longer")
        (out / "sub").mkdir()
        (out / "sub" / "b.txt").write_text("in a subfolder")
        (out / "link.txt").symlink_to(out / "own.txt")
        if ctx.inputs["text"] == "boom":
            raise RuntimeError("failed half way")
        return "done"

    client = CountingClient(functions.address, identity=identity("agent:demo/demo-bot"))
    alice = await clients("user:alice")
    try:
        async with worker(functions, identity, handler, tmp_path, client=client) as outcomes:
            ok = await alice.call("crew:demo", echo, {"text": "ok"})
            assert (await asyncio.wait_for(outcomes.get(), 20)).status == "completed"
            assert client.uploads == ["own.txt", "changed.txt", "changed.txt", "sub/b.txt"]
            status = await alice.get_status(ok.call_id)
            assert {f.name for f in status.files} == {"own.txt", "changed.txt", "sub/b.txt"}
            assert await alice.read_file_bytes(ok.call_id, "changed.txt") == b"second, longer"

            boom = await alice.call("crew:demo", echo, {"text": "boom"})
            assert (await asyncio.wait_for(outcomes.get(), 20)).status == "failed"
            status = await alice.get_status(boom.call_id)
            assert status.error == "RuntimeError: failed half way"
            assert {f.name for f in status.files} == {"own.txt", "changed.txt", "sub/b.txt"}
    finally:
        await client.close()


async def test_sdk_names_the_folder_files_the_service_refuses_F4_F10_R1(
    functions, identity, clients, summarize, tmp_path
):
    """F4 F10 R1: a folder file the service refuses is skipped and named in one `runner`
    message; the returned result is written and uploaded first, and the call completes."""

    async def handler(ctx: ExecutionContext) -> dict:
        (ctx.output_dir / "back\\slash.txt").write_text("refused name")
        (ctx.output_dir / "fine.txt").write_text("kept")
        return {"summary": "s", "words": 1}

    alice = await clients("user:alice")
    async with worker(functions, identity, handler, tmp_path) as outcomes:
        ok = await alice.call("crew:demo", summarize, {"text": "ok"})
        assert (await asyncio.wait_for(outcomes.get(), 20)).status == "completed"
        status = await alice.get_status(ok.call_id)
        assert {f.name for f in status.files} == {"result.json", "fine.txt"}
        (note,) = [m.text for m in status.messages if m.role == "runner"]
        assert note.startswith("1 of 3 files in the output folder were not uploaded: ")
        assert "'back\\\\slash.txt'" in note, note


async def until_logged(logs: list, event: str, timeout: float = 10) -> dict:
    """The first captured log entry named `event`, polled for up to `timeout` seconds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        found = [e for e in logs if e["event"] == event]
        if found:
            return found[0]
        assert asyncio.get_running_loop().time() < deadline, f"no {event} logged"
        await asyncio.sleep(0.05)


async def test_worker_warns_at_start_about_unhandled_functions_and_unknown_targets_R1_F2(
    functions, identity, owner, echo, tmp_path
):
    """R1 F2: a worker names, once at start, the declared functions it has no handler for
    (their calls still come to it and fail) and a target the service does not know."""
    for name in ("shell", "echo_too"):
        await owner.declare_function(
            "crew:demo", name, input_schema={"type": "object"}, allowed_callers=["agent:demo/*"]
        )

    async def handler(ctx: ExecutionContext) -> str:
        return "ok"

    with structlog.testing.capture_logs() as logs:
        async with worker(functions, identity, {"echo": handler, "echo_too": handler}, tmp_path):
            warning = await until_logged(logs, "worker.unhandled_functions")
    # echo is not listed to the runtime (its allowed_callers exclude agent:demo/*).
    assert warning["functions"] == {"crew:demo": ["shell"]}
    assert "fail with 'this runtime has no handler for function" in warning["effect"]
    assert not [e for e in logs if e["event"] == "worker.target_not_registered"]

    typo = ExecutionWorker(
        functions.address,
        identity("agent:dmeo/bot"),
        ["crew:dmeo"],
        handler,
        root=tmp_path,
        wait_seconds=1,
    )
    with structlog.testing.capture_logs() as logs:
        task = asyncio.create_task(typo.run())
        try:
            warning = await until_logged(logs, "worker.target_not_registered")
        finally:
            typo.stop()
            await asyncio.wait_for(task, 15)
    assert warning["unregistered"] == ["crew:dmeo"] and warning["log_level"] == "warning"
    assert [e["event"] for e in logs].count("worker.target_not_registered") == 1


STOPPING_SCRIPT = textwrap.dedent(
    """
    import asyncio, os, sys
    from agentworks.core.identity import Minter
    from agentworks.core.keys import signing_key_from_env
    from agentworks.runtime.executions import ExecutionWorker
    from agentworks.runtime.serving import run_until_signal

    async def handler(ctx):
        return await ctx.ask("go on?")  # waits for a human: never ends by itself here

    async def main():
        worker = ExecutionWorker(
            os.environ["FUNCTIONS_ADDRESS"],
            Minter("agent:demo/bot", signing_key_from_env()),
            ["crew:demo"], handler, root=sys.argv[1], lease_seconds=120, wait_seconds=10,
        )
        return await run_until_signal(worker)

    sys.exit(asyncio.run(main()))
    """
)


@pytest.mark.parametrize("drain", ["1", "600"])
async def test_a_stopping_runtime_gives_up_what_it_cannot_finish_at_once_F12_F11_R1(
    drain, functions, signing_keys, clients, echo, tmp_path
):
    """F12 F11 R1: after SIGTERM an execution waiting in ctx.ask gets the drain time
    (AGENTWORKS_RUNTIME_DRAIN_SECONDS); at its end, or at a second SIGTERM, the runtime
    cancels it and gives it up: the call ends `interrupted` saying why (an open call cut
    short by a restart shows its interruption, never `failed`), so the caller learns at
    once, not when the (two-minute) lease expires; the process exits 130."""
    script = tmp_path / "runtime.py"
    script.write_text(STOPPING_SCRIPT)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        str(tmp_path),
        env={
            **os.environ,
            "FUNCTIONS_ADDRESS": functions.address,
            **signing_keys.env("gateway"),
            "AGENTWORKS_RUNTIME_DRAIN_SECONDS": drain,
        },
    )
    try:
        alice = await clients("user:alice")
        receipt = await alice.call("crew:demo", echo, {"text": "x"})
        await alice.wait(receipt.call_id, until={"waiting_for_input"}, timeout=30)
        process.send_signal(signal.SIGTERM)
        if drain == "600":
            # Still draining: the execution keeps waiting for its reply.
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(asyncio.shield(process.wait()), 1)
            assert (
                state_name((await alice.get_status(receipt.call_id)).status) == "waiting_for_input"
            )
            process.send_signal(signal.SIGTERM)
            expected = "the runtime stopped (SIGTERM) before the execution ended; call again"
        else:
            expected = (
                "the runtime stopped (SIGTERM) before the execution ended (drain time of "
                "1 s over); call again"
            )
        assert await asyncio.wait_for(process.wait(), 15) == 130
        status = await alice.wait(receipt.call_id, timeout=5)  # ended already, not at lease end
        assert (state_name(status.status), status.error) == ("interrupted", expected)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
