"""Typed client of the scheduler service, and the webhook signing recipe (S5).

Signing, for senders and tests: the signature is HMAC-SHA256, keyed with the webhook's
secret, over the ASCII timestamp (Unix seconds), a dot, and the raw body, sent as
`X-AgentWorks-Signature: sha256=<hex>` with `X-AgentWorks-Timestamp: <seconds>` and a
unique `X-AgentWorks-Delivery: <id>` per event.
"""

from __future__ import annotations

import hashlib
import hmac
import time
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime

from agentworks.client.common import aware_timestamp
from agentworks.client.rpc import ServiceClient
from agentworks.core.limits import MAX_MESSAGE_BYTES
from agentworks.scheduler.v1 import scheduler_pb2 as s
from agentworks.scheduler.v1 import scheduler_pb2_grpc

TIMESTAMP_HEADER = "X-AgentWorks-Timestamp"
SIGNATURE_HEADER = "X-AgentWorks-Signature"
DELIVERY_HEADER = "X-AgentWorks-Delivery"
SIGNATURE_PREFIX = "sha256="


def webhook_signature(secret: str, timestamp: int | str, body: bytes) -> str:
    """`sha256=<hex>` of HMAC-SHA256(secret, f"{timestamp}." + body)."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return SIGNATURE_PREFIX + mac.hexdigest()


def signed_webhook_headers(
    secret: str, body: bytes, *, delivery_id: str | None = None, timestamp: int | None = None
) -> dict[str, str]:
    """The three headers a sender adds to a webhook POST (now, and a new delivery id)."""
    ts = int(time.time()) if timestamp is None else timestamp
    return {
        TIMESTAMP_HEADER: str(ts),
        SIGNATURE_HEADER: webhook_signature(secret, ts, body),
        DELIVERY_HEADER: delivery_id or uuid.uuid4().hex,
    }


_ts = aware_timestamp


def _recurrence(
    cron: str | None, interval_seconds: int | None, time_zone: str
) -> s.Recurrence | None:
    if cron is None and interval_seconds is None:
        if time_zone:
            # The zone is part of a cron rule: alone it would be dropped without a word.
            raise ValueError("time_zone goes with a cron rule: give cron too")
        return None
    if cron is not None:
        return s.Recurrence(cron=cron, time_zone=time_zone)
    return s.Recurrence(interval_seconds=interval_seconds, time_zone=time_zone)


def _retry_key(submission_id: str | None) -> str:
    """The caller's retry key, or a new one per call so that the channel's automatic
    retries (after a lost answer) cannot create a second object; "" for none."""
    return uuid.uuid4().hex if submission_id is None else submission_id


class SchedulerClient(ServiceClient):
    """Client of `agentworks.scheduler.v1.SchedulerService`."""

    stub_class = scheduler_pb2_grpc.SchedulerServiceStub
    max_request_bytes = MAX_MESSAGE_BYTES  # the scheduler receives what gRPC carries

    # ------------------------------------------------------------------ wake-ups

    async def create_wake_up(
        self,
        conversation_id: str,
        *,
        at: datetime | None = None,
        delay_seconds: int | None = None,
        note: str = "",
        product: str = "",
        submission_id: str | None = None,
    ) -> s.WakeUp:
        """Ask for a wake-up at `at` (aware datetime) or after `delay_seconds`.

        A retry key is made up when none is given, so that the channel's automatic
        retries (after a lost answer) cannot create a second wake-up; pass "" for none.
        """
        request = s.CreateWakeUpRequest(
            conversation_id=conversation_id,
            note=note,
            product=product,
            submission_id=_retry_key(submission_id),
        )
        if at is not None:
            request.at.CopyFrom(_ts(at))
        elif delay_seconds is not None:
            request.delay_seconds = delay_seconds
        return await self._unary("CreateWakeUp", request)

    async def get_wake_up(self, wake_up_id: str) -> s.WakeUp:
        return await self._unary("GetWakeUp", s.GetWakeUpRequest(wake_up_id=wake_up_id))

    async def list_wake_ups(
        self,
        *,
        conversation_id: str = "",
        product: str = "",
        include_finished: bool = False,
        after: str = "",
        limit: int = 0,
    ) -> s.ListWakeUpsResponse:
        return await self._unary(
            "ListWakeUps",
            s.ListWakeUpsRequest(
                conversation_id=conversation_id,
                product=product,
                include_finished=include_finished,
                after=after,
                limit=limit,
            ),
        )

    async def cancel_wake_up(self, wake_up_id: str) -> s.WakeUp:
        return await self._unary("CancelWakeUp", s.CancelWakeUpRequest(wake_up_id=wake_up_id))

    async def reschedule_wake_up(
        self, wake_up_id: str, *, at: datetime | None = None, delay_seconds: int | None = None
    ) -> s.WakeUp:
        request = s.RescheduleWakeUpRequest(wake_up_id=wake_up_id)
        if at is not None:
            request.at.CopyFrom(_ts(at))
        elif delay_seconds is not None:
            request.delay_seconds = delay_seconds
        return await self._unary("RescheduleWakeUp", request)

    # ----------------------------------------------------------------- schedules

    async def create_schedule(
        self,
        conversation_id: str,
        prompt: str,
        *,
        cron: str | None = None,
        interval_seconds: int | None = None,
        time_zone: str = "",
        name: str = "",
        product: str = "",
        start_at: datetime | None = None,
        paused: bool = False,
        submission_id: str | None = None,
    ) -> s.Schedule:
        """A schedule on a cron rule (read in `time_zone`) or a fixed interval.

        As for `create_wake_up`, a retry key is made up when none is given; pass your own
        to retry after a lost answer, or "" for none.
        """
        request = s.CreateScheduleRequest(
            conversation_id=conversation_id,
            prompt=prompt,
            recurrence=_recurrence(cron, interval_seconds, time_zone),
            name=name,
            product=product,
            paused=paused,
            submission_id=_retry_key(submission_id),
        )
        if start_at is not None:
            request.start_at.CopyFrom(_ts(start_at))
        return await self._unary("CreateSchedule", request)

    async def get_schedule(self, schedule_id: str) -> s.Schedule:
        return await self._unary("GetSchedule", s.GetScheduleRequest(schedule_id=schedule_id))

    async def update_schedule(
        self,
        schedule_id: str,
        *,
        prompt: str | None = None,
        name: str | None = None,
        cron: str | None = None,
        interval_seconds: int | None = None,
        time_zone: str = "",
    ) -> s.Schedule:
        """Change the prompt, the name and/or the rule (give cron or interval_seconds)."""
        request = s.UpdateScheduleRequest(
            schedule_id=schedule_id,
            recurrence=_recurrence(cron, interval_seconds, time_zone),
        )
        if prompt is not None:
            request.prompt = prompt
        if name is not None:
            request.name = name
        return await self._unary("UpdateSchedule", request)

    async def pause_schedule(self, schedule_id: str) -> s.Schedule:
        return await self._unary("PauseSchedule", s.PauseScheduleRequest(schedule_id=schedule_id))

    async def resume_schedule(self, schedule_id: str) -> s.Schedule:
        return await self._unary("ResumeSchedule", s.ResumeScheduleRequest(schedule_id=schedule_id))

    async def delete_schedule(self, schedule_id: str) -> None:
        await self._unary("DeleteSchedule", s.DeleteScheduleRequest(schedule_id=schedule_id))

    async def list_schedules(
        self, *, conversation_id: str = "", product: str = "", after: str = "", limit: int = 0
    ) -> s.ListSchedulesResponse:
        return await self._unary(
            "ListSchedules",
            s.ListSchedulesRequest(
                conversation_id=conversation_id, product=product, after=after, limit=limit
            ),
        )

    async def preview_schedule(
        self,
        schedule_id: str | None = None,
        *,
        cron: str | None = None,
        interval_seconds: int | None = None,
        time_zone: str = "",
        count: int = 0,
        after: datetime | None = None,
    ) -> list[datetime]:
        """The next fire times (aware UTC datetimes) of a schedule or of a rule."""
        request = s.PreviewScheduleRequest(count=count)
        if schedule_id:
            request.schedule_id = schedule_id
        else:
            rule = _recurrence(cron, interval_seconds, time_zone)
            if rule is not None:
                request.recurrence.CopyFrom(rule)
        if after is not None:
            request.after.CopyFrom(_ts(after))
        response = await self._unary("PreviewSchedule", request)
        return [t.ToDatetime(tzinfo=UTC) for t in response.fire_times]

    # -------------------------------------------------------------------- pauses

    async def pause(self, product: str = "", *, reason: str = "") -> s.PauseState:
        """Pause everything (no product) or one product (`crew:demo`, `crew:*`, ...)."""
        return await self._unary("Pause", s.PauseRequest(product=product, reason=reason))

    async def resume(self, product: str = "") -> s.PauseState:
        """Lift the pause of exactly this scope; `resumed` says whether there was one."""
        return await self._unary("Resume", s.ResumeRequest(product=product))

    async def pause_state(self) -> s.PauseState:
        return await self._unary("GetPauseState", s.GetPauseStateRequest())

    # ------------------------------------------------------------------ webhooks

    async def create_webhook(
        self,
        conversation_id: str,
        *,
        name: str = "",
        product: str = "",
        submission_id: str | None = None,
    ) -> s.Webhook:
        """A webhook into the conversation; the response carries the secret.

        A retry with the same `submission_id` gets the same webhook, with its secret
        within 24 hours of the create unless it was rotated since. A key is made up when
        none is given, as for `create_wake_up`; pass "" for none.
        """
        return await self._unary(
            "CreateWebhook",
            s.CreateWebhookRequest(
                conversation_id=conversation_id,
                name=name,
                product=product,
                submission_id=_retry_key(submission_id),
            ),
        )

    async def get_webhook(self, webhook_id: str) -> s.Webhook:
        return await self._unary("GetWebhook", s.GetWebhookRequest(webhook_id=webhook_id))

    async def list_webhooks(
        self, *, conversation_id: str = "", product: str = "", after: str = "", limit: int = 0
    ) -> s.ListWebhooksResponse:
        return await self._unary(
            "ListWebhooks",
            s.ListWebhooksRequest(
                conversation_id=conversation_id, product=product, after=after, limit=limit
            ),
        )

    async def rotate_webhook_secret(self, webhook_id: str) -> s.Webhook:
        return await self._unary(
            "RotateWebhookSecret", s.RotateWebhookSecretRequest(webhook_id=webhook_id)
        )

    async def delete_webhook(self, webhook_id: str) -> None:
        await self._unary("DeleteWebhook", s.DeleteWebhookRequest(webhook_id=webhook_id))

    async def receive_webhook(
        self, webhook_id: str, *, headers: Mapping[str, str], body: bytes
    ) -> s.ReceiveWebhookResponse:
        """Hand a received HTTP request (headers as sent, raw body) to the scheduler."""
        return await self._unary(
            "ReceiveWebhook",
            s.ReceiveWebhookRequest(webhook_id=webhook_id, headers=dict(headers), body=body),
        )
