"""Completion notices to the messaging service (F13): the adapter and the outbox loop."""

from __future__ import annotations

import asyncio

import structlog

from agentworks.client import MessagingClient, delivery_request
from agentworks.core import errors
from agentworks.messaging.v1 import messaging_pb2
from agentworks_functions.config import Config
from agentworks_functions.models import (
    Delivered,
    GaveUp,
    Notice,
    NoticeOutcome,
    RetryLater,
)
from agentworks_functions.service import FunctionsService, NoticeSender
from agentworks_functions.store import (
    NOTICE_CHANNEL,
)

log = structlog.get_logger("agentworks.functions")


def notice_sender(client: MessagingClient) -> NoticeSender:
    """Deliver completion notices into the callers' conversations (F13), once per call.

    A batch of due notices goes in one EnqueueDeliveries request; each notice succeeds
    or fails on its own.
    """

    async def send(notices: list[Notice]) -> list[NoticeOutcome]:
        try:
            results = await client.enqueue_deliveries(
                [
                    delivery_request(
                        notice.conversation_id,
                        kind=messaging_pb2.DELIVERY_KIND_FUNCTION_COMPLETED,
                        idempotency_key=f"call:{notice.call_id}:done",
                        text=notice.text,
                        attributes=notice.attributes,
                    )
                    for notice in notices
                ]
            )
        except errors.AgentWorksError as exc:  # the whole request: every notice waits
            log.warning("notices.retry", count=len(notices), code=exc.code.name, error=exc.message)
            return [RetryLater(exc.code.name, exc.message, str(exc.reason))] * len(notices)
        outcomes = [notice_outcome(r) for r in results]
        for notice, outcome in zip(notices, outcomes, strict=True):
            _log_outcome(notice, outcome)
        return outcomes

    return send


def notice_outcome(result: object) -> NoticeOutcome:
    """What became of one notice, from messaging's answer to it (F13).

    A refusal that every retry would get too (`errors.REFUSED_FOR_GOOD`: INVALID_ARGUMENT,
    NOT_FOUND, ALREADY_EXISTS) gives up; any other error is tried again later.
    """
    if not isinstance(result, errors.AgentWorksError):
        return Delivered()
    failure = GaveUp if isinstance(result, errors.REFUSED_FOR_GOOD) else RetryLater
    return failure(result.code.name, result.message, str(result.reason))


def _log_outcome(notice: Notice, outcome: NoticeOutcome) -> None:
    match outcome:
        case GaveUp(code=code, message=message):
            log.error("notice.refused", call_id=notice.call_id, code=code, error=message)
        case RetryLater(code=code, message=message):
            log.warning("notice.retry", call_id=notice.call_id, code=code, error=message)
        case Delivered():
            log.info(
                "notice.delivered", call_id=notice.call_id, conversation_id=notice.conversation_id
            )


async def deliver_notices(service: FunctionsService, send: NoticeSender, config: Config) -> None:
    """The outbox worker: deliver completion notices, woken by NOTIFY (F13)."""
    wait = min(config.poll_fallback_seconds, config.notice_retry_seconds)
    with service.listener.subscribe(NOTICE_CHANNEL, ["due"]) as waiter:
        while True:
            try:
                if await service.deliver_notices(send):
                    continue  # maybe more are due
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("notices.failed", error=str(exc))
            await waiter.wait(wait)
