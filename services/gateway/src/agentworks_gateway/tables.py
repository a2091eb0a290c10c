"""The gateway's tables (schema `gateway`); `migrations/` is their history."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg

metadata = sa.MetaData(schema="gateway")

# API tokens (A1). Only the SHA-256 of a token is stored; the plaintext is shown once.
api_tokens = sa.Table(
    "api_tokens",
    metadata,
    sa.Column("token_id", sa.Text, primary_key=True),
    sa.Column("label", sa.Text, nullable=False, server_default=""),
    sa.Column("principal", sa.Text, nullable=False),
    sa.Column("roles", pg.ARRAY(sa.Text), nullable=False, server_default="{}"),
    sa.Column("token_hash", sa.Text, nullable=False, unique=True),
    sa.Column("created_by", sa.Text, nullable=False, server_default=""),
    sa.Column(
        "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
    sa.Column("revoked_at", sa.DateTime(timezone=True)),
    sa.Column("revoked_by", sa.Text),
    # Set: a runtime credential (T2) for these targets ("crew:demo"); NULL: an API token.
    sa.Column("targets", pg.ARRAY(sa.Text)),
    sa.Column("expires_at", sa.DateTime(timezone=True)),
    # A runtime credential's last exchange for an identity (V1: when its runtime was
    # last seen); NULL when never, and for API tokens.
    sa.Column("last_seen_at", sa.DateTime(timezone=True)),
)

# Web console sessions (V3): the SHA-256 of the cookie's session id, the API token it
# acts as, its CSRF token and its expiry.
console_sessions = sa.Table(
    "console_sessions",
    metadata,
    sa.Column("session_hash", sa.Text, primary_key=True),
    sa.Column(
        "token_id",
        sa.Text,
        sa.ForeignKey("gateway.api_tokens.token_id", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("csrf_token", sa.Text, nullable=False),
    sa.Column(
        "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
    sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
)
