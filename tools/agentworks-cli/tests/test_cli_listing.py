"""`agentworks calls|conversations|inboxes|targets|runtimes list`, `calls cancel` and
`messages transcript` as subprocesses (V1, V2, A3, G3)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
from pathlib import Path

from agentworks.client import MessagingClient
from agentworks.messaging.v1 import messaging_pb2 as m
from tests.fixtures.gateway import WITH_CTRL_C

AGENTWORKS_BIN = str(Path(sys.executable).with_name("agentworks"))


def _env(gateway, token: str) -> dict[str, str]:
    return {"AGENTWORKS_URL": gateway.url, "AGENTWORKS_TOKEN": token}


async def _interrupted_wait(env: dict[str, str], tmp_path: Path) -> str:
    """`crews call demo echo --wait`, stopped with Ctrl-C once accepted: its call_id."""
    process = await asyncio.create_subprocess_exec(
        *WITH_CTRL_C, AGENTWORKS_BIN, "crews", "call", "demo", "echo", "-i", "text=hi", "--wait",
        # A CLI that outlives its Ctrl-C is aborted below: faulthandler says where it was.
        env={**os.environ, **env, "PYTHONFAULTHANDLER": "1"}, cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stderr is not None
    async with asyncio.timeout(30):
        line = (await process.stderr.readline()).decode()
    call_id = re.match(r"call (\S+) accepted", line)
    assert call_id, line
    process.send_signal(signal.SIGINT)
    try:
        async with asyncio.timeout(30):
            _, err = await process.communicate()
    except TimeoutError:
        process.send_signal(signal.SIGABRT)
        _, err = await process.communicate()
        where = err.decode()
        raise AssertionError(f"the CLI outlived its Ctrl-C by 30 s; it was at:\n{where}") from None
    assert process.returncode == 130, err
    assert f"agentworks calls cancel {call_id[1]}" in err.decode()
    return call_id[1]


async def test_calls_left_by_a_stopped_wait_are_found_and_cancelled_and_free_the_target_V1_F15(
    gateway, cli, alice_token, operator_token, echo, tmp_path
):
    """V1 F15 G3 (issue 25's story): two `crews call --wait` stopped with Ctrl-C hold the
    target's running limit of 2, so the next call is refused busy; `calls list --status
    open` finds them (a page of one says how to get the next; --all gets both), `calls
    cancel` ends them, `targets list` shows the slots free, and the next call runs."""
    ops = _env(gateway, operator_token)
    code, _, err = await cli("targets", "set-limit", "crew:demo", "--running-limit", "2", env=ops)
    assert code == 0, err
    env = _env(gateway, alice_token)
    left = [await _interrupted_wait(env, tmp_path) for _ in range(2)]
    code, _, err = await cli("crews", "call", "demo", "echo", "-i", "text=x", env=env)
    assert code == 5 and "busy" in err, err

    code, out, err = await cli("calls", "list", "--status", "open", "--limit", "1", env=env)
    assert code == 0, err
    assert left[1] in out and left[0] not in out
    assert "more: --cursor " in err and "agentworks calls cancel CALL_ID" in err
    cursor = err.split("more: --cursor ")[1].split()[0]
    code, out, err = await cli(
        "calls", "list", "--status", "open", "--limit", "1", "--cursor", cursor, env=env
    )
    assert code == 0 and left[0] in out and left[1] not in out, (out, err)
    code, out, err = await cli("--json", "calls", "list", "--status", "open", "--all",
                               "--limit", "1", env=env)  # fmt: skip
    page = json.loads(out)
    assert [c["call_id"] for c in page["items"]] == left[::-1] and page["next_cursor"] == ""
    code, out, err = await cli("targets", "list", env=ops)
    assert code == 0 and re.search(r"crew:demo\s+user:owner\s+2/2\s+0\s+echo", out), out

    code, out, err = await cli("calls", "cancel", *left, env=env)
    assert code == 0, err
    assert all(f"call {c} is cancelled" in out for c in left), out
    code, out, err = await cli("calls", "list", "--status", "open", env=env)
    assert code == 0 and "no calls" in err, (out, err)
    code, out, err = await cli("--json", "targets", "list", env=ops)
    (target,) = json.loads(out)["items"]
    assert (target["running"], target["free"]) == (0, 2)
    code, _, err = await cli("crews", "call", "demo", "echo", "-i", "text=x", env=env)
    assert code == 0, err


async def test_conversations_inboxes_and_transcripts_from_the_cli_and_a_second_user_sees_none_V1_V2_A3(  # noqa: E501
    gateway, cli, alice_token, make_token, demo, bot, messaging, identity
):
    """V1 V2 A3 G3: `conversations list` shows alice's conversation with its last message
    and a --since cursor, `inboxes list` its inbox; `messages transcript` prints what she
    sent, the agent's reply and each delivery (a wake-up too); bob lists nothing and may
    not read her transcript (exit 4)."""
    env = _env(gateway, alice_token)
    code, out, err = await cli("--json", "messages", "send", "--crew", "demo", "hello", env=env)
    assert code == 0, err
    receipt = json.loads(out)
    turn = await bot.claim_turn([demo], wait_seconds=10)
    await bot.send_message(turn.reply_inbox_id, "hi alice")
    await bot.complete_turn(turn.turn_id)
    async with MessagingClient(messaging.address, identity=identity("service:x")) as svc:
        await svc.enqueue_delivery(
            receipt["conversation_id"], kind=m.DELIVERY_KIND_WAKE_UP, idempotency_key="w1",
            text="time to check",
        )  # fmt: skip

    code, out, err = await cli("conversations", "list", env=env)
    assert code == 0, err
    assert receipt["conversation_id"] in out and "agent:demo/bot: hi alice" in out
    assert "--since " in err
    code, out, err = await cli("inboxes", "list", "--target", "crew:demo", env=env)
    assert code == 0 and receipt["inbox_id"] in out and "user:alice" in out, (out, err)

    code, out, err = await cli(
        "messages", "transcript", "--inbox", receipt["inbox_id"], "--all", "--limit", "2",
        env=env,
    )  # fmt: skip
    assert code == 0, err
    assert "user:alice → crew:demo:" in out and "hello" in out
    assert "agent:demo/bot → inbox:" in out and "hi alice" in out
    assert "[message · handled]" in out and "[wake_up · pending] time to check" in out
    assert out.index("hello") < out.index("hi alice") < out.index("time to check")
    assert "next_cursor: " in out
    code, out, err = await cli(
        "--json", "messages", "transcript", "--conversation", receipt["conversation_id"], env=env
    )
    kinds = [i.get("kind", i["type"]) for i in json.loads(out)["items"]]
    assert kinds == ["message", "message", "message", "wake_up"]

    bob = _env(gateway, await make_token("user:bob"))
    for command in (("conversations", "list"), ("inboxes", "list"), ("calls", "list")):
        code, out, err = await cli(*command, env=bob)
        assert code == 0 and receipt["inbox_id"] not in out and "no " in err, command
    code, _, err = await cli(
        "messages", "transcript", "--conversation", receipt["conversation_id"], env=bob
    )
    assert code == 4 and "not found" in err, err


async def test_runtimes_list_shows_credentials_and_last_seen_V1_T2(
    gateway, cli, api, operator_token, alice_token
):
    """V1 T2 G3: `runtimes list` shows a target's runtimes by credential, `never` until
    the runtime exchanged it, then when it was last seen."""
    ops = _env(gateway, operator_token)
    code, _, err = await cli("targets", "register", "crew:a", "--owner", "user:alice", env=ops)
    assert code == 0, err
    env = _env(gateway, alice_token)
    code, out, err = await cli(
        "--json", "runtimes", "credentials", "create", "--principal", "agent:a/bot", env=env
    )
    created = json.loads(out)
    code, out, err = await cli("runtimes", "list", env=env)
    assert code == 0 and created["credential_id"] in out and "never" in out, (out, err)
    exchanged = await api(created["credential"]).post("/api/v1/identity")
    assert exchanged.status_code == 200
    code, out, err = await cli("--json", "runtimes", "list", env=env)
    (runtime,) = json.loads(out)["items"]
    assert runtime["principal"] == "agent:a/bot" and runtime["last_seen_at"] is not None
