"""The scheduler's limits (P6, stated in docs/scheduler.md) and request checks; no I/O."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import uuid
from datetime import datetime, timedelta
from typing import Any

from agentworks.core import checks
from agentworks.core.checks import check_no_nul
from agentworks.core.checks import check_retry_key as check_retry_key
from agentworks.core.checks import request_hash as request_hash
from agentworks.core.errors import InvalidArgument, NotFound, Reason, rule_meta
from agentworks.core.identity import Identity
from agentworks.core.limits import MAX_DELAY as MAX_DELAY
from agentworks.core.limits import MAX_DELIVERY_ID_CHARS as MAX_DELIVERY_ID_CHARS
from agentworks.core.limits import MAX_PAST as MAX_PAST
from agentworks.core.limits import MAX_PENDING_WAKE_UPS as MAX_PENDING_WAKE_UPS
from agentworks.core.limits import MAX_PREVIEW_SPAN as MAX_PREVIEW_SPAN
from agentworks.core.limits import MAX_REASON_CHARS as MAX_REASON_CHARS
from agentworks.core.limits import (
    MAX_SCHEDULES_PER_CONVERSATION as MAX_SCHEDULES_PER_CONVERSATION,
)
from agentworks.core.limits import MAX_WEBHOOKS_PER_CONVERSATION as MAX_WEBHOOKS_PER_CONVERSATION
from agentworks_scheduler.store import When

# The limits (P6) are stated once in agentworks.core.limits (imported above; the
# scheduler modules take them from here).
# A page's size and a preview's count when the request leaves them 0; their ranges are
# the proto's rules (List*Request.limit, PreviewScheduleRequest.count).
LIST_LIMIT_DEFAULT = 50
PREVIEW_DEFAULT = 5
# A retried CreateWebhook gives the secret again only this long after the create, and
# only while it was not rotated (docs/scheduler.md, Webhooks).
RETRY_SECRET_WINDOW = timedelta(hours=24)

RUNTIME_ROLE = "runtime"
_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}"
_PRODUCT_RE = re.compile(rf"^(?:crew|workflow):{_NAME}$")
_PAUSE_SCOPE_RE = re.compile(rf"^(?:crew|workflow):(?:\*|{_NAME})$")
DELIVERY_ID_RE = re.compile(rf"^[\x21-\x7e]{{1,{MAX_DELIVERY_ID_CHARS}}}$")
_CURSOR_PREFIX = "s1:"


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


def check_prompt(prompt: str, field: str = "prompt") -> str:
    """A schedule's prompt: not blank (a rule no proto annotation states: whitespace is
    not text to deliver), no NUL. Its size is the proto's rule (CreateScheduleRequest)."""
    check_no_nul(prompt, field)
    if not prompt.strip():
        raise InvalidArgument(
            f"{field} is empty: give the text to deliver",
            reason=Reason.FIELD_RULE,
            metadata=rule_meta(field, "required"),
        )
    return prompt


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
    assert delay_seconds is not None  # its range is the proto's rule, checked before
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


def legacy_request_hash(*fields: Any) -> str:
    """The scheduler's request hash before `checks.request_hash` became the one (issue
    36): a SHA-256 of the fields' repr. Nothing new is stored with it; a retry of a key
    stored before still matches it (`checks.is_retry`'s legacy_hash). Remove it when no
    wake-up, schedule or webhook created with a retry key before then is left."""
    return hashlib.sha256(repr(list(fields)).encode()).hexdigest()
