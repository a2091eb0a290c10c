"""The messaging schema as SQLAlchemy Core tables (kept equal to migrations/ by a test)."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import BYTEA, JSONB, UUID

metadata = sa.MetaData(schema="messaging")
TS = sa.DateTime(timezone=True)

targets = sa.Table(
    "targets",
    metadata,
    sa.Column("kind", sa.Text, primary_key=True),
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("owner", sa.Text, nullable=False),
    sa.Column("free_text_ask", sa.Boolean),
    sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
    sa.Column("updated_at", TS, nullable=False, server_default=sa.func.now()),
    sa.Column("a2a_card", sa.Boolean),  # NULL: never set, which means on (X1)
)

conversations = sa.Table(
    "conversations",
    metadata,
    sa.Column("id", UUID, primary_key=True),
    sa.Column("target_kind", sa.Text, nullable=False),
    sa.Column("target_name", sa.Text, nullable=False),
    sa.Column("started_by", sa.Text, nullable=False),
    sa.Column("last_position", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("pending_deliveries", sa.Integer, nullable=False, server_default="0"),
    sa.Column("oldest_pending_at", TS),
    sa.Column("active_turn_id", UUID),
    sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
    # L5: the conversation (and its target) whose turn started this one, if any.
    sa.Column("origin_conversation_id", UUID),
    sa.Column("origin_target_kind", sa.Text),
    sa.Column("origin_target_name", sa.Text),
    # B9: its place in the target's fair turn order while claimable (0005_fair_turns.sql).
    sa.Column("turn_at", TS),
)

inboxes = sa.Table(
    "inboxes",
    metadata,
    sa.Column("id", UUID, primary_key=True),
    sa.Column("conversation_id", UUID, nullable=False),
    sa.Column("principal", sa.Text, nullable=False),
    sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
)

messages = sa.Table(
    "messages",
    metadata,
    sa.Column("id", UUID, primary_key=True),
    sa.Column("conversation_id", UUID, nullable=False),
    sa.Column("position", sa.BigInteger, nullable=False),
    sa.Column("inbox_id", UUID, nullable=False),
    sa.Column("direction", sa.Text, nullable=False),
    sa.Column("sender", sa.Text, nullable=False),
    sa.Column("channel", sa.Text, nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("parts", JSONB),
    sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
)

submissions = sa.Table(
    "submissions",
    metadata,
    sa.Column("principal", sa.Text, primary_key=True),
    sa.Column("submission_id", sa.Text, primary_key=True),
    sa.Column("request_hash", sa.Text, nullable=False),
    sa.Column("message_id", UUID, nullable=False),
    sa.Column("conversation_id", UUID, nullable=False),
    sa.Column("inbox_id", UUID, nullable=False),
    sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
)

turns = sa.Table(
    "turns",
    metadata,
    sa.Column("id", UUID, primary_key=True),
    sa.Column("conversation_id", UUID, nullable=False),
    sa.Column("runtime", sa.Text, nullable=False),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("lease_expires_at", TS, nullable=False),
    sa.Column("claimed_at", TS, nullable=False, server_default=sa.func.now()),
    sa.Column("ended_at", TS),
    sa.Column("error", sa.Text, nullable=False, server_default=""),
)

deliveries = sa.Table(
    "deliveries",
    metadata,
    sa.Column("id", UUID, primary_key=True),
    sa.Column("conversation_id", UUID, nullable=False),
    sa.Column("position", sa.BigInteger, nullable=False),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("message_id", UUID),
    sa.Column("text", sa.Text, nullable=False, server_default=""),
    sa.Column("payload", BYTEA),
    sa.Column("attributes", JSONB),
    sa.Column("idempotency_key", sa.Text, unique=True),
    sa.Column("status", sa.Text, nullable=False, server_default="pending"),
    sa.Column("turn_id", UUID),
    sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
    sa.Column("traceparent", sa.Text, nullable=False, server_default=""),
)
