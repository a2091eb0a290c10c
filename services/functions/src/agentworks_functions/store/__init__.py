"""SQL for the functions use cases: one method per use case, each one short transaction.

Concurrency rests on PostgreSQL alone (P3):

- F5 running limit: a new call is inserted, then the target row is locked
  (`FOR NO KEY UPDATE`, which does not conflict with the key-share lock the insert's
  foreign key took) and the target's open calls are counted. Concurrent calls on one
  target serialize on that lock and each count sees every committed call, so the limit
  holds exactly across replicas. Over the limit the transaction rolls back: nothing stored.
- F6 dedup: the unique index on (caller, submission_key). A concurrent twin blocks on the
  index entry until the first commits, then finds its row — before the limit is checked,
  so a retry recovers its call even when the target is busy.
- Each call row is locked (`FOR UPDATE`) for every change to its execution; per-call
  message, event and step indexes are assigned under that lock. Every end of a call is an
  `UPDATE ... WHERE status IN (open)`, so a call ends exactly once, and the completion
  notice (F13) is written in that same transaction.
- `pg_notify` (sent at commit) wakes claims, status long-polls, AskInput waits and the
  notice worker on every replica."""

from __future__ import annotations

from agentworks_functions.store.calls import CallQueries
from agentworks_functions.store.declarations import DeclarationQueries
from agentworks_functions.store.executions import ExecutionQueries
from agentworks_functions.store.files import FileQueries
from agentworks_functions.store.listing import ListingQueries
from agentworks_functions.store.notices import NoticeQueries
from agentworks_functions.store.rows import (
    CALL_CHANNEL,
    DIFFERENT_CALL,
    EXECUTION_CHANNEL,
    NOTICE_CHANNEL,
    PAGE_TEXT_BUDGET,
    Claim,
    busy,
    call_ended,
    call_not_found,
    ended_key,
    ended_message,
)
from agentworks_functions.store.sql import BUSY_SQLSTATE
from agentworks_functions.store.watching import WatchQueries, ends_key


class FunctionsStore(
    DeclarationQueries,
    CallQueries,
    ExecutionQueries,
    FileQueries,
    NoticeQueries,
    ListingQueries,
    WatchQueries,
):
    """All SQL of the functions service."""


__all__ = [
    "BUSY_SQLSTATE",
    "CALL_CHANNEL",
    "DIFFERENT_CALL",
    "EXECUTION_CHANNEL",
    "NOTICE_CHANNEL",
    "PAGE_TEXT_BUDGET",
    "Claim",
    "FunctionsStore",
    "busy",
    "call_ended",
    "call_not_found",
    "ended_key",
    "ended_message",
    "ends_key",
]
