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

# Webhooks out (N2): endpoints, the feeds each follows, and the deliveries made from them
# (migrations/0005_webhook_endpoints.sql says what each column holds).
webhook_endpoints = sa.Table(
    "webhook_endpoints",
    metadata,
    sa.Column("endpoint_id", sa.Text, primary_key=True),
    sa.Column("principal", sa.Text, nullable=False),
    sa.Column("url", sa.Text, nullable=False),
    sa.Column("description", sa.Text, nullable=False, server_default=""),
    sa.Column("secret", sa.Text, nullable=False),
    sa.Column(
        "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
    sa.Column("secret_rotated_at", sa.DateTime(timezone=True)),
    # 'webhook' (the endpoints tool's) or 'a2a_push' (an A2A push config's, 0007) and
    # the headers each attempt carries besides the signed ones.
    sa.Column("kind", sa.Text, nullable=False, server_default="webhook"),
    sa.Column("headers", pg.JSONB, nullable=False, server_default="{}"),
)

webhook_feeds = sa.Table(
    "webhook_feeds",
    metadata,
    sa.Column(
        "endpoint_id",
        sa.Text,
        sa.ForeignKey("gateway.webhook_endpoints.endpoint_id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("source", sa.Text, primary_key=True),
    sa.Column("cursor", sa.Text, nullable=False, server_default=""),
    sa.Column(
        "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
    sa.Column("leased_by", sa.Text),
    sa.Column("lease_until", sa.DateTime(timezone=True)),
    sa.Column("last_error", sa.Text, nullable=False, server_default=""),
)

webhook_deliveries = sa.Table(
    "webhook_deliveries",
    metadata,
    sa.Column("delivery_id", sa.Text, primary_key=True),
    sa.Column(
        "endpoint_id",
        sa.Text,
        sa.ForeignKey("gateway.webhook_endpoints.endpoint_id", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("event_type", sa.Text, nullable=False),
    sa.Column("event_key", sa.Text, nullable=False),
    sa.Column("payload", sa.LargeBinary, nullable=False),
    sa.Column("status", sa.Text, nullable=False, server_default="pending"),
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
    sa.Column(
        "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
    sa.Column(
        "next_attempt_at",
        sa.DateTime(timezone=True),
        nullable=False,
        server_default=sa.func.now(),
    ),
    sa.Column("give_up_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("last_attempt_at", sa.DateTime(timezone=True)),
    sa.Column("last_error", sa.Text, nullable=False, server_default=""),
    sa.Column("last_status", sa.Integer),
    sa.Column("delivered_at", sa.DateTime(timezone=True)),
    sa.Column("leased_by", sa.Text),
)

# A2A outbound (X4): external tasks followed until they end
# (migrations/0006_a2a_out_tasks.sql says what each column holds).
a2a_out_tasks = sa.Table(
    "a2a_out_tasks",
    metadata,
    sa.Column("agent", sa.Text, primary_key=True),
    sa.Column("task_id", sa.Text, primary_key=True),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("skill", sa.Text, nullable=False, server_default=""),
    sa.Column("conversation_id", sa.Text, nullable=False),
    sa.Column("target", sa.Text, nullable=False),
    sa.Column("context_id", sa.Text, nullable=False, server_default=""),
    sa.Column("state", sa.Text, nullable=False, server_default=""),
    sa.Column("delivered", pg.ARRAY(sa.Text), nullable=False, server_default="{}"),
    sa.Column("last_error", sa.Text, nullable=False, server_default=""),
    sa.Column(
        "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
    sa.Column(
        "updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
    sa.Column("done_at", sa.DateTime(timezone=True)),
    sa.Column("leased_by", sa.Text),
    sa.Column("lease_until", sa.DateTime(timezone=True)),
)

# A2A push-notification configs (X2, N2) on calls' tasks, each with its webhooks-out
# endpoint (migrations/0007_a2a_push_configs.sql says what each column holds).
a2a_push_configs = sa.Table(
    "a2a_push_configs",
    metadata,
    sa.Column(
        "endpoint_id",
        sa.Text,
        sa.ForeignKey("gateway.webhook_endpoints.endpoint_id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("call_id", sa.Text, nullable=False),
    sa.Column("config_id", sa.Text, nullable=False),
    sa.Column("principal", sa.Text, nullable=False),
    sa.Column("token", sa.Text, nullable=False, server_default=""),
    sa.Column("auth_scheme", sa.Text, nullable=False, server_default=""),
    sa.Column("last_state", sa.Text, nullable=False, server_default=""),
    sa.Column("last_error", sa.Text, nullable=False, server_default=""),
    sa.Column(
        "created_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
    ),
    sa.Column("done_at", sa.DateTime(timezone=True)),
    sa.Column("leased_by", sa.Text),
    sa.Column("lease_until", sa.DateTime(timezone=True)),
    sa.UniqueConstraint("call_id", "config_id", name="a2a_push_configs_task_id"),
)
