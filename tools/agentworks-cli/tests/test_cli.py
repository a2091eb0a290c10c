"""The `agentworks` console script as a subprocess against an in-process gateway (G3)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from agentworks.core.errors import Unavailable
from agentworks.server.testing import until
from tests.fixtures.gateway import WITH_CTRL_C


async def test_messages_send_prints_the_receipt_and_read_prints_the_reply_G3_C2_C7(
    gateway, cli, alice_token, demo, bot
):
    """G3 C2 C7: human output by default, the receipt fields, then the reply and cursor."""
    env = {"AGENTWORKS_URL": gateway.url, "AGENTWORKS_TOKEN": alice_token}
    code, out, err = await cli("messages", "send", "--crew", "demo", "hello", env=env)
    assert code == 0, err
    fields = dict(line.split(None, 1) for line in out.splitlines())
    assert set(fields) == {"accepted", "message_id", "conversation_id", "inbox_id"}
    assert fields["accepted"] == "true"
    inbox = fields["inbox_id"]
    assert f"agentworks messages read --inbox {inbox}" in err

    turn = await bot.claim_turn([demo], wait_seconds=10)
    assert turn is not None
    await bot.send_message(turn.reply_inbox_id, "hello yourself")
    await bot.complete_turn(turn.turn_id)

    code, out, err = await cli("messages", "read", "--inbox", inbox, "--wait", "5", env=env)
    assert code == 0, err
    assert "agent:demo/bot:" in out and "hello yourself" in out
    cursor = out.strip().splitlines()[-1].removeprefix("next_cursor: ")

    code, out, err = await cli(
        "messages", "read", "--inbox", inbox, "--after", cursor, "--json", env=env
    )
    assert code == 0, err
    assert json.loads(out) == {"messages": [], "next_cursor": cursor}


async def test_json_output_and_retry_keys_G3_C4(gateway, cli, alice_token, demo):
    """G3 C4: --json prints the receipt; the same submission id gives the same receipt."""
    env = {"AGENTWORKS_URL": gateway.url, "AGENTWORKS_TOKEN": alice_token}
    args = ("--json", "messages", "send", "--crew", "demo", "--submission-id", "k-1", "once")
    code, out, err = await cli(*args, env=env)
    assert code == 0, err
    first = json.loads(out)
    code, out, err = await cli(*args, env=env)
    assert code == 0 and json.loads(out) == first

    code, out, _ = await cli(*args[:-1], "different text", env=env)
    assert code == 6  # ALREADY_EXISTS: same key, different content
    assert json.loads(out)["error"]["code"] == "ALREADY_EXISTS"


async def test_exit_codes_for_auth_not_found_usage_and_unreachable_G3_A1(gateway, cli, alice_token):
    """G3 A1: 3 for a bad or missing token, 4 for not found, 2 for usage, 7 unreachable."""
    env = {"AGENTWORKS_URL": gateway.url}
    code, _, err = await cli("messages", "read", "--inbox", "x", env=env)
    assert code == 3 and "no API token" in err

    code, _, err = await cli(
        "messages", "read", "--inbox", "x", "--token", "aw_" + "z" * 43, env=env
    )
    assert code == 3 and "unknown API token" in err

    code, _, err = await cli(
        "messages", "read", "--inbox", "in_missing", "--token", alice_token, env=env
    )
    assert code == 4 and "inbox 'in_missing' not found" in err

    code, _, err = await cli("messages", "send", "--token", alice_token, "no target", env=env)
    assert code == 2 and "one of the arguments --crew --workflow --inbox is required" in err

    code, _, err = await cli(
        "messages", "read", "--inbox", "x", "--wait", "99", "--token", alice_token, env=env
    )
    assert code == 2 and "--wait must be 0-25 seconds, got 99" in err

    code, _, err = await cli(
        "messages", "read", "--inbox", "x", "--token", alice_token, "--url", "http://127.0.0.1:9"
    )
    assert code == 7 and "cannot reach the gateway at http://127.0.0.1:9" in err


async def test_operator_registers_targets_and_manages_tokens_from_the_cli_G3_A1_C1(
    gateway, cli, operator_token, tmp_path
):
    """G3 A1 C1: targets register/get, tokens create/list/revoke; cli.json supplies url+token."""
    (tmp_path / ".agentworks").mkdir()
    (tmp_path / ".agentworks" / "cli.json").write_text(
        json.dumps({"url": gateway.url, "token": operator_token})
    )

    code, out, err = await cli(
        "targets", "register", "crew:research", "--owner", "user:dana", "--no-free-text-ask"
    )
    assert code == 0, err
    assert "crew:research" in out and "user:dana" in out
    code, out, err = await cli("targets", "get", "crew:research", "--json")
    assert code == 0, err
    assert json.loads(out)["capabilities"] == {"free_text_ask": False, "a2a_card": True}
    # X1: the A2A card switch, alone; the messaging switch keeps its value.
    code, out, err = await cli("targets", "update", "crew:research", "--no-a2a-card")
    assert code == 0, err
    assert re.search(r"^a2a_card +false$", out, re.M), out
    code, out, err = await cli("targets", "get", "crew:research", "--json")
    assert json.loads(out)["capabilities"] == {"free_text_ask": False, "a2a_card": False}
    code, out, err = await cli("targets", "get", "crew:unknown")
    assert code == 4, (out, err)

    code, out, err = await cli(
        "tokens", "create", "--principal", "user:dana", "--label", "dana ci", "--json"
    )
    assert code == 0, err
    created = json.loads(out)
    assert created["principal"] == "user:dana" and created["roles"] == []

    code, out, err = await cli("tokens", "list")
    assert code == 0, err
    assert created["token_id"] in out and "dana ci" in out and created["token"] not in out

    # env beats cli.json; a token from the env is not sent to the URL of a cli.json
    dana = {"AGENTWORKS_TOKEN": created["token"], "AGENTWORKS_URL": gateway.url}
    code, _, err = await cli("tokens", "list", env=dana)
    assert code == 3 and "only operators may list tokens" in err

    code, out, err = await cli("tokens", "revoke", created["token_id"])
    assert code == 0, err
    assert out.startswith(f"revoked {created['token_id']} (user:dana)")
    code, _, err = await cli("targets", "get", "crew:research", env=dana)
    assert code == 3 and "was revoked" in err

    code, _, err = await cli("tokens", "revoke", "tok_missing")
    assert code == 4 and "no token 'tok_missing'" in err


@contextlib.asynccontextmanager
async def following(gateway, token: str, cwd: Path) -> AsyncIterator[tuple[str, Any]]:
    """(inbox, process): a new conversation's inbox, read by `messages read --follow
    --json` in a subprocess; Ctrl-C'd on the way out, where it must exit 130 (as every
    command Ctrl-C stops does) with one line on stderr and no traceback."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("AGENTWORKS_")},
        "AGENTWORKS_URL": gateway.url,
        "AGENTWORKS_TOKEN": token,
    }
    agentworks = str(Path(sys.executable).with_name("agentworks"))
    send = await asyncio.create_subprocess_exec(
        agentworks, "--json", "messages", "send", "--crew", "demo", "ping",
        env=env, cwd=cwd, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    inbox = json.loads((await send.communicate())[0])["inbox_id"]
    follow = await asyncio.create_subprocess_exec(
        *WITH_CTRL_C,
        agentworks, "messages", "read", "--inbox", inbox, "--follow", "--json",
        env=env, cwd=cwd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        yield inbox, follow
    finally:
        follow.send_signal(signal.SIGINT)
        try:
            async with asyncio.timeout(30):
                _, err = await follow.communicate()
        finally:
            if follow.returncode is None:
                follow.kill()
                await follow.wait()
    assert follow.returncode == 130, err
    assert err.decode().splitlines()[-1] == f"agentworks: stopped following inbox {inbox}", err
    assert b"Traceback" not in err


async def replies(follow, count: int) -> list[str]:
    """The texts of the next `count` messages the follower prints."""
    seen: list[str] = []
    async with asyncio.timeout(30):
        while len(seen) < count:
            page = json.loads(await follow.stdout.readline())
            seen += [m["text"] for m in page["messages"]]
    return seen


async def test_read_follow_prints_pages_as_replies_arrive_until_interrupted_G3_C7(
    gateway, alice_token, demo, bot, tmp_path
):
    """G3 C7: `messages read --follow --json` prints one JSON page per line as agents reply."""
    async with following(gateway, alice_token, tmp_path) as (_, follow):
        turn = await bot.claim_turn([demo], wait_seconds=10)
        for text in ("one", "two"):
            await bot.send_message(turn.reply_inbox_id, text)
        await bot.complete_turn(turn.turn_id)
        assert await replies(follow, 2) == ["one", "two"]


async def test_read_follow_waits_out_a_messaging_restart_G3_C7(
    gateway, alice_token, demo, bot, messaging, start_messaging, tmp_path
):
    """G3 C7: --follow runs until Ctrl-C: while messaging is down it says so on stderr and
    tries again, and it prints the replies sent once messaging is back."""
    async with following(gateway, alice_token, tmp_path) as (_, follow):
        turn = await bot.claim_turn([demo], wait_seconds=10)
        await messaging.stop(0)
        async with asyncio.timeout(30):
            note = (await follow.stderr.readline()).decode()
        assert "messaging service is unavailable" in note and "trying again" in note
        assert follow.returncode is None
        await start_messaging(MESSAGING_LISTEN=messaging.address)

        async def sent() -> bool:  # the bot's channel reconnects too
            try:
                await bot.send_message(turn.reply_inbox_id, "back")
            except Unavailable:
                return False
            return True

        await until(sent, 30, every=0.1, what="the bot sends again")
        assert await replies(follow, 1) == ["back"]


async def test_usage_errors_are_clear_with_or_without_json_and_never_a_traceback_G3(
    gateway, cli, alice_token, demo
):
    """G3: bytes that are not UTF-8 (an argument, the token), a flag out of range and a
    malformed flag end with exit 2 and a message that says so (with --json: the error
    object on stdout); a reader that goes away early gets no traceback either."""
    env = {"AGENTWORKS_URL": gateway.url, "AGENTWORKS_TOKEN": alice_token}
    code, out, err = await cli("messages", "send", "--crew", "demo", b"bad\xff", env=env)
    assert code == 2 and "not valid UTF-8" in err and "Traceback" not in err
    code, out, err = await cli(
        "--json", "messages", "send", "--crew", "demo", "hi", "--token", b"aw_\xff", env=env
    )
    assert code == 2 and json.loads(out)["error"]["code"] == "USAGE"
    code, out, err = await cli("messages", "read", "--inbox", "x", "--wait", "30", env=env)
    assert code == 2 and "--wait must be 0-25 seconds, got 30" in err
    code, out, err = await cli("--json", "messages", "read", "--inbox", "x", "--limit", "abc")
    assert (
        code == 2
        and err == ""
        and json.loads(out)["error"]
        == {
            "code": "USAGE",
            "message": "agentworks messages read: argument --limit: invalid int value: 'abc'",
        }
    )

    read_end, write_end = os.pipe()
    os.close(read_end)  # like `| head` that has already exited
    try:
        process = await asyncio.create_subprocess_exec(
            str(Path(sys.executable).with_name("agentworks")), "--json", "crews", "functions",
            "demo", env={**os.environ, **env}, stdout=write_end, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
    finally:
        os.close(write_end)
    _, err = await process.communicate()
    assert process.returncode == 1 and b"Traceback" not in err, err


async def test_up_hands_its_arguments_to_the_supervisor_G3(cli):
    """G3: `agentworks up ...` is parsed by agentworks_dev.up.main, not by this CLI."""
    code, out, err = await cli("up", "--help")
    assert code == 0, err
    assert out.startswith("usage: ") and " up " in out.splitlines()[0]


async def test_the_cli_finds_cli_json_in_a_parent_directory_and_says_where_it_looked_G3(
    gateway, cli, operator_token, demo, tmp_path
):
    """G3: run anywhere inside the project, the CLI finds .agentworks/cli.json in the
    current directory or the nearest parent (as git finds .git); without one, the error
    says where it looked; AGENTWORKS_HOME names the one file to read."""
    project = tmp_path / "project"
    deeper = project / "src" / "deeper"
    deeper.mkdir(parents=True)
    (project / ".agentworks").mkdir()
    (project / ".agentworks" / "cli.json").write_text(
        json.dumps({"url": gateway.url, "token": operator_token})
    )
    code, out, err = await cli("targets", "get", "crew:demo", "--json", cwd=deeper)
    assert code == 0, err
    assert json.loads(out)["target"] == "crew:demo"

    outside = tmp_path / "outside"
    outside.mkdir()
    code, _, err = await cli("targets", "get", "crew:demo", cwd=outside)
    assert code == 3 and "no API token" in err
    assert f"looked for .agentworks/cli.json in {outside} and its parents: not found" in err
    assert "export AGENTWORKS_HOME=DIR" in err

    home = {"AGENTWORKS_HOME": str(tmp_path / "nowhere")}
    code, _, err = await cli("targets", "get", "crew:demo", cwd=deeper, env=home)
    assert code == 3
    assert f"looked for {tmp_path / 'nowhere' / 'cli.json'} (from AGENTWORKS_HOME)" in err


async def test_an_unreachable_gateway_error_names_the_cli_json_that_gave_its_url_G3(cli, tmp_path):
    """G3: a cli.json left by a suite that has stopped: the error says which file gave
    the URL, so the stale file is obvious; a URL from the environment is named too."""
    (tmp_path / ".agentworks").mkdir()
    stale = tmp_path / ".agentworks" / "cli.json"
    stale.write_text(json.dumps({"url": "http://127.0.0.1:9", "token": "aw_" + "x" * 43}))
    code, _, err = await cli("tokens", "list")
    assert code == 7 and "cannot reach the gateway at http://127.0.0.1:9" in err
    assert f"The URL came from {stale}, written by `agentworks up`" in err
    code, out, _ = await cli("--json", "tokens", "list")
    assert code == 7 and str(stale) in json.loads(out)["error"]["message"]
    code, _, err = await cli("tokens", "list", env={"AGENTWORKS_URL": "http://127.0.0.1:9"})
    assert code == 7 and "The URL came from AGENTWORKS_URL" in err


async def test_targets_commands_take_crew_and_workflow_options_as_well_as_a_target_G3(
    gateway, cli, operator_token, demo
):
    """G3: `targets get --crew demo` (as other commands take --crew NAME) is the same as
    `targets get crew:demo`; --workflow ID likewise; one target, and only one, is needed."""
    env = {"AGENTWORKS_URL": gateway.url, "AGENTWORKS_TOKEN": operator_token}
    code, out, err = await cli("targets", "get", "--crew", "demo", "--json", env=env)
    assert code == 0, err
    by_option = json.loads(out)
    code, out, err = await cli("targets", "get", "crew:demo", "--json", env=env)
    assert code == 0 and json.loads(out) == by_option
    code, out, err = await cli(
        "targets", "register", "--workflow", "wf-7", "--owner", "user:dana", env=env
    )
    assert code == 0 and "workflow:wf-7" in out, err
    code, out, err = await cli(
        "targets", "update", "--workflow", "wf-7", "--no-free-text-ask", env=env
    )
    assert code == 0 and "workflow:wf-7" in out, err
    code, _, err = await cli("targets", "get", env=env)
    assert code == 2 and "name one target" in err and "--crew NAME" in err
    code, _, err = await cli("targets", "get", "crew:demo", "--crew", "demo", env=env)
    assert code == 2 and "name one target" in err
    code, _, err = await cli("targets", "get", "--crew", "crew:demo", env=env)
    assert code == 2 and "without the 'crew:' prefix" in err


async def test_an_unknown_option_shows_the_usage_of_the_command_it_was_given_to_G3(cli):
    """G3: `agentworks crews call demo hello --bogus` prints the usage of `crews call`
    (its arguments and options), not the top-level usage; with --json the message names
    the command too. Unknown top-level options keep the top-level usage."""
    code, out, err = await cli("crews", "call", "demo", "hello", "--bogus")
    assert code == 2 and out == ""
    assert err.startswith("usage: agentworks crews call "), err
    assert "CREW FUNCTION" in err
    assert err.rstrip().endswith("agentworks crews call: error: unrecognized arguments: --bogus")
    code, _, err = await cli("targets", "get", "crew:demo", "--bogus", "1")
    assert code == 2 and err.startswith("usage: agentworks targets get ")
    assert "unrecognized arguments: --bogus 1" in err
    code, _, err = await cli("crews", "--bogus", "call", "demo", "hello")
    assert code == 2 and err.startswith("usage: agentworks crews ")
    code, out, err = await cli("--json", "schedules", "list", "--bogus")
    assert code == 2 and err == ""
    assert json.loads(out)["error"]["message"] == (
        "agentworks schedules list: unrecognized arguments: --bogus"
    )
    code, _, err = await cli("--bogus", "tokens", "list")
    assert code == 2 and err.startswith("usage: agentworks [-h]")
