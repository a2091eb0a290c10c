"""Scheduler use cases: validation, access rules, firing and webhook checks. No gRPC, no SQL.

Who may do what (A3):
- Wake-ups, schedules and webhooks are attached to a conversation by an agent serving
  the conversation's target (`agent:<crew>/<name>`, `workflow:<id>`), by an operator, or
  by a runtime service (a `service:` principal with the `runtime` role). The scheduler
  does not read messaging's tables (P1): it asks messaging, as the caller, for the first
  transcript entry (`GetTranscript`, participants only — anyone else gets NOT_FOUND).
  The first entry is the message that opened the conversation; its sender is the
  outside party, who may talk to the target only through messages (C8), so it may not
  attach timers or webhooks.
- The product of what an agent creates is the target it serves (`crew:<crew>`,
  `workflow:<id>`); operators and runtime services may name one.
- Wake-ups are seen and changed by their creator, by agents of the same product and by
  operators; schedules and webhooks by their creator and operators. Anyone else gets
  NOT_FOUND, so a guessed id reveals nothing.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import re
import secrets
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import structlog

from agentworks.client import checks
from agentworks.client.checks import bounded, check_no_nul
from agentworks.client.errors import (
    REFUSED_FOR_GOOD,
    AgentWorksError,
    Conflict,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    PreconditionFailed,
    Unauthenticated,
)
from agentworks.client.identity import Identity
from agentworks.client.scheduler import (
    DELIVERY_HEADER,
    SIGNATURE_HEADER,
    SIGNATURE_PREFIX,
    TIMESTAMP_HEADER,
    webhook_signature,
)
from agentworks_scheduler import metrics
from agentworks_scheduler import recurrence as rec
from agentworks_scheduler.config import Config
from agentworks_scheduler.models import (
    Delivered,
    Due,
    Failed,
    FireOutcome,
    Page,
    PauseEntry,
    Recurrence,
    Retry,
    Schedule,
    WakeUp,
    Webhook,
)
from agentworks_scheduler.store import SchedulerStore, When

log = structlog.get_logger("agentworks.scheduler")

# Limits (P6), stated in docs/scheduler.md.
MAX_NOTE_BYTES = 16 * 1024
MAX_SUBMISSION_ID = 128
MAX_PROMPT_BYTES = 16 * 1024
MAX_NAME_CHARS = 200
MAX_REASON_CHARS = 500
MAX_DELAY = timedelta(days=400)
MAX_PAST = timedelta(hours=1)
MAX_PREVIEW_SPAN = timedelta(days=100 * 365)
MAX_PENDING_WAKE_UPS = 100
# Each schedule writes a delivery per occurrence, each webhook takes events: per
# conversation, a bound on what one agent can pile up (P6).
MAX_SCHEDULES_PER_CONVERSATION = 100
MAX_WEBHOOKS_PER_CONVERSATION = 100
MAX_DELIVERY_ID_CHARS = 128
LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX = 50, 200
PREVIEW_DEFAULT, PREVIEW_MAX = 5, 100
# A firing more than one tick plus this much after its due time is marked late.
LATE_SLACK = timedelta(seconds=1)
PURGE_EVERY_SECONDS = 600.0
# A retried CreateWebhook gives the secret again only this long after the create, and
# only while it was not rotated (docs/scheduler.md, Webhooks).
RETRY_SECRET_WINDOW = timedelta(hours=24)

RUNTIME_ROLE = "runtime"
_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}"
_PRODUCT_RE = re.compile(rf"^(?:crew|workflow):{_NAME}$")
_PAUSE_SCOPE_RE = re.compile(rf"^(?:crew|workflow):(?:\*|{_NAME})$")
_DELIVERY_ID_RE = re.compile(rf"^[\x21-\x7e]{{1,{MAX_DELIVERY_ID_CHARS}}}$")
_CURSOR_PREFIX = "s1:"


@dataclass(frozen=True)
class Participation:
    """What messaging says about a conversation the caller takes part in."""

    opener: str  # the principal that sent the opening message
    target: str  # crew:<name> or workflow:<id>


class Conversations(Protocol):
    """What the scheduler asks of the messaging service."""

    async def participation(self, identity: Identity, conversation_id: str) -> Participation:
        """As `identity`: who opened the conversation and which target it is with.

        Raises NotFound when the conversation does not exist or the caller is not one
        of its participants.
        """
        ...

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
        """Put a delivery into the conversation's turn queue: (delivery_id, created)."""
        ...

    async def enqueue_many(
        self, requests: Sequence[Mapping[str, Any]]
    ) -> list[tuple[str, bool] | AgentWorksError]:
        """Many deliveries in one request (each with `enqueue`'s fields, at most
        MAX_ENQUEUE_ITEMS): one outcome per request, (delivery_id, created) or the error
        that delivery alone failed with. An error of the whole request is raised."""
        ...


