"""The read-only `list` and `transcript` tools (V1, V2, A3) with the official MCP client and
on `/api`: paging across a page boundary, filters, who sees what, and the issue's story
(calls left open by an interrupted `--wait` found and cancelled)."""

from __future__ import annotations

import pytest

from agentworks.client import MessagingClient
from agentworks.messaging.v1 import messaging_pb2 as m

ALL_KINDS = {
    "calls",
    "conversations",
    "inboxes",
    "targets",
    "wake_ups",
    "schedules",
    "webhooks",
    "runtimes",
}


@pytest.fixture
def scheduler_address(scheduler) -> str:
    """The gateways of these tests talk to the in-process scheduler."""
    return scheduler.address


async def ok(mcp, tool: str, args: dict) -> dict:
    result = await mcp.call_tool(tool, args)
    assert not result.is_error, result.content
    return result.structured_content


async def every_page(mcp, args: dict) -> tuple[list[dict], int]:
    """Every item of a `list`, two per page, and how many pages it took."""
    items, cursor, pages = [], None, 0
    while True:
        page = await ok(mcp, "list", {**args, "limit": 2, **({"cursor": cursor} if cursor else {})})
        items.extend(page["items"])
        pages += 1
        cursor = page["next_cursor"]
        if not cursor:
            return items, pages


async def test_list_and_transcript_are_read_only_flat_mcp_tools_V1_V2_G2(
    gateway, mcp_session, alice_token
):
    """V1 V2 G2: `list` and `transcript` are on MCP, annotated read-only (and idempotent,
    not destructive), with flat input schemas (no allOf, if/then, oneOf)."""
    async with mcp_session(gateway.mcp_url, alice_token) as mcp:
        tools = {t.name: t for t in (await mcp.list_tools()).tools}
    for name in ("list", "transcript"):
        hints = tools[name].annotations
        assert hints.read_only_hint is True and hints.idempotent_hint is True
        assert hints.destructive_hint is False
        schema = tools[name].input_schema
        assert not {"allOf", "anyOf", "oneOf", "if", "then"} & set(schema), name
    assert set(tools["list"].input_schema["properties"]["what"]["enum"]) == ALL_KINDS
    assert tools["list"].input_schema["properties"]["limit"]["maximum"] == 200


async def test_open_calls_are_found_across_pages_and_cancelled_then_the_target_is_free_V1_F15(
    gateway, mcp_session, alice_token, echo, api
):
    """V1 F15 (issue 25's story): calls left running (a `--wait` cut short) are found with
    list what=calls status=open across a page boundary, cancelled with `functions`, and
    the target's running slots are free again (list what=targets)."""
    async with mcp_session(gateway.mcp_url, alice_token) as mcp:
        made = []
        for n in range(3):
            receipt = await ok(
                mcp,
                "functions",
                {"action": "call", "crew": "demo", "function": "echo", "inputs": {"text": f"{n}"}},
            )
            made.append(receipt["call_id"])
        (target,) = (await ok(mcp, "list", {"what": "targets"}))["items"]
        assert target["target"] == "crew:demo" and target["running"] == 3
        assert target["free"] == target["effective_running_limit"] - 3
        assert [f["name"] for f in target["functions"]] == ["echo"]
        assert target["functions"][0]["input_schema"]["required"] == ["text"]

        found, pages = await every_page(mcp, {"what": "calls", "status": "open"})
        assert [c["call_id"] for c in found] == made[::-1] and pages == 2
        first = found[-1]
        assert (first["target"], first["function"], first["caller"]) == (
            "crew:demo",
            "echo",
            "user:alice",
        )
        assert first["status"] == "running" and first["ended_at"] is None
        for call in found:
            await ok(mcp, "functions", {"action": "cancel", "call_id": call["call_id"]})
        assert (await ok(mcp, "list", {"what": "calls", "status": "open"}))["items"] == []
        cancelled = await ok(mcp, "list", {"what": "calls", "status": "cancelled"})
        assert len(cancelled["items"]) == 3 and cancelled["next_cursor"] == ""
        (target,) = (await ok(mcp, "list", {"what": "targets"}))["items"]
        assert target["running"] == 0 and target["free"] == target["effective_running_limit"]
    # the same tool and result on /api
    response = await api(alice_token).post(
        "/api/v1/tools/list", json={"what": "calls", "caller": "user:alice", "limit": 5}
    )
    assert response.status_code == 200, response.text
    assert [c["call_id"] for c in response.json()["items"]] == made[::-1]


