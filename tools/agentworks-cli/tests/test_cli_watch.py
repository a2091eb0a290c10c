"""`agentworks messages watch` and `agentworks calls watch` as subprocesses (N1, G3): what
the gateway's event streams push is printed as it comes; a dropped stream resumes from
the last event id; a watched call exits with its outcome code as `call --wait` does."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

AGENTWORKS_BIN = str(Path(sys.executable).with_name("agentworks"))
SEND = "/api/v1/tools/messages"


def _base_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("AGENTWORKS_")}


async def _start(gateway, token: str, *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        AGENTWORKS_BIN,
        *args,
        env={**_base_env(), "AGENTWORKS_URL": gateway.url, "AGENTWORKS_TOKEN": token},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def _line(stream: asyncio.StreamReader | None, timeout: float = 15) -> str:
    assert stream is not None
    async with asyncio.timeout(timeout):
        line = await stream.readline()
    assert line, "the stream ended"
    return line.decode().rstrip("\n")


async def _lines_up_to(stream: asyncio.StreamReader | None, needle: str) -> list[str]:
    """Lines of a piped stream up to one containing `needle`."""
    seen = []
    while True:
        seen.append(await _line(stream))
        if needle in seen[-1]:
            return seen


async def test_messages_watch_prints_each_reply_and_resumes_after_a_drop_N1_G3(
    gateway, api, alice_token, demo, bot
):
    """N1: `messages watch --json` prints each reply as one JSON line as it is sent; when
    the gateway drops the stream (a drain) the CLI says so, reconnects, and goes on after
    the last message: the next reply once, nothing repeated."""
    sent = await api(alice_token).post(
        SEND, json={"action": "send", "crew": "demo", "message": "hi"}
    )
    inbox_id = sent.json()["inbox_id"]
    turn = await bot.claim_turn([demo], wait_seconds=10)
    assert turn is not None
    await bot.send_message(turn.reply_inbox_id, "one")
    watch = await _start(gateway, alice_token, "messages", "watch", "--inbox", inbox_id, "--json")
    try:
        first = json.loads(await _line(watch.stdout))
        assert first["text"] == "one" and first["cursor"]
        await bot.send_message(turn.reply_inbox_id, "two")
        assert json.loads(await _line(watch.stdout))["text"] == "two"

        gateway.gateway.draining.set()  # its streams end; new ones are refused 503
        said = await _lines_up_to(watch.stderr, "reconnecting")
        assert "shutting down" in said[-1]
        await bot.send_message(turn.reply_inbox_id, "three")
        gateway.gateway.draining.clear()  # serving again: the CLI's next try gets through
        third = json.loads(await _line(watch.stdout))
        assert third["text"] == "three"  # not "one" or "two" again
    finally:
        watch.terminate()
        await watch.wait()
    await bot.complete_turn(turn.turn_id)


async def test_calls_watch_shows_the_changes_and_exits_with_the_outcome_N1_G3(
    gateway, alice_token, api, demo, echo, runtime
):
    """N1: `calls watch` prints progress and the runtime's messages on stderr as they
    come, then the final status, and exits 0 for a completed call and 8 for a failed one,
    as `call --wait` does."""
    for failed, code in ((False, 0), (True, 8)):
        called = await api(alice_token).post(
            "/api/v1/tools/functions",
            json={"action": "call", "crew": "demo", "function": echo, "inputs": {"text": "x"}},
        )
        call_id = called.json()["call_id"]
        watch = await _start(gateway, alice_token, "calls", "watch", call_id)
        try:
            execution = await runtime.claim_execution([demo], wait_seconds=10)
            assert execution is not None and execution.call_id == call_id
            await runtime.report(call_id, progress="halfway", messages=["working on it"])
            await _lines_up_to(watch.stderr, "progress: halfway")
            await _lines_up_to(watch.stderr, "working on it")
            await runtime.finish_execution(
                call_id, final_message="done", failed=failed, error="broke" if failed else ""
            )
            async with asyncio.timeout(15):
                out, err = await watch.communicate()
        finally:
            if watch.returncode is None:
                watch.terminate()
                await watch.wait()
        assert watch.returncode == code, err.decode()
        status = "failed" if failed else "completed"
        assert status in out.decode()
        if failed:
            assert f"call {call_id} ended failed" in err.decode()
