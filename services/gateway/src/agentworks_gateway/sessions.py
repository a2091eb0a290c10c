"""Web console sessions (V3): an API token signed in becomes a session, its cookie a
random id.

Only the SHA-256 of the session id is stored (`SessionStore`), with the token it acts
as, a CSRF token and an expiry (`GATEWAY_CONSOLE_SESSION_SECONDS`). Every console
request reads the session and its token in one statement and checks the token as
`Gateway.authenticate` does, so a revoked or expired token ends its sessions on the
next request, on every replica; sign-out deletes the session.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import structlog

from agentworks.core.errors import Reason, Unauthenticated
from agentworks.core.identity import Identity
from agentworks_gateway.service import Gateway
from agentworks_gateway.store import SessionStore

log = structlog.get_logger("agentworks.gateway.console")

SIGN_IN_AGAIN = "sign in again with an API token"


@dataclass(frozen=True)
class Session:
    """A signed-in console session: who it acts as and its CSRF token."""

    identity: Identity
    csrf_token: str
    token_id: str
    expires_at: datetime

    def csrf_matches(self, presented: str | None) -> bool:
        """Whether a request carries this session's CSRF token (compared in constant time)."""
        if not presented:
            return False
        return hmac.compare_digest(presented.encode(), self.csrf_token.encode())


def _hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


class Sessions:
    """Sign in, resume and sign out console sessions, for one gateway process."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.store = SessionStore(gateway.tokens.database)
        self.lifetime = timedelta(seconds=gateway.config.console_session_seconds)

    async def sign_in(self, token: str) -> tuple[str, Session]:
        """A new session for an API token; returns the session id (the cookie) and it.

        The token is checked as on every API request: unknown, revoked, expired or a
        runtime credential is refused with the same message.
        """
        token = token.strip()
        if not token:
            raise Unauthenticated(
                f"no API token given: {SIGN_IN_AGAIN} (aw_...)",
                reason=Reason.CREDENTIALS_MISSING,
                metadata={"credential": "API token"},
            )
        record = await self.gateway.token_record(token)
        identity = self.gateway.identity_of(record)
        session_id = secrets.token_urlsafe(32)
        csrf_token = secrets.token_urlsafe(32)
        expires_at = datetime.now(UTC) + self.lifetime
        if record.expires_at is not None:
            expires_at = min(expires_at, record.expires_at)
        await self.store.create(
            session_hash=_hash(session_id),
            token_id=record.token_id,
            csrf_token=csrf_token,
            expires_at=expires_at,
        )
        log.info("console.signed_in", token_id=record.token_id, principal=identity.principal)
        return session_id, Session(identity, csrf_token, record.token_id, expires_at)

    async def resume(self, session_id: str | None) -> Session:
        """The session of a request's cookie, or Unauthenticated saying why there is none."""
        if not session_id:
            raise Unauthenticated(
                f"not signed in: {SIGN_IN_AGAIN}",
                reason=Reason.CREDENTIALS_MISSING,
                metadata={"credential": "console session"},
            )
        found = await self.store.find(_hash(session_id))
        if found is None:
            raise Unauthenticated(
                f"this console session has ended: {SIGN_IN_AGAIN}",
                reason=Reason.CREDENTIALS_REVOKED,
                metadata={"credential": "console session"},
            )
        if datetime.now(UTC) >= found.expires_at:
            raise Unauthenticated(
                f"this console session expired: {SIGN_IN_AGAIN}",
                reason=Reason.CREDENTIALS_EXPIRED,
                metadata={"credential": "console session"},
            )
        identity = self.gateway.identity_of(found.token)  # revoked or expired: refused
        return Session(identity, found.csrf_token, found.token.token_id, found.expires_at)

    async def sign_out(self, session_id: str | None) -> None:
        """End the session of a cookie (none: nothing to do)."""
        if session_id:
            await self.store.delete(_hash(session_id))
            log.info("console.signed_out")
