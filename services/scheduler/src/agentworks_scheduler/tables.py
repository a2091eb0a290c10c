"""The scheduler schema as SQLAlchemy Core tables (kept equal to migrations/ by a test)."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import UUID

metadata = sa.MetaData(schema="scheduler")
TS = sa.DateTime(timezone=True)

wake_ups = sa.Table(
    "wake_ups",
    metadata,
    sa.Column("id", UUID, primary_key=True),
    sa.Column("seq", sa.BigInteger, sa.Identity(always=True), nullable=False),
    sa.Column("conversation_id", UUID, nullable=False),
    sa.Column("product", sa.Text, nullable=False, server_default=""),
    sa.Column("note", sa.Text, nullable=False, server_default=""),
    sa.Column("due_at", TS, nullable=False),
    sa.Column("status", sa.Text, nullable=False, server_default="pending"),
    sa.Column("created_by", sa.Text, nullable=False),
    sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
    sa.Column("updated_at", TS, nullable=False, server_default=sa.func.now()),
    sa.Column("fired_at", TS),
    sa.Column("delivery_id", UUID),
    sa.Column("late_seconds", sa.Double),
    sa.Column("error", sa.Text),
    sa.Column("submission_id", sa.Text),
    sa.Column("request_hash", sa.Text),
)

schedules = sa.Table(
    "schedules",
    metadata,
    sa.Column("id", UUID, primary_key=True),
    sa.Column("seq", sa.BigInteger, sa.Identity(always=True), nullable=False),
    sa.Column("name", sa.Text, nullable=False, server_default=""),
    sa.Column("conversation_id", UUID, nullable=False),
    sa.Column("product", sa.Text, nullable=False, server_default=""),
    sa.Column("prompt", sa.Text, nullable=False),
    sa.Column("cron", sa.Text),
    sa.Column("interval_seconds", sa.BigInteger),
    sa.Column("time_zone", sa.Text, nullable=False, server_default="UTC"),
    sa.Column("anchor_at", TS, nullable=False),
    sa.Column("paused", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("next_fire_at", TS, nullable=False),
    sa.Column("last_fired_at", TS),
    sa.Column("fire_count", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("created_by", sa.Text, nullable=False),
    sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
    sa.Column("updated_at", TS, nullable=False, server_default=sa.func.now()),
    sa.Column("last_error", sa.Text),
    sa.Column("submission_id", sa.Text),
    sa.Column("request_hash", sa.Text),
)

pauses = sa.Table(
    "pauses",
    metadata,
    sa.Column("product", sa.Text, primary_key=True),
    sa.Column("reason", sa.Text, nullable=False, server_default=""),
    sa.Column("paused_by", sa.Text, nullable=False),
    sa.Column("paused_at", TS, nullable=False, server_default=sa.func.now()),
)

pause_gate = sa.Table(
    "pause_gate",
    metadata,
    sa.Column("id", sa.SmallInteger, primary_key=True),
    sa.Column("changed_at", TS, nullable=False, server_default=sa.func.now()),
)

webhooks = sa.Table(
    "webhooks",
    metadata,
    sa.Column("id", UUID, primary_key=True),
    sa.Column("seq", sa.BigInteger, sa.Identity(always=True), nullable=False),
    sa.Column("name", sa.Text, nullable=False, server_default=""),
    sa.Column("conversation_id", UUID, nullable=False),
    sa.Column("product", sa.Text, nullable=False, server_default=""),
    sa.Column("salt", sa.Text, nullable=False),
    sa.Column("secret_fingerprint", sa.Text, nullable=False),
    sa.Column("created_by", sa.Text, nullable=False),
    sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
    sa.Column("secret_rotated_at", TS),
    sa.Column("submission_id", sa.Text),
    sa.Column("request_hash", sa.Text),
)

webhook_receipts = sa.Table(
    "webhook_receipts",
    metadata,
    sa.Column("webhook_id", UUID, primary_key=True),
    sa.Column("delivery_key", sa.Text, primary_key=True),
    sa.Column("signature", sa.Text, nullable=False),
    sa.Column("body_sha256", sa.Text, nullable=False),
    sa.Column("delivery_id", UUID),
    sa.Column("received_at", TS, nullable=False, server_default=sa.func.now()),
)
