"""SQL for the gateway's own data (API tokens, console sessions); one method per use case."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert

from agentworks.core.errors import PreconditionFailed, Unavailable
from agentworks.server.db import Database, fetch_one, fixed_sql, sqlalchemy_url
from agentworks_gateway.metrics import database_failed
from agentworks_gateway.models import ConsoleSession, TokenRecord
from agentworks_gateway.tables import api_tokens, console_sessions

_RECORD_COLUMNS = [
    api_tokens.c.token_id,
    api_tokens.c.label,
    api_tokens.c.principal,
    api_tokens.c.roles,
    api_tokens.c.created_by,
    api_tokens.c.created_at,
    api_tokens.c.revoked_at,
    api_tokens.c.revoked_by,
    api_tokens.c.targets,
    api_tokens.c.expires_at,
    api_tokens.c.last_seen_at,
]

_SEEN = fixed_sql("UPDATE gateway.api_tokens SET last_seen_at = now() WHERE token_id = :token_id")

_FIND_BY_HASH = fixed_sql(
    "SELECT token_id, label, principal, roles, created_by, created_at, revoked_at, revoked_by, "
    "targets, expires_at, last_seen_at FROM gateway.api_tokens WHERE token_hash = :token_hash"
)


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
        async with _watched("healthz"), self.database.transaction() as conn:
            await conn.execute(sa.text("SELECT 1"))

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
        async with _watched("tokens"), self.database.transaction() as conn:
            row = (
                await conn.execute(
                    api_tokens.insert()
                    .values(
                        token_id=token_id,
                        token_hash=token_hash,
                        principal=principal,
                        roles=sorted(roles),
                        label=label,
                        created_by=created_by,
                        targets=sorted(targets) if targets is not None else None,
                        expires_at=expires_at,
                    )
                    .returning(*_RECORD_COLUMNS)
                )
            ).one()
        return _record(row)

    async def find_by_hash(self, token_hash: str) -> TokenRecord | None:
        """The token with this hash, revoked or not; None if there is none.

        Every request looks its token up (a revocation works at once, on every replica),
        so this is one fixed statement on a plain connection (`Database.raw`).
        """
        async with _watched("authenticate"), self.database.raw() as conn:
            row = await fetch_one(conn, _FIND_BY_HASH, {"token_hash": token_hash})
        return _record(row) if row else None

    async def list_tokens(
        self, *, include_revoked: bool, runtime: bool = False
    ) -> list[TokenRecord]:
        """Every API token (or, with `runtime`, every runtime credential), oldest first."""
        query = sa.select(*_RECORD_COLUMNS).order_by(api_tokens.c.created_at, api_tokens.c.token_id)
        query = query.where(
            api_tokens.c.targets.isnot(None) if runtime else api_tokens.c.targets.is_(None)
        )
        if not include_revoked:
            query = query.where(api_tokens.c.revoked_at.is_(None))
        async with _watched("tokens"), self.database.transaction() as conn:
            rows = (await conn.execute(query)).all()
        return [_record(r) for r in rows]

    async def seen(self, token_id: str) -> None:
        """Record that a runtime just exchanged this credential (its last seen, V1)."""
        async with _watched("authenticate"), self.database.raw() as conn:
            await conn.execute(_SEEN, {"token_id": token_id})

    async def runtime_page(
        self, *, include_revoked: bool, after: tuple[datetime, str] | None, limit: int
    ) -> list[TokenRecord]:
        """Up to `limit` runtime credentials oldest first, after the (created_at,
        token_id) key `after`: one keyset page, never OFFSET."""
        c = api_tokens.c
        query = sa.select(*_RECORD_COLUMNS).where(c.targets.isnot(None))
        if not include_revoked:
            query = query.where(c.revoked_at.is_(None))
        if after is not None:
            query = query.where(sa.tuple_(c.created_at, c.token_id) > sa.tuple_(*after))
        query = query.order_by(c.created_at, c.token_id).limit(limit)
        async with _watched("tokens"), self.database.transaction() as conn:
            rows = (await conn.execute(query)).all()
        return [_record(r) for r in rows]

    async def get(self, token_id: str) -> TokenRecord | None:
        """The token or runtime credential with this id, revoked or not; None if none."""
        async with _watched("tokens"), self.database.transaction() as conn:
            row = (
                await conn.execute(
                    sa.select(*_RECORD_COLUMNS).where(api_tokens.c.token_id == token_id)
                )
            ).one_or_none()
        return _record(row) if row else None

    async def revoke(self, token_id: str, *, revoked_by: str) -> TokenRecord | None:
        """Mark a token revoked (keeping the first revocation); None if there is no such id."""
        async with _watched("tokens"), self.database.transaction() as conn:
            await conn.execute(
                api_tokens.update()
                .where(api_tokens.c.token_id == token_id, api_tokens.c.revoked_at.is_(None))
                .values(revoked_at=sa.func.now(), revoked_by=revoked_by)
            )
            row = (
                await conn.execute(
                    sa.select(*_RECORD_COLUMNS).where(api_tokens.c.token_id == token_id)
                )
            ).one_or_none()
        return _record(row) if row else None


_FIND_SESSION = fixed_sql(
    "SELECT s.csrf_token, s.expires_at AS session_expires_at, t.token_id, t.label, t.principal, "
    "t.roles, t.created_by, t.created_at, t.revoked_at, t.revoked_by, t.targets, t.expires_at, "
    "t.last_seen_at "
    "FROM gateway.console_sessions s JOIN gateway.api_tokens t ON t.token_id = s.token_id "
    "WHERE s.session_hash = :session_hash"
)


class SessionStore:
    """Web console sessions (V3) in PostgreSQL, beside the tokens they act as."""

    def __init__(self, database: Database) -> None:
        self.database = database

    async def create(
        self, *, session_hash: str, token_id: str, csrf_token: str, expires_at: datetime
    ) -> None:
        """Store a new session, and drop the sessions that have expired."""
        async with _watched("sessions"), self.database.transaction() as conn:
            await conn.execute(
                console_sessions.delete().where(console_sessions.c.expires_at < sa.func.now())
            )
            await conn.execute(
                console_sessions.insert().values(
                    session_hash=session_hash,
                    token_id=token_id,
                    csrf_token=csrf_token,
                    expires_at=expires_at,
                )
            )

    async def find(self, session_hash: str) -> ConsoleSession | None:
        """The session with this hash and its token (revoked or not); None if none.

        One fixed statement on a plain connection per console request, like a token's
        lookup: a revoked token ends its sessions on the very next request.
        """
        async with _watched("sessions"), self.database.raw() as conn:
            row = await fetch_one(conn, _FIND_SESSION, {"session_hash": session_hash})
        if row is None:
            return None
        return ConsoleSession(
            csrf_token=row.csrf_token, expires_at=row.session_expires_at, token=_record(row)
        )

    async def delete(self, session_hash: str) -> None:
        """End a session (sign-out); nothing happens when there is none."""
        async with _watched("sessions"), self.database.transaction() as conn:
            await conn.execute(
                console_sessions.delete().where(console_sessions.c.session_hash == session_hash)
            )


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
    engine = sa.create_engine(sqlalchemy_url(database_url), poolclass=sa.pool.NullPool)
    try:
        with engine.begin() as conn:
            statement = pg_insert(api_tokens).values(
                token_id=token_id,
                token_hash=token_hash,
                principal=principal,
                roles=sorted(roles),
                label=label,
                created_by="service:supervisor",
                targets=sorted(targets) if targets is not None else None,
            )
            upsert = statement.on_conflict_do_update(
                index_elements=[api_tokens.c.token_hash],
                set_={
                    "principal": statement.excluded.principal,
                    "roles": statement.excluded.roles,
                    "label": statement.excluded.label,
                    "targets": statement.excluded.targets,
                },
                where=api_tokens.c.revoked_at.is_(None),
            ).returning(api_tokens.c.token_id)
            if conn.execute(upsert).one_or_none() is None:
                revoked: datetime | None = conn.execute(
                    sa.select(api_tokens.c.revoked_at).where(api_tokens.c.token_hash == token_hash)
                ).scalar_one_or_none()
                raise PreconditionFailed(
                    f"this token was revoked at {revoked}: it cannot be registered again; "
                    "mint a new one with agentworks_gateway.tokens.new_token()"
                )
    finally:
        engine.dispose()
