"""`agentworks crews ...` and `agentworks functions ...` as subprocesses (G3, F1-F15).

The runtime side is the test itself (plain FunctionsClient calls), so the CLI is watched
while each step happens; waits read the CLI's own output, never the clock.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import sys
from pathlib import Path

from agentworks.client import FunctionsClient

AGENTWORKS_BIN = str(Path(sys.executable).with_name("agentworks"))


def _env(gateway, token: str) -> dict[str, str]:
    return {"AGENTWORKS_URL": gateway.url, "AGENTWORKS_TOKEN": token}


def _fields(out: str) -> dict[str, str]:
    """`key  value` lines of the human output (until the first non-field line)."""
    fields = {}
    for line in out.splitlines():
        if line.startswith(" "):
            continue  # the continuation of a multi-line value
        key, _, value = line.partition("  ")
        if not key or key.endswith(":") or " " in key:
            break
        fields[key] = value.strip()
    return fields


async def _until_line(stream: asyncio.StreamReader | None, prefix: str, seen: list[str]) -> str:
    """Read lines (kept in `seen`) of a piped stream until one starts with `prefix`."""
    assert stream is not None, "the stream is not piped"
    async with asyncio.timeout(30):
        while True:
            line = (await stream.readline()).decode()
            assert line, f"the CLI ended before printing {prefix!r}: {seen}"
            seen.append(line.rstrip("\n"))
            if line.startswith(prefix):
                return line


async def test_crews_call_wait_shows_progress_messages_and_questions_then_the_outcome_G3_F7_F8_F9_F11(  # noqa: E501
    gateway, cli, alice_token, demo, echo, runtime, tmp_path
):
    """G3 F7 F8 F9 F11: `crews call --wait` prints progress, messages and the question on
    stderr as they happen; `crews reply` answers; the outcome ends the wait; call-status and
    call-file (paged, binary byte-exact to --out) read the call."""
    env = _env(gateway, alice_token)
    process = await asyncio.create_subprocess_exec(
        AGENTWORKS_BIN, "crews", "call", "demo", "echo", "-i", "text=hello world", "-i", "count=2",
        "--wait",
        env={**{k: v for k, v in os.environ.items() if not k.startswith("AGENTWORKS_")}, **env},
        cwd=tmp_path, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    seen: list[str] = []
    try:
        execution = await runtime.claim_execution([demo], wait_seconds=20)
        assert execution is not None
        call_id = execution.call_id
        # -i values: JSON when they parse (2 is a number), else strings.
        assert json.loads(execution.inputs_json) == {"text": "hello world", "count": 2}
        await runtime.report(call_id, progress="reading", messages=["looked at it"], sequence=1)
        await _until_line(process.stderr, "progress: reading", seen)
        await _until_line(process.stderr, "assistant: looked at it", seen)

        ask = asyncio.create_task(runtime.ask_input(call_id, "q", "Which format?", wait_seconds=20))
        await _until_line(process.stderr, "question: Which format?", seen)
        code, out, err = await cli("crews", "reply", "--call", call_id, "csv", env=env)
        assert code == 0, err
        assert out.strip() == f"answered call {call_id}; it is running"
        async with asyncio.timeout(20):
            assert (await ask).reply == "csv"

        image = random.Random(6).randbytes(1_300_000)  # more than one 1 MiB page
        await runtime.upload_file(call_id, "out/image.bin", image)
        await runtime.upload_file(call_id, "notes.txt", b"first line\nsecond line\n")
        await runtime.finish_execution(call_id, final_message="echo: hello world")
        async with asyncio.timeout(30):
            out_bytes, err_bytes = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 0, [*seen, err_bytes.decode()]
    assert f"call {call_id} accepted; waiting for it to end" in seen[0]
    fields = _fields(out_bytes.decode())
    assert fields["call_id"] == call_id and fields["status"] == "completed"
    assert fields["answer"] == "echo: hello world"
    assert fields["files"] == "notes.txt (23 B, text), out/image.bin (1.2 MiB)"

    code, out, err = await cli("crews", "call-status", "--call", call_id, "--json", env=env)
    assert code == 0, err
    status = json.loads(out)
    assert status["status"] == "completed" and status["question"] is None
    assert [m["text"] for m in status["messages"]] == ["looked at it"]

    code, out, err = await cli("crews", "call-status", "--call", call_id, "--after", "0", env=env)
    assert code == 0, err
    assert "messages:" not in out and out.rstrip().endswith("next: --after 0 --after-event -1")

    target = tmp_path / "image.bin"
    code, out, err = await cli(
        "crews", "call-file", "--call", call_id, "--file", "out/image.bin", "--out", str(target),
        env=env,
    )  # fmt: skip
    assert code == 0, err
    assert target.read_bytes() == image
    assert f"wrote {len(image)} bytes of out/image.bin" in err

    code, out, err = await cli(
        "crews", "call-file", "--call", call_id, "--file", "notes.txt", "--offset", "6",
        "--limit", "4", env=env,
    )  # fmt: skip
    assert code == 0, err
    assert out == "line" and "more remains, continue with --offset 10" in err


async def test_crews_call_exit_codes_busy_invalid_cancelled_and_failed_G3_F3_F5_F15(
    gateway, api, cli, operator_token, alice_token, demo, echo, runtime
):
    """G3 F3 F5 F15: invalid inputs exit 2, a busy crew exits 5 (the text names the limit),
    a call no runtime claimed yet says so, cancel ends a call, and a waited-for call that
    fails exits 8 after printing its status."""
    limited = await api(operator_token).post(
        "/api/v1/tools/targets",
        json={"action": "set_limit", "target": demo, "running_limit": 1},
    )
    assert limited.status_code == 200, limited.text
    env = _env(gateway, alice_token)

    code, out, err = await cli("crews", "functions", "demo", env=env)
    assert code == 0, err
    header, row = out.splitlines()
    assert header.split()[:2] == ["FUNCTION", "INPUTS"]
    assert row.split()[:3] == ["echo", "text*:string,", "count:integer"]  # required first

    code, _, err = await cli("crews", "call", "demo", "echo", "-i", "count=many", env=env)
    assert code == 2 and "inputs.text: missing (required)" in err
    assert "inputs.count: expected integer, got string" in err

    code, out, err = await cli("crews", "call", "demo", "echo", "-i", "text=a", env=env)
    assert code == 0, err
    call_id = _fields(out)["call_id"]
    assert f"agentworks crews call-status --call {call_id}" in err
    code, out, err = await cli("crews", "call-status", "--call", call_id, env=env)
    assert code == 0, err  # nothing claimed it yet, and the text says so
    assert _fields(out)["status"].startswith("running (not started: waiting for a runtime")

    code, _, err = await cli("crews", "call", "demo", "echo", "-i", "text=b", env=env)
    assert code == 5
    assert "busy: crew:demo is running 1 calls and its running limit is 1" in err

    code, out, err = await cli("crews", "cancel", "--call", call_id, env=env)
    assert code == 0, err
    assert out.strip() == f"call {call_id} is cancelled"

    waiting = asyncio.create_task(
        cli("--json", "crews", "call", "demo", "echo", "--inputs-json", '{"text": "c"}',
            "--wait", env=env)
    )  # fmt: skip
    execution = await runtime.claim_execution([demo], wait_seconds=20)
    assert execution is not None and execution.call_id != call_id
    # An error that starts with the status (as `interrupted: ...` does) says it once.
    await runtime.finish_execution(execution.call_id, failed=True, error="failed: disk full")
    code, out, err = await waiting
    assert code == 8, err
    assert json.loads(out)["status"] == "failed"
    assert json.loads(out)["error"] == "failed: disk full"
    assert f"call {execution.call_id} ended failed: disk full" in err

    code, _, err = await cli("crews", "call-status", "--call", "nope", env=env)
    assert code == 4 and "call 'nope' not found: check the call_id" in err
    code, _, err = await cli("crews", "call", "demo", "echo", "-i", "text", env=env)
    assert code == 2 and "-i 'text': write KEY=VALUE" in err


async def test_functions_commands_declare_list_call_and_read_workflow_functions_G3_F1_F14(
    gateway, cli, operator_token, make_token, alice_token, functions, identity, tmp_path
):
    """G3 F1 F14: an operator registers a workflow with a running limit, its owner declares
    a function from a file plus flags, a user lists, calls and reads it with --workflow
    (a call read with another workflow's id is not found)."""
    ops = _env(gateway, operator_token)
    owner = _env(gateway, await make_token("user:owner"))
    alice = _env(gateway, alice_token)

    code, out, err = await cli(
        "targets", "register", "workflow:wf-1", "--owner", "user:owner", "--running-limit", "2",
        env=ops,
    )  # fmt: skip
    assert code == 0, err
    assert _fields(out)["running_limit"] == "2"

    declaration = tmp_path / "decl.json"
    declaration.write_text(
        json.dumps(
            {
                "name": "report",
                "description": "Write the regional report.\nSecond line.",
                "input_schema": {
                    "type": "object",
                    "properties": {"region": {"type": "string"}},
                    "required": ["region"],
                },
                "workflow": {"route": "reports/regional", "allowed_groups": ["draft"]},
            }
        )
    )
    code, out, err = await cli(
        "functions", "declare", "workflow:wf-1", "--file", str(declaration),
        "--allowed-caller", "user:*", "--variable", "region:string:required", env=owner,
    )  # fmt: skip
    assert code == 0, err
    assert _fields(out)["route"] == "reports/regional"
    assert _fields(out)["allowed_callers"] == "user:*"

    code, out, err = await cli("functions", "list", "--workflow", "workflow:wf-1", env=alice)
    assert code == 2 and "without the 'workflow:' prefix: 'wf-1', not 'workflow:wf-1'" in err
    code, out, err = await cli("functions", "list", "--workflow", "wf-1", env=alice)
    assert code == 0, err
    assert out.splitlines()[1].split()[:2] == ["report", "region*:string"]
    assert "Write the regional report." in out and "Second line" not in out

    code, out, err = await cli(
        "--json", "functions", "call", "--workflow", "wf-1", "report", "-i", "region=eu", env=alice
    )
    assert code == 0, err
    receipt = json.loads(out)
    assert receipt["target"] == "workflow:wf-1" and receipt["created"] is True

    async with FunctionsClient(functions.address, identity=identity("workflow:wf-1")) as flow:
        execution = await flow.claim_execution(["workflow:wf-1"], wait_seconds=10)
        assert execution is not None
        assert execution.call_id == receipt["call_id"] and execution.run_id
        await flow.report(
            execution.call_id,
            steps=[{"step": "draft", "group": "draft", "status": "completed"}],
            sequence=1,
        )
        await flow.upload_file(execution.call_id, "report.txt", b"EU: all good\n")
        await flow.finish_execution(execution.call_id, final_message="report ready")

    code, out, err = await cli(
        "functions", "call-status", "--workflow", "wf-1", "--call", receipt["call_id"],
        "--json", env=alice,
    )  # fmt: skip
    assert code == 0, err
    status = json.loads(out)
    assert status["status"] == "completed" and status["answer"] == "report ready"
    assert status["run"]["route"] == "reports/regional"
    assert [(s["step"], s["status"]) for s in status["run"]["steps"]] == [("draft", "completed")]

    code, out, err = await cli(
        "functions", "call-file", "--call", receipt["call_id"], "--file", "report.txt", env=alice
    )
    assert code == 0, err
    assert out == "EU: all good\n"
    code, out, err = await cli(
        "functions", "call-file", "--workflow", "wf-2", "--call", receipt["call_id"],
        "--file", "report.txt", env=alice,
    )  # fmt: skip
    assert code == 4 and "is not a call of workflow:wf-2" in err and out == ""

    code, out, err = await cli("functions", "remove", "workflow:wf-1", "report", env=alice)
    assert code == 3 and "only the owner of workflow:wf-1 (user:owner)" in err
    code, out, err = await cli("functions", "remove", "workflow:wf-1", "report", env=owner)
    assert code == 0, err
    code, out, err = await cli("functions", "list", "--workflow", "wf-1", env=alice)
    assert code == 0 and "no functions you may call on workflow:wf-1" in err

    code, out, err = await cli(
        "targets", "set-limit", "workflow:wf-1", "--running-limit", "5", env=ops
    )
    assert code == 0, err
    assert _fields(out)["running_limit"] == "5"


async def test_call_wait_says_at_once_that_no_runtime_claimed_the_call_and_how_long_it_took_G3_F7(
    gateway, alice_token, demo, echo, runtime, tmp_path
):
    """G3 F7: `crews call --wait` into a pipe says straight away (its first status read
    does not long-poll) that the call waits for a runtime to claim it, with the seconds
    since it was accepted; then that it runs once claimed, and how long it took."""
    process = await asyncio.create_subprocess_exec(
        AGENTWORKS_BIN, "crews", "call", "demo", "echo", "-i", "text=hi", "--wait",
        env={**{k: v for k, v in os.environ.items() if not k.startswith("AGENTWORKS_")},
             **_env(gateway, alice_token)},
        cwd=tmp_path, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    seen: list[str] = []
    try:
        await _until_line(process.stderr, "call ", seen)
        async with asyncio.timeout(10):  # well before the 25 s of a long-poll
            line = await _until_line(process.stderr, "waiting for a runtime to claim it (", seen)
        assert re.fullmatch(r"waiting for a runtime to claim it \(\d+s\)\n", line), line
        execution = await runtime.claim_execution([demo], wait_seconds=20)
        assert execution is not None
        await _until_line(process.stderr, "running (", seen)
        await runtime.finish_execution(execution.call_id, final_message="hi")
        async with asyncio.timeout(30):
            out, err = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 0, seen
    assert _fields(out.decode())["status"] == "completed"
    assert re.search(rf"call {execution.call_id} completed after \d+s", err.decode()), err


async def test_crews_call_status_says_a_start_receipt_L7_F9(
    gateway, cli, alice_token, demo, deploy, runtime
):
    """L7/F9: `crews call --wait` and `crews call-status` of a `starts_work` function say
    it returned a start receipt, not finished work, in the human output and in --json."""
    env = _env(gateway, alice_token)
    waiting = asyncio.create_task(cli("crews", "call", "demo", "deploy", "--wait", env=env))
    execution = await runtime.claim_execution([demo], wait_seconds=20)
    await runtime.finish_execution(execution.call_id, final_message="deployment 9 started")
    code, out, err = await waiting
    assert code == 0, err
    status = _fields(out)["status"]
    assert status == (
        "completed (it returned a start receipt: the function only starts work, and the "
        "work itself is not finished)"
    )
    code, out, err = await cli("crews", "call-status", "--call", execution.call_id, env=env)
    assert code == 0, err
    assert _fields(out)["status"] == status
    code, out, err = await cli(
        "--json", "crews", "call-status", "--call", execution.call_id, env=env
    )
    assert code == 0, err
    shown = json.loads(out)
    assert (shown["status"], shown["start_receipt"]) == ("completed", True)
    assert "start receipt" in shown["note"]


async def test_call_status_lists_a_questions_choices_and_reply_takes_one_by_number_F11_G3(
    gateway, cli, alice_token, demo, echo, runtime
):
    """F11 G3: `crews call-status` prints the pending question's choices, numbered, and
    when the call was claimed; `crews reply --choice N` answers with choice N; a TEXT
    that is none of them is refused with the service's words, the question still open."""
    env = _env(gateway, alice_token)
    code, out, err = await cli("crews", "call", "demo", "echo", "-i", "text=a", "--json", env=env)
    assert code == 0, err
    call_id = json.loads(out)["call_id"]
    assert (await runtime.claim_execution([demo], wait_seconds=20)) is not None
    await runtime.ask_input(call_id, "q", "Which format?", choices=["csv", "json"])

    code, out, err = await cli("crews", "call-status", "--call", call_id, env=env)
    assert code == 0, err
    fields = _fields(out)
    assert fields["question"] == "Which format?"
    assert fields["choices"] == "[1] csv  [2] json"
    assert fields["claimed_at"] and fields["updated_at"]

    code, out, err = await cli("crews", "reply", "--call", call_id, "xml", env=env)
    assert code != 0 and "not one of the question's choices" in err, err
    code, out, err = await cli("crews", "reply", "--call", call_id, "--choice", "3", env=env)
    assert code != 0 and "--choice must be 1 to 2" in err, err
    ask = asyncio.create_task(runtime.ask_input(call_id, "q", "Which format?", wait_seconds=20))
    code, out, err = await cli("crews", "reply", "--call", call_id, "--choice", "2", env=env)
    assert code == 0, err
    async with asyncio.timeout(20):
        assert (await ask).reply == "json"
