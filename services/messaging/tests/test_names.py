"""Names (B10): no two target or principal names may differ only by case. New names are
lower-case; a name stored before that rule keeps working by its exact spelling, and no
new name may look like it."""

from __future__ import annotations

import psycopg
import pytest

from agentworks.core.errors import Conflict, InvalidArgument
from agentworks.core.identity import check_new_principal, check_principal
from agentworks.core.targets import check_new_target, check_target


async def test_a_target_or_owner_with_upper_case_letters_is_refused_naming_the_field_B10(
    operator, demo
):
    """B10: `crew:DEMO` beside `crew:demo`, or an owner `user:DEV` beside `user:dev`, was
    a look-alike (a spoofing aid); now each is refused INVALID_ARGUMENT naming the field
    and the lower-case spelling."""
    with pytest.raises(InvalidArgument, match=r"ref.name 'DEMO' has upper-case letters.*'demo'"):
        await operator.register_target("crew:DEMO", owner="user:owner")
    with pytest.raises(InvalidArgument, match=r"owner 'user:DEV' has upper-case letters"):
        await operator.register_target("crew:other", owner="user:DEV")
    assert [t.ref.name for t in (await operator.list_targets()).targets] == ["demo"]


async def test_a_name_stored_before_the_rule_stays_reachable_and_cannot_be_imitated_B10(
    operator, clients, database_url
):
    """B10, the rule for existing rows: a mixed-case target registered before names had
    to be lower-case keeps its spelling and works by it (sends, turns); registering its
    lower-case look-alike is refused ALREADY_EXISTS naming the existing one."""
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(
            "INSERT INTO messaging.targets (kind, name, owner) "
            "VALUES ('crew', 'Legacy', 'user:owner')"
        )
    alice = await clients("user:alice")
    receipt = await alice.send("still there?", target="crew:Legacy")
    bot = await clients("agent:Legacy/bot")
    turn = await bot.claim_turn(["crew:Legacy"], wait_seconds=5)
    assert turn is not None and turn.conversation_id == receipt.conversation_id
    with pytest.raises(
        Conflict, match="differs only by case from the registered crew:Legacy"
    ) as refused:
        await operator.register_target("crew:legacy", owner="user:owner")
    assert (refused.value.reason, refused.value.metadata) == (
        "NAME_TAKEN",
        {"field": "ref.name", "existing": "crew:Legacy"},
    )


def test_the_shared_checks_refuse_upper_case_for_new_names_only_B10():
    """B10: one shared check for every service (messaging's and functions' RegisterTarget,
    the gateway's tokens and runtime credentials): new names lower-case; references to
    an existing name (`check_target`, `check_principal`) still take any case."""
    assert check_new_principal("agent:demo/bot") == "agent:demo/bot"
    with pytest.raises(InvalidArgument, match="principal 'user:Dev' has upper-case"):
        check_new_principal("user:Dev")
    with pytest.raises(InvalidArgument, match=r"target\.name 'Demo' has upper-case"):
        check_new_target("crew", "Demo")
    assert check_principal("user:Dev") == "user:Dev"
    assert check_target("crew", "Demo").name == "Demo"