async def test_the_operator_finds_someone_elses_stuck_call_and_cancels_it_V1_A3_F15(
    gateway, mcp_session, alice_token, make_token, operator_token, echo
):
    """V1 A3 F15 (issue 25's story, as the operator): a call alice left open holds a slot;
    the operator lists it, reads its status and cancels it, and the slot is free; a plain
    user gets NOT_FOUND for status and cancel of it, as for a call that does not exist."""
    async with mcp_session(gateway.mcp_url, alice_token) as alice:
        call = await ok(
            alice,
            "functions",
            {"action": "call", "crew": "demo", "function": "echo", "inputs": {"text": "x"}},
        )
    async with mcp_session(gateway.mcp_url, await make_token("user:bob")) as bob:
        for action in ("status", "cancel"):
            refused = await bob.call_tool(
                "functions", {"action": action, "call_id": call["call_id"]}
            )
            assert refused.is_error, action
            assert refused.structured_content["error"]["code"] == "NOT_FOUND", action
    async with mcp_session(gateway.mcp_url, operator_token) as ops:
        (found,) = (await ok(ops, "list", {"what": "calls", "status": "open"}))["items"]
        assert (found["call_id"], found["caller"]) == (call["call_id"], "user:alice")
        status = await ok(ops, "functions", {"action": "status", "call_id": call["call_id"]})
        assert status["status"] == "running"
        cancelled = await ok(ops, "functions", {"action": "cancel", "call_id": call["call_id"]})
        assert cancelled["status"] == "cancelled"
        (target,) = (await ok(ops, "list", {"what": "targets"}))["items"]
        assert target["running"] == 0


async def test_a_second_user_sees_none_of_the_first_users_an_owner_its_targets_A3_V1(
    gateway, mcp_session, alice_token, make_token, operator_token, echo
):
    """A3 V1: bob lists none of alice's calls, conversations or inboxes (filters by her
    or the target change nothing) and may read no transcript of hers; the target's owner
    sees them; the operator sees all."""
    bob_token = await make_token("user:bob")
    owner_token = await make_token("user:owner")
    async with mcp_session(gateway.mcp_url, alice_token) as alice:
        sent = await ok(alice, "messages", {"action": "send", "crew": "demo", "message": "mine"})
        call = await ok(
            alice,
            "functions",
            {"action": "call", "crew": "demo", "function": "echo", "inputs": {"text": "x"}},
        )
    async with mcp_session(gateway.mcp_url, bob_token) as bob:
        for args in (
            {"what": "calls"},
            {"what": "calls", "caller": "user:alice"},
            {"what": "calls", "target": "crew:demo"},
            {"what": "conversations"},
            {"what": "inboxes", "target": "crew:demo"},
            {"what": "runtimes"},
        ):
            assert (await ok(bob, "list", args))["items"] == [], args
        refused = await bob.call_tool("transcript", {"conversation_id": sent["conversation_id"]})
        assert refused.is_error and refused.structured_content["error"]["code"] == "NOT_FOUND"
        refused = await bob.call_tool("transcript", {"inbox_id": sent["inbox_id"]})
        assert refused.is_error
    for token in (owner_token, operator_token):
        async with mcp_session(gateway.mcp_url, token) as viewer:
            calls = (await ok(viewer, "list", {"what": "calls"}))["items"]
            assert [c["call_id"] for c in calls] == [call["call_id"]]
            conversations = (await ok(viewer, "list", {"what": "conversations"}))["items"]
            assert [c["conversation_id"] for c in conversations] == [sent["conversation_id"]]


