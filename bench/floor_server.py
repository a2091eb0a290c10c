"""The RPC floors: methods on the same server stack as the services, doing the least.

Same `GrpcServer` (identity interceptor, metrics, options) as the services, with generic
methods on raw bytes (no protobuf, no validation, no bookkeeping):

- `Floor/Empty` does nothing, so "send throughput / floor" says what the messaging work
  itself costs.
- `Jobs/Call`, `Jobs/Claim` and `Jobs/Finish` are the shape of a call round trip at its
  cheapest (with FLOOR_DATABASE_URL): Call inserts a row and waits, in this process, for
  its end; Claim takes the next job from an in-process queue (a long-poll) and marks it
  running; Finish marks the job done and the next queued one running in one UPDATE and
  answers with it. Two requests and two statements per round trip under load, where the
  functions service makes two requests and four statements and validates, authorises,
  records and notifies. What it leaves out is what a real service needs (replicas, a
  claim that survives a restart, the call's rules), so it is a floor, not a peer.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator

import grpc
import psycopg

from agentworks.core.keys import TrustedKeys
from agentworks.server.db import libpq_url
from agentworks.server.rpc import GrpcServer
from agentworks.server.service import wait_for_signal

METHOD = "/agentworks.bench.Floor/Empty"
JOBS = "agentworks.bench.Jobs"
CALL, CLAIM, FINISH = (f"/{JOBS}/{name}" for name in ("Call", "Claim", "Finish"))
POOL_SIZE = 10  # the services' default pool size
CLAIM_WAIT_SECONDS = 20.0


async def _empty(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    return b""


class Jobs:
    """A call round trip with nothing but its requests and statements."""

    def __init__(self, database_url: str) -> None:
        self.url = libpq_url(database_url)
        self.free: asyncio.Queue[psycopg.AsyncConnection] = asyncio.Queue()
        self.queued: asyncio.Queue[int] = asyncio.Queue()
        self.ends: dict[int, asyncio.Future[None]] = {}

    async def open(self) -> None:
        for _ in range(POOL_SIZE):
            self.free.put_nowait(await psycopg.AsyncConnection.connect(self.url, autocommit=True))
        async with self._conn() as conn:
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS bench_jobs "
                "(id bigserial PRIMARY KEY, status text NOT NULL, body text NOT NULL)"
            )

    @contextlib.asynccontextmanager
    async def _conn(self) -> AsyncIterator[psycopg.AsyncConnection]:
        conn = await self.free.get()
        try:
            yield conn
        finally:
            self.free.put_nowait(conn)

    async def call(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        async with self._conn() as conn:
            cur = await conn.execute(
                "INSERT INTO bench_jobs (status, body) VALUES ('pending', %s) RETURNING id",
                (request.decode(),),
            )
            row = await cur.fetchone()
        assert row is not None  # INSERT ... RETURNING returns its row
        job = row[0]
        end = self.ends[job] = asyncio.get_running_loop().create_future()
        self.queued.put_nowait(job)
        try:
            await end
        finally:
            del self.ends[job]
        return b"completed"

    async def claim(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        try:
            job = await asyncio.wait_for(self.queued.get(), CLAIM_WAIT_SECONDS)
        except TimeoutError:
            return b""
        async with self._conn() as conn:
            await conn.execute("UPDATE bench_jobs SET status = 'running' WHERE id = %s", (job,))
        return str(job).encode()

    async def finish(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        job = int(request)
        after = None if self.queued.empty() else self.queued.get_nowait()
        async with self._conn() as conn:
            await conn.execute(
                "UPDATE bench_jobs SET status = CASE WHEN id = %s THEN 'done' ELSE 'running' "
                "END WHERE id = ANY(%s)",
                (job, [job] if after is None else [job, after]),
            )
        if (end := self.ends.get(job)) is not None and not end.done():
            end.set_result(None)
        return b"" if after is None else str(after).encode()

    def handler(self) -> grpc.GenericRpcHandler:
        return grpc.method_handlers_generic_handler(
            JOBS,
            {
                name: grpc.unary_unary_rpc_method_handler(method)
                for name, method in (
                    ("Call", self.call),
                    ("Claim", self.claim),
                    ("Finish", self.finish),
                )
            },
        )


async def main() -> None:
    handlers = [
        grpc.method_handlers_generic_handler(
            "agentworks.bench.Floor", {"Empty": grpc.unary_unary_rpc_method_handler(_empty)}
        )
    ]
    names = ["agentworks.bench.Floor"]
    if os.environ.get("FLOOR_JOBS") == "1":
        jobs = Jobs(os.environ["FLOOR_DATABASE_URL"])
        await jobs.open()
        handlers.append(jobs.handler())
        names.append(JOBS)
    server = GrpcServer(
        name="floor",
        listen=os.environ["FLOOR_LISTEN"],
        trusted_keys=TrustedKeys.load(os.environ["AGENTWORKS_TRUSTED_KEYS"]),
        register=lambda server: server.add_generic_rpc_handlers(tuple(handlers)),
        service_names=names,
    )
    await server.start()
    await wait_for_signal()
    await server.stop(1)


if __name__ == "__main__":
    asyncio.run(main())
