"""SQL for the gateway's own data (API tokens, console sessions); one method per use case."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable
from datetime import datetime
from typing import Any

import psycopg

from agentworks.core.errors import PreconditionFailed, Reason, Unavailable
from agentworks.server.db import Database, libpq_url
from agentworks.server.queries import Queries
from agentworks_gateway.metrics import database_failed
from agentworks_gateway.models import ConsoleSession, TokenRecord

# Every statement of the gateway's store, by name, from queries.sql (read once).
Q = Queries.load("agentworks_gateway")


def _record(row: Any) -> TokenRecord:
    return TokenRecord(
        token_id=row.token_id,
        label=row.label,
        principal=row.principal,
        roles=frozenset(row.roles or ()),
        created_by=row.created_by,
        created_at=row.created_at,
        revoked_at=row.revoked_at,
        revoked_by=row.revoked_by,
        targets=tuple(row.targets) if row.targets is not None else None,
        expires_at=row.expires_at,
        last_seen_at=row.last_seen_at,
    )


@contextlib.asynccontextmanager
async def _watched(operation: str) -> AsyncIterator[None]:
    """Count and log (rate-limited) the database being away or full, then re-raise."""
    try:
        yield
    except Unavailable as exc:
        database_failed(operation, exc)
        raise


class TokenStore:
    """API tokens in PostgreSQL (schema `gateway`).

    A database that is away or has no free connection raises Unavailable; each such
    failure is counted in `agentworks_gateway_database_errors_total` and logged.
    """

    def __init__(self, database: Database) -> None:
        self.database = database

    async def ping(self) -> None:
        """Run a trivial query; raises Unavailable when the database cannot be reached."""
        async with _watched("healthz"), self.database.raw() as pg:
            await Q.execute(pg, "ping")

    async def insert(
        self,
        *,
        token_id: str,
        token_hash: str,
        principal: str,
        roles: Iterable[str],
        label: str,
        created_by: str,
        targets: Iterable[str] | None = None,
        expires_at: datetime | None = None,
    ) -> TokenRecord:
        """Store a new token or runtime credential (with `targets`), its hash only."""
        params = {
            "token_id": token_id,
            "token_hash": token_hash,
            "principal": principal,
            "roles": sorted(roles),
            "label": label,
            "created_by": created_by,
            "targets": sorted(targets) if targets is not None else None,
            "expires_at": expires_at,
        }
        async with _watched("tokens"), self.database.raw() as pg:
            row = await Q.one(pg, "insert_token", params)
        return _record(row)

    async def find_by_hash(self, token_hash: str) -> TokenRecord | None:
        """The token with this hash, revoked or not; None if there is none.

        Every request looks its token up (a revocation works at once, on every replica),
        so this is one prepared statement on a plain connection (`Database.raw`).
        """
        async with _watched("authenticate"), self.database.raw() as pg:
            row = await Q.one(pg, "find_token_by_hash", {"token_hash": token_hash})
        return _record(row) if row else None

    async def list_tokens(
        self, *, include_revoked: bool, runtime: bool = False
    ) -> list[TokenRecord]:
        """Every API token (or, with `runtime`, every runtime credential), oldest first."""
        params = {"runtime": runtime, "include_revoked": include_revoked}
        async with _watched("tokens"), self.database.raw() as pg:
            rows = await Q.all(pg, "list_tokens", params)
        return [_record(r) for r in rows]

    async def seen(self, token_id: str) -> None:
        """Record that a runtime just exchanged this credential (its last seen, V1)."""
        async with _watched("authenticate"), self.database.raw() as pg:
            await Q.execute(pg, "token_seen", {"token_id": token_id})

    async def runtime_page(
        self, *, include_revoked: bool, after: tuple[datetime, str] | None, limit: int
    ) -> list[TokenRecord]:
        """Up to `limit` runtime credentials oldest first, after the (created_at,
        token_id) key `after`: one keyset page, never OFFSET."""
        params = {
            "include_revoked": include_revoked,
            "after_at": after[0] if after else None,
            "after_id": after[1] if after else None,
            "limit": limit,
        }
        async with _watched("tokens"), self.database.raw() as pg:
            rows = await Q.all(pg, "runtime_page", params)
        return [_record(r) for r in rows]

    async def get(self, token_id: str) -> TokenRecord | None:
        """The token or runtime credential with this id, revoked or not; None if none."""
        async with _watched("tokens"), self.database.raw() as pg:
            row = await Q.one(pg, "get_token", {"token_id": token_id})
        return _record(row) if row else None

    async def by_ids(self, token_ids: list[str]) -> list[TokenRecord]:
        """The tokens with these ids that still exist, revoked or not (one statement)."""
        async with _watched("tokens"), self.database.raw() as pg:
            rows = await Q.all(pg, "tokens_by_ids", {"token_ids": token_ids})
        return [_record(r) for r in rows]

    async def revoke(self, token_id: str, *, revoked_by: str) -> TokenRecord | None:
        """Mark a token revoked (keeping the first revocation); None if there is no such id."""
        async with _watched("tokens"), self.database.raw(transaction=True) as pg:
            await Q.execute(pg, "revoke_token", {"token_id": token_id, "revoked_by": revoked_by})
            row = await Q.one(pg, "get_token", {"token_id": token_id})
        return _record(row) if row else None


class SessionStore:
    """Web console sessions (V3) in PostgreSQL, beside the tokens they act as."""

    def __init__(self, database: Database) -> None:
        self.database = database

    async def create(
        self, *, session_hash: str, token_id: str, csrf_token: str, expires_at: datetime
    ) -> None:
        """Store a new session, and drop the sessions that have expired."""
        params = {
            "session_hash": session_hash,
            "token_id": token_id,
            "csrf_token": csrf_token,
            "expires_at": expires_at,
        }
        async with _watched("sessions"), self.database.raw(transaction=True) as pg:
            await Q.execute(pg, "drop_expired_sessions")
            await Q.execute(pg, "insert_session", params)

    async def find(self, session_hash: str) -> ConsoleSession | None:
        """The session with this hash and its token (revoked or not); None if none.

        One prepared statement on a plain connection per console request, like a token's
        lookup: a revoked token ends its sessions on the very next request.
        """
        async with _watched("sessions"), self.database.raw() as pg:
            row = await Q.one(pg, "find_session", {"session_hash": session_hash})
        if row is None:
            return None
        return ConsoleSession(
            csrf_token=row.csrf_token, expires_at=row.session_expires_at, token=_record(row)
        )

    async def delete(self, session_hash: str) -> None:
        """End a session (sign-out); nothing happens when there is none."""
        async with _watched("sessions"), self.database.raw() as pg:
            await Q.execute(pg, "delete_session", {"session_hash": session_hash})


def ensure_token_sync(
    database_url: str,
    *,
    token_id: str,
    token_hash: str,
    principal: str,
    roles: Iterable[str],
    label: str,
    targets: Iterable[str] | None = None,
) -> None:
    """Insert or refresh a token (a runtime credential with `targets`) by hash, in one
    statement; refuses a revoked token."""
    params = {
        "token_id": token_id,
        "token_hash": token_hash,
        "principal": principal,
        "roles": sorted(roles),
        "label": label,
        "targets": sorted(targets) if targets is not None else None,
    }
    with psycopg.connect(libpq_url(database_url)) as conn:  # one transaction, committed
        if conn.execute(Q.sql("ensure_token"), params).fetchone() is None:
            found = conn.execute(Q.sql("token_revoked_at"), {"token_hash": token_hash}).fetchone()
            revoked: datetime | None = found[0] if found else None
            raise PreconditionFailed(
                f"this token was revoked at {revoked}: it cannot be registered again; "
                "mint a new one with agentworks_gateway.tokens.new_token()",
                reason=Reason.CREDENTIALS_REVOKED,
                metadata={"credential": "token"},
            )
