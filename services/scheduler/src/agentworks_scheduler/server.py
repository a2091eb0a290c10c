"""gRPC servicer for the scheduler: request -> convert -> service -> convert -> response."""

from __future__ import annotations

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
    async def CreateWakeUp(self, request, context):
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
        at, delay = when(request)
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
                start_at=dt(request.start_at, "start_at") if request.HasField("start_at") else None,
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
            after=dt(request.after, "after") if request.HasField("after") else None,
        )
        return pb.PreviewScheduleResponse(fire_times=[ts(t) for t in times])

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
