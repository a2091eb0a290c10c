"""The gateway's use cases: authenticate a bearer token, manage tokens, reach the services.

No HTTP and no SQL here. Business rules about conversations, targets and functions live
in the services; the gateway only turns a token into a signed identity (A1, A2) and owns
the rules about its own data, the tokens.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

import grpc
import structlog

from agentworks.client import FunctionsClient, MessagingClient, SchedulerClient
from agentworks.client.rpc import open_channel
from agentworks.core.checks import check_no_nul
from agentworks.core.errors import (
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Reason,
    Unauthenticated,
    kind_meta,
    rule_meta,
)
from agentworks.core.identity import Identity, Minter, check_new_principal
from agentworks.scheduler.v1 import scheduler_pb2
from agentworks_gateway.admission import Admission
from agentworks_gateway.bodies import LargeBodies
from agentworks_gateway.config import Config
from agentworks_gateway.models import TokenRecord
from agentworks_gateway.store import TokenStore
from agentworks_gateway.stream_auth import OpenTokens
from agentworks_gateway.tokens import (
    TOKEN_PREFIX,
    check_roles,
    hash_token,
    new_token,
    new_token_id,
)

if TYPE_CHECKING:
    from agentworks_gateway.webhooks_out.worker import WebhooksOut

log = structlog.get_logger("agentworks.gateway")

CREATE_TOKEN_HINT = "create one with `agentworks tokens create` (operator) or `agentworks up`"
# Who the gateway is when it hands a webhook event to the scheduler (S5): the event's
# sender has no token, its HMAC signature (checked by the scheduler) is the authentication.
WEBHOOK_PRINCIPAL = "service:gateway"


# Callers whose identity signers are kept (see Gateway.minter).
MAX_CACHED_MINTERS = 4096

T = TypeVar("T")


class Gateway:
    """One gateway process: its token store and its channels to the services."""

    # Webhooks out (N2), set by `app.start` (None in a Gateway built without one).
    webhooks_out: WebhooksOut | None = None

    def __init__(self, config: Config, tokens: TokenStore) -> None:
        self.config = config
        self.tokens = tokens
        self._minters: dict[tuple[str, frozenset[str]], Minter] = {}
        # The request and long-poll pools and the principals' shares of them (B6, B7).
        self.admission = Admission(config.max_requests, config.max_waits)
        # Large request bodies, parsed one at a time on /api/v1 and /mcp (B1, B5).
        self.large_bodies = LargeBodies()
        # One channel per service per process, balanced over its replicas; the
        # typed clients built per request share it.
        self._messaging_channel = self._channel(config.messaging_address)
        self._functions_channel = self._channel(config.functions_address)
        self._scheduler_channel = self._channel(config.scheduler_address)
        self._webhook_identity = Minter(
            WEBHOOK_PRINCIPAL, config.signing_key, ttl_seconds=config.identity_ttl_seconds
        )
        # The tokens behind open event streams, checked again together (A1).
        self.open_tokens = OpenTokens(tokens, self.identity_of, config.stream_recheck_seconds)
        # Set when the process starts to stop (SIGTERM): long-polls return at once.
        self.draining = asyncio.Event()
        # When the drain's grace ends (loop time): what still runs then is cut.
        self.drain_ends_at = float("inf")

    def _channel(self, addresses: str) -> grpc.aio.Channel:
        return open_channel(addresses, self.config.service.tls)

    def begin_drain(self, grace: float) -> None:
        """The process is stopping: waiting long-polls return now with what they have,
        and new ones do not wait, so that clients ask again elsewhere (P4). Requests
        still running after `grace` seconds are cut."""
        self.drain_ends_at = asyncio.get_running_loop().time() + grace
        self.draining.set()

    def drain_ended(self) -> bool:
        """Whether the drain's grace has run out (with a little slack for the timer)."""
        return asyncio.get_running_loop().time() >= self.drain_ends_at - 0.5

    async def long_poll(self, ask: Callable[[int], Awaitable[T]], wait_seconds: int) -> T:
        """`await ask(wait_seconds)`, a service call that may wait that long for news;
        ended early when the gateway starts to drain.

        On a drain the waiting call is cancelled (the service stops waiting too) and
        asked again with no wait, so the caller gets at once what it would have got had
        the wait passed with no news (or the news that came meanwhile). `ask` must be
        safe to repeat: a read, or a call with a retry key.

        The wait holds one of the gateway's long-polls and one of the caller's
        (`Admission.wait`): past either it is refused at once, 503 or 429.
        """
        if not wait_seconds or self.draining.is_set():
            return await ask(0)
        with self.admission.wait():
            return await self._wait(ask, wait_seconds)

    async def _wait(self, ask: Callable[[int], Awaitable[T]], wait_seconds: int) -> T:
        waiting = asyncio.ensure_future(ask(wait_seconds))
        drained = asyncio.ensure_future(self.draining.wait())
        try:
            await asyncio.wait({waiting, drained}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            waiting.cancel()  # the caller went away (or the drain ended): stop waiting
            waiting.add_done_callback(_discard_outcome)
            raise
        finally:
            drained.cancel()
        if not waiting.done():
            waiting.cancel()
            waiting.add_done_callback(_discard_outcome)
            await asyncio.wait({waiting})  # never raises; our own cancellation does
            if waiting.cancelled() or waiting.exception() is not None:
                log.info("long_poll.ended_early", reason="draining", wait_seconds=wait_seconds)
                return await ask(0)
        return waiting.result()

    async def close(self) -> None:
        """Close the channels to the services."""
        for channel in (
            self._messaging_channel,
            self._functions_channel,
            self._scheduler_channel,
        ):
            await channel.close()

    # ------------------------------------------------------------------ identity (A1, A2)

    async def authenticate(self, authorization: str | None) -> Identity:
        """The identity behind an `Authorization: Bearer <token>` header value."""
        return self.identity_of(await self.token_record(bearer_token(authorization, "API token")))

    async def token_record(self, token: str) -> TokenRecord:
        """The stored record of an API token, or Unauthenticated saying why there is none."""
        record = await self.tokens.find_by_hash(hash_token(token))
        if record is None:
            hint = "" if token.startswith(TOKEN_PREFIX) else f" (tokens start with {TOKEN_PREFIX})"
            raise Unauthenticated(
                f"unknown API token{hint}: check it, or {CREATE_TOKEN_HINT}",
                reason=Reason.CREDENTIALS_INVALID,
                metadata={"credential": "API token"},
            )
        return record

    def identity_of(self, record: TokenRecord) -> Identity:
        """The identity an API token acts as; Unauthenticated when it is a runtime
        credential, revoked or expired (checked on every request, A1, T4)."""
        if record.is_runtime_credential:
            raise Unauthenticated(
                "this is a runtime credential: exchange it at POST /api/v1/identity for a "
                "runtime's identity; API calls take an API token (aw_...)",
                reason=Reason.CREDENTIALS_INVALID,
                metadata={"credential": "API token", "token_id": record.token_id},
            )
        if record.revoked_at is not None:
            when = record.revoked_at.astimezone(UTC)
            raise Unauthenticated(
                f"API token {record.token_id} was revoked at {when:%Y-%m-%d %H:%M:%S} UTC: "
                f"use another token, or {CREATE_TOKEN_HINT}",
                reason=Reason.CREDENTIALS_REVOKED,
                metadata={"credential": "API token", "token_id": record.token_id},
            )
        if record.expires_at is not None and record.expired(datetime.now(UTC)):
            raise Unauthenticated(
                f"API token {record.token_id} expired at {_utc(record.expires_at)}: "
                f"use another token, or {CREATE_TOKEN_HINT}",
                reason=Reason.CREDENTIALS_EXPIRED,
                metadata={"credential": "API token", "token_id": record.token_id},
            )
        return Identity(principal=record.principal, roles=record.roles)

    def minter(self, identity: Identity) -> Minter:
        """A signer of short-lived identities for this caller, sent on every gRPC call.

        Kept per principal and roles (bounded), so a caller's identity is signed once per
        half lifetime instead of on every request, and the services' check of a known
        identity is a cache hit.
        """
        key = (identity.principal, identity.roles)
        minter = self._minters.get(key)
        if minter is None:
            if len(self._minters) >= MAX_CACHED_MINTERS:
                self._minters.clear()
            minter = self._minters[key] = Minter(
                identity.principal,
                self.config.signing_key,
                roles=identity.roles,
                ttl_seconds=self.config.identity_ttl_seconds,
            )
        return minter

    def messaging(self, identity: Identity) -> MessagingClient:
        """The messaging service, called as `identity`."""
        return MessagingClient(channel=self._messaging_channel, identity=self.minter(identity))

    def functions(self, identity: Identity) -> FunctionsClient:
        """The functions service, called as `identity`."""
        return FunctionsClient(channel=self._functions_channel, identity=self.minter(identity))

    def scheduler(self, identity: Identity) -> SchedulerClient:
        """The scheduler service, called as `identity`."""
        return SchedulerClient(channel=self._scheduler_channel, identity=self.minter(identity))

    # ------------------------------------------------------------------- webhooks (S5)

    async def receive_webhook(
        self, webhook_id: str, *, headers: Mapping[str, str], body: bytes
    ) -> scheduler_pb2.ReceiveWebhookResponse:
        """Hand a webhook request (raw body, headers) to the scheduler as the gateway.

        The scheduler checks the signature, the timestamp and replays, and delivers the
        body byte-for-byte into the webhook's conversation.
        """
        client = SchedulerClient(channel=self._scheduler_channel, identity=self._webhook_identity)
        return await client.receive_webhook(webhook_id, headers=headers, body=body)

    # -------------------------------------------------------------------- tokens (A1)

    @staticmethod
    def _require_operator(caller: Identity, what: str) -> None:
        if not caller.is_operator:
            raise PermissionDenied(
                f"only operators may {what}: {caller.principal} has no operator role; "
                "ask an operator, or use a token created with --operator",
                reason=Reason.ROLE_REQUIRED,
                metadata={"role": "operator"},
            )

    async def create_token(
        self,
        caller: Identity,
        *,
        principal: str,
        roles: Iterable[str],
        label: str,
        expires_in_seconds: int | None = None,
    ) -> tuple[str, TokenRecord]:
        """Create a token for `principal`, expiring after `expires_in_seconds` if given;
        returns the plaintext (shown once) and its record."""
        self._require_operator(caller, "create tokens")
        check_new_principal(principal)  # B10: new principals are lower-case
        check_no_nul(label, "label")
        if principal.startswith("service:"):
            # The gateway vouches for external callers only (T1): services sign for
            # themselves, and an identity it signed for one would be refused everywhere.
            raise InvalidArgument(
                f"principal {principal}: tokens are for user:<name>, agent:<crew>/<agent> "
                "or workflow:<id>; services sign their own identities",
                reason=Reason.INVALID_VALUE,
                metadata={"field": "principal"},
            )
        token = new_token()
        record = await self.tokens.insert(
            token_id=new_token_id(),
            token_hash=hash_token(token),
            principal=principal,
            roles=check_roles(roles),
            label=label,
            created_by=caller.principal,
            expires_at=expiry(expires_in_seconds),
        )
        log.info(
            "token.created",
            token_id=record.token_id,
            principal=principal,
            roles=sorted(record.roles),
            by=caller.principal,
        )
        return token, record

    async def list_tokens(self, caller: Identity, *, include_revoked: bool) -> list[TokenRecord]:
        """Every token (without secrets), oldest first."""
        self._require_operator(caller, "list tokens")
        return await self.tokens.list_tokens(include_revoked=include_revoked)

    async def revoke_token(self, caller: Identity, token_id: str) -> TokenRecord:
        """Revoke a token; effective on the next request (tokens are not cached)."""
        self._require_operator(caller, "revoke tokens")
        check_no_nul(token_id, "token_id")
        record = await self.tokens.revoke(token_id, revoked_by=caller.principal)
        if record is None:
            raise NotFound(
                f"no token {token_id!r}: list token ids with `agentworks tokens list`",
                metadata=kind_meta("token", token_id),
            )
        log.info("token.revoked", token_id=token_id, by=caller.principal)
        return record


def bearer_token(authorization: str | None, what: str) -> str:
    """The token of an `Authorization: Bearer <token>` header value, else Unauthenticated."""
    scheme, _, token = (authorization or "").strip().partition(" ")
    token = token.strip()
    if not authorization:
        raise Unauthenticated(
            f"missing {what}: send the header `Authorization: Bearer <token>`; "
            + CREATE_TOKEN_HINT,
            reason=Reason.CREDENTIALS_MISSING,
            metadata={"credential": what},
        )
    if scheme.lower() != "bearer" or not token:
        raise Unauthenticated(
            "malformed Authorization header: use `Authorization: Bearer <token>`",
            reason=Reason.CREDENTIALS_INVALID,
            metadata={"credential": what},
        )
    return token


# Longest expiry a token or runtime credential may be given (ten years).
MAX_EXPIRES_IN_SECONDS = 10 * 366 * 24 * 3600


def expiry(expires_in_seconds: int | None) -> datetime | None:
    """When something given `expires_in_seconds` from now expires; None: never."""
    if expires_in_seconds is None:
        return None
    if not 1 <= expires_in_seconds <= MAX_EXPIRES_IN_SECONDS:
        raise InvalidArgument(
            f"expires_in_seconds must be 1 to {MAX_EXPIRES_IN_SECONDS} (ten years), got "
            f"{expires_in_seconds}; leave it out for no expiry",
            reason=Reason.FIELD_RULE,
            metadata=rule_meta("expires_in_seconds", "int64.gte_lte", MAX_EXPIRES_IN_SECONDS),
        )
    return datetime.now(UTC) + timedelta(seconds=expires_in_seconds)


def _utc(moment: datetime) -> str:
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"


def _discard_outcome(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()
