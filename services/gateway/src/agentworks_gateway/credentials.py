"""Runtime credentials (T2, T4): create, list, revoke, and exchange one for an identity.

A runtime credential (`awr_...`) is bound to one agent principal (`agent:<crew>/<agent>`
or `workflow:<id>`) and the targets it serves (each one the principal may serve: an
agent's own crew, a workflow's own id). The operator manages any; a target's owner
(messaging's registration, else functions') those of their own targets. Like API tokens
they are stored as hashes in `gateway.api_tokens` (with `targets` set).

`POST /api/v1/identity` with the credential as bearer token exchanges it for an identity
the gateway signs: the credential's principal, no role, the `targets` claim, living
GATEWAY_RUNTIME_IDENTITY_TTL_SECONDS (never past the credential's expiry). Every exchange
reads the credential (one statement, no cache), so a revoked or expired one is refused at
its next exchange on every replica; identities issued before end with their lifetime.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog

from agentworks.core import errors
from agentworks.core.checks import check_no_nul
from agentworks.core.identity import Identity, check_new_principal, mint
from agentworks_gateway.models import TokenRecord
from agentworks_gateway.service import Gateway, bearer_token, expiry
from agentworks_gateway.tokens import (
    CREDENTIAL_PREFIX,
    hash_token,
    new_credential_id,
    new_runtime_credential,
)

log = structlog.get_logger("agentworks.gateway")

# Exchanges of a credential within this of its last are routine: logged at debug (V8).
QUIET_EXCHANGES = timedelta(minutes=10)

CREATE_HINT = (
    "create one with `agentworks runtimes credentials create` (a target's owner or the operator)"
)


def own_target(principal: str) -> str:
    """The one target a runtime principal may serve: an agent's crew, a workflow itself."""
    check_new_principal(principal)  # B10: new principals are lower-case
    kind, _, name = principal.partition(":")
    if kind == "agent":
        return "crew:" + name.split("/", 1)[0]
    if kind == "workflow":
        return principal
    raise errors.InvalidArgument(
        f"principal {principal}: a runtime credential is for agent:<crew>/<agent> or "
        "workflow:<id>, the principals a runtime acts as",
        reason=errors.Reason.INVALID_VALUE,
        metadata=errors.rule_meta("principal"),
    )


def check_targets(principal: str, targets: Iterable[str] | None) -> list[str]:
    """The credential's targets (default: the principal's own), each one it may serve."""
    own = own_target(principal)
    chosen = sorted(set(targets)) if targets is not None else [own]
    if not chosen:
        raise errors.InvalidArgument(
            f"targets is empty: a runtime for {principal} serves {own}",
            reason=errors.Reason.FIELD_RULE,
            metadata=errors.rule_meta("targets", "required"),
        )
    for target in chosen:
        if target != own:
            raise errors.InvalidArgument(
                f"target {target}: {principal} may serve only {own} (an agent its own crew, "
                "a workflow itself)",
                reason=errors.Reason.OUT_OF_SCOPE,
                metadata={"field": "targets", "target": target, "principal": principal},
            )
    return chosen


async def target_owner(gateway: Gateway, caller: Identity, target: str) -> str:
    """The owner of a registered target (messaging's registration, else functions')."""
    try:
        return str((await gateway.messaging(caller).get_target(target)).owner)
    except errors.NotFound:
        pass
    try:
        return str((await gateway.functions(caller).get_target(target)).owner)
    except errors.NotFound:
        raise errors.NotFound(
            f"target {target} is not registered: register it first (`agentworks targets "
            "register`, operator)",
            reason=errors.Reason.NOT_FOUND,
            metadata=errors.kind_meta("target", target),
        ) from None


async def _owns_all(gateway: Gateway, caller: Identity, targets: Iterable[str]) -> bool:
    for target in targets:
        if await target_owner(gateway, caller, target) != caller.principal:
            return False
    return True


async def create(
    gateway: Gateway,
    caller: Identity,
    *,
    principal: str,
    targets: Iterable[str] | None,
    label: str,
    expires_in_seconds: int | None,
) -> tuple[str, TokenRecord]:
    """A new runtime credential; returns the plaintext (shown once) and its record."""
    check_no_nul(label, "label")
    chosen = check_targets(principal, targets)
    if not caller.is_operator:
        for target in chosen:
            owner = await target_owner(gateway, caller, target)
            if owner != caller.principal:
                raise errors.PermissionDenied(
                    f"only the owner of {target} ({owner}) or an operator may create runtime "
                    f"credentials for it; {caller.principal} is neither",
                    reason=errors.Reason.NOT_OWNER,
                    metadata={"target": target},
                )
    credential = new_runtime_credential()
    record = await gateway.tokens.insert(
        token_id=new_credential_id(),
        token_hash=hash_token(credential),
        principal=principal,
        roles=(),
        label=label,
        created_by=caller.principal,
        targets=chosen,
        expires_at=expiry(expires_in_seconds),
    )
    log.info(
        "runtime_credential.created",
        credential_id=record.token_id,
        principal=principal,
        targets=chosen,
        by=caller.principal,
    )
    return credential, record


async def visible(
    gateway: Gateway, caller: Identity, *, include_revoked: bool
) -> list[TokenRecord]:
    """The runtime credentials the caller may see: all for an operator, else those of
    targets the caller owns; oldest first, without secrets."""
    records = await gateway.tokens.list_tokens(include_revoked=include_revoked, runtime=True)
    if caller.is_operator:
        return records
    owners: dict[str, str | None] = {}
    shown = []
    for record in records:
        for target in record.targets or ():
            if target not in owners:
                try:
                    owners[target] = await target_owner(gateway, caller, target)
                except errors.NotFound:
                    owners[target] = None
        if record.targets and all(owners[t] == caller.principal for t in record.targets):
            shown.append(record)
    return shown