async def test_conversations_inboxes_and_the_whole_transcript_both_ways_every_kind_V1_V2_C12(
    gateway, mcp_session, alice_token, demo, bot, messaging, identity
):
    """V1 V2 C12: a caller lists its conversations (latest message, latest cursor, new
    since a cursor) and inboxes across pages, and reads a transcript whole: what it
    sent, the agent's replies and deliveries of every kind, by conversation or inbox."""
    async with mcp_session(gateway.mcp_url, alice_token) as mcp:
        receipts = [
            await ok(mcp, "messages", {"action": "send", "crew": "demo", "message": f"hi {n}"})
            for n in range(3)
        ]
        turn = await bot.claim_turn([demo], wait_seconds=10)
        await bot.send_message(turn.reply_inbox_id, "agent reply")
        await bot.complete_turn(turn.turn_id)
        conversation = turn.conversation_id
        async with MessagingClient(messaging.address, identity=identity("service:x")) as svc:
            for kind in (
                m.DELIVERY_KIND_WAKE_UP,
                m.DELIVERY_KIND_SCHEDULE,
                m.DELIVERY_KIND_WEBHOOK,
                m.DELIVERY_KIND_FUNCTION_COMPLETED,
            ):
                await svc.enqueue_delivery(
                    conversation,
                    kind=kind,
                    idempotency_key=f"k{kind}",
                    text=f"kind {kind}",
                    payload=b"\xff\x00" if kind == m.DELIVERY_KIND_WEBHOOK else b"",
                )

        listed, pages = await every_page(mcp, {"what": "conversations"})
        assert [c["conversation_id"] for c in listed] == [
            r["conversation_id"] for r in receipts[::-1]
        ]
        assert pages == 2
        replied = next(c for c in listed if c["conversation_id"] == conversation)
        assert replied["last_message"]["text"] == "agent reply"
        assert replied["last_message"]["direction"] == "to_inbox"
        assert replied["message_count"] == 2 and replied["new_messages"] is None
        inboxes, _ = await every_page(mcp, {"what": "inboxes"})
        assert {i["inbox_id"] for i in inboxes} == {r["inbox_id"] for r in receipts}
        assert all(i["principal"] == "user:alice" for i in inboxes)

        items, cursor = [], None
        while True:
            page = await ok(
                mcp,
                "transcript",
                {"inbox_id": turn.reply_inbox_id, "limit": 3}
                | ({"cursor": cursor} if cursor else {}),
            )
            assert page["conversation_id"] == conversation and page["target"] == "crew:demo"
            if not page["items"]:
                break
            items.extend(page["items"])
            cursor = page["next_cursor"]
        assert cursor == replied["latest_cursor"]
        messages = [(i["direction"], i["text"]) for i in items if i["type"] == "message"]
        sent_text = next(r for r in receipts if r["conversation_id"] == conversation)
        assert messages[0][0] == "to_target" and sent_text
        assert messages[1] == ("to_inbox", "agent reply")
        kinds = [i["kind"] for i in items if i["type"] == "delivery"]
        assert kinds == ["message", "wake_up", "schedule", "webhook", "function_completed"]
        webhook = next(i for i in items if i.get("kind") == "webhook")
        assert webhook["payload"] is None and webhook["payload_base64"] == "/wA="
        assert next(i for i in items if i.get("kind") == "message")["status"] == "handled"

        since = (await ok(mcp, "list", {"what": "conversations"}))["since_cursor"]
        await ok(
            mcp, "messages", {"action": "send", "inbox_id": turn.reply_inbox_id, "message": "more"}
        )
        new = await ok(mcp, "list", {"what": "conversations", "since": since})
        assert conversation in [c["conversation_id"] for c in new["items"]]
        assert (
            next(c for c in new["items"] if c["conversation_id"] == conversation)["new_messages"]
            >= 1
        )


