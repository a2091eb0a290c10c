"""`agentworks wake-ups|schedules|pauses|webhooks` as subprocesses against a gateway wired
to an in-process scheduler (G3, S1, S3, S4, S5)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from agentworks.core.clients.scheduler import signed_webhook_headers


@pytest.fixture
def scheduler_address(scheduler) -> str:
    """The gateways of these tests talk to the in-process scheduler."""
    return scheduler.address


@pytest.fixture
def ops(gateway, operator_token) -> dict[str, str]:
    """The environment of an operator's `agentworks`."""
    return {"AGENTWORKS_URL": gateway.url, "AGENTWORKS_TOKEN": operator_token}


def _fields(out: str) -> dict[str, str]:
    pairs = (line.partition("  ") for line in out.splitlines() if not line.startswith(" "))
    return {key: value.strip() for key, _, value in pairs}


async def test_wake_ups_are_listed_rescheduled_and_cancelled_from_the_cli_G3_S1(
    cli, ops, conversation, agent_scheduler
):
    """G3 S1: an agent's wake-up shows in `wake-ups list`; reschedule moves it, cancel
    ends it; `--all` still lists it afterwards."""
    wake_up = await agent_scheduler.create_wake_up(
        conversation, delay_seconds=3600, note="check the deploy"
    )
    code, out, err = await cli("wake-ups", "list", "--conversation", conversation, env=ops)
    assert code == 0, err
    header, row = out.splitlines()
    assert header.split() == ["ID", "STATUS", "DUE", "CONVERSATION", "PRODUCT", "NOTE"]
    assert row.split()[:2] == [wake_up.wake_up_id, "pending"] and "check the deploy" in row
    assert "more may follow" not in err  # one row of at most 50: this was the last page
    second = await agent_scheduler.create_wake_up(conversation, delay_seconds=7200)
    code, out, err = await cli(
        "wake-ups", "list", "--conversation", conversation, "--limit", "1", env=ops
    )
    assert code == 0 and len(out.splitlines()) == 2
    cursor = err.split("more may follow: --after ")[1].split()[0]
    code, out, err = await cli(
        "wake-ups", "list", "--conversation", conversation, "--limit", "1", "--after", cursor,
        env=ops,
    )  # fmt: skip
    assert code == 0 and out.splitlines()[1].split()[0] == second.wake_up_id
    await agent_scheduler.cancel_wake_up(second.wake_up_id)

    before = datetime.now(UTC)
    code, out, err = await cli(
        "--json", "wake-ups", "reschedule", wake_up.wake_up_id, "--delay", "2h", env=ops
    )
    assert code == 0, err
    moved = json.loads(out)
    due = datetime.fromisoformat(moved["due_at"])
    assert moved["status"] == "pending" and moved["product"] == "crew:demo"
    assert before + timedelta(hours=2) - timedelta(seconds=5) <= due
    assert due <= datetime.now(UTC) + timedelta(hours=2, seconds=5)

    code, out, err = await cli("wake-ups", "cancel", wake_up.wake_up_id, env=ops)
    assert code == 0, err
    assert _fields(out)["status"] == "cancelled"
    code, out, err = await cli("wake-ups", "list", "--conversation", conversation, env=ops)
    assert code == 0 and out.split() == header.split() and "no wake-ups" in err
    code, out, err = await cli("wake-ups", "list", "--all", "--json", env=ops)
    statuses = [(w["wake_up_id"], w["status"]) for w in json.loads(out)["wake_ups"]]
    assert statuses == [(wake_up.wake_up_id, "cancelled"), (second.wake_up_id, "cancelled")]

    code, _, err = await cli("wake-ups", "cancel", wake_up.wake_up_id, env=ops)
    assert code == 6, err  # FAILED_PRECONDITION: only pending wake-ups can be cancelled
    code, _, err = await cli("wake-ups", "reschedule", "x", "--delay", "soon", env=ops)
    assert code == 2 and "--delay 'soon' is not a duration" in err