async def page(
    gateway: Gateway,
    caller: Identity,
    *,
    include_revoked: bool,
    after: tuple[datetime, str] | None,
    limit: int,
) -> tuple[list[TokenRecord], bool]:
    """One page of the runtime credentials the caller may see (as `visible`), oldest
    first after the key `after`, and whether more follow. Whose a credential is depends
    on its targets' owners, which the services hold, so pages are read in keyset batches
    until `limit` visible ones are found."""
    shown: list[TokenRecord] = []
    owners: dict[str, str | None] = {}
    while True:
        batch = await gateway.tokens.runtime_page(
            include_revoked=include_revoked, after=after, limit=limit + 1
        )
        for record in batch:
            if caller.is_operator or await _owned(gateway, caller, record, owners):
                shown.append(record)
                if len(shown) > limit:
                    return shown[:limit], True
        if len(batch) <= limit:
            return shown, False
        after = (batch[-1].created_at, batch[-1].token_id)


async def _owned(
    gateway: Gateway, caller: Identity, record: TokenRecord, owners: dict[str, str | None]
) -> bool:
    for target in record.targets or ():
        if target not in owners:
            try:
                owners[target] = await target_owner(gateway, caller, target)
            except errors.NotFound:
                owners[target] = None
    targets = record.targets or ()
    return bool(targets) and all(owners[t] == caller.principal for t in targets)


async def revoke(gateway: Gateway, caller: Identity, credential_id: str) -> TokenRecord:
    """Revoke a runtime credential: its next exchange is refused, on every replica."""
    check_no_nul(credential_id, "credential_id")
    record = await gateway.tokens.get(credential_id)
    missing = errors.NotFound(
        f"no runtime credential {credential_id!r}: list them with "
        "`agentworks runtimes credentials list`",
        reason=errors.Reason.NOT_FOUND,
        metadata=errors.kind_meta("runtime_credential", credential_id),
    )
    if record is None or not record.is_runtime_credential:
        raise missing
    if not caller.is_operator and not await _owns_all(gateway, caller, record.targets or ()):
        raise missing  # as if there were none: a guessed id reveals nothing (A3)
    revoked = await gateway.tokens.revoke(credential_id, revoked_by=caller.principal)
    if revoked is None:
        raise missing
    log.info("runtime_credential.revoked", credential_id=credential_id, by=caller.principal)
    return revoked


async def exchange(gateway: Gateway, authorization: str | None) -> dict[str, Any]:
    """`POST /api/v1/identity`: a runtime credential for a short-lived, scoped identity."""
    credential = bearer_token(authorization, "runtime credential")
    record = await gateway.tokens.find_by_hash(hash_token(credential))
    if record is None:
        hint = "" if credential.startswith(CREDENTIAL_PREFIX) else " (they start with awr_)"
        raise errors.Unauthenticated(
            f"unknown runtime credential{hint}: check it, or {CREATE_HINT}",
            reason=errors.Reason.CREDENTIALS_INVALID,
            metadata={"credential": "runtime credential"},
        )
    if not record.is_runtime_credential:
        raise errors.Unauthenticated(
            f"{record.token_id} is an API token, not a runtime credential: send an API token "
            f"as it is with every call; {CREATE_HINT}",
            reason=errors.Reason.CREDENTIALS_INVALID,
            metadata={"credential": "runtime credential", "token_id": record.token_id},
        )
    now = datetime.now(UTC)
    if record.revoked_at is not None:
        raise errors.Unauthenticated(
            f"runtime credential {record.token_id} was revoked at {_utc(record.revoked_at)}: "
            f"{CREATE_HINT}",
            reason=errors.Reason.CREDENTIALS_REVOKED,
            metadata={"credential": "runtime credential", "token_id": record.token_id},
        )
    if record.expires_at is not None and record.expired(now):
        raise errors.Unauthenticated(
            f"runtime credential {record.token_id} expired at {_utc(record.expires_at)}: "
            f"{CREATE_HINT}",
            reason=errors.Reason.CREDENTIALS_EXPIRED,
            metadata={"credential": "runtime credential", "token_id": record.token_id},
        )
    ttl = gateway.config.runtime_identity_ttl_seconds
    if record.expires_at is not None:  # an identity never outlives its credential
        ttl = max(1, min(ttl, int((record.expires_at - now).total_seconds())))
    await gateway.tokens.seen(record.token_id)
    issued = int(now.timestamp())
    targets = frozenset(record.targets or ())
    identity = mint(
        record.principal,
        _signing_key(gateway),
        ttl_seconds=ttl,
        now=issued,
        targets=targets,
    )
    # A runtime renews its identity every TTL or so: only a credential's first exchange,
    # or the first after a pause (a runtime started again), is news at info (V8).
    last = record.last_seen_at
    routine = last is not None and now - last < QUIET_EXCHANGES
    (log.debug if routine else log.info)(
        "runtime_credential.exchanged",
        credential_id=record.token_id,
        principal=record.principal,
        ttl_seconds=ttl,
        first_use=last is None,
    )
    return {
        "identity": identity,
        "principal": record.principal,
        "targets": sorted(targets),
        "expires_at": datetime.fromtimestamp(issued + ttl, UTC).isoformat(),
    }


def _signing_key(gateway: Gateway) -> Any:
    key = gateway.config.signing_key
    if key is None:
        raise errors.Unavailable(
            "the gateway has no signing key configured: it cannot vouch for runtimes",
            reason=errors.Reason.NOT_CONFIGURED,
            metadata={"setting": "GATEWAY_SIGNING_KEY"},
        )
    return key


def _utc(moment: datetime) -> str:
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
