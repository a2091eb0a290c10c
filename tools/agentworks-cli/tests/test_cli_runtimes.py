"""`agentworks runtimes credentials` and token expiries from the CLI (T2, T4, G3)."""

from __future__ import annotations

import json


async def test_an_owner_manages_runtime_credentials_from_the_cli_T2_G3(
    gateway, cli, operator_token, make_token
):
    """T2 G3: create prints the secret once, list shows it without, revoke ends it; a
    crew's owner manages only their own crew's credentials."""
    ops = {"AGENTWORKS_TOKEN": operator_token, "AGENTWORKS_URL": gateway.url}
    for target, owner in (("crew:research", "user:dana"), ("crew:other", "user:erin")):
        code, _, err = await cli("targets", "register", target, "--owner", owner, env=ops)
        assert code == 0, err
    dana = {"AGENTWORKS_TOKEN": await make_token("user:dana"), "AGENTWORKS_URL": gateway.url}

    code, out, err = await cli(
        "runtimes", "credentials", "create", "--principal", "agent:research/bot",
        "--label", "research runtime", "--expires-in-seconds", "3600", env=dana,
    )  # fmt: skip
    assert code == 0, err
    assert "awr_" in out and "not shown again" in err
    code, out, err = await cli(
        "runtimes", "credentials", "create", "--principal", "agent:research/bot", "--json",
        env=dana,
    )  # fmt: skip
    created = json.loads(out)
    assert created["targets"] == ["crew:research"] and created["expires_at"] is None

    code, out, err = await cli("runtimes", "credentials", "list", env=dana)
    assert code == 0, err
    assert created["credential_id"] in out and "research runtime" in out
    assert created["credential"] not in out

    code, _, err = await cli(
        "runtimes", "credentials", "create", "--principal", "agent:other/bot", env=dana
    )
    assert code == 3 and "only the owner of crew:other (user:erin)" in err

    code, out, err = await cli(
        "runtimes", "credentials", "revoke", created["credential_id"], env=dana
    )
    assert code == 0, err
    assert out.startswith(f"revoked {created['credential_id']} (agent:research/bot)")


async def test_a_token_created_with_an_expiry_shows_it_T4_G3(gateway, cli, operator_token):
    """T4 G3: `tokens create --expires-in-seconds` gives the token an expiry."""
    env = {"AGENTWORKS_TOKEN": operator_token, "AGENTWORKS_URL": gateway.url}
    code, out, err = await cli(
        "tokens", "create", "--principal", "user:erin", "--expires-in-seconds", "60", "--json",
        env=env,
    )  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["expires_at"]