# -------------------------------------------------------------------------- validation


def encode_cursor(seq: int) -> str:
    return checks.encode_cursor(seq, _CURSOR_PREFIX)


def decode_cursor(cursor: str) -> int:
    return checks.decode_cursor(cursor, _CURSOR_PREFIX)


def check_product(product: str, *, field: str = "product") -> str:
    if product and not _PRODUCT_RE.match(product):
        raise InvalidArgument(
            f"{field} {product!r} is not a product: use crew:<name> or workflow:<id>"
        )
    return product


def check_pause_scope(product: str) -> str:
    if product and not _PAUSE_SCOPE_RE.match(product):
        raise InvalidArgument(
            f"product {product!r} cannot be paused: leave it empty for the global pause, "
            "or use crew:<name>, workflow:<id>, crew:* or workflow:*"
        )
    return product


def check_text(value: str, field: str, limit: int, *, required: bool = False) -> str:
    check_no_nul(value, field)
    if required and not value.strip():
        raise InvalidArgument(f"{field} is empty: give the text to deliver")
    size = len(value.encode())
    if size > limit:
        raise InvalidArgument(f"{field} is {size} bytes; the limit is {limit} bytes")
    return value


def check_submission_id(submission_id: str) -> str:
    check_no_nul(submission_id, "submission_id")
    if len(submission_id) > MAX_SUBMISSION_ID:
        raise InvalidArgument(
            f"submission_id is {len(submission_id)} characters; the limit is {MAX_SUBMISSION_ID}"
        )
    return submission_id


def check_name(name: str, field: str = "name") -> str:
    check_no_nul(name, field)
    if len(name) > MAX_NAME_CHARS:
        raise InvalidArgument(f"{field} is longer than {MAX_NAME_CHARS} characters")
    return name


def check_conversation_id(conversation_id: str) -> str:
    if not conversation_id:
        raise InvalidArgument("conversation_id is required: the conversation to deliver into")
    try:
        return str(uuid.UUID(conversation_id))
    except ValueError:
        raise NotFound(f"conversation {conversation_id!r} not found") from None


def check_when(at: datetime | None, delay_seconds: int | None, now: datetime) -> When:
    """A wake-up's time from `at` or `delay_seconds` (exactly one)."""
    if at is None and delay_seconds is None:
        raise InvalidArgument(
            "when is missing: give at (a time) or delay_seconds (0 fires on the next tick)"
        )
    if at is not None:
        if at < now - MAX_PAST:
            raise InvalidArgument(
                f"at {at.isoformat()} is more than {MAX_PAST} in the past; "
                "use delay_seconds=0 to be woken on the next tick"
            )
        if at > now + MAX_DELAY:
            raise InvalidArgument(f"at {at.isoformat()} is more than {MAX_DELAY.days} days ahead")
        return at
    assert delay_seconds is not None
    if not 0 <= delay_seconds <= MAX_DELAY.total_seconds():
        raise InvalidArgument(
            f"delay_seconds must be between 0 and {int(MAX_DELAY.total_seconds())} "
            f"({MAX_DELAY.days} days), got {delay_seconds}"
        )
    return timedelta(seconds=delay_seconds)


def own_product(identity: Identity) -> str | None:
    """The target an agent or workflow principal serves, as a product."""
    if identity.kind == "agent":
        return f"crew:{identity.crew}"
    if identity.kind == "workflow":
        return identity.principal
    return None


def trusted(identity: Identity) -> bool:
    """Operators and runtime services act for any product."""
    return identity.is_operator or (identity.is_service and RUNTIME_ROLE in identity.roles)


def webhook_secret(key: str, webhook_id: str, salt: str) -> str:
    """The secret of a webhook, derived from the webhook key; never stored."""
    mac = hmac.new(
        key.encode(), f"agentworks-webhook:v1:{webhook_id}:{salt}".encode(), hashlib.sha256
    )
    return "whsec_" + base64.urlsafe_b64encode(mac.digest()).decode().rstrip("=")