async def test_schedules_are_created_previewed_updated_paused_and_deleted_G3_S4(
    cli, ops, conversation
):
    """G3 S4: create on a cron rule with a time zone, preview its fire times (daylight
    saving shifts them in UTC), switch to an interval, pause, resume, list, delete."""
    code, out, err = await cli(
        "--json", "schedules", "create", "--conversation", conversation, "--prompt", "digest",
        "--cron", "30 2 * * *", "--time-zone", "Europe/Berlin", "--name", "nightly", env=ops,
    )  # fmt: skip
    assert code == 0, err
    schedule = json.loads(out)
    schedule_id = schedule["schedule_id"]
    assert schedule["recurrence"] == {"cron": "30 2 * * *", "time_zone": "Europe/Berlin"}
    assert schedule["product"] == "crew:demo" and schedule["paused"] is False

    code, out, err = await cli(
        "schedules", "preview", schedule_id, "--count", "3", "--after", "2024-03-29T12:00:00Z",
        env=ops,
    )  # fmt: skip
    assert code == 0, err
    assert out.split() == [
        "2024-03-30T01:30:00+00:00",
        "2024-03-31T01:30:00+00:00",
        "2024-04-01T00:30:00+00:00",
    ]
    code, out, err = await cli("schedules", "preview", "--every", "90m", "--count", "2", env=ops)
    assert code == 0 and len(out.split()) == 2, err

    code, out, err = await cli("schedules", "update", schedule_id, "--every", "2h", env=ops)
    assert code == 0, err
    assert _fields(out)["rule"] == "every 7200 s" and _fields(out)["name"] == "nightly"
    code, out, err = await cli("schedules", "pause", schedule_id, env=ops)
    assert code == 0 and _fields(out)["paused"] == "true", err
    code, out, err = await cli("schedules", "resume", schedule_id, env=ops)
    assert code == 0 and _fields(out)["paused"] == "false", err

    code, out, err = await cli("schedules", "list", "--conversation", conversation, env=ops)
    assert code == 0, err
    assert out.splitlines()[1].split()[:5] == [schedule_id, "nightly", "every", "7200", "s"]

    code, out, err = await cli("schedules", "delete", schedule_id, env=ops)
    assert code == 0 and out.strip() == f"deleted schedule {schedule_id}", err
    code, _, err = await cli("schedules", "get", schedule_id, env=ops)
    assert code == 4 and "not found" in err
    code, _, err = await cli(
        "schedules", "create", "--conversation", conversation, "--prompt", "x", env=ops
    )
    assert code == 2 and "one of the arguments --cron --every is required" in err


async def test_pauses_hold_timers_globally_or_per_product_operators_only_G3_S3(
    cli, ops, alice_token, gateway
):
    """G3 S3: an operator pauses a product and everything, status lists both, resume lifts
    them; a non-operator is refused (exit 3)."""
    code, out, err = await cli(
        "pauses", "pause", "--product", "crew:demo", "--reason", "maintenance", env=ops
    )
    assert code == 0, err
    header, row = out.splitlines()
    assert header.split() == ["SCOPE", "REASON", "PAUSED_BY", "PAUSED_AT"]
    assert row.split()[:3] == ["crew:demo", "maintenance", "user:ops"]
    code, out, err = await cli("pauses", "pause", env=ops)
    assert code == 0, err

    code, out, err = await cli("pauses", "status", "--json", env=ops)
    assert code == 0, err
    state = json.loads(out)
    assert state["global_paused"] is True and state["paused_products"] == ["crew:demo"]

    alice = {"AGENTWORKS_URL": gateway.url, "AGENTWORKS_TOKEN": alice_token}
    code, _, err = await cli("pauses", "resume", env=alice)
    assert code == 3 and "resuming timers needs the operator role" in err

    code, out, err = await cli("pauses", "resume", env=ops)
    assert code == 0, err
    code, out, err = await cli("pauses", "resume", "--product", "crew:demo", env=ops)
    assert code == 0 and "no pauses: timers fire" in err
    code, _, err = await cli("pauses", "pause", "--product", "demo", env=ops)
    assert code == 2, err


async def test_webhooks_are_created_with_a_url_and_secret_rotated_and_deleted_G3_S5(
    cli, ops, conversation, gateway
):
    """G3 S5: create prints the URL and the secret once; a POST signed with it is
    accepted; rotate replaces the secret (the old one fails); delete removes the hook."""
    code, out, err = await cli(
        "webhooks", "create", "--conversation", conversation, "--name", "ci", env=ops
    )
    assert code == 0, err
    hook = _fields(out)
    assert hook["url"] == f"{gateway.url}/webhooks/{hook['webhook_id']}"
    assert hook["secret"].startswith("whsec_") and "store the secret now" in err

    body = b'{"build": 7}'
    async with httpx.AsyncClient(timeout=30) as outside:
        sent = await outside.post(
            hook["url"], content=body, headers=signed_webhook_headers(hook["secret"], body)
        )
        assert sent.status_code == 202, sent.text

        code, out, err = await cli("webhooks", "list", "--conversation", conversation, env=ops)
        assert code == 0, err
        assert out.splitlines()[1].split()[:2] == [hook["webhook_id"], "ci"]
        assert hook["secret"] not in out

        code, out, err = await cli("--json", "webhooks", "rotate", hook["webhook_id"], env=ops)
        assert code == 0, err
        rotated = json.loads(out)
        assert rotated["secret"] != hook["secret"]
        assert rotated["secret_fingerprint"] != hook["secret_fingerprint"]
        old = await outside.post(
            hook["url"], content=body, headers=signed_webhook_headers(hook["secret"], body)
        )
        assert old.status_code == 401

    code, out, err = await cli("webhooks", "delete", hook["webhook_id"], env=ops)
    assert code == 0 and out.strip() == f"deleted webhook {hook['webhook_id']}", err
    code, _, err = await cli("webhooks", "get", hook["webhook_id"], env=ops)
    assert code == 4, err
