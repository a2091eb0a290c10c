"""Every scheduler RPC refuses bad input with a clear error naming what was wrong, and
stores and delivers nothing: every table of the scheduler and messaging schemas is the
same before and after the refused request (P6, S1, S4, S5)."""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from agentworks.client.scheduler import signed_webhook_headers, webhook_signature
from agentworks.core.errors import AgentWorksError, from_trailers
from agentworks.core.identity import METADATA_KEY
from agentworks.scheduler.v1 import scheduler_pb2 as pb
from agentworks.scheduler.v1 import scheduler_pb2_grpc
from agentworks.server.testing import database_snapshot

BOT, ALICE, OPS, GATEWAY = "agent:demo/bot", "user:alice", "user:ops", "service:gateway"
UNKNOWN_UUID = "00000000-0000-0000-0000-000000000000"


def ts(seconds: int, nanos: int = 0) -> Timestamp:
    """A Timestamp as sent, valid or not (protobuf does not check on the wire)."""
    return Timestamp(seconds=seconds, nanos=nanos)


def at(delta: timedelta) -> Timestamp:
    out = Timestamp()
    out.FromDatetime(datetime.now(UTC) + delta)
    return out


def cursor(raw: str) -> str:
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


TOO_LATE = ts(2**62)
BAD_NANOS = ts(0, -1)
LAST_SECOND = ts(253402300799)  # 9999-12-31T23:59:59Z: valid, but nothing fires after it
HOUR = pb.Recurrence(interval_seconds=3600)

Build = Callable[[SimpleNamespace], Any]


def receive(headers: Callable[[SimpleNamespace], dict[str, str]], body: bytes = b"{}") -> Build:
    return lambda c: pb.ReceiveWebhookRequest(
        webhook_id=c.webhook_id, headers=headers(c), body=body
    )


def wake(**fields: Any) -> Build:
    return lambda c: pb.CreateWakeUpRequest(conversation_id=c.conversation, **fields)


def schedule(**fields: Any) -> Build:
    fields.setdefault("prompt", "p")
    fields.setdefault("recurrence", HOUR)
    return lambda c: pb.CreateScheduleRequest(conversation_id=c.conversation, **fields)


def cron(rule: str, time_zone: str = "") -> Build:
    return schedule(recurrence=pb.Recurrence(cron=rule, time_zone=time_zone))


def as_expected(code: str, words: str | dict[str, str], got: str, refusal: Any) -> bool:
    """Whether a refusal is the expected one: `words` in its message, or, for a field's
    proto rule (`words` a dict), the reason FIELD_RULE with that field and rule in its
    ErrorInfo metadata: the rule's numbers and wording are the validator's, not the test's."""
    if got != code:
        return False
    if isinstance(words, dict):
        return refusal.reason == "FIELD_RULE" and words.items() <= refusal.metadata.items()
    return words in refusal.message


def field_rule(field: str, rule: str) -> dict[str, str]:
    """The ErrorInfo metadata a refusal by a field's proto rule names (see as_expected)."""
    return {"field": field, "rule": rule}


