"""gRPC servicer for the scheduler: protos in, domain calls, protos out. Plus start/main."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import grpc
import structlog
from google.protobuf.timestamp_pb2 import Timestamp

from agentworks.client import MessagingClient, delivery_request, target_str
from agentworks.client.errors import AgentWorksError, InvalidArgument
from agentworks.client.identity import Identity, Minter, caller
from agentworks.client.rpc import channel_options, channel_target
from agentworks.messaging.v1 import messaging_pb2 as m
from agentworks.scheduler.v1 import scheduler_pb2 as pb
from agentworks.scheduler.v1 import scheduler_pb2_grpc
from agentworks.server.db import Database
from agentworks.server.rpc import GrpcServer
from agentworks.server.service import Running, main_for, prepare_database, read_config
from agentworks_scheduler.config import Config
from agentworks_scheduler.metrics import start_refresh
from agentworks_scheduler.models import PauseEntry, Recurrence, Schedule, WakeUp, Webhook
from agentworks_scheduler.service import Participation, SchedulerService
from agentworks_scheduler.store import SchedulerStore

log = structlog.get_logger("agentworks.scheduler")

SERVICE_PRINCIPAL = "service:scheduler"
# Identities minted to ask messaging on a caller's behalf live this long.
ON_BEHALF_TTL_SECONDS = 60

_WAKE_UP_STATUS = {
    "pending": pb.WAKE_UP_STATUS_PENDING,
    "fired": pb.WAKE_UP_STATUS_FIRED,
    "cancelled": pb.WAKE_UP_STATUS_CANCELLED,
    "failed": pb.WAKE_UP_STATUS_FAILED,
}
_DELIVERY_KIND = {
    "wake_up": m.DELIVERY_KIND_WAKE_UP,
    "schedule": m.DELIVERY_KIND_SCHEDULE,
    "webhook": m.DELIVERY_KIND_WEBHOOK,
}


def _ts(value: datetime) -> Timestamp:
    ts = Timestamp()
    ts.FromDatetime(value)
    return ts


def _dt(ts: Timestamp, field: str) -> datetime:
    """A request's Timestamp as a datetime; out-of-range seconds or nanos are refused."""
    if not 0 <= ts.nanos <= 999_999_999:  # protobuf's own message misstates the range
        raise InvalidArgument(
            f"{field} is not a valid timestamp: nanos must be 0-999,999,999, got {ts.nanos}"
        )
    try:
        return ts.ToDatetime(tzinfo=UTC)
    except (ValueError, OverflowError) as exc:
        raise InvalidArgument(f"{field} is not a valid timestamp: {exc}") from None


def _when(request: Any) -> tuple[datetime | None, int | None]:
    which = request.WhichOneof("when")
    if which == "at":
        return _dt(request.at, "at"), None
    if which == "delay_seconds":
        return None, request.delay_seconds
    return None, None


def recurrence_in(message: pb.Recurrence) -> Recurrence:
    rule = message.WhichOneof("rule")
    return Recurrence(
        cron=message.cron if rule == "cron" else None,
        interval_seconds=message.interval_seconds if rule == "interval_seconds" else None,
        time_zone=message.time_zone,
    )


def recurrence_out(rule: Recurrence) -> pb.Recurrence:
    if rule.cron is not None:
        return pb.Recurrence(cron=rule.cron, time_zone=rule.time_zone)
    return pb.Recurrence(interval_seconds=rule.interval_seconds or 0, time_zone=rule.time_zone)


def wake_up_out(w: WakeUp) -> pb.WakeUp:
    out = pb.WakeUp(
        wake_up_id=w.id,
        conversation_id=w.conversation_id,
        due_at=_ts(w.due_at),
        note=w.note,
        status=_WAKE_UP_STATUS[w.status],
        product=w.product,
        created_by=w.created_by,
        created_at=_ts(w.created_at),
        delivery_id=w.delivery_id or "",
        late_seconds=w.late_seconds or 0.0,
        error=w.error or "",
    )
    if w.fired_at is not None:
        out.fired_at.CopyFrom(_ts(w.fired_at))
    return out


