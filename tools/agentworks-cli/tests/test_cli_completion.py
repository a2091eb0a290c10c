"""Shell completion with the gateway's names (V8, A3, G3): `agentworks __complete`, run as
the real CLI against the real gateway, offers the crews, targets, functions, calls,
inboxes and conversations the user may see, and nothing, quickly and quietly, when no
gateway answers; the generated bash script asks it where an argument takes a name.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path

import pytest

from agentworks.client import FunctionsClient
from agentworks.server.testing import free_port
from tests.fixtures.gateway import AGENTWORKS_BIN

# Sources the generated bash script and completes like bash does on TAB: COMP_LINE up to
# the cursor (bash itself splits COMP_WORDS at ':' too, as COMP_WORDBREAKS says).
BASH_TAB = r"""
source <(agentworks completion bash)
COMP_LINE=$1 COMP_POINT=${#1} COMPREPLY=()
COMP_WORDBREAKS=${COMP_WORDBREAKS:-$' \t\n"\'><=;|&(:'}
words=${1//:/ : }
read -ra COMP_WORDS <<< "$words"
[[ $1 == *' ' ]] && COMP_WORDS+=("")
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
_agentworks
printf '%s\n' "${COMPREPLY[@]}"
"""


@pytest.fixture
async def complete(gateway, cli):
    """`await complete(token, *words)` -> the lines `agentworks __complete` printed."""

    async def run(token: str, *words: str, url: str | None = None) -> list[str]:
        env = {"AGENTWORKS_URL": url or gateway.url, "AGENTWORKS_TOKEN": token}
        code, out, err = await cli("__complete", *words, env=env)
        assert (code, err) == (0, ""), (code, err)
        return out.splitlines()

    return run


@pytest.fixture
async def bobs_crew(api, operator_token, functions, identity) -> str:
    """crew:deploy, owned by user:bob, whose one function only bob may call."""
    registered = await api(operator_token).post(
        "/api/v1/tools/targets",
        json={"action": "register", "target": "crew:deploy", "owner": "user:bob"},
    )
    assert registered.status_code == 200, registered.text
    async with FunctionsClient(functions.address, identity=identity("user:bob")) as bob:
        await bob.declare_function(
            "crew:deploy", "ship", input_schema={"type": "object"}, allowed_callers=["user:bob"]
        )
    return "crew:deploy"


async def test_complete_offers_the_names_the_user_may_see_V8_A3(
    complete, alice_token, make_token, demo, echo, bobs_crew
):
    """V8 A3: a partial crew name completes to the crews alice may see (demo: she may call
    echo), not bob's crew:deploy; bob, who owns it, gets it; targets come whole
    (crew:<name>), functions are the named target's that the user may call."""
    bob = await make_token("user:bob")
    assert await complete(alice_token, "crews", "call", "de") == ["demo"]
    assert await complete(bob, "crews", "call", "de") == ["demo", "deploy"]
    assert await complete(alice_token, "messages", "send", "--crew", "") == ["demo"]
    assert await complete(alice_token, "targets", "get", "crew:") == ["crew:demo"]
    assert await complete(bob, "calls", "list", "--target", "crew:dep") == ["crew:deploy"]
    assert await complete(alice_token, "crews", "call", "demo", "") == ["echo"]
    assert await complete(alice_token, "functions", "call", "--crew", "demo", "e") == ["echo"]
    assert await complete(bob, "crews", "call", "deploy", "") == ["ship"]
    assert await complete(alice_token, "crews", "call", "deploy", "") == []  # not hers
    # Not a name: options, free text, and arguments that take none.
    assert await complete(alice_token, "crews", "call", "--") == []
    assert await complete(alice_token, "messages", "send", "--crew", "demo", "hel") == []
    assert await complete(alice_token, "tokens", "create", "--label", "") == []


async def test_complete_offers_the_users_calls_inboxes_and_conversations_V8_A3(
    gateway, api, complete, alice_token, make_token, demo, echo
):
    """V8 A3: call ids (calls cancel, --call), inbox ids (--inbox) and conversation ids
    (--conversation) are the user's own; another user gets none of them."""
    alice = api(alice_token)
    called = await alice.post(
        "/api/v1/tools/functions",
        json={"action": "call", "crew": "demo", "function": "echo", "inputs": {"text": "hi"}},
    )
    assert called.status_code == 200, called.text
    call_id = called.json()["call_id"]
    sent = await alice.post(
        "/api/v1/tools/messages", json={"action": "send", "crew": "demo", "message": "hello"}
    )
    assert sent.status_code == 200, sent.text
    inbox_id, conversation_id = sent.json()["inbox_id"], sent.json()["conversation_id"]

    assert await complete(alice_token, "calls", "cancel", "") == [call_id]
    assert await complete(alice_token, "crews", "call-status", "--call", call_id[:4]) == [call_id]
    assert await complete(alice_token, "messages", "read", "--inbox", "") == [inbox_id]
    assert await complete(alice_token, "messages", "transcript", "--conversation", "") == [
        conversation_id
    ]
    carol = await make_token("user:carol")
    assert await complete(carol, "calls", "cancel", "") == []
    assert await complete(carol, "messages", "read", "--inbox", "") == []


async def test_complete_is_silent_and_quick_without_a_gateway_V8(cli, alice_token, tmp_path):
    """V8: with no gateway listening, a bad token, or none at all, __complete prints
    nothing, exits 0 and takes well under its one-second budget."""
    down = f"http://127.0.0.1:{free_port()}"
    for env in (
        {"AGENTWORKS_URL": down, "AGENTWORKS_TOKEN": alice_token},
        {"AGENTWORKS_URL": down},  # no token (and no cli.json here)
    ):
        started = time.monotonic()
        code, out, err = await cli("__complete", "crews", "call", "de", env=env, cwd=tmp_path)
        assert (code, out, err) == (0, "", "")
        assert time.monotonic() - started < 5  # the CLI's start and one refused connection


async def test_complete_with_a_bad_token_prints_nothing_V8(complete, gateway):
    """V8 A1: a token the gateway refuses completes nothing and says nothing."""
    assert await complete("aw_not_a_token", "crews", "call", "de") == []


def _tab(line: str, env: dict[str, str]) -> list[str]:
    bin_dir = str(Path(AGENTWORKS_BIN).parent)
    base = {k: v for k, v in os.environ.items() if not k.startswith("AGENTWORKS_")}
    done = subprocess.run(
        ["bash", "-c", BASH_TAB, "bash", line],
        env={**base, "PATH": f"{bin_dir}:{base.get('PATH', '')}", **env},
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    assert done.stderr == ""
    return done.stdout.split()


async def test_the_bash_script_asks_the_gateway_where_a_name_goes_V8_G3(
    gateway, alice_token, demo, echo
):
    """V8 G3: bash's TAB after `crews call de`, `crews call demo e` and `targets get crew:d`
    offers the gateway's names (after the colon, as bash splits the word there); the
    static completions are unchanged, and with the gateway down a name is not completed."""
    env = {"AGENTWORKS_URL": gateway.url, "AGENTWORKS_TOKEN": alice_token}
    assert await asyncio.to_thread(_tab, "agentworks crews call de", env) == ["demo"]
    assert await asyncio.to_thread(_tab, "agentworks crews call demo e", env) == ["echo"]
    assert await asyncio.to_thread(_tab, "agentworks targets get crew:d", env) == ["demo"]
    assert await asyncio.to_thread(_tab, "agentworks crews ca", env) == [
        "call", "call-status", "call-file", "cancel",
    ]  # fmt: skip
    down = {**env, "AGENTWORKS_URL": f"http://127.0.0.1:{free_port()}"}
    assert await asyncio.to_thread(_tab, "agentworks crews call de", down) == []