# (method, principal, request builder, expected code, words the message must contain or,
# for a field's proto rule, the field_rule its ErrorInfo names)
CASES: list[tuple[str, str, Build, str, str | dict[str, str]]] = [
    # ----------------------------------------------------------- wake-ups
    (
        "CreateWakeUp",
        BOT,
        lambda c: pb.CreateWakeUpRequest(delay_seconds=1),
        "INVALID_ARGUMENT",
        "conversation_id is required",
    ),
    (
        "CreateWakeUp",
        BOT,
        lambda c: pb.CreateWakeUpRequest(conversation_id="../x", delay_seconds=1),
        "NOT_FOUND",
        "conversation '../x'",
    ),
    (
        "CreateWakeUp",
        BOT,
        lambda c: pb.CreateWakeUpRequest(conversation_id=UNKNOWN_UUID, delay_seconds=1),
        "NOT_FOUND",
        "conversation",
    ),
    ("CreateWakeUp", BOT, wake(), "INVALID_ARGUMENT", "when is missing"),
    (
        "CreateWakeUp",
        BOT,
        wake(delay_seconds=-1),
        "INVALID_ARGUMENT",
        field_rule("delay_seconds", "int64.gte_lte"),
    ),
    ("CreateWakeUp", BOT, wake(delay_seconds=2**62), "INVALID_ARGUMENT", "delay_seconds"),
    ("CreateWakeUp", BOT, wake(at=at(-timedelta(hours=2))), "INVALID_ARGUMENT", "in the past"),
    ("CreateWakeUp", BOT, wake(at=at(timedelta(days=401))), "INVALID_ARGUMENT", "days ahead"),
    ("CreateWakeUp", BOT, wake(at=TOO_LATE), "INVALID_ARGUMENT", "at"),
    ("CreateWakeUp", BOT, wake(at=BAD_NANOS), "INVALID_ARGUMENT", "nanos must be 0-999,999,999"),
    (
        "CreateWakeUp",
        BOT,
        wake(delay_seconds=1, note="n" * 17_000),
        "INVALID_ARGUMENT",
        field_rule("note", "string.max_bytes"),
    ),
    ("CreateWakeUp", BOT, wake(delay_seconds=1, note="n\x00"), "INVALID_ARGUMENT", "note"),
    (
        "CreateWakeUp",
        BOT,
        wake(delay_seconds=1, product="crew:other"),
        "INVALID_ARGUMENT",
        "product is taken from your identity",
    ),
    (
        "CreateWakeUp",
        OPS,
        wake(delay_seconds=1, product="bogus"),
        "INVALID_ARGUMENT",
        "product 'bogus'",
    ),
    (  # another product would escape the pauses of the conversation's own (S3)
        "CreateWakeUp",
        OPS,
        wake(delay_seconds=1, product="crew:other"),
        "INVALID_ARGUMENT",
        "product crew:other is not the target of conversation",
    ),
    ("CreateWakeUp", ALICE, wake(delay_seconds=1), "PERMISSION_DENIED", "only the agents"),
    ("GetWakeUp", BOT, lambda c: pb.GetWakeUpRequest(), "NOT_FOUND", "wake-up ''"),
    ("GetWakeUp", BOT, lambda c: pb.GetWakeUpRequest(wake_up_id="x\x00"), "NOT_FOUND", "wake-up"),
    (
        "ListWakeUps",
        BOT,
        lambda c: pb.ListWakeUpsRequest(after="%%%"),
        "INVALID_ARGUMENT",
        "not a cursor",
    ),
    (
        "ListWakeUps",
        BOT,
        lambda c: pb.ListWakeUpsRequest(after=cursor("s1:-5")),
        "INVALID_ARGUMENT",
        "not a cursor",
    ),
    (
        "ListWakeUps",
        BOT,
        lambda c: pb.ListWakeUpsRequest(after=cursor("s1:" + "9" * 30)),
        "INVALID_ARGUMENT",
        "not a cursor",
    ),
    (
        "ListWakeUps",
        BOT,
        lambda c: pb.ListWakeUpsRequest(limit=201),
        "INVALID_ARGUMENT",
        field_rule("limit", "int32.gte_lte"),
    ),
    ("ListWakeUps", BOT, lambda c: pb.ListWakeUpsRequest(limit=-1), "INVALID_ARGUMENT", "limit"),
    (
        "ListWakeUps",
        BOT,
        lambda c: pb.ListWakeUpsRequest(product="crew"),
        "INVALID_ARGUMENT",
        "product 'crew'",
    ),
    (
        "ListWakeUps",
        BOT,
        lambda c: pb.ListWakeUpsRequest(conversation_id="nope"),
        "NOT_FOUND",
        "conversation 'nope'",
    ),
    (
        "CancelWakeUp",
        BOT,
        lambda c: pb.CancelWakeUpRequest(wake_up_id=UNKNOWN_UUID),
        "NOT_FOUND",
        "wake-up",
    ),
    (
        "RescheduleWakeUp",
        BOT,
        lambda c: pb.RescheduleWakeUpRequest(wake_up_id=c.wake_up_id),
        "INVALID_ARGUMENT",
        "when is missing",
    ),
    (
        "RescheduleWakeUp",
        BOT,
        lambda c: pb.RescheduleWakeUpRequest(wake_up_id=c.wake_up_id, delay_seconds=-5),
        "INVALID_ARGUMENT",
        "delay_seconds",
    ),
    (
        "RescheduleWakeUp",
        BOT,
        lambda c: pb.RescheduleWakeUpRequest(wake_up_id=c.wake_up_id, at=TOO_LATE),
        "INVALID_ARGUMENT",
        "at",
    ),
    (
        "RescheduleWakeUp",
        BOT,
        lambda c: pb.RescheduleWakeUpRequest(wake_up_id="nope", delay_seconds=5),
        "NOT_FOUND",
        "wake-up 'nope'",
    ),
    # ---------------------------------------------------------- schedules
    ("CreateSchedule", BOT, schedule(prompt=""), "INVALID_ARGUMENT", "prompt is empty"),
    ("CreateSchedule", BOT, schedule(prompt=" \n "), "INVALID_ARGUMENT", "prompt is empty"),
    (
        "CreateSchedule",
        BOT,
        schedule(prompt="p" * 17_000),
        "INVALID_ARGUMENT",
        field_rule("prompt", "string.max_bytes"),
    ),
    ("CreateSchedule", BOT, schedule(prompt="p\x00"), "INVALID_ARGUMENT", "prompt"),
    (
        "CreateSchedule",
        BOT,
        lambda c: pb.CreateScheduleRequest(conversation_id=c.conversation, prompt="p"),
        "INVALID_ARGUMENT",
        "recurrence is required",
    ),
    (
        "CreateSchedule",
        BOT,
        schedule(recurrence=pb.Recurrence(time_zone="UTC")),
        "INVALID_ARGUMENT",
        "exactly one of cron or interval_seconds",
    ),
    ("CreateSchedule", BOT, cron("* * *"), "INVALID_ARGUMENT", "has 3 fields; it needs five"),
    (
        "CreateSchedule",
        BOT,
        cron("61 * * * *"),
        "INVALID_ARGUMENT",
        "the minute field '61' is not valid",
    ),
    ("CreateSchedule", BOT, cron("*/0 * * * *"), "INVALID_ARGUMENT", "cron"),
    ("CreateSchedule", BOT, cron("0 0 31 2 *"), "INVALID_ARGUMENT", "never fires"),
    ("CreateSchedule", BOT, cron("@every"), "INVALID_ARGUMENT", "unknown alias"),
    ("CreateSchedule", BOT, cron("0 " * 120), "INVALID_ARGUMENT", "cron"),
    ("CreateSchedule", BOT, cron("0 0 * * *\x00"), "INVALID_ARGUMENT", "cron"),
    (
        "CreateSchedule",
        BOT,
        cron("0 9 * * *", "Mars/Olympus"),
        "INVALID_ARGUMENT",
        "time_zone 'Mars/Olympus'",
    ),
    (
        "CreateSchedule",
        BOT,
        cron("0 9 * * *", "../../../etc/passwd"),
        "INVALID_ARGUMENT",
        "time_zone",
    ),
    ("CreateSchedule", BOT, cron("0 9 * * *", "UTC\x00"), "INVALID_ARGUMENT", "time_zone"),
    ("CreateSchedule", BOT, cron("0 9 * * *", "localtime"), "INVALID_ARGUMENT", "time_zone"),
    ("CreateSchedule", BOT, cron("0 9 * * *", "Factory"), "INVALID_ARGUMENT", "time_zone"),
    (
        "CreateSchedule",
        BOT,
        schedule(recurrence=pb.Recurrence(interval_seconds=3600, time_zone="Mars/Olympus")),
        "INVALID_ARGUMENT",
        "time_zone 'Mars/Olympus'",
    ),
    (
        "CreateSchedule",
        BOT,
        schedule(recurrence=pb.Recurrence(interval_seconds=0)),
        "INVALID_ARGUMENT",
        "interval_seconds",
    ),
    (
        "CreateSchedule",
        BOT,
        schedule(recurrence=pb.Recurrence(interval_seconds=-60)),
        "INVALID_ARGUMENT",
        "interval_seconds",
    ),
    (
        "CreateSchedule",
        BOT,
        schedule(recurrence=pb.Recurrence(interval_seconds=2**62)),
        "INVALID_ARGUMENT",
        "interval_seconds",
    ),
    (
        "CreateSchedule",
        BOT,
        schedule(name="n" * 201),
        "INVALID_ARGUMENT",
        field_rule("name", "string.max_len"),
    ),
    ("CreateSchedule", BOT, schedule(name="n\x00"), "INVALID_ARGUMENT", "name"),
    (
        "CreateSchedule",
        BOT,
        schedule(recurrence=pb.Recurrence(cron="0 9 * * *"), start_at=at(timedelta(hours=1))),
        "INVALID_ARGUMENT",
        "start_at applies to interval",
    ),
    ("CreateSchedule", BOT, schedule(start_at=TOO_LATE), "INVALID_ARGUMENT", "start_at"),
    (
        "CreateSchedule",
        BOT,
        schedule(start_at=at(timedelta(days=500))),
        "INVALID_ARGUMENT",
        "start_at must be within",
    ),
    ("CreateSchedule", ALICE, schedule(), "PERMISSION_DENIED", "only the agents"),
    (
        "GetSchedule",
        BOT,
        lambda c: pb.GetScheduleRequest(schedule_id=UNKNOWN_UUID),
        "NOT_FOUND",
        "schedule",
    ),
    (
        "UpdateSchedule",
        BOT,
        lambda c: pb.UpdateScheduleRequest(schedule_id=c.schedule_id, prompt=""),
        "INVALID_ARGUMENT",
        "prompt is empty",
    ),
    (
        "UpdateSchedule",
        BOT,
        lambda c: pb.UpdateScheduleRequest(schedule_id=c.schedule_id, prompt="p\x00"),
        "INVALID_ARGUMENT",
        "prompt",
    ),
    (
        "UpdateSchedule",
        BOT,
        lambda c: pb.UpdateScheduleRequest(schedule_id=c.schedule_id, name="n" * 201),
        "INVALID_ARGUMENT",
        field_rule("name", "string.max_len"),
    ),
    (
        "UpdateSchedule",
        BOT,
        lambda c: pb.UpdateScheduleRequest(schedule_id=c.schedule_id, name="n\x00"),
        "INVALID_ARGUMENT",
        "name",
    ),
    (
        "UpdateSchedule",
        BOT,
        lambda c: pb.UpdateScheduleRequest(
            schedule_id=c.schedule_id, recurrence=pb.Recurrence(cron="x")
        ),
        "INVALID_ARGUMENT",
        "cron 'x'",
    ),
    (
        "UpdateSchedule",
        BOT,
        lambda c: pb.UpdateScheduleRequest(schedule_id="nope", prompt="p"),
        "NOT_FOUND",
        "schedule 'nope'",
    ),
    (
        "PauseSchedule",
        BOT,
        lambda c: pb.PauseScheduleRequest(schedule_id="nope"),
        "NOT_FOUND",
        "schedule 'nope'",
    ),
    (
        "ResumeSchedule",
        BOT,
        lambda c: pb.ResumeScheduleRequest(schedule_id=""),
        "NOT_FOUND",
        "schedule ''",
    ),
    (
        "DeleteSchedule",
        BOT,
        lambda c: pb.DeleteScheduleRequest(schedule_id=UNKNOWN_UUID),
        "NOT_FOUND",
        "schedule",
    ),
    (
        "ListSchedules",
        BOT,
        lambda c: pb.ListSchedulesRequest(after="s1:1"),
        "INVALID_ARGUMENT",
        "not a cursor",
    ),
    (
        "ListSchedules",
        BOT,
        lambda c: pb.ListSchedulesRequest(after=cursor("s1:" + "9" * 19)),
        "INVALID_ARGUMENT",
        "not a cursor",
    ),
    (
        "ListSchedules",
        BOT,
        lambda c: pb.ListSchedulesRequest(limit=1000),
        "INVALID_ARGUMENT",
        field_rule("limit", "int32.gte_lte"),
    ),
    (
        "PreviewSchedule",
        BOT,
        lambda c: pb.PreviewScheduleRequest(),
        "INVALID_ARGUMENT",
        "recurrence is required",
    ),
    (
        "PreviewSchedule",
        BOT,
        lambda c: pb.PreviewScheduleRequest(recurrence=HOUR, count=101),
        "INVALID_ARGUMENT",
        field_rule("count", "int32.gte_lte"),
    ),
    (
        "PreviewSchedule",
        BOT,
        lambda c: pb.PreviewScheduleRequest(recurrence=HOUR, count=-1),
        "INVALID_ARGUMENT",
        "count",
    ),
    (
        "PreviewSchedule",
        BOT,
        lambda c: pb.PreviewScheduleRequest(recurrence=pb.Recurrence(cron="bad")),
        "INVALID_ARGUMENT",
        "cron 'bad'",
    ),
    (
        "PreviewSchedule",
        BOT,
        lambda c: pb.PreviewScheduleRequest(recurrence=HOUR, after=TOO_LATE),
        "INVALID_ARGUMENT",
        "after",
    ),
    (
        "PreviewSchedule",
        BOT,
        lambda c: pb.PreviewScheduleRequest(recurrence=HOUR, after=LAST_SECOND),
        "INVALID_ARGUMENT",
        "after",
    ),
    (
        "PreviewSchedule",
        BOT,
        lambda c: pb.PreviewScheduleRequest(
            recurrence=pb.Recurrence(cron="0 9 * * *"), after=LAST_SECOND
        ),
        "INVALID_ARGUMENT",
        "after",
    ),
    (
        "PreviewSchedule",
        BOT,
        lambda c: pb.PreviewScheduleRequest(schedule_id=UNKNOWN_UUID),
        "NOT_FOUND",
        "schedule",
    ),
    # ------------------------------------------------------------- pauses
    (
        "Pause",
        OPS,
        lambda c: pb.PauseRequest(product="crew:bad name"),
        "INVALID_ARGUMENT",
        "cannot be paused",
    ),
    ("Pause", OPS, lambda c: pb.PauseRequest(product="*"), "INVALID_ARGUMENT", "cannot be paused"),
    ("Pause", OPS, lambda c: pb.PauseRequest(reason="r" * 501), "INVALID_ARGUMENT", "reason"),
    ("Pause", OPS, lambda c: pb.PauseRequest(reason="r\x00"), "INVALID_ARGUMENT", "reason"),
    ("Pause", ALICE, lambda c: pb.PauseRequest(), "PERMISSION_DENIED", "operator"),
    (
        "Resume",
        OPS,
        lambda c: pb.ResumeRequest(product="workflow:"),
        "INVALID_ARGUMENT",
        "cannot be paused",
    ),
    ("Resume", BOT, lambda c: pb.ResumeRequest(), "PERMISSION_DENIED", "operator"),
    (
        "GetPauseState",
        "",
        lambda c: pb.GetPauseStateRequest(),
        "UNAUTHENTICATED",
        "missing identity",
    ),
    # ----------------------------------------------------------- webhooks
    (
        "CreateWebhook",
        BOT,
        lambda c: pb.CreateWebhookRequest(),
        "INVALID_ARGUMENT",
        "conversation_id is required",
    ),
    (
        "CreateWebhook",
        BOT,
        lambda c: pb.CreateWebhookRequest(conversation_id=c.conversation, name="n" * 201),
        "INVALID_ARGUMENT",
        field_rule("name", "string.max_len"),
    ),
    (
        "CreateWebhook",
        BOT,
        lambda c: pb.CreateWebhookRequest(conversation_id=c.conversation, name="n\x00"),
        "INVALID_ARGUMENT",
        "name",
    ),
    (
        "CreateWebhook",
        ALICE,
        lambda c: pb.CreateWebhookRequest(conversation_id=c.conversation),
        "PERMISSION_DENIED",
        "only the agents",
    ),
    (
        "GetWebhook",
        BOT,
        lambda c: pb.GetWebhookRequest(webhook_id="nope"),
        "NOT_FOUND",
        "webhook 'nope'",
    ),
    (
        "ListWebhooks",
        BOT,
        lambda c: pb.ListWebhooksRequest(after="nope"),
        "INVALID_ARGUMENT",
        "not a cursor",
    ),
    ("ListWebhooks", BOT, lambda c: pb.ListWebhooksRequest(limit=-3), "INVALID_ARGUMENT", "limit"),
    (
        "RotateWebhookSecret",
        BOT,
        lambda c: pb.RotateWebhookSecretRequest(webhook_id=UNKNOWN_UUID),
        "NOT_FOUND",
        "webhook",
    ),
    (
        "DeleteWebhook",
        BOT,
        lambda c: pb.DeleteWebhookRequest(webhook_id=""),
        "NOT_FOUND",
        "webhook ''",
    ),
    (
        "ReceiveWebhook",
        ALICE,
        receive(lambda c: c.signed(b"{}")),
        "PERMISSION_DENIED",
        "service principal",
    ),
    (
        "ReceiveWebhook",
        GATEWAY,
        lambda c: pb.ReceiveWebhookRequest(webhook_id=UNKNOWN_UUID),
        "NOT_FOUND",
        "webhook",
    ),
    (
        "ReceiveWebhook",
        GATEWAY,
        receive(lambda c: c.signed(b"x" * 300_000), b"x" * 300_000),
        "INVALID_ARGUMENT",
        "body is 300000 bytes",
    ),
    ("ReceiveWebhook", GATEWAY, receive(lambda c: {}), "UNAUTHENTICATED", "not signed"),
    (
        "ReceiveWebhook",
        GATEWAY,
        receive(lambda c: {**c.signed(b"{}"), "X-AgentWorks-Timestamp": "soon"}),
        "INVALID_ARGUMENT",
        "Unix seconds",
    ),
    (
        "ReceiveWebhook",
        GATEWAY,
        receive(lambda c: {**c.signed(b"{}"), "X-AgentWorks-Timestamp": "9" * 40}),
        "INVALID_ARGUMENT",
        "Unix seconds",
    ),
    (
        "ReceiveWebhook",
        GATEWAY,
        receive(lambda c: c.signed(b"other body")),
        "UNAUTHENTICATED",
        "signature does not match",
    ),
    (
        "ReceiveWebhook",
        GATEWAY,
        receive(lambda c: c.signed(b"{}", stale=True)),
        "UNAUTHENTICATED",
        "timestamp is",
    ),
    (
        "ReceiveWebhook",
        GATEWAY,
        receive(lambda c: c.signed(b"{}", delivery="")),
        "INVALID_ARGUMENT",
        "X-AgentWorks-Delivery is required",
    ),
    (
        "ReceiveWebhook",
        GATEWAY,
        receive(lambda c: c.signed(b"{}", delivery="has space")),
        "INVALID_ARGUMENT",
        "X-AgentWorks-Delivery is not a valid delivery id",
    ),
    (
        "ReceiveWebhook",
        GATEWAY,
        receive(lambda c: c.signed(b"{}", delivery="d\x00")),
        "INVALID_ARGUMENT",
        "X-AgentWorks-Delivery",
    ),
    (
        "ReceiveWebhook",
        GATEWAY,
        receive(lambda c: c.signed(b"{}", delivery="d" * 129)),
        "INVALID_ARGUMENT",
        "X-AgentWorks-Delivery",
    ),
]