def schedule_out(s: Schedule) -> pb.Schedule:
    out = pb.Schedule(
        schedule_id=s.id,
        name=s.name,
        conversation_id=s.conversation_id,
        product=s.product,
        prompt=s.prompt,
        recurrence=recurrence_out(s.recurrence),
        paused=s.paused,
        next_fire_at=_ts(s.next_fire_at),
        fire_count=s.fire_count,
        created_by=s.created_by,
        created_at=_ts(s.created_at),
        updated_at=_ts(s.updated_at),
        last_error=s.last_error or "",
    )
    if s.last_fired_at is not None:
        out.last_fired_at.CopyFrom(_ts(s.last_fired_at))
    return out


def webhook_out(h: Webhook) -> pb.Webhook:
    out = pb.Webhook(
        webhook_id=h.id,
        conversation_id=h.conversation_id,
        secret=h.secret,
        name=h.name,
        product=h.product,
        secret_fingerprint=h.secret_fingerprint,
        created_by=h.created_by,
        created_at=_ts(h.created_at),
    )
    if h.secret_rotated_at is not None:
        out.secret_rotated_at.CopyFrom(_ts(h.secret_rotated_at))
    return out


def pause_state_out(entries: list[PauseEntry]) -> pb.PauseState:
    return pb.PauseState(
        global_paused=any(e.product == "" for e in entries),
        paused_products=[e.product for e in entries if e.product],
        pauses=[
            pb.PauseEntry(
                product=e.product,
                reason=e.reason,
                paused_by=e.paused_by,
                paused_at=_ts(e.paused_at),
            )
            for e in entries
        ],
    )


