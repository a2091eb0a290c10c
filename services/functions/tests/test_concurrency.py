"""The running limit and retry dedup under concurrency, across two replicas (F5, F6, P3)."""

from __future__ import annotations

import asyncio
import json

import psycopg

from agentworks.core import errors
from agentworks.server import shares as shares_module


async def count_calls(database_url: str) -> tuple[int, int]:
    """(calls, open calls) stored."""
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        row = await (
            await conn.execute(
                "SELECT count(*), count(*) FILTER (WHERE status IN "
                "('running', 'waiting_for_input')) FROM functions.calls"
            )
        ).fetchone()
    assert row is not None
    return row[0], row[1]


async def test_100_concurrent_calls_on_two_replicas_respect_a_limit_of_5_exactly_F5_P3(
    clients, operator, echo, functions, start_functions, database_url, monkeypatch
):
    """F5 P3: 100 racing calls over two replicas -> exactly 5 accepted, 95 busy, 5 rows."""
    await operator.register_target("crew:demo", owner="user:owner", running_limit=5)
    # Both replicas run in this process and so share one table of principal shares (B7):
    # give alice the open requests two replica processes would give her, or a loaded
    # machine keeps more than 64 of her 100 calls open at once and some are refused by
    # her share instead of the running limit. The table is the process's, read once (a
    # replica started in-process does not read it again): replaced here, put back after.
    monkeypatch.setenv("AGENTWORKS_PRINCIPAL_SHARES", json.dumps({"user:alice": {"requests": 128}}))
    monkeypatch.setattr(shares_module, "_shares", shares_module.Shares.from_env())
    second = await start_functions()
    replicas = [
        await clients("user:alice", address=functions.address),
        await clients("user:alice", address=second.address),
    ]
    results = await asyncio.gather(
        *(replicas[i % 2].call("crew:demo", echo, {"text": f"call {i}"}) for i in range(100)),
        return_exceptions=True,
    )
    accepted = [r for r in results if not isinstance(r, BaseException)]
    busy = [r for r in results if isinstance(r, errors.Busy)]
    others = [r for r in results if isinstance(r, BaseException) and not isinstance(r, errors.Busy)]
    assert others == []
    assert len(accepted) == 5 and len(busy) == 95
    assert len({r.call_id for r in accepted}) == 5
    # Each busy one is refused by the running limit, or (B7) earlier by alice's share of
    # a replica's check workers: 50 of her calls at once on each replica.
    checks = [b for b in busy if b.metadata.get("share") == "check_workers"]
    odd = [(b.reason, b.message) for b in busy if b not in checks]
    odd = [o for o in odd if o[0] != errors.Reason.RUNNING_LIMIT]
    assert not odd, odd[:3]
    assert all(b.reason == errors.Reason.PRINCIPAL_SHARE for b in checks)
    assert all("running limit is 5" in b.message for b in busy if b not in checks)
    assert await count_calls(database_url) == (5, 5)


async def test_50_concurrent_duplicate_submissions_make_one_call_F6_P3(
    clients, echo, functions, start_functions, database_url
):
    """F6 P3: 50 racing retries with one submission_id over two replicas -> one call."""
    second = await start_functions()
    replicas = [
        await clients("agent:alpha/scout", address=functions.address),
        await clients("agent:alpha/scout", address=second.address),
    ]
    results = await asyncio.gather(
        *(
            replicas[i % 2].call("crew:demo", echo, {"text": "once"}, submission_id="retry-1")
            for i in range(50)
        )
    )
    assert len({r.call_id for r in results}) == 1
    assert sum(r.created for r in results) == 1
    assert await count_calls(database_url) == (1, 1)