def fingerprint(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()[:12]


def request_hash(*fields: Any) -> str:
    """What a retry key stands for: the same key must come with the same request."""
    return hashlib.sha256(repr(list(fields)).encode()).hexdigest()


@dataclass(frozen=True)
class Attachment:
    """A checked conversation and the product of what is attached to it."""

    conversation_id: str
    product: str


class SchedulerService:
    """The timer, schedule, pause and webhook contract (S1-S6) over a store and messaging."""

    def __init__(self, store: SchedulerStore, conversations: Conversations, config: Config):
        self.store = store
        self.conversations = conversations
        self.config = config
        self.draining = asyncio.Event()
        self.stats: Counter[str] = Counter()
        self.ticks = 0
        self._ticked = asyncio.Condition()
        self._last_purge = 0.0
        self._late_after = timedelta(seconds=config.tick_seconds) + LATE_SLACK
        # Fault injection for tests: awaited after messaging accepted an occurrence and
        # before the scheduler records it (a crash here must not duplicate it, S6).
        self.after_delivery: Callable[[Due], Awaitable[None]] | None = None

    # ------------------------------------------------------------------- access

    async def _attach(self, identity: Identity, conversation_id: str, product: str) -> Attachment:
        """Check the caller may attach timers or webhooks to the conversation."""
        conversation_id = check_conversation_id(conversation_id)
        check_product(product)
        mine = own_product(identity)
        if not trusted(identity):
            if mine is None:
                raise PermissionDenied(
                    "only the agents serving a conversation (agent:<crew>/<name>, "
                    "workflow:<id>) and operators can attach wake-ups, schedules or webhooks"
                )
            if product and product != mine:
                raise InvalidArgument(
                    f"product is taken from your identity ({mine}); leave it empty"
                )
        seen = await self.conversations.participation(identity, conversation_id)
        if not trusted(identity) and seen.target != mine:
            raise PermissionDenied(
                f"conversation {conversation_id} is with {seen.target}; you act for {mine}, "
                "so only its agents or an operator can attach timers or webhooks to it"
            )
        if product and product != seen.target:
            # A product that is not the conversation's own would escape its pauses (S3).
            raise InvalidArgument(
                f"product {product} is not the target of conversation {conversation_id} "
                f"({seen.target}); leave product empty to take the conversation's own"
            )
        product = product or seen.target
        if not trusted(identity) and seen.opener == identity.principal:
            raise PermissionDenied(
                f"you started conversation {conversation_id}: timers and webhooks prompt the "
                "agents of its target, which you reach by sending messages; the target's "
                "agents or an operator can attach them"
            )
        return Attachment(conversation_id, product)

    def _sees_wake_up(self, identity: Identity, wake_up: WakeUp) -> bool:
        mine = own_product(identity)
        return (
            trusted(identity)
            or wake_up.created_by == identity.principal
            or (mine is not None and wake_up.product == mine)
        )

    async def _visible_wake_up(self, identity: Identity, wake_up_id: str) -> WakeUp:
        wake_up = await self.store.get_wake_up(wake_up_id)
        if not self._sees_wake_up(identity, wake_up):
            raise NotFound(f"wake-up {wake_up_id!r} not found")
        return wake_up

    async def _owned_schedule(self, identity: Identity, schedule_id: str) -> Schedule:
        schedule = await self.store.get_schedule(schedule_id)
        if not (identity.is_operator or schedule.created_by == identity.principal):
            raise NotFound(f"schedule {schedule_id!r} not found")
        return schedule

    async def _owned_webhook(self, identity: Identity, webhook_id: str) -> Webhook:
        webhook = await self.store.get_webhook(webhook_id)
        if not (identity.is_operator or webhook.created_by == identity.principal):
            raise NotFound(f"webhook {webhook_id!r} not found")
        return webhook

    # ----------------------------------------------------------------- wake-ups

    async def create_wake_up(
        self,
        identity: Identity,
        *,
        conversation_id: str,
        at: datetime | None,
        delay_seconds: int | None,
        note: str,
        product: str,
        submission_id: str = "",
    ) -> WakeUp:
        """A durable wake-up for a conversation the caller serves (S1).

        With a `submission_id`, a retry of the same request gets the same wake-up.
        """
        when = check_when(at, delay_seconds, datetime.now(UTC))
        check_text(note, "note", MAX_NOTE_BYTES)
        check_submission_id(submission_id)
        place = await self._attach(identity, conversation_id, product)
        wake_up, created = await self.store.create_wake_up(
            conversation_id=place.conversation_id,
            product=place.product,
            note=note,
            when=when,
            created_by=identity.principal,
            max_pending=MAX_PENDING_WAKE_UPS,
            submission_id=submission_id,
            request_hash=request_hash(
                conversation_id, at.isoformat() if at else None, delay_seconds, note, product
            ),
        )
        log.info(
            "wake_up.created" if created else "wake_up.retried",
            wake_up_id=wake_up.id,
            conversation_id=wake_up.conversation_id,
            due_at=wake_up.due_at.isoformat(),
        )
        return wake_up

    async def get_wake_up(self, identity: Identity, wake_up_id: str) -> WakeUp:
        return await self._visible_wake_up(identity, wake_up_id)

    async def list_wake_ups(
        self,
        identity: Identity,
        *,
        conversation_id: str,
        product: str,
        include_finished: bool,
        after: str,
        limit: int,
    ) -> tuple[list[WakeUp], str]:
        position = decode_cursor(after)
        limit = bounded(limit, "limit", 1, LIST_LIMIT_MAX, LIST_LIMIT_DEFAULT)
        check_product(product)
        page: Page = await self.store.list_wake_ups(
            conversation_id=conversation_id,
            product=product,
            visible_to=None if trusted(identity) else (identity.principal, own_product(identity)),
            include_finished=include_finished,
            after=position,
            limit=limit,
        )
        return page.items, encode_cursor(page.next_seq)

    async def cancel_wake_up(self, identity: Identity, wake_up_id: str) -> WakeUp:
        """Cancel a pending wake-up; only this (or a reschedule) stops it (S1)."""
        await self._visible_wake_up(identity, wake_up_id)
        wake_up = await self.store.change_pending_wake_up(wake_up_id, when=None)
        log.info("wake_up.cancelled", wake_up_id=wake_up.id)
        return wake_up

    async def reschedule_wake_up(
        self,
        identity: Identity,
        wake_up_id: str,
        *,
        at: datetime | None,
        delay_seconds: int | None,
    ) -> WakeUp:
        when = check_when(at, delay_seconds, datetime.now(UTC))
        await self._visible_wake_up(identity, wake_up_id)
        wake_up = await self.store.change_pending_wake_up(wake_up_id, when=when)
        log.info("wake_up.rescheduled", wake_up_id=wake_up.id, due_at=wake_up.due_at.isoformat())
        return wake_up

    # ---------------------------------------------------------------- schedules

    def _check_recurrence(self, recurrence: Recurrence | None) -> Recurrence:
        if recurrence is None:
            raise InvalidArgument("recurrence is required: give a cron rule or interval_seconds")
        return rec.check(recurrence, min_interval_seconds=self.config.min_interval_seconds)

    async def create_schedule(
        self,
        identity: Identity,
        *,
        conversation_id: str,
        prompt: str,
        recurrence: Recurrence | None,
        name: str,
        product: str,
        start_at: datetime | None,
        paused: bool,
        submission_id: str = "",
    ) -> Schedule:
        """A recurring prompt into a conversation (S4).

        With a `submission_id`, a retry of the same request gets the same schedule.
        """
        check_text(prompt, "prompt", MAX_PROMPT_BYTES, required=True)
        check_name(name)
        check_submission_id(submission_id)
        rule = self._check_recurrence(recurrence)
        now = datetime.now(UTC)
        if start_at is not None and rule.interval_seconds is None:
            raise InvalidArgument(
                "start_at applies to interval schedules only; cron rules fire at the times "
                "they name (in time_zone), so leave start_at out"
            )
        if start_at is not None and not now - MAX_DELAY <= start_at <= now + MAX_DELAY:
            raise InvalidArgument(f"start_at must be within {MAX_DELAY.days} days of now")
        place = await self._attach(identity, conversation_id, product)
        if rule.interval_seconds:
            anchor = start_at or now + timedelta(seconds=rule.interval_seconds)
            # A start in the past joins the grid at its next point: nothing is backfilled.
            next_fire_at = rec.next_after(rule, anchor, now - timedelta(microseconds=1))
        else:
            anchor = now
            next_fire_at = rec.next_after(rule, anchor, now)
        schedule, created = await self.store.create_schedule(
            name=name,
            conversation_id=place.conversation_id,
            product=place.product,
            prompt=prompt,
            recurrence=rule,
            anchor_at=anchor,
            next_fire_at=next_fire_at,
            paused=paused,
            created_by=identity.principal,
            max_per_conversation=MAX_SCHEDULES_PER_CONVERSATION,
            submission_id=submission_id,
            request_hash=request_hash(
                conversation_id,
                prompt,
                rule.cron,
                rule.interval_seconds,
                rule.time_zone,
                name,
                product,
                start_at.isoformat() if start_at else None,
                paused,
            ),
        )
        log.info(
            "schedule.created" if created else "schedule.retried",
            schedule_id=schedule.id,
            conversation_id=schedule.conversation_id,
            rule=str(rule),
            next_fire_at=schedule.next_fire_at.isoformat(),
        )
        return schedule

    async def get_schedule(self, identity: Identity, schedule_id: str) -> Schedule:
        return await self._owned_schedule(identity, schedule_id)

    async def update_schedule(
        self,
        identity: Identity,
        schedule_id: str,
        *,
        prompt: str | None,
        name: str | None,
        recurrence: Recurrence | None,
    ) -> Schedule:
        """Change prompt, name or rule; a new rule restarts from now (S4)."""
        if prompt is not None:
            check_text(prompt, "prompt", MAX_PROMPT_BYTES, required=True)
        if name is not None:
            check_name(name)
        rule = self._check_recurrence(recurrence) if recurrence is not None else None
        await self._owned_schedule(identity, schedule_id)

        def change(schedule: Schedule, now: datetime) -> dict[str, Any]:
            values: dict[str, Any] = {}
            if prompt is not None:
                values["prompt"] = prompt
            if name is not None:
                values["name"] = name
            if rule is not None:
                anchor = now + timedelta(seconds=rule.interval_seconds or 0)
                values.update(
                    cron=rule.cron,
                    interval_seconds=rule.interval_seconds,
                    time_zone=rule.time_zone,
                    anchor_at=anchor,
                    next_fire_at=rec.next_after(rule, anchor, now),
                )
            return values

        schedule = await self.store.update_schedule(schedule_id, change)
        log.info("schedule.updated", schedule_id=schedule_id, rule=str(schedule.recurrence))
        return schedule

    async def set_schedule_paused(
        self, identity: Identity, schedule_id: str, *, paused: bool
    ) -> Schedule:
        """Pause or resume one schedule; resuming skips what was missed meanwhile."""
        await self._owned_schedule(identity, schedule_id)

        def change(schedule: Schedule, now: datetime) -> dict[str, Any]:
            if schedule.paused == paused:
                return {}
            values: dict[str, Any] = {"paused": paused}
            if not paused and schedule.next_fire_at <= now:
                values["next_fire_at"] = rec.next_after(
                    schedule.recurrence, schedule.anchor_at, now
                )
            return values

        schedule = await self.store.update_schedule(schedule_id, change)
        log.info("schedule.paused" if paused else "schedule.resumed", schedule_id=schedule_id)
        return schedule

    async def delete_schedule(self, identity: Identity, schedule_id: str) -> None:
        await self._owned_schedule(identity, schedule_id)
        await self.store.delete_schedule(schedule_id)
        log.info("schedule.deleted", schedule_id=schedule_id)

    async def _list_own(
        self,
        identity: Identity,
        listing: Callable[..., Awaitable[Page]],
        *,
        conversation_id: str,
        product: str,
        after: str,
        limit: int,
    ) -> tuple[list[Any], str]:
        """One page of the caller's own schedules or webhooks (an operator's: anyone's)."""
        position = decode_cursor(after)
        limit = bounded(limit, "limit", 1, LIST_LIMIT_MAX, LIST_LIMIT_DEFAULT)
        check_product(product)
        page = await listing(
            conversation_id=conversation_id,
            product=product,
            created_by=None if identity.is_operator else identity.principal,
            after=position,
            limit=limit,
        )
        return page.items, encode_cursor(page.next_seq)

    async def list_schedules(
        self, identity: Identity, *, conversation_id: str, product: str, after: str, limit: int
    ) -> tuple[list[Schedule], str]:
        return await self._list_own(
            identity,
            self.store.list_schedules,
            conversation_id=conversation_id,
            product=product,
            after=after,
            limit=limit,
        )

    async def preview_schedule(
        self,
        identity: Identity,
        *,
        schedule_id: str,
        recurrence: Recurrence | None,
        count: int,
        after: datetime | None,
    ) -> list[datetime]:
        """The next `count` fire times of a saved schedule or of a rule (S4)."""
        count = bounded(count, "count", 1, PREVIEW_MAX, PREVIEW_DEFAULT)
        now = datetime.now(UTC)
        if after is not None and abs(after - now) > MAX_PREVIEW_SPAN:
            # Far enough out, fire times run past the year 9999 that datetime can hold.
            raise InvalidArgument(
                f"after must be within {MAX_PREVIEW_SPAN.days // 365} years of now, "
                f"got {after.isoformat()}"
            )
        start = after or now
        if schedule_id:
            schedule = await self._owned_schedule(identity, schedule_id)
            return rec.fire_times(schedule.recurrence, schedule.anchor_at, start, count)
        rule = self._check_recurrence(recurrence)
        anchor = start + timedelta(seconds=rule.interval_seconds or 0)
        return rec.fire_times(rule, anchor, start, count)

    # ------------------------------------------------------------------- pauses

    async def pause(self, identity: Identity, *, product: str, reason: str) -> list[PauseEntry]:
        """Hold timers globally or for a product (S3); operators only."""
        if not identity.is_operator:
            raise PermissionDenied("pausing timers needs the operator role")
        check_pause_scope(product)
        if len(reason) > MAX_REASON_CHARS:
            raise InvalidArgument(f"reason is longer than {MAX_REASON_CHARS} characters")
        check_no_nul(reason, "reason")
        entries = await self.store.pause(product, reason, identity.principal)
        log.warning("timers.paused", product=product or "(global)", reason=reason)
        return entries

    async def resume(self, identity: Identity, *, product: str) -> tuple[bool, list[PauseEntry]]:
        """Lift the pause of exactly this scope; held timers fire on the next tick (S3).

        Idempotent: a scope that is not paused changes nothing. Returns whether a pause
        was lifted, and the pauses in force.
        """
        if not identity.is_operator:
            raise PermissionDenied("resuming timers needs the operator role")
        check_pause_scope(product)
        resumed, entries = await self.store.resume(product)
        log.warning("timers.resumed", product=product or "(global)", resumed=resumed)
        return resumed, entries

    async def pause_state(self, identity: Identity) -> list[PauseEntry]:
        return await self.store.pauses()

    # ----------------------------------------------------------------- webhooks

    def _secret(self, webhook_id: str, salt: str) -> str:
        return webhook_secret(self.config.webhook_key, webhook_id, salt)

    async def create_webhook(
        self,
        identity: Identity,
        *,
        conversation_id: str,
        name: str,
        product: str,
        submission_id: str = "",
    ) -> Webhook:
        """A webhook into a conversation; the secret is in the result (S5).

        With a `submission_id`, a retry of the same request gets the same webhook, with
        its secret if the create was less than RETRY_SECRET_WINDOW ago and the secret was
        not rotated since (the caller is its creator, who was given that secret already);
        otherwise without it.
        """
        check_name(name)
        check_submission_id(submission_id)
        place = await self._attach(identity, conversation_id, product)
        webhook_id = str(uuid.uuid4())
        salt = secrets.token_urlsafe(16)
        secret = self._secret(webhook_id, salt)
        webhook = await self.store.create_webhook(
            webhook_id=webhook_id,
            name=name,
            conversation_id=place.conversation_id,
            product=place.product,
            salt=salt,
            secret_fingerprint=fingerprint(secret),
            created_by=identity.principal,
            secret=secret,
            max_per_conversation=MAX_WEBHOOKS_PER_CONVERSATION,
            submission_id=submission_id,
            request_hash=request_hash(conversation_id, name, product),
        )
        if webhook.id != webhook_id:  # a retry: the webhook the key created earlier
            given_again = webhook.secret_rotated_at is None and (
                datetime.now(UTC) - webhook.created_at < RETRY_SECRET_WINDOW
            )
            log.info("webhook.retried", webhook_id=webhook.id, secret_given=given_again)
            if given_again:
                return replace(webhook, secret=self._secret(webhook.id, webhook.salt))
            return webhook
        log.info("webhook.created", webhook_id=webhook_id, conversation_id=place.conversation_id)
        return webhook

    async def get_webhook(self, identity: Identity, webhook_id: str) -> Webhook:
        return await self._owned_webhook(identity, webhook_id)

    async def list_webhooks(
        self, identity: Identity, *, conversation_id: str, product: str, after: str, limit: int
    ) -> tuple[list[Webhook], str]:
        return await self._list_own(
            identity,
            self.store.list_webhooks,
            conversation_id=conversation_id,
            product=product,
            after=after,
            limit=limit,
        )

    async def rotate_webhook_secret(self, identity: Identity, webhook_id: str) -> Webhook:
        await self._owned_webhook(identity, webhook_id)
        salt = secrets.token_urlsafe(16)
        secret = self._secret(webhook_id, salt)
        webhook = await self.store.rotate_webhook_secret(
            webhook_id, salt=salt, secret_fingerprint=fingerprint(secret), secret=secret
        )
        log.info("webhook.secret_rotated", webhook_id=webhook_id)
        return webhook

    async def delete_webhook(self, identity: Identity, webhook_id: str) -> None:
        await self._owned_webhook(identity, webhook_id)
        await self.store.delete_webhook(webhook_id)
        log.info("webhook.deleted", webhook_id=webhook_id)

    async def receive_webhook(
        self,
        identity: Identity,
        *,
        webhook_id: str,
        headers: Mapping[str, str],
        body: bytes,
    ) -> Delivered:
        """Check an incoming event's signature, age and novelty; deliver it raw (S5)."""
        if not identity.is_service:
            raise PermissionDenied(
                "webhook events are handed over by the gateway (a service principal)"
            )
        limit = self.config.webhook_max_body_bytes
        if len(body) > limit:
            raise InvalidArgument(
                f"webhook body is {len(body)} bytes; the limit is {limit} bytes — "
                "nothing was delivered"
            )
        webhook = await self.store.get_webhook(webhook_id)
        lowered = {k.lower(): v.strip() for k, v in headers.items()}
        stamp = lowered.get(TIMESTAMP_HEADER.lower(), "")
        signature = lowered.get(SIGNATURE_HEADER.lower(), "")
        if not stamp or not signature:
            raise Unauthenticated(
                f"webhook request is not signed: send {TIMESTAMP_HEADER} (Unix seconds) and "
                f"{SIGNATURE_HEADER}: {SIGNATURE_PREFIX}<hex HMAC-SHA256 of timestamp + '.' "
                "+ body, keyed with the webhook secret>"
            )
        if not stamp.isdigit() or len(stamp) > 12:
            raise InvalidArgument(f"{TIMESTAMP_HEADER} must be Unix seconds, got {stamp!r}")
        expected = webhook_signature(self._secret(webhook.id, webhook.salt), stamp, body)
        if not hmac.compare_digest(expected.encode(), signature.lower().encode()):
            raise Unauthenticated(
                f"webhook signature does not match: {SIGNATURE_HEADER} must be "
                f"{SIGNATURE_PREFIX}<hex HMAC-SHA256 of '{stamp}.' + the raw body>, keyed with "
                "this webhook's current secret — nothing was delivered"
            )
        skew = int(time.time()) - int(stamp)
        tolerance = self.config.webhook_tolerance_seconds
        if abs(skew) > tolerance:
            age = f"{skew} s old" if skew > 0 else f"{-skew} s in the future"
            raise Unauthenticated(
                f"webhook timestamp is {age}; the tolerance is {tolerance} s — sign each "
                "request with the current time (and check the sender's clock)"
            )
        delivery = lowered.get(DELIVERY_HEADER.lower(), "")
        if not _DELIVERY_ID_RE.match(delivery):
            problem = "is not a valid delivery id" if delivery else "is required"
            raise InvalidArgument(
                f"{DELIVERY_HEADER} {problem}: a unique id per event, 1-"
                f"{MAX_DELIVERY_ID_CHARS} printable ASCII characters without spaces"
            )
        body_sha256 = hashlib.sha256(body).hexdigest()

        async def deliver() -> Delivered:
            try:
                delivery_id, created = await self.conversations.enqueue(
                    conversation_id=webhook.conversation_id,
                    kind="webhook",
                    idempotency_key=f"webhook:{webhook.id}:{delivery}",
                    text=f"webhook event {delivery}"
                    + (f" from {webhook.name}" if webhook.name else ""),
                    payload=body,
                    attributes={
                        "webhook_id": webhook.id,
                        "webhook_name": webhook.name,
                        "delivery": delivery,
                        "content_type": lowered.get("content-type", ""),
                        "signed_at": int(stamp),
                        "body_sha256": body_sha256,
                    },
                )
            except REFUSED_FOR_GOOD as exc:
                raise PreconditionFailed(
                    f"webhook {webhook.id} cannot deliver into conversation "
                    f"{webhook.conversation_id}: {exc.message}; nothing was delivered"
                ) from None
            return Delivered(delivery_id, created)

        result = await self.store.receive_webhook(
            webhook_id=webhook.id,
            delivery_key=delivery,
            signature=expected,
            body_sha256=body_sha256,
            deliver=deliver,
        )
        log.info(
            "webhook.delivered",
            webhook_id=webhook.id,
            delivery=delivery,
            delivery_id=result.delivery_id,
            created=result.created,
            bytes=len(body),
        )
        return result

    # ------------------------------------------------------------------- firing

    async def tick(self) -> int:
        """Fire everything due and not paused, batch after batch (S2, S3, S6)."""
        fired = 0
        try:
            for fire_batch in (self._fire_wake_ups, self._fire_schedules):
                while not self.draining.is_set():
                    claimed, delivered = await fire_batch()
                    fired += delivered
                    if claimed < self.config.batch_size or delivered == 0:
                        break
            await self._purge()
        finally:
            async with self._ticked:
                self.ticks += 1
                self._ticked.notify_all()
        return fired

    async def wait_ticks(self, count: int = 1, timeout: float = 10.0) -> None:
        """Return once `count` more ticks have ended (two: one started after this call)."""
        target = self.ticks + count
        async with asyncio.timeout(timeout), self._ticked:
            await self._ticked.wait_for(lambda: self.ticks >= target)

    async def _deliver_all(
        self, dues: list[Due], request_of: Callable[[Due], dict[str, Any]]
    ) -> list[FireOutcome]:
        """Deliver a batch of occurrences in as few EnqueueDeliveries requests as fit."""
        requests = [request_of(due) for due in dues]
        outcomes: list[FireOutcome] = []
        for chunk in _chunks(requests):
            try:
                results = await self.conversations.enqueue_many(chunk)
            except AgentWorksError as exc:  # the whole request failed: all stay pending
                self.stats["retries"] += len(chunk)
                log.warning("occurrences.retry", count=len(chunk), error=exc.message)
                outcomes += [Retry(exc.message)] * len(chunk)
                continue
            outcomes += [
                self._outcome(request["idempotency_key"], result)
                for request, result in zip(chunk, results, strict=True)
            ]
        if self.after_delivery is not None:
            for due, outcome in zip(dues, outcomes, strict=True):
                if isinstance(outcome, Delivered):
                    await self.after_delivery(due)
        return outcomes

    def _outcome(self, key: str, result: tuple[str, bool] | AgentWorksError) -> FireOutcome:
        """One occurrence's answer from messaging, as delivered, failed or retry."""
        if isinstance(result, Conflict):
            # Messaging already holds a delivery under this occurrence's key, which only
            # the scheduler mints (the wake-up's or schedule's id and the occurrence): an
            # earlier attempt was stored and its answer lost, and the content changed
            # since (a schedule's prompt was edited). The occurrence is in the turn queue
            # once, with the first attempt's text: delivered (S6). Messaging's refusal
            # carries no delivery id, so none is recorded.
            self.stats["duplicates"] += 1
            log.warning("occurrence.delivered_earlier", key=key, error=result.message)
            return Delivered(None, created=False)
        if isinstance(result, REFUSED_FOR_GOOD):
            self.stats["failed"] += 1
            log.warning("occurrence.refused", key=key, error=result.message)
            return Failed(result.message)
        if isinstance(result, AgentWorksError):
            self.stats["retries"] += 1
            log.warning("occurrence.retry", key=key, error=result.message)
            return Retry(result.message)
        delivery_id, created = result
        self.stats["delivered" if created else "duplicates"] += 1
        return Delivered(delivery_id, created)

    def _lateness(self, due: Due) -> dict[str, Any]:
        late = due.late
        return {"late": late > self._late_after, "late_seconds": round(late.total_seconds(), 3)}

    async def _fire_wake_ups(self) -> tuple[int, int]:
        def request(due: Due) -> dict[str, Any]:
            wake_up: WakeUp = due.item
            due_at = wake_up.due_at.astimezone(UTC).isoformat(timespec="microseconds")
            return {
                "conversation_id": wake_up.conversation_id,
                "kind": "wake_up",
                "idempotency_key": f"wake_up:{wake_up.id}:{due_at}",
                "text": wake_up.note,
                "attributes": {
                    "wake_up_id": wake_up.id,
                    "due_at": due_at,
                    "requested_by": wake_up.created_by,
                    **self._lateness(due),
                },
            }

        results = await self.store.fire_due_wake_ups(
            self.config.batch_size, lambda dues: self._deliver_all(dues, request)
        )
        return self._report("wake_up", results)

    async def _fire_schedules(self) -> tuple[int, int]:
        def request(due: Due) -> dict[str, Any]:
            schedule: Schedule = due.item
            occurrence = schedule.next_fire_at.astimezone(UTC).isoformat(timespec="microseconds")
            return {
                "conversation_id": schedule.conversation_id,
                "kind": "schedule",
                "idempotency_key": f"schedule:{schedule.id}:{occurrence}",
                "text": schedule.prompt,
                "attributes": {
                    "schedule_id": schedule.id,
                    "schedule_name": schedule.name,
                    "occurrence": occurrence,
                    "missed_occurrences": rec.missed(
                        schedule.recurrence, schedule.anchor_at, schedule.next_fire_at, due.now
                    ),
                    **self._lateness(due),
                },
            }

        async def deliver(dues: list[Due]) -> list[tuple[FireOutcome, datetime]]:
            outcomes = await self._deliver_all(dues, request)
            # Whatever was missed up to now collapses into this occurrence (S3).
            return [
                (o, rec.next_after(d.item.recurrence, d.item.anchor_at, d.now))
                for d, o in zip(dues, outcomes, strict=True)
            ]

        results = await self.store.fire_due_schedules(self.config.batch_size, deliver)
        return self._report("schedule", results)

    def _report(self, kind: str, results: list[tuple[Due, FireOutcome]]) -> tuple[int, int]:
        delivered = 0
        for due, outcome in results:
            if isinstance(outcome, Delivered):
                delivered += 1
                metrics.fired(kind, due.late.total_seconds())
                log.info(
                    f"{kind}.fired",
                    id=due.item.id,
                    conversation_id=due.item.conversation_id,
                    delivery_id=outcome.delivery_id,
                    created=outcome.created,
                    late_seconds=round(due.late.total_seconds(), 3),
                )
        return len(results), delivered

    async def _purge(self) -> None:
        now = time.monotonic()
        if now - self._last_purge < PURGE_EVERY_SECONDS:
            return
        self._last_purge = now
        await self.store.purge_finished_wake_ups(timedelta(days=self.config.history_days))
        await self.store.purge_webhook_receipts(
            timedelta(hours=self.config.webhook_replay_window_hours)
        )


# One EnqueueDeliveries request carries at most this many deliveries (messaging's limit)
# and about this many bytes of text (well under gRPC's 8 MiB message limit).
MAX_ENQUEUE_ITEMS = 500
MAX_ENQUEUE_BYTES = 2 * 1024 * 1024


def _chunks(requests: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    chunk: list[dict[str, Any]] = []
    size = 0
    for request in requests:
        weight = len(request["text"].encode()) + 1024  # the rest of an item is small
        if chunk and (len(chunk) == MAX_ENQUEUE_ITEMS or size + weight > MAX_ENQUEUE_BYTES):
            yield chunk
            chunk, size = [], 0
        chunk.append(request)
        size += weight
    if chunk:
        yield chunk
