"""Fairness under the running limit (F5, F11; issue 26): no caller can hold a target
hostage. Four unanswered human-input calls from one caller used to make crew:demo busy
for everyone, with no end."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agentworks.client import FunctionsClient
from agentworks.client.functions import state_name
from agentworks.core.errors import Busy, Reason
from agentworks.server.testing import until


def clients_of(functions, identity) -> Callable[..., FunctionsClient]:
    """`client(principal, roles)` -> a FunctionsClient of that replica for that principal."""

    def client(principal: str, roles: frozenset[str] = frozenset()) -> FunctionsClient:
        return FunctionsClient(functions.address, identity=identity(principal, roles))

    return client


async def test_one_caller_may_hold_only_its_share_of_a_targets_running_limit_F5(
    start_functions, identity
):
    """F5: with FUNCTIONS_CALLER_SHARE_PERCENT=50 and a limit of 4, alice's third open
    call is refused busy (reason CALLER_SHARE, saying her share), nothing stored, while bob
    still gets the other two slots; the target's own limit then refuses carol as before.
    A retry of one of alice's calls with its submission_id still returns it (F6)."""
    functions = await start_functions(
        FUNCTIONS_CALLER_SHARE_PERCENT="50", FUNCTIONS_DEFAULT_RUNNING_LIMIT="4"
    )

    client = clients_of(functions, identity)

    async with (
        client("user:ops", frozenset({"operator"})) as ops,
        client("user:owner") as owner,
        client("user:alice") as alice,
        client("user:bob") as bob,
        client("user:carol") as carol,
    ):
        await ops.register_target("crew:demo", owner="user:owner")
        await owner.declare_function(
            "crew:demo", "task", input_schema={"type": "object"}, allowed_callers=["*"]
        )
        first = await alice.call("crew:demo", "task", submission_id="a-1")
        await alice.call("crew:demo", "task", submission_id="a-2")
        with pytest.raises(Busy) as refused:
            await alice.call("crew:demo", "task", submission_id="a-3")
        assert refused.value.reason == Reason.CALLER_SHARE
        assert refused.value.message.startswith(
            "busy: you are running 2 of crew:demo's calls, the most one caller may (2 of its "
            "running limit 4"
        )
        again = await alice.call("crew:demo", "task", submission_id="a-1")
        assert (again.call_id, again.created) == (first.call_id, False)
        await bob.call("crew:demo", "task")
        await bob.call("crew:demo", "task")
        with pytest.raises(Busy) as full:
            await carol.call("crew:demo", "task")
        assert full.value.reason == Reason.RUNNING_LIMIT
        assert "its running limit is 4" in full.value.message


async def test_a_question_nobody_answers_ends_its_call_failed_and_frees_the_slot_F11_F5(
    start_functions, identity
):
    """F11 F5: with FUNCTIONS_QUESTION_TIMEOUT_SECONDS=1, a call waiting for a reply that
    does not come ends `failed` saying so, and its running slot (the target's only one)
    takes the next call; the runtime's next heartbeat hears that the call ended."""
    functions = await start_functions(
        FUNCTIONS_QUESTION_TIMEOUT_SECONDS="1", FUNCTIONS_DEFAULT_RUNNING_LIMIT="1"
    )

    client = clients_of(functions, identity)

    async with (
        client("user:ops", frozenset({"operator"})) as ops,
        client("user:owner") as owner,
        client("user:alice") as alice,
        client("agent:demo/bot") as bot,
    ):
        await ops.register_target("crew:demo", owner="user:owner")
        await owner.declare_function(
            "crew:demo", "ask", input_schema={"type": "object"}, allowed_callers=["*"]
        )
        receipt = await alice.call("crew:demo", "ask")
        assert await bot.claim_execution(["crew:demo"], wait_seconds=5) is not None
        asked = await bot.ask_input(receipt.call_id, "q-1", "deploy?", wait_seconds=0)
        assert not asked.answered
        with pytest.raises(Busy):
            await alice.call("crew:demo", "ask")
        ended = await alice.wait(receipt.call_id, timeout=15)
        assert state_name(ended.status) == "failed"
        assert ended.error.startswith("failed: nobody answered the execution's question within 1 s")

        async def accepted() -> bool:
            try:
                await alice.call("crew:demo", "ask")
            except Busy:
                return False
            return True

        # the sweeper's commit frees the slot
        await until(accepted, 5, every=0.1, what="the running slot is freed")


async def test_a_targets_output_files_stop_at_its_quota_and_nothing_is_stored_T8(
    start_functions, identity
):
    """T8: with FUNCTIONS_TARGET_FILE_QUOTA_BYTES=1000, crew:demo's calls may store 1000
    bytes of files in all: a file that would pass it is refused RESOURCE_EXHAUSTED naming
    the quota, and not stored; replacing a file counts its new size only; another
    target's files are not counted."""
    functions = await start_functions(
        FUNCTIONS_TARGET_FILE_QUOTA_BYTES="1000", FUNCTIONS_DEFAULT_RUNNING_LIMIT="4"
    )

    client = clients_of(functions, identity)

    async with (
        client("user:ops", frozenset({"operator"})) as ops,
        client("user:owner") as owner,
        client("user:alice") as alice,
        client("agent:demo/bot") as bot,
        client("agent:other/bot") as other_bot,
    ):
        for crew in ("crew:demo", "crew:other"):
            await ops.register_target(crew, owner="user:owner")
            await owner.declare_function(
                crew, "make", input_schema={"type": "object"}, allowed_callers=["*"]
            )
        first = await alice.call("crew:demo", "make")
        second = await alice.call("crew:demo", "make")
        elsewhere = await alice.call("crew:other", "make")
        for runtime, crew in ((bot, "crew:demo"), (bot, "crew:demo"), (other_bot, "crew:other")):
            assert await runtime.claim_execution([crew], wait_seconds=5) is not None
        await bot.upload_file(first.call_id, "a.bin", b"x" * 600)
        with pytest.raises(Busy) as refused:
            await bot.upload_file(second.call_id, "b.bin", b"y" * 500)
        assert "past its quota of 1000 bytes (FUNCTIONS_TARGET_FILE_QUOTA_BYTES)" in str(
            refused.value.message
        )
        assert (refused.value.reason, refused.value.metadata) == (
            "STORED_LIMIT",
            {
                "target": "crew:demo",
                "counted": "file_bytes",
                "limit": "1000",
                "setting": "FUNCTIONS_TARGET_FILE_QUOTA_BYTES",
            },
        )
        assert [f.name for f in (await alice.get_status(second.call_id)).files] == []
        await bot.upload_file(first.call_id, "a.bin", b"x" * 100)  # replaced: 100 now
        await bot.upload_file(second.call_id, "b.bin", b"y" * 500)
        await other_bot.upload_file(elsewhere.call_id, "c.bin", b"z" * 900)
        sizes = {f.name: f.size for f in (await alice.get_status(second.call_id)).files}
        assert sizes == {"b.bin": 500}