class SchedulerServicer(scheduler_pb2_grpc.SchedulerServiceServicer):
    """Translates between protos and `SchedulerService`; errors map in the interceptor."""

    def __init__(self, service: SchedulerService) -> None:
        self.service = service

    # wake-ups
    async def CreateWakeUp(self, request, context):
        at, delay = _when(request)
        structlog.contextvars.bind_contextvars(conversation_id=request.conversation_id)
        return wake_up_out(
            await self.service.create_wake_up(
                caller(),
                conversation_id=request.conversation_id,
                at=at,
                delay_seconds=delay,
                note=request.note,
                product=request.product,
                submission_id=request.submission_id,
            )
        )

    async def GetWakeUp(self, request, context):
        return wake_up_out(await self.service.get_wake_up(caller(), request.wake_up_id))

    async def ListWakeUps(self, request, context):
        items, cursor = await self.service.list_wake_ups(
            caller(),
            conversation_id=request.conversation_id,
            product=request.product,
            include_finished=request.include_finished,
            after=request.after,
            limit=request.limit,
        )
        return pb.ListWakeUpsResponse(wake_ups=[wake_up_out(w) for w in items], next_cursor=cursor)

    async def CancelWakeUp(self, request, context):
        return wake_up_out(await self.service.cancel_wake_up(caller(), request.wake_up_id))

    async def RescheduleWakeUp(self, request, context):
        at, delay = _when(request)
        return wake_up_out(
            await self.service.reschedule_wake_up(
                caller(), request.wake_up_id, at=at, delay_seconds=delay
            )
        )

    # schedules
    async def CreateSchedule(self, request, context):
        structlog.contextvars.bind_contextvars(conversation_id=request.conversation_id)
        return schedule_out(
            await self.service.create_schedule(
                caller(),
                conversation_id=request.conversation_id,
                prompt=request.prompt,
                recurrence=(
                    recurrence_in(request.recurrence) if request.HasField("recurrence") else None
                ),
                name=request.name,
                product=request.product,
                start_at=_dt(request.start_at, "start_at")
                if request.HasField("start_at")
                else None,
                paused=request.paused,
                submission_id=request.submission_id,
            )
        )

    async def GetSchedule(self, request, context):
        return schedule_out(await self.service.get_schedule(caller(), request.schedule_id))

    async def UpdateSchedule(self, request, context):
        return schedule_out(
            await self.service.update_schedule(
                caller(),
                request.schedule_id,
                prompt=request.prompt if request.HasField("prompt") else None,
                name=request.name if request.HasField("name") else None,
                recurrence=(
                    recurrence_in(request.recurrence) if request.HasField("recurrence") else None
                ),
            )
        )

    async def PauseSchedule(self, request, context):
        return schedule_out(
            await self.service.set_schedule_paused(caller(), request.schedule_id, paused=True)
        )

    async def ResumeSchedule(self, request, context):
        return schedule_out(
            await self.service.set_schedule_paused(caller(), request.schedule_id, paused=False)
        )

    async def DeleteSchedule(self, request, context):
        await self.service.delete_schedule(caller(), request.schedule_id)
        return pb.DeleteScheduleResponse()

    async def ListSchedules(self, request, context):
        items, cursor = await self.service.list_schedules(
            caller(),
            conversation_id=request.conversation_id,
            product=request.product,
            after=request.after,
            limit=request.limit,
        )
        return pb.ListSchedulesResponse(
            schedules=[schedule_out(s) for s in items], next_cursor=cursor
        )

    async def PreviewSchedule(self, request, context):
        source = request.WhichOneof("source")
        times = await self.service.preview_schedule(
            caller(),
            schedule_id=request.schedule_id if source == "schedule_id" else "",
            recurrence=recurrence_in(request.recurrence) if source == "recurrence" else None,
            count=request.count,
            after=_dt(request.after, "after") if request.HasField("after") else None,
        )
        return pb.PreviewScheduleResponse(fire_times=[_ts(t) for t in times])

    # pauses
    async def Pause(self, request, context):
        return pause_state_out(
            await self.service.pause(caller(), product=request.product, reason=request.reason)
        )

    async def Resume(self, request, context):
        resumed, entries = await self.service.resume(caller(), product=request.product)
        state = pause_state_out(entries)
        state.resumed = resumed
        return state

    async def GetPauseState(self, request, context):
        return pause_state_out(await self.service.pause_state(caller()))

    # webhooks
    async def CreateWebhook(self, request, context):
        structlog.contextvars.bind_contextvars(conversation_id=request.conversation_id)
        return webhook_out(
            await self.service.create_webhook(
                caller(),
                conversation_id=request.conversation_id,
                name=request.name,
                product=request.product,
                submission_id=request.submission_id,
            )
        )

    async def GetWebhook(self, request, context):
        return webhook_out(await self.service.get_webhook(caller(), request.webhook_id))

    async def ListWebhooks(self, request, context):
        items, cursor = await self.service.list_webhooks(
            caller(),
            conversation_id=request.conversation_id,
            product=request.product,
            after=request.after,
            limit=request.limit,
        )
        return pb.ListWebhooksResponse(webhooks=[webhook_out(h) for h in items], next_cursor=cursor)

    async def RotateWebhookSecret(self, request, context):
        return webhook_out(await self.service.rotate_webhook_secret(caller(), request.webhook_id))

    async def DeleteWebhook(self, request, context):
        await self.service.delete_webhook(caller(), request.webhook_id)
        return pb.DeleteWebhookResponse()

    async def ReceiveWebhook(self, request, context):
        result = await self.service.receive_webhook(
            caller(),
            webhook_id=request.webhook_id,
            headers=dict(request.headers),
            body=request.body,
        )
        return pb.ReceiveWebhookResponse(
            delivery_id=result.delivery_id or "", created=result.created
        )