async def test_runtimes_are_listed_with_last_seen_across_pages_to_their_owner_only_V1_T2(
    gateway, api, operator_token, alice_token, make_token
):
    """V1 T2: runtime credentials are listed (no secret) oldest first across a page
    boundary with when each runtime last exchanged its credential; the target's owner
    sees its own, another user none, the operator all."""
    await api(operator_token).post(
        "/api/v1/tools/targets",
        json={"action": "register", "target": "crew:a", "owner": "user:alice"},
    )
    created = []
    for n in range(3):
        response = await api(alice_token).post(
            "/api/v1/tools/runtime_credentials",
            json={"action": "create", "principal": f"agent:a/bot{n}"},
        )
        assert response.status_code == 200, response.text
        created.append(response.json())
    exchanged = await api(created[1]["credential"]).post("/api/v1/identity")
    assert exchanged.status_code == 200, exchanged.text

    seen, cursor = [], None
    while True:
        body = {"what": "runtimes", "limit": 2, **({"cursor": cursor} if cursor else {})}
        page = (await api(alice_token).post("/api/v1/tools/list", json=body)).json()
        seen.extend(page["items"])
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert [r["credential_id"] for r in seen] == [c["credential_id"] for c in created]
    assert [r["principal"] for r in seen] == ["agent:a/bot0", "agent:a/bot1", "agent:a/bot2"]
    assert seen[1]["last_seen_at"] is not None and seen[0]["last_seen_at"] is None
    assert all("credential" not in r and r["targets"] == ["crew:a"] for r in seen)

    bob = await make_token("user:bob")
    page = (await api(bob).post("/api/v1/tools/list", json={"what": "runtimes"})).json()
    assert page["items"] == []
    page = (await api(operator_token).post("/api/v1/tools/list", json={"what": "runtimes"})).json()
    assert len(page["items"]) == 3


async def test_wake_ups_schedules_and_webhooks_are_listed_by_conversation_V1_S1_S4_S5(
    gateway, api, operator_token, agent_scheduler, conversation
):
    """V1 S1 S4 S5: the scheduler's wake-ups, schedules and webhooks come through `list`
    with the same envelope, filtered by conversation; the last page has no cursor."""
    await agent_scheduler.create_wake_up(conversation, delay_seconds=3600, note="later")
    await agent_scheduler.create_schedule(conversation, "hourly", interval_seconds=3600)
    await agent_scheduler.create_webhook(conversation, name="ci")
    for what, key in (
        ("wake_ups", "wake_up_id"),
        ("schedules", "schedule_id"),
        ("webhooks", "webhook_id"),
    ):
        response = await api(operator_token).post(
            "/api/v1/tools/list", json={"what": what, "conversation_id": conversation}
        )
        assert response.status_code == 200, response.text
        page = response.json()
        assert len(page["items"]) == 1 and key in page["items"][0], what
        assert page["next_cursor"] == ""


async def test_the_targets_owner_lists_its_agents_timers_a_second_user_none_V1_A3_S1_S4_S5(
    gateway, mcp_session, make_token, operator_token, agent_scheduler, conversation
):
    """V1 A3 S1 S4 S5: through the `list` tool, crew:demo's owner sees the wake-up,
    schedule and webhook its agent attached to alice's conversation, the operator too;
    alice (who opened it) and bob see none, even filtering by the conversation."""
    made = {
        "wake_ups": (await agent_scheduler.create_wake_up(conversation, delay_seconds=3600)),
        "schedules": await agent_scheduler.create_schedule(
            conversation, "hourly", interval_seconds=3600
        ),
        "webhooks": await agent_scheduler.create_webhook(conversation, name="ci"),
    }
    ids = {
        "wake_ups": ("wake_up_id", made["wake_ups"].wake_up_id),
        "schedules": ("schedule_id", made["schedules"].schedule_id),
        "webhooks": ("webhook_id", made["webhooks"].webhook_id),
    }
    for token in (await make_token("user:owner"), operator_token):
        async with mcp_session(gateway.mcp_url, token) as viewer:
            for what, (key, item_id) in ids.items():
                items = (await ok(viewer, "list", {"what": what}))["items"]
                assert [i[key] for i in items] == [item_id], what
    for principal in ("user:alice", "user:bob"):
        async with mcp_session(gateway.mcp_url, await make_token(principal)) as other:
            for what in ids:
                for args in ({"what": what}, {"what": what, "conversation_id": conversation}):
                    assert (await ok(other, "list", args))["items"] == [], (principal, args)