def snapshot(database_url: str) -> dict[str, str]:
    """A digest of every table of the scheduler schema and of messaging's (deliveries)."""
    return database_snapshot(database_url, ["scheduler", "messaging"])


@pytest.fixture
async def ctx(clients, conversation) -> SimpleNamespace:
    """A conversation of crew:demo, and the bot's wake-up, schedule and webhook in it."""
    bot = await clients.scheduler(BOT)
    wake_up = await bot.create_wake_up(conversation, delay_seconds=3600, note="later")
    sched = await bot.create_schedule(conversation, "hourly", interval_seconds=3600)
    hook = await bot.create_webhook(conversation, name="ci")

    def signed(body: bytes, *, stale: bool = False, delivery: str | None = None) -> dict:
        stamp = int(time.time()) - (3600 if stale else 0)
        headers = signed_webhook_headers(hook.secret, body, timestamp=stamp)
        headers["X-AgentWorks-Signature"] = webhook_signature(hook.secret, stamp, body)
        if delivery is not None:
            headers["X-AgentWorks-Delivery"] = delivery
        return headers

    return SimpleNamespace(
        conversation=conversation,
        wake_up_id=wake_up.wake_up_id,
        schedule_id=sched.schedule_id,
        webhook_id=hook.webhook_id,
        signed=signed,
    )


