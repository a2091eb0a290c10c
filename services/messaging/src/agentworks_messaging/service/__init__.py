"""Messaging use cases: validation, access rules and long-polls (turns in `turns.py`,
deliveries from other services in `deliveries.py`). No gRPC, no SQL here."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import structlog

from agentworks.core.checks import (
    check_lower_case,
    check_no_nul,
    check_retry_key,
    request_hash,
)
from agentworks.core.errors import (
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Reason,
    kind_meta,
    rule_meta,
)
from agentworks.core.identity import Identity, check_new_principal
from agentworks.server.db import Listener
from agentworks.server.shares import shares
from agentworks_messaging.cursors import decode_cursor, encode_cursor
from agentworks_messaging.listing import ConversationListing
from agentworks_messaging.models import (
    Capabilities,
    Message,
    Page,
    Receipt,
    Target,
    TargetKey,
    Transcript,
)
from agentworks_messaging.service.deliveries import DeliveryCases
from agentworks_messaging.service.rules import (
    check_text,
    check_turn_to_complete,
    refuse_runtime_inbox_read,
    without_turn_error,
)
from agentworks_messaging.service.subscriptions import SubscriptionCases
from agentworks_messaging.service.turns import TurnCases
from agentworks_messaging.store import INBOX_CHANNEL, MessagingStore

log = structlog.get_logger("agentworks.messaging")

# A page's size when the request leaves it 0; the ranges (and the wait's) are the protos'
# field rules (ReadRequest, GetTranscriptRequest), checked before the handler.
READ_LIMIT_DEFAULT = 20
TRANSCRIPT_LIMIT_DEFAULT = 50


class MessagingService(TurnCases, DeliveryCases, SubscriptionCases, ConversationListing):
    """The conversation contract (A3, A4, C1-C12) over a store and a NOTIFY listener."""

    def __init__(
        self, store: MessagingStore, listener: Listener, *, poll_fallback_seconds: float = 5.0
    ) -> None:
        self.store = store
        self.listener = listener
        self.poll_fallback_seconds = poll_fallback_seconds
        self.draining = asyncio.Event()

    # ------------------------------------------------------------------ targets

    async def register_target(
        self, identity: Identity, key: TargetKey, owner: str, caps: Capabilities
    ) -> Target:
        if not identity.is_operator:
            raise PermissionDenied(
                "registering a target needs the operator role",
                reason=Reason.ROLE_REQUIRED,
                metadata={"role": "operator"},
            )
        # B10: new names are lower-case (names stored before keep their spelling).
        check_lower_case(key.name, "ref.name")
        check_new_principal(owner, "owner")
        target = await self.store.put_target(key, owner, caps)
        log.info(
            "target.registered",
            target=str(key),
            owner=owner,
            free_text_ask=caps.free_text_ask,
            a2a_card=caps.a2a_card,
        )
        return target

    async def update_target(self, identity: Identity, key: TargetKey, caps: Capabilities) -> Target:
        target = await self.store.get_target(key)
        if not (identity.is_operator or identity.principal == target.owner):
            raise PermissionDenied(
                f"only the owner of {key} ({target.owner}) may change it",
                reason=Reason.NOT_OWNER,
                metadata={"target": str(key), "owner": target.owner},
            )
        updated = await self.store.update_target(key, caps)
        log.info(
            "target.updated",
            target=str(key),
            free_text_ask=caps.free_text_ask,
            a2a_card=caps.a2a_card,
        )
        return updated

    async def get_target(self, identity: Identity, key: TargetKey) -> Target:
        return await self.store.get_target(key)

    # --------------------------------------------------------------------- send

    async def send(
        self,
        identity: Identity,
        *,
        target: TargetKey | None,
        inbox_id: str,
        text: str,
        parts: list[dict[str, Any]] | None,
        submission_id: str,
        channel: str,
    ) -> Receipt:
        """Start (target) or continue (inbox_id) a conversation (C2-C5, C8, C9)."""
        if target is None and not inbox_id:
            raise InvalidArgument(
                "destination is missing: give a target (crew or workflow) to start a new "
                "conversation, or an inbox_id to continue one",
                reason=Reason.FIELD_RULE,
                metadata=rule_meta("destination", "required"),
            )
        check_no_nul(inbox_id, "inbox_id")
        check_text(text, parts)
        check_retry_key(submission_id)
        if channel == "app" and identity.kind != "user":
            raise InvalidArgument(
                "channel app is for people in the app (user principals) only",
                reason=Reason.INVALID_VALUE,
                metadata={"field": "channel"},
            )
        # C8, V5: the switch refuses programmatic messages; the owner's app chat (a person
        # in the console) still gets through. Another principal's app message is refused
        # like a programmatic one: the app channel is the owner's, not a way around it.
        refuse = channel != "app"
        digest = (
            request_hash(str(target) if target else inbox_id, text, parts, channel)
            if submission_id
            else ""  # no retry key: nothing to compare a retry with
        )
        if target is not None:
            # B7: a new conversation is one of the principal's creations (a rate).
            shares().create(identity.principal, "conversations")
            receipt = await self.store.send_new(
                principal=identity.principal,
                key=target,
                text=text,
                parts=parts,
                channel=channel,
                submission_id=submission_id,
                request_hash=digest,
                refuse_if_disabled=refuse,
            )
        else:
            receipt = await self.store.send_continue(
                principal=identity.principal,
                inbox_id=inbox_id,
                text=text,
                parts=parts,
                channel=channel,
                submission_id=submission_id,
                request_hash=digest,
                refuse_if_disabled=refuse,
            )
        log.info(
            "message.accepted",
            message_id=receipt.message_id,
            conversation_id=receipt.conversation_id,
            inbox_id=receipt.inbox_id,
        )
        return receipt

    async def send_message(
        self,
        identity: Identity,
        *,
        inbox_id: str,
        text: str,
        parts: list[dict[str, Any]] | None,
        submission_id: str,
        complete_turn_id: str = "",
    ) -> Receipt:
        """An agent's explicit reply to the trusted reply address (C6); with
        `complete_turn_id`, a reply that also completes the caller's turn (C10)."""
        check_no_nul(inbox_id, "inbox_id")
        check_no_nul(complete_turn_id, "complete_turn_id")
        check_text(text, parts)
        check_retry_key(submission_id)
        turn: tuple[str, str] | None = None
        if complete_turn_id and identity.capability is None:
            conversation_id, key, _, turn = await self.store.inbox_target_and_turn(
                inbox_id, complete_turn_id, identity.principal
            )
        else:
            conversation_id, key, _ = await self.store.inbox_target(inbox_id)
        if not identity.serves(key.kind, key.name):
            raise NotFound(f"inbox {inbox_id!r} not found", metadata=kind_meta("inbox", inbox_id))
        if identity.capability is not None:
            await self._check_turn_capability(identity, conversation_id)
        if complete_turn_id:
            check_turn_to_complete(identity, complete_turn_id, conversation_id, turn)
        receipt = await self.store.agent_reply(
            principal=identity.principal,
            inbox_id=inbox_id,
            conversation_id=conversation_id,
            text=text,
            parts=parts,
            submission_id=submission_id,
            request_hash=request_hash(inbox_id, text, parts) if submission_id else "",
            # Used when this conversation was started in another's turn (L5).
            reply_text=(
                f"{identity.principal} ({key}) wrote in conversation {conversation_id}, "
                "which an agent of this conversation started; continue it with the "
                f"continue_conversation tool and its inbox_id {inbox_id}"
            ),
            reply_attributes={
                "conversation_id": conversation_id,
                "inbox_id": inbox_id,
                "target": str(key),
                "sender": identity.principal,
            },
        )
        log.info("reply.sent", message_id=receipt.message_id, conversation_id=conversation_id)
        if complete_turn_id:
            await self.store.complete_turn(complete_turn_id, identity.principal, interrupted=False)
            log.info("turn.completed", turn_id=complete_turn_id)
        return receipt

    async def send_from_turn(
        self,
        identity: Identity,
        *,
        target: TargetKey | None,
        inbox_id: str,
        text: str,
        parts: list[dict[str, Any]] | None,
        submission_id: str,
    ) -> Receipt:
        """An agent in a turn starts (target) or continues (inbox_id) a conversation with
        another target, tied to the turn's conversation (L5). The other side's replies
        come back as `conversation_reply` turns of the turn's conversation."""
        bound = identity.capability
        if bound is None or bound.kind != "turn":
            raise PermissionDenied(
                "SendFromTurn acts for a turn: call it with the turn's capability "
                "(TurnContext.start_conversation does); other callers use Send",
                reason=Reason.ROLE_REQUIRED,
                metadata={"role": "turn"},
            )
        if (target is None) == (not inbox_id):
            raise InvalidArgument(
                "destination: give a target (crew or workflow) to start a conversation, or "
                "the inbox_id of one this turn's conversation started to continue it",
                reason=Reason.FIELD_RULE,
                metadata=rule_meta("destination", "oneof"),
            )
        check_no_nul(inbox_id, "inbox_id")
        check_text(text, parts)
        check_retry_key(submission_id)
        await self._check_turn_capability(identity)
        origin = bound.conversation_id
        digest = (
            request_hash(str(target) if target else inbox_id, text, parts, "turn", origin)
            if submission_id
            else ""
        )
        fields: dict[str, Any] = {
            "principal": identity.principal,
            "text": text,
            "parts": parts,
            "channel": "programmatic",
            "submission_id": submission_id,
            "request_hash": digest,
            "refuse_if_disabled": True,  # C8: the other target's switch
            "origin": origin,
        }
        if target is not None:
            shares().create(identity.principal, "conversations")  # B7, as Send's
            receipt = await self.store.send_new(key=target, **fields)
        else:
            receipt = await self.store.send_continue(inbox_id=inbox_id, **fields)
        log.info(
            "conversation.started" if target is not None else "conversation.continued",
            message_id=receipt.message_id,
            conversation_id=receipt.conversation_id,
            origin_conversation_id=origin,
        )
        return receipt

    # --------------------------------------------------------------------- read

    async def read(
        self,
        identity: Identity,
        *,
        inbox_id: str,
        after: str,
        limit: int,
        wait_seconds: int,
        newest: bool = False,
    ) -> tuple[list[Message], str]:
        """Messages agents sent to the caller's inbox after the cursor (C7); with
        `newest`, its newest `limit` (oldest first) and the cursor after them."""
        position = decode_cursor(after)
        limit = limit or READ_LIMIT_DEFAULT
        check_no_nul(inbox_id, "inbox_id")
        refuse_runtime_inbox_read(identity)
        if newest:  # the proto's rule: no `after`, no wait
            messages = await self.store.read_own_inbox(inbox_id, identity.principal, None, limit)
            return messages, encode_cursor(messages[-1].position if messages else 0)
        deadline = time.monotonic() + wait_seconds
        with self.listener.subscribe(INBOX_CHANNEL, [inbox_id]) as waiter:
            # The first page checks the inbox is the caller's (A3) in the same statement.
            messages = await self.store.read_own_inbox(
                inbox_id, identity.principal, position, limit
            )
            if not messages and wait_seconds > 0 and not self.draining.is_set():
                # B7: waiting holds one of the principal's long-polls.
                with shares().wait(identity.principal):
                    while True:
                        remaining = deadline - time.monotonic()
                        if messages or remaining <= 0 or self.draining.is_set():
                            break
                        await waiter.wait(min(remaining, self.poll_fallback_seconds))
                        messages = await self.store.read_inbox(inbox_id, position, limit)
        next_position = messages[-1].position if messages else position
        return messages, encode_cursor(next_position)

    async def transcript(
        self,
        identity: Identity,
        *,
        conversation_id: str,
        after: str,
        limit: int,
        inbox_id: str = "",
        newest: bool = False,
    ) -> Transcript:
        """A conversation's messages and delivery records, both directions and every
        delivery kind, for its participants (C12, V2); by conversation or by its inbox;
        with `newest`, its newest `limit` entries (the proto's rule: no `after`)."""
        position = decode_cursor(after)
        limit = limit or TRANSCRIPT_LIMIT_DEFAULT
        if inbox_id:
            if conversation_id:
                raise InvalidArgument(
                    "give conversation_id or inbox_id, not both: either names the conversation",
                    reason=Reason.FIELD_RULE,
                    metadata=rule_meta("inbox_id", "oneof"),
                )
            check_no_nul(inbox_id, "inbox_id")
            try:
                conversation_id = await self.store.inbox_conversation(inbox_id)
            except NotFound:
                raise NotFound(
                    f"conversation of inbox {inbox_id!r} not found",
                    metadata={"kind": "conversation", "inbox_id": inbox_id},
                ) from None
        # A turn's capability reads its own conversation's, while its turn is leased.
        await self._check_turn_capability(identity, conversation_id)
        key, owner, inbox_principal, inbox_id = await self.store.conversation(conversation_id)
        if not (
            identity.principal in (owner, inbox_principal)
            or identity.serves(key.kind, key.name)
            or identity.is_operator
        ):
            raise NotFound(
                f"conversation {conversation_id!r} not found",
                metadata=kind_meta("conversation", conversation_id),
            )
        page: Page = await self.store.transcript(
            conversation_id, None if newest else position, limit
        )
        entries = page.items
        if not (identity.principal == owner or identity.is_operator):
            # A failed turn's stderr is the crew's (L12): its owner and the operator read
            # it, the conversation's outside caller (and the crew's turns) never (A3).
            entries = [without_turn_error(e) for e in entries]
        return Transcript(
            entries, encode_cursor(page.last_position), key, inbox_id, conversation_id
        )
