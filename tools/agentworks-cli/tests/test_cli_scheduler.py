"""`agentworks wake-ups|schedules|pauses|webhooks` as subprocesses against a gateway wired
to an in-process scheduler (G3, S1, S3, S4, S5)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from agentworks.client.scheduler import signed_webhook_headers


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
    assert out.splitlines()[1].split()[-2:] == ["no", conversation]
    # Held by a pause of its product: the list says so (it stays due meanwhile, S3).
    code, _, err = await cli("pauses", "pause", "--product", "crew:demo", env=ops)
    assert code == 0, err
    code, out, err = await cli("schedules", "list", "--conversation", conversation, env=ops)
    await cli("pauses", "resume", "--product", "crew:demo", env=ops)
    assert code == 0 and "no (held: crew:demo)" in out.splitlines()[1], out

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


async def test_schedules_and_webhooks_created_again_with_a_submission_id_are_the_same_G3_S4_S5(
    cli, ops, conversation, api, operator_token
):
    """G3 S4 S5: `schedules create` and `webhooks create` run twice with the same
    --submission-id (a retry after a lost answer) make one schedule and one webhook; the
    retried webhook comes with the same secret. The HTTP tools take the key too."""
    create = (
        "--json", "schedules", "create", "--conversation", conversation, "--prompt", "digest",
        "--every", "1h", "--submission-id", "nightly-1",
    )  # fmt: skip
    first, again = [json.loads((await cli(*create, env=ops))[1]) for _ in range(2)]
    assert first["schedule_id"] == again["schedule_id"]
    code, out, err = await cli("--json", "schedules", "list", env=ops)
    assert code == 0 and len(json.loads(out)["schedules"]) == 1, err
    code, _, err = await cli(*create[1:-3], "2h", "--submission-id", "nightly-1", env=ops)
    assert code == 6 and "submission_id 'nightly-1' was already used" in err  # ALREADY_EXISTS

    hook = ("webhooks", "create", "--conversation", conversation, "--submission-id", "ci-1")
    code, out, err = await cli(*hook, env=ops)
    assert code == 0, err
    code, out2, err = await cli(*hook, env=ops)
    assert code == 0, err
    assert _fields(out)["webhook_id"] == _fields(out2)["webhook_id"]
    assert _fields(out)["secret"] == _fields(out2)["secret"]

    tool = await api(operator_token).post(
        "/api/v1/tools/webhooks",
        json={"action": "create", "conversation_id": conversation, "submission_id": "ci-1"},
    )
    assert tool.status_code == 200 and tool.json()["webhook_id"] == _fields(out)["webhook_id"]


async def test_resuming_a_scope_that_is_not_paused_says_so_G3_S3(cli, ops, api, operator_token):
    """G3 S3: `pauses resume --product crew:typo` while crew:demo is paused exits 0 (resume
    is idempotent) but says that crew:typo was not paused and which pauses are in force;
    the HTTP tool answers resumed=false with the same note."""
    code, _, err = await cli("pauses", "pause", "--product", "crew:demo", env=ops)
    assert code == 0, err
    code, out, err = await cli("pauses", "resume", "--product", "crew:typo", env=ops)
    assert code == 0, err
    assert "crew:typo was not paused; pauses in force: crew:demo" in err
    assert out.splitlines()[1].split()[0] == "crew:demo"

    tool = await api(operator_token).post(
        "/api/v1/tools/pauses", json={"action": "resume", "product": "crew:typo"}
    )
    assert tool.status_code == 200, tool.text
    assert tool.json()["resumed"] is False and "crew:typo was not paused" in tool.json()["note"]

    code, out, err = await cli("--json", "pauses", "resume", "--product", "crew:demo", env=ops)
    assert code == 0, err
    assert json.loads(out)["resumed"] is True and json.loads(out)["note"] is None
    code, _, err = await cli("pauses", "resume", env=ops)
    assert code == 0 and "there was no global pause; no pauses are in force" in err


async def test_operators_create_wake_ups_from_the_cli_and_the_http_tool_G3_S1(
    cli, ops, conversation, api, operator_token, alice_token, gateway
):
    """G3 S1: `wake-ups create --conversation ID --delay D --note N` makes a pending wake-up
    (product: the conversation's target); the same --submission-id gives the same one; the
    HTTP tool `wake_ups` creates with `at`. A plain user may not attach one; a second
    cancel says the wake-up will not fire and a reschedule of it says to create a new one."""
    create = (
        "--json", "wake-ups", "create", "--conversation", conversation, "--delay", "2h",
        "--note", "check the deploy", "--submission-id", "w-1",
    )  # fmt: skip
    code, out, err = await cli(*create, env=ops)
    assert code == 0, err
    wake_up = json.loads(out)
    assert wake_up["status"] == "pending" and wake_up["note"] == "check the deploy"
    assert wake_up["product"] == "crew:demo" and wake_up["created_by"] == "user:ops"
    code, out, err = await cli(*create, env=ops)
    assert code == 0 and json.loads(out)["wake_up_id"] == wake_up["wake_up_id"], err

    at = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    tool = await api(operator_token).post(
        "/api/v1/tools/wake_ups",
        json={"action": "create", "conversation_id": conversation, "at": at},
    )
    assert tool.status_code == 200, tool.text
    assert datetime.fromisoformat(tool.json()["due_at"]) == datetime.fromisoformat(at)
    missing = await api(operator_token).post(
        "/api/v1/tools/wake_ups", json={"action": "create", "conversation_id": conversation}
    )
    assert missing.status_code == 400, missing.text

    alice = {"AGENTWORKS_URL": gateway.url, "AGENTWORKS_TOKEN": alice_token}
    code, _, err = await cli(*create[1:-2], env=alice)
    assert code == 3 and "operators can attach wake-ups" in err  # PERMISSION_DENIED

    code, _, err = await cli("wake-ups", "cancel", wake_up["wake_up_id"], env=ops)
    assert code == 0, err
    code, _, err = await cli("wake-ups", "cancel", wake_up["wake_up_id"], env=ops)
    assert code == 6 and "is cancelled, not pending" in err and "no longer due to fire" in err
    code, _, err = await cli(
        "wake-ups", "reschedule", wake_up["wake_up_id"], "--delay", "1h", env=ops
    )
    assert code == 6 and f"create a new wake-up for conversation {conversation}" in err