async def invoke(
    address: str, token: str, method: str, request: Any
) -> tuple[str, AgentWorksError | None]:
    """(status code name, the refusal with its reason and metadata) of one RPC; ("OK",
    None) when it was accepted."""
    async with grpc.aio.insecure_channel(address) as channel:
        stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        try:
            metadata = ((METADATA_KEY, token),) if token else ()
            await getattr(stub, method)(request, metadata=metadata, timeout=10)
        except grpc.aio.AioRpcError as exc:
            refusal = from_trailers(exc.code(), exc.details() or "", exc.trailing_metadata())
            return exc.code().name, refusal
    return "OK", None


METHODS = list(dict.fromkeys(case[0] for case in CASES))

# Row for docs/reliability.md (see tests/conftest.py).
RELIABILITY = {
    "test": "test_bad_input_is_refused_clearly_and_stores_nothing_P6_S1_S4_S5",
    "scenario": "Bad input, scheduler service (P6, S1, S4, S5)",
    "action": f"{len(CASES)} cases over all {len(METHODS)} RPCs (one test per RPC): "
    "missing fields, out-of-range and malformed timestamps, NUL "
    "characters, empty and oversized values, bad cursors (also past int64), bad cron rules "
    "and time zones, unsigned/badly signed/stale/oversized webhook requests",
    "check": "the expected status code (never INTERNAL) with a message naming the field; "
    "every table of the scheduler and messaging schemas unchanged",
}


