"""API tokens (A1) and runtime credentials (T2): their format and hashing, and the
supervisor's helper that stores one.

A token is `aw_` followed by 43 URL-safe random characters (256 bits); a runtime
credential is `awr_` followed by 43 (it is exchanged for an identity at
`POST /api/v1/identity`, never used as a token). Only the SHA-256 hex digest of either is
stored. Both are looked up on every request (every exchange), without a cache, so a
revocation takes effect on the very next one on every replica.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable

from agentworks.core.errors import InvalidArgument, Reason, rule_meta
from agentworks.core.identity import OPERATOR, check_new_principal

TOKEN_PREFIX = "aw_"
TOKEN_ID_PREFIX = "tok_"
CREDENTIAL_PREFIX = "awr_"
CREDENTIAL_ID_PREFIX = "cred_"
KNOWN_ROLES = frozenset({OPERATOR})


def new_token() -> str:
    """A fresh random API token (`aw_...`)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def new_token_id() -> str:
    """A fresh public token id (`tok_...`), used to list and revoke a token."""
    return TOKEN_ID_PREFIX + secrets.token_hex(8)


def new_runtime_credential() -> str:
    """A fresh random runtime credential (`awr_...`)."""
    return CREDENTIAL_PREFIX + secrets.token_urlsafe(32)


def new_credential_id() -> str:
    """A fresh public runtime credential id (`cred_...`), used to list and revoke it."""
    return CREDENTIAL_ID_PREFIX + secrets.token_hex(8)


def hash_token(token: str) -> str:
    """The SHA-256 hex digest stored for a token."""
    return hashlib.sha256(token.encode()).hexdigest()


def check_roles(roles: Iterable[str]) -> frozenset[str]:
    """Return the roles if every one is known, else raise InvalidArgument."""
    roles = frozenset(roles)
    unknown = sorted(roles - KNOWN_ROLES)
    if unknown:
        raise InvalidArgument(
            f"unknown role(s) {', '.join(unknown)}: "
            f"known roles are {', '.join(sorted(KNOWN_ROLES))}",
            reason=Reason.FIELD_RULE,
            metadata=rule_meta("roles", "enum"),
        )
    return roles


def check_token_format(token: str) -> str:
    """Return the token if it looks like one this gateway issues, else raise InvalidArgument."""
    if not token.startswith(TOKEN_PREFIX) or len(token) < len(TOKEN_PREFIX) + 32:
        raise InvalidArgument(
            f"a token must start with {TOKEN_PREFIX!r} and carry at least 32 random characters; "
            "make one with agentworks_gateway.tokens.new_token()",
            reason=Reason.CREDENTIALS_INVALID,
            metadata={"credential": "API token"},
        )
    return token


def ensure_token(
    database_url: str,
    token: str,
    principal: str,
    roles: set[str],
    label: str,
    *,
    targets: Iterable[str] | None = None,
) -> None:
    """Store `token` (its hash) for `principal` with `roles`, idempotently; blocking.

    For the supervisor, which keeps a dev token in a file and registers it on each
    start. Applies the gateway's migrations first, so it works before the gateway
    ever ran. An existing, unrevoked token gets `principal`, `roles` and `label`
    updated. A token that was revoked stays revoked: this raises PreconditionFailed,
    and the caller should mint a new one with `new_token()`. With `targets`, `token` is a
    runtime credential (`awr_...`, from `new_runtime_credential()`) for those targets.
    """
    # Imported here: making or hashing a token needs no database driver.
    from agentworks.server.db import migrate
    from agentworks_gateway.store import ensure_token_sync

    if targets is None:
        check_token_format(token)
    elif not token.startswith(CREDENTIAL_PREFIX):
        raise InvalidArgument(
            f"a runtime credential must start with {CREDENTIAL_PREFIX!r}; make one with "
            "agentworks_gateway.tokens.new_runtime_credential()",
            reason=Reason.CREDENTIALS_INVALID,
            metadata={"credential": "runtime credential"},
        )
    check_new_principal(principal)  # B10: new principals are lower-case
    migrate(database_url, "gateway", "agentworks_gateway.migrations")
    ensure_token_sync(
        database_url,
        token_id=new_token_id() if targets is None else new_credential_id(),
        token_hash=hash_token(token),
        principal=principal,
        roles=check_roles(roles),
        label=label,
        targets=targets,
    )
