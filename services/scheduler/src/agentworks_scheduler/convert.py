"""Proto <-> domain conversion for the scheduler's servicer, nothing else."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from agentworks.core.errors import InvalidArgument
from agentworks.scheduler.v1 import scheduler_pb2 as pb
from agentworks_scheduler.models import PauseEntry, Recurrence, Schedule, WakeUp, Webhook

WAKE_UP_STATUS = {
    "pending": pb.WAKE_UP_STATUS_PENDING,
    "fired": pb.WAKE_UP_STATUS_FIRED,
    "cancelled": pb.WAKE_UP_STATUS_CANCELLED,
    "failed": pb.WAKE_UP_STATUS_FAILED,
}


def ts(value: datetime) -> Timestamp:
    ts = Timestamp()
    ts.FromDatetime(value)
    return ts


def dt(ts: Timestamp, field: str) -> datetime:
    """A request's Timestamp as a datetime; out-of-range seconds or nanos are refused."""
    if not 0 <= ts.nanos <= 999_999_999:  # protobuf's own message misstates the range
        raise InvalidArgument(
            f"{field} is not a valid timestamp: nanos must be 0-999,999,999, got {ts.nanos}"
        )
    try:
        return ts.ToDatetime(tzinfo=UTC)
    except (ValueError, OverflowError) as exc:
        raise InvalidArgument(f"{field} is not a valid timestamp: {exc}") from None


def when(request: Any) -> tuple[datetime | None, int | None]:
    which = request.WhichOneof("when")
    if which == "at":
        return dt(request.at, "at"), None
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
        due_at=ts(w.due_at),
        note=w.note,
        status=WAKE_UP_STATUS[w.status],
        product=w.product,
        created_by=w.created_by,
        created_at=ts(w.created_at),
        delivery_id=w.delivery_id or "",
        late_seconds=w.late_seconds or 0.0,
        error=w.error or "",
    )
    if w.fired_at is not None:
        out.fired_at.CopyFrom(ts(w.fired_at))
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
        next_fire_at=ts(s.next_fire_at),
        fire_count=s.fire_count,
        created_by=s.created_by,
        created_at=ts(s.created_at),
        updated_at=ts(s.updated_at),
        last_error=s.last_error or "",
    )
    if s.last_fired_at is not None:
        out.last_fired_at.CopyFrom(ts(s.last_fired_at))
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
        created_at=ts(h.created_at),
    )
    if h.secret_rotated_at is not None:
        out.secret_rotated_at.CopyFrom(ts(h.secret_rotated_at))
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
                paused_at=ts(e.paused_at),
            )
            for e in entries
        ],
    )