class MessagingConversations:
    """The scheduler's view of messaging, over the typed `MessagingClient`.

    Participation is checked as the caller: the scheduler holds the internal key, like
    every service, and signs a short-lived identity for the caller's principal and
    roles, so messaging applies exactly its own access rule (A2, A3). Deliveries are
    enqueued as `service:scheduler`.
    """

    def __init__(self, address: str, internal_key: str, *, timeout: float) -> None:
        self._key = internal_key
        self._timeout = timeout
        self._channel = grpc.aio.insecure_channel(
            channel_target(address), options=channel_options()
        )
        self._as_scheduler = MessagingClient(
            channel=self._channel, identity=Minter(SERVICE_PRINCIPAL, internal_key), timeout=timeout
        )

    async def participation(self, identity: Identity, conversation_id: str) -> Participation:
        on_behalf = MessagingClient(
            channel=self._channel,
            identity=Minter(
                identity.principal,
                self._key,
                roles=identity.roles,
                ttl_seconds=ON_BEHALF_TTL_SECONDS,
            ),
            timeout=self._timeout,
        )
        # Position 1 of every conversation is the message that opened it.
        page = await on_behalf.get_transcript(conversation_id, limit=1)
        opener = ""
        for entry in page.entries:
            if entry.HasField("message"):
                opener = entry.message.sender
            elif entry.HasField("delivery") and entry.delivery.HasField("message"):
                opener = entry.delivery.message.sender
        return Participation(opener=opener, target=target_str(page.target))

    async def enqueue(
        self,
        *,
        conversation_id: str,
        kind: str,
        idempotency_key: str,
        text: str,
        payload: bytes = b"",
        attributes: Mapping[str, Any] | None = None,
    ) -> tuple[str, bool]:
        response = await self._as_scheduler.enqueue_delivery(
            conversation_id,
            kind=_DELIVERY_KIND[kind],
            idempotency_key=idempotency_key,
            text=text,
            payload=payload,
            attributes=attributes,
        )
        return response.delivery_id, response.created

    async def enqueue_many(
        self, requests: Sequence[Mapping[str, Any]]
    ) -> list[tuple[str, bool] | AgentWorksError]:
        results = await self._as_scheduler.enqueue_deliveries(
            [
                delivery_request(
                    r["conversation_id"],
                    kind=_DELIVERY_KIND[r["kind"]],
                    idempotency_key=r["idempotency_key"],
                    text=r["text"],
                    payload=r.get("payload", b""),
                    attributes=r.get("attributes"),
                )
                for r in requests
            ]
        )
        return [
            r if isinstance(r, AgentWorksError) else (r.delivery_id, r.created) for r in results
        ]

    async def close(self) -> None:
        await self._channel.close()


@dataclass
class SchedulerRunning(Running):
    """A started scheduler; `service` lets tests wait for ticks and inject faults."""

    service: SchedulerService | None = None


async def _tick_loop(service: SchedulerService, config: Config) -> None:
    """Fire what is due every tick until the service drains (S2)."""
    while not service.draining.is_set():
        try:
            fired = await service.tick()
            if fired:
                log.info("tick.fired", count=fired)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the database or messaging may be away; next tick
            log.warning("tick.failed", error=str(exc))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(config.tick_seconds):
                await service.draining.wait()


async def start(config: Config) -> SchedulerRunning:
    """Migrate, connect, and serve the scheduler on `config.service.listen`."""
    await asyncio.to_thread(
        prepare_database, config.service, "scheduler", "agentworks_scheduler.migrations"
    )
    db = Database(config.service.database_url, pool_size=config.service.pool_size)
    await db.start()
    conversations = MessagingConversations(
        config.messaging_address,
        config.service.internal_key,
        timeout=config.delivery_timeout_seconds,
    )
    service = SchedulerService(SchedulerStore(db), conversations, config)

    async def drain() -> None:
        service.draining.set()

    server = GrpcServer(
        name="scheduler",
        listen=config.service.listen,
        internal_key=config.service.internal_key,
        accepted_keys=config.service.accepted_keys,
        register=lambda s: scheduler_pb2_grpc.add_SchedulerServiceServicer_to_server(
            SchedulerServicer(service), s
        ),
        service_names=[pb.DESCRIPTOR.services_by_name["SchedulerService"].full_name],
        on_drain=drain,
    )
    await server.start()
    ticker = asyncio.create_task(_tick_loop(service, config), name="scheduler-tick")
    return SchedulerRunning(
        "scheduler",
        server,
        db,
        background=[ticker, *start_refresh(db, config)],
        on_stop=[conversations.close],
        service=service,
    )


def main() -> None:
    config = read_config("scheduler", Config.from_env)
    main_for(config.service, lambda: start(config))
