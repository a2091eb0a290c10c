"""gRPC servicer for the scheduler: request -> convert -> service -> convert -> response."""

from __future__ import annotations

import grpc
import structlog

from agentworks.core.identity import caller
from agentworks.scheduler.v1 import scheduler_pb2 as pb
from agentworks.scheduler.v1 import scheduler_pb2_grpc
from agentworks_scheduler.convert import (
    dt,
    pause_state_out,
    recurrence_in,
    schedule_out,
    ts,
    wake_up_out,
    webhook_out,
    when,
)
from agentworks_scheduler.service import SchedulerService


class SchedulerServicer(scheduler_pb2_grpc.SchedulerServiceServicer):
    """Translates between protos and `SchedulerService`; errors map in the interceptor."""

    def __init__(self, service: SchedulerService) -> None:
        self.service = service

    # wake-ups
    async def CreateWakeUp(
        self, request: pb.CreateWakeUpRequest, context: grpc.aio.ServicerContext
    ) -> pb.WakeUp:
        at, delay = when(request)
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

    async def GetWakeUp(
        self, request: pb.GetWakeUpRequest, context: grpc.aio.ServicerContext
    ) -> pb.WakeUp:
        return wake_up_out(await self.service.get_wake_up(caller(), request.wake_up_id))

    async def ListWakeUps(
        self, request: pb.ListWakeUpsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListWakeUpsResponse:
        items, cursor = await self.service.list_wake_ups(
            caller(),
            conversation_id=request.conversation_id,
            product=request.product,
            include_finished=request.include_finished,
            after=request.after,
            limit=request.limit,
        )
        return pb.ListWakeUpsResponse(wake_ups=[wake_up_out(w) for w in items], next_cursor=cursor)

    async def CancelWakeUp(
        self, request: pb.CancelWakeUpRequest, context: grpc.aio.ServicerContext
    ) -> pb.WakeUp:
        return wake_up_out(await self.service.cancel_wake_up(caller(), request.wake_up_id))

    async def RescheduleWakeUp(
        self, request: pb.RescheduleWakeUpRequest, context: grpc.aio.ServicerContext
    ) -> pb.WakeUp:
        at, delay = when(request)
        return wake_up_out(
            await self.service.reschedule_wake_up(
                caller(), request.wake_up_id, at=at, delay_seconds=delay
            )
        )

    # schedules
    async def CreateSchedule(
        self, request: pb.CreateScheduleRequest, context: grpc.aio.ServicerContext
    ) -> pb.Schedule:
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
                start_at=dt(request.start_at, "start_at") if request.HasField("start_at") else None,
                paused=request.paused,
                submission_id=request.submission_id,
            )
        )

    async def GetSchedule(
        self, request: pb.GetScheduleRequest, context: grpc.aio.ServicerContext
    ) -> pb.Schedule:
        return schedule_out(await self.service.get_schedule(caller(), request.schedule_id))

    async def UpdateSchedule(
        self, request: pb.UpdateScheduleRequest, context: grpc.aio.ServicerContext
    ) -> pb.Schedule:
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

    async def PauseSchedule(
        self, request: pb.PauseScheduleRequest, context: grpc.aio.ServicerContext
    ) -> pb.Schedule:
        return schedule_out(
            await self.service.set_schedule_paused(caller(), request.schedule_id, paused=True)
        )

    async def ResumeSchedule(
        self, request: pb.ResumeScheduleRequest, context: grpc.aio.ServicerContext
    ) -> pb.Schedule:
        return schedule_out(
            await self.service.set_schedule_paused(caller(), request.schedule_id, paused=False)
        )

    async def DeleteSchedule(
        self, request: pb.DeleteScheduleRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteScheduleResponse:
        await self.service.delete_schedule(caller(), request.schedule_id)
        return pb.DeleteScheduleResponse()

    async def ListSchedules(
        self, request: pb.ListSchedulesRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListSchedulesResponse:
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

    async def PreviewSchedule(
        self, request: pb.PreviewScheduleRequest, context: grpc.aio.ServicerContext
    ) -> pb.PreviewScheduleResponse:
        source = request.WhichOneof("source")
        times = await self.service.preview_schedule(
            caller(),
            schedule_id=request.schedule_id if source == "schedule_id" else "",
            recurrence=recurrence_in(request.recurrence) if source == "recurrence" else None,
            count=request.count,
            after=dt(request.after, "after") if request.HasField("after") else None,
        )
        return pb.PreviewScheduleResponse(fire_times=[ts(t) for t in times])

    # pauses
    async def Pause(
        self, request: pb.PauseRequest, context: grpc.aio.ServicerContext
    ) -> pb.PauseState:
        return pause_state_out(
            await self.service.pause(caller(), product=request.product, reason=request.reason)
        )

    async def Resume(
        self, request: pb.ResumeRequest, context: grpc.aio.ServicerContext
    ) -> pb.PauseState:
        resumed, entries = await self.service.resume(caller(), product=request.product)
        state = pause_state_out(entries)
        state.resumed = resumed
        return state

    async def GetPauseState(
        self, request: pb.GetPauseStateRequest, context: grpc.aio.ServicerContext
    ) -> pb.PauseState:
        return pause_state_out(await self.service.pause_state(caller()))

    # webhooks
    async def CreateWebhook(
        self, request: pb.CreateWebhookRequest, context: grpc.aio.ServicerContext
    ) -> pb.Webhook:
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

    async def GetWebhook(
        self, request: pb.GetWebhookRequest, context: grpc.aio.ServicerContext
    ) -> pb.Webhook:
        return webhook_out(await self.service.get_webhook(caller(), request.webhook_id))

    async def ListWebhooks(
        self, request: pb.ListWebhooksRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListWebhooksResponse:
        items, cursor = await self.service.list_webhooks(
            caller(),
            conversation_id=request.conversation_id,
            product=request.product,
            after=request.after,
            limit=request.limit,
        )
        return pb.ListWebhooksResponse(webhooks=[webhook_out(h) for h in items], next_cursor=cursor)

    async def RotateWebhookSecret(
        self, request: pb.RotateWebhookSecretRequest, context: grpc.aio.ServicerContext
    ) -> pb.Webhook:
        return webhook_out(await self.service.rotate_webhook_secret(caller(), request.webhook_id))

    async def DeleteWebhook(
        self, request: pb.DeleteWebhookRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteWebhookResponse:
        await self.service.delete_webhook(caller(), request.webhook_id)
        return pb.DeleteWebhookResponse()

    async def ReceiveWebhook(
        self, request: pb.ReceiveWebhookRequest, context: grpc.aio.ServicerContext
    ) -> pb.ReceiveWebhookResponse:
        result = await self.service.receive_webhook(
            caller(),
            webhook_id=request.webhook_id,
            headers=dict(request.headers),
            body=request.body,
        )
        return pb.ReceiveWebhookResponse(
            delivery_id=result.delivery_id or "", created=result.created
        )
