"""Who may do what (A3), shared by every use case; the base of `SchedulerService`.

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
  operators; schedules and webhooks by their creator and operators. The owner of the
  product (the conversation's target) sees them too (V1, A3: "an owner sees their
  targets'"), in lists and by id, but does not change them: PERMISSION_DENIED saying who
  may. Anyone else gets NOT_FOUND, so a guessed id reveals nothing.
- Who owns a target is messaging's to say (P1): the record keeps its product, and each
  read asks messaging, as the caller, for the targets the caller owns (`ListTargets`).
  Not stored with the record: the operator may give a target another owner, and from
  then on the new owner sees its timers, the old one none. Operators and runtime
  services see all without asking; a capability acts for its own turn only, so it
  shows nothing by ownership.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from agentworks.core.errors import (
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Reason,
    kind_meta,
    rule_meta,
)
from agentworks.core.identity import Identity
from agentworks.server.capabilities import require_conversation
from agentworks_scheduler.config import Config
from agentworks_scheduler.models import Conversations, Page, Schedule, WakeUp, Webhook
from agentworks_scheduler.service.rules import (
    LIST_LIMIT_DEFAULT,
    check_conversation_id,
    check_product,
    decode_cursor,
    encode_cursor,
    own_product,
    trusted,
)
from agentworks_scheduler.store import SchedulerStore


@dataclass(frozen=True)
class Attachment:
    """A checked conversation and the product of what is attached to it."""

    conversation_id: str
    product: str


class Access:
    """The store, messaging and settings every use case works with, and the access rules."""

    def __init__(self, store: SchedulerStore, conversations: Conversations, config: Config) -> None:
        self.store = store
        self.conversations = conversations
        self.config = config

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
                    "workflow:<id>) and operators can attach wake-ups, schedules or webhooks",
                    reason=Reason.ROLE_REQUIRED,
                    metadata={"role": "agent"},
                )
            if product and product != mine:
                raise InvalidArgument(
                    f"product is taken from your identity ({mine}); leave it empty",
                    reason=Reason.INVALID_VALUE,
                    metadata=rule_meta("product"),
                )
        seen = await self.conversations.participation(identity, conversation_id)
        if not trusted(identity) and seen.target != mine:
            raise PermissionDenied(
                f"conversation {conversation_id} is with {seen.target}; you act for {mine}, "
                "so only its agents or an operator can attach timers or webhooks to it",
                reason=Reason.OUT_OF_SCOPE,
                metadata={"conversation_id": conversation_id, "target": seen.target},
            )
        if product and product != seen.target:
            # A product that is not the conversation's own would escape its pauses (S3).
            raise InvalidArgument(
                f"product {product} is not the target of conversation {conversation_id} "
                f"({seen.target}); leave product empty to take the conversation's own",
                reason=Reason.INVALID_VALUE,
                metadata=rule_meta("product"),
            )
        product = product or seen.target
        if not trusted(identity) and seen.opener == identity.principal:
            raise PermissionDenied(
                f"you started conversation {conversation_id}: timers and webhooks prompt the "
                "agents of its target, which you reach by sending messages; the target's "
                "agents or an operator can attach them",
                reason=Reason.OUT_OF_SCOPE,
                metadata={"conversation_id": conversation_id},
            )
        return Attachment(conversation_id, product)

    async def _owned_targets(self, identity: Identity) -> frozenset[str]:
        """The targets `identity` owns, as messaging says now (none to ask for an
        operator or runtime service, who see all, or for a capability)."""
        if trusted(identity) or identity.capability is not None:
            return frozenset()
        return await self.conversations.owned_targets(identity)

    async def _owner_may_see(self, identity: Identity, item: Any, what: str, change: bool) -> None:
        """NOT_FOUND unless `identity` owns the item's product; if it does but wants to
        `change` it, PERMISSION_DENIED (it may see, not change)."""
        if item.product not in await self._owned_targets(identity):
            raise NotFound(
                f"{what} {item.id!r} not found",
                reason=Reason.NOT_FOUND,
                metadata=kind_meta(what.replace("-", "_"), item.id),
            )
        if change:
            who = f"its creator ({item.created_by})"
            if what == "wake-up":
                who += f", the agents of {item.product}"
            raise PermissionDenied(
                f"you own {item.product}, so you may see {what} {item.id}, but only {who} "
                "or an operator may change it",
                reason=Reason.NOT_OWNER,
                metadata={
                    "kind": what.replace("-", "_"),
                    "id": item.id,
                    "created_by": item.created_by,
                },
            )

    def _changes_wake_up(self, identity: Identity, wake_up: WakeUp) -> bool:
        mine = own_product(identity)
        return (
            trusted(identity)
            or wake_up.created_by == identity.principal
            or (mine is not None and wake_up.product == mine)
        )

    async def _visible_wake_up(
        self, identity: Identity, wake_up_id: str, *, change: bool = False
    ) -> WakeUp:
        wake_up = await self.store.get_wake_up(wake_up_id)
        if not self._changes_wake_up(identity, wake_up):
            await self._owner_may_see(identity, wake_up, "wake-up", change)
        require_conversation(identity, wake_up.conversation_id)  # a turn's capability (T3)
        return wake_up

    async def _owned_schedule(
        self, identity: Identity, schedule_id: str, *, change: bool = False
    ) -> Schedule:
        schedule = await self.store.get_schedule(schedule_id)
        if not (identity.is_operator or schedule.created_by == identity.principal):
            await self._owner_may_see(identity, schedule, "schedule", change)
        return schedule

    async def _owned_webhook(
        self, identity: Identity, webhook_id: str, *, change: bool = False
    ) -> Webhook:
        webhook = await self.store.get_webhook(webhook_id)
        if not (identity.is_operator or webhook.created_by == identity.principal):
            await self._owner_may_see(identity, webhook, "webhook", change)
        return webhook

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
        """One page of the schedules or webhooks the caller created or that are on
        targets it owns (an operator's: anyone's)."""
        position = decode_cursor(after)
        limit = limit or LIST_LIMIT_DEFAULT  # its range is the proto's rule
        check_product(product)
        page = await listing(
            conversation_id=conversation_id,
            product=product,
            visible_to=None
            if identity.is_operator
            else (identity.principal, await self._owned_targets(identity)),
            after=position,
            limit=limit,
        )
        return page.items, encode_cursor(page.next_seq)