@pytest.mark.parametrize("method", METHODS)
async def test_bad_input_is_refused_clearly_and_stores_nothing_P6_S1_S4_S5(
    scheduler, identity, ctx, database_url, method
):
    """P6 S1 S4 S5: each case of this RPC gets its code and a message naming the field,
    and changes nothing. All cases run; the failures are listed together."""
    problems = []
    cases = [case for case in CASES if case[0] == method]
    for number, (_, principal, build, code, words) in enumerate(cases):
        request = build(ctx)
        before = snapshot(database_url)
        roles = {"operator"} if principal == OPS else set()
        token = identity(principal, roles).token() if principal else ""
        got, refusal = await invoke(scheduler.address, token, method, request)
        if not as_expected(code, words, got, refusal):
            said = (refusal.message, refusal.reason, refusal.metadata) if refusal else ""
            problems.append(f"case {number}: expected {code} with {words!r}, got {got}: {said}")
        if snapshot(database_url) != before:
            problems.append(f"case {number}: the database changed")
    assert not problems, "\n".join(problems)


def test_every_rpc_has_bad_input_cases():
    """The table covers the whole SchedulerService."""
    service = pb.DESCRIPTOR.services_by_name["SchedulerService"]
    assert set(METHODS) == {m.name for m in service.methods}
