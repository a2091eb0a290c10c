"""The functions schema as SQLAlchemy Core tables (kept equal to migrations/ by a test)."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY, BYTEA, JSONB, UUID

metadata = sa.MetaData(schema="functions")
TS = sa.DateTime(timezone=True)

targets = sa.Table(
    "targets",
    metadata,
    sa.Column("kind", sa.Text, primary_key=True),
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("owner", sa.Text, nullable=False),
    sa.Column("running_limit", sa.Integer, nullable=False, server_default="0"),
    sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
    sa.Column("updated_at", TS, nullable=False, server_default=sa.func.now()),
)

functions = sa.Table(
    "functions",
    metadata,
    sa.Column("target_kind", sa.Text, primary_key=True),
    sa.Column("target_name", sa.Text, primary_key=True),
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("description", sa.Text, nullable=False, server_default=""),
    sa.Column("input_schema", JSONB, nullable=False),
    sa.Column("output_schema", JSONB),
    sa.Column("allowed_callers", ARRAY(sa.Text), nullable=False, server_default="{}"),
    sa.Column("starts_work", sa.Boolean, nullable=False, server_default="false"),
    sa.Column("workflow", JSONB),
    sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
    sa.Column("updated_at", TS, nullable=False, server_default=sa.func.now()),
)

calls = sa.Table(
    "calls",
    metadata,
    sa.Column("id", UUID, primary_key=True),
    sa.Column("target_kind", sa.Text, nullable=False),
    sa.Column("target_name", sa.Text, nullable=False),
    sa.Column("function", sa.Text, nullable=False),
    sa.Column("caller", sa.Text, nullable=False),
    sa.Column("inputs", JSONB, nullable=False),
    sa.Column("description", sa.Text, nullable=False, server_default=""),
    sa.Column("output_schema", JSONB),
    sa.Column("starts_work", sa.Boolean, nullable=False, server_default="false"),
    sa.Column("workflow", JSONB),
    sa.Column("variables", JSONB),
    sa.Column("run_id", UUID),
    sa.Column("source", JSONB),
    sa.Column("submission_key", sa.Text),
    sa.Column("request_hash", sa.Text, nullable=False),
    sa.Column("notify_conversation_id", UUID),
    sa.Column("status", sa.Text, nullable=False, server_default="running"),
    sa.Column("progress", sa.Text, nullable=False, server_default=""),
    sa.Column("runtime", sa.Text),
    sa.Column("claimed_at", TS),
    sa.Column("lease_expires_at", TS),
    sa.Column("message_count", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("event_count", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("step_count", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("question_count", sa.Integer, nullable=False, server_default="0"),
    sa.Column("last_report_seq", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("correction_turns", sa.Integer, nullable=False, server_default="0"),
    sa.Column("correction_prompt", sa.Text),
    sa.Column("answer", sa.Text, nullable=False, server_default=""),
    sa.Column("has_result", sa.Boolean, nullable=False, server_default="false"),
    sa.Column("result", JSONB(none_as_null=True)),
    sa.Column("error", sa.Text, nullable=False, server_default=""),
    sa.Column("version", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
    sa.Column("ended_at", TS),
    sa.Column("traceparent", sa.Text, nullable=False, server_default=""),
    # The execution whose capability made the call (T3, L8; migration 0010).
    sa.Column("source_call_id", UUID),
    # The end's number among the caller's calls' ends (N1: WatchCallEnds; migration 0013).
    sa.Column("end_seq", sa.BigInteger),
    # When the call last changed: set by a trigger whenever version increases (0014).
    sa.Column("updated_at", TS, nullable=False, server_default=sa.func.now()),
)

# Each caller's last end number, kept by the trigger that numbers ends (migration 0013).
caller_ends = sa.Table(
    "caller_ends",
    metadata,
    sa.Column("caller", sa.Text, primary_key=True),
    sa.Column("last_end", sa.BigInteger, nullable=False),
)

# The running, unclaimed calls, kept by triggers on calls (migration 0011): what a
# claim takes the oldest of.
queued_calls = sa.Table(
    "queued_calls",
    metadata,
    sa.Column("call_id", UUID, primary_key=True),
    sa.Column("target_kind", sa.Text, nullable=False),
    sa.Column("target_name", sa.Text, nullable=False),
    sa.Column("created_at", TS, nullable=False),
)

execution_messages = sa.Table(
    "execution_messages",
    metadata,
    sa.Column("call_id", UUID, primary_key=True),
    sa.Column("index", sa.BigInteger, primary_key=True),
    sa.Column("role", sa.Text, nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
)

execution_events = sa.Table(
    "execution_events",
    metadata,
    sa.Column("call_id", UUID, primary_key=True),
    sa.Column("index", sa.BigInteger, primary_key=True),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("text", sa.Text, nullable=False, server_default=""),
    sa.Column("tool_name", sa.Text, nullable=False, server_default=""),
    sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
)

# The sequences of the reports stored per call: a report whose sequence is here is a retry.
execution_reports = sa.Table(
    "execution_reports",
    metadata,
    sa.Column("call_id", UUID, primary_key=True),
    sa.Column("sequence", sa.BigInteger, primary_key=True),
)

workflow_steps = sa.Table(
    "workflow_steps",
    metadata,
    sa.Column("call_id", UUID, primary_key=True),
    sa.Column("index", sa.BigInteger, primary_key=True),
    sa.Column("step", sa.Text, nullable=False),
    sa.Column("group_name", sa.Text, nullable=False, server_default=""),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("detail", sa.Text, nullable=False, server_default=""),
    sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
)

questions = sa.Table(
    "questions",
    metadata,
    sa.Column("call_id", UUID, primary_key=True),
    sa.Column("ask_id", sa.Text, primary_key=True),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("question", sa.Text, nullable=False),
    sa.Column("reply", sa.Text),
    sa.Column("answered_by", sa.Text),
    sa.Column("asked_at", TS, nullable=False, server_default=sa.func.now()),
    sa.Column("answered_at", TS),
    sa.Column("withdrawn_at", TS),
    # The answers the question offers; empty: any text (F11; migration 0014).
    sa.Column("choices", ARRAY(sa.Text), nullable=False, server_default="{}"),
)

blobs = sa.Table(
    "blobs",
    metadata,
    sa.Column("id", UUID, primary_key=True),
    sa.Column("size", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("sha256", sa.Text),
    sa.Column("complete", sa.Boolean, nullable=False, server_default="false"),
    sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
)

blob_chunks = sa.Table(
    "blob_chunks",
    metadata,
    sa.Column("blob_id", UUID, primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True),
    sa.Column("data", BYTEA, nullable=False),
)

files = sa.Table(
    "files",
    metadata,
    sa.Column("call_id", UUID, primary_key=True),
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("blob_id", UUID, nullable=False),
    sa.Column("size", sa.BigInteger, nullable=False),
    sa.Column("media_type", sa.Text, nullable=False, server_default="application/octet-stream"),
    sa.Column("sha256", sa.Text, nullable=False),
    sa.Column("is_text", sa.Boolean, nullable=False),
    sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
)

notices = sa.Table(
    "notices",
    metadata,
    sa.Column("call_id", UUID, primary_key=True),
    sa.Column("conversation_id", UUID, nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("attributes", JSONB, nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
    sa.Column("next_attempt_at", TS, nullable=False, server_default=sa.func.now()),
    sa.Column("delivered_at", TS),
    sa.Column("failed_at", TS),
    sa.Column("last_error", sa.Text),
    sa.Column("created_at", TS, nullable=False, server_default=sa.func.now()),
    sa.Column("last_error_code", sa.Text),
    sa.Column("last_error_reason", sa.Text),
)
