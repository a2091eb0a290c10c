"""Named queries: a service's SQL in one `queries.sql`, run on `Database.raw()` connections.

The file has procrastinate's shape: each statement under a header line naming it, a few
comment lines saying what it does, then the statement itself up to the next header::

    -- read_inbox --
    -- A page of an inbox's messages.
    SELECT * FROM messaging.messages WHERE inbox_id = %(inbox_id)s ...

Parameters are psycopg's `%(name)s` (a literal `%` is written `%%`); what is written is
what runs. A header `-- name (prepared) --` marks a hot statement: psycopg prepares it
on a connection after its fifth run there (planned once per connection; such statements
write the constants a partial index needs into their text). Every other statement is
never prepared, so PostgreSQL plans it with its parameter values each time (a generic
plan could not use a partial index whose predicate a parameter must satisfy, nor fold
`CAST(%(x)s AS text) IS NULL OR ...` filters).

The file is read once, when the store's module is imported (`Queries.load`); a name that
is not in it fails there or in the service's query test, not in a request.
"""

from __future__ import annotations

import importlib.resources
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.rows import namedtuple_row

# Set by `agentworks.server.tracing.trace_database` when tracing is on: then every named
# query runs in a span of its own (its name, its statement), as SQLAlchemy's
# instrumentation gave each statement of the engine.
tracer: Any = None

_HEADER = re.compile(r"^-- ([a-z][a-z0-9_]*)( \(prepared\))? --[ \t]*$", re.MULTILINE)


@dataclass(frozen=True)
class Query:
    name: str
    text: str
    # psycopg's `prepare`: None after its threshold (hot statements), False never.
    prepare: bool | None


def parse_queries(text: str, source: str = "queries.sql") -> dict[str, Query]:
    """The named statements of a queries file's text (see the module's docstring)."""
    found: dict[str, Query] = {}
    headers = list(_HEADER.finditer(text))
    preamble = text[: headers[0].start()] if headers else text
    if not headers or any(
        line.strip() and not line.startswith("--") for line in preamble.splitlines()
    ):
        raise ValueError(f"{source}: a statement outside any `-- name --` header")
    for header, following in zip(headers, [*headers[1:], None], strict=True):
        name = header[1]
        body = text[header.end() : following.start() if following else len(text)]
        lines = body.strip("\n").splitlines()
        while lines and (lines[0].startswith("--") or not lines[0].strip()):
            lines.pop(0)  # the description
        while lines and (lines[-1].startswith("--") or not lines[-1].strip()):
            lines.pop()  # a section heading before the next query
        statement = "\n".join(lines).strip().rstrip(";").strip()
        if not statement:
            raise ValueError(f"{source}: query {name!r} has no statement")
        if name in found:
            raise ValueError(f"{source}: query {name!r} is defined twice")
        found[name] = Query(name, statement, None if header[2] else False)
    return found


def _span(query: Query) -> Any:
    """The span a named query runs in when tracing is on."""
    return tracer.start_as_current_span(
        query.name,
        attributes={
            "db.system": "postgresql",
            "db.operation.name": query.name,
            "db.statement": query.text,
        },
    )


async def _execute(cur: psycopg.AsyncCursor[Any], query: Query, params: Any) -> None:
    """Run `query` on `cur`, in a span of its own when tracing is on; with tracing off
    (the usual case) no context manager is entered per statement."""
    if tracer is None:
        await cur.execute(query.text, params, prepare=query.prepare)
        return
    with _span(query):
        await cur.execute(query.text, params, prepare=query.prepare)


class Queries:
    """The named statements of one service, and the ways to run one on a connection.

    Each runner takes a psycopg connection from `Database.raw()` (autocommit, or one
    transaction with `raw(transaction=True)`), so every statement of a store runs on the
    one pool, traced as the hot paths are. Rows are named tuples.
    """

    def __init__(self, queries: dict[str, Query], source: str) -> None:
        self._queries = queries
        self.source = source

    @classmethod
    def load(cls, package: str, resource: str = "queries.sql") -> Queries:
        """The queries of `package`'s `queries.sql` (shipped inside the package)."""
        text = importlib.resources.files(package).joinpath(resource).read_text()
        source = f"{package}/{resource}"
        return cls(parse_queries(text, source), source)

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self._queries)

    def __getitem__(self, name: str) -> Query:
        try:
            return self._queries[name]
        except KeyError:
            raise KeyError(f"no query {name!r} in {self.source}") from None

    def sql(self, name: str) -> str:
        """The text of a query (for tests that EXPLAIN or PREPARE it)."""
        return self[name].text

    async def all(
        self, conn: psycopg.AsyncConnection[Any], name: str, params: Any = None
    ) -> list[Any]:
        """Every row of a query."""
        query = self[name]
        async with conn.cursor(row_factory=namedtuple_row) as cur:
            await _execute(cur, query, params)
            return await cur.fetchall()

    async def one(self, conn: psycopg.AsyncConnection[Any], name: str, params: Any = None) -> Any:
        """The first row of a query, or None."""
        query = self[name]
        async with conn.cursor(row_factory=namedtuple_row) as cur:
            await _execute(cur, query, params)
            return await cur.fetchone()

    async def value(self, conn: psycopg.AsyncConnection[Any], name: str, params: Any = None) -> Any:
        """The first column of the first row of a query, or None when it has no row."""
        query = self[name]
        async with conn.cursor() as cur:
            await _execute(cur, query, params)
            row = await cur.fetchone()
            return None if row is None else row[0]

    async def execute(
        self, conn: psycopg.AsyncConnection[Any], name: str, params: Any = None
    ) -> int:
        """Run a query for its effect: the number of rows it changed."""
        query = self[name]
        async with conn.cursor() as cur:
            await _execute(cur, query, params)
            return cur.rowcount

    async def execute_many(
        self, conn: psycopg.AsyncConnection[Any], name: str, params: Iterable[Any]
    ) -> None:
        """Run a query once per parameter set (psycopg pipelines them: one round trip)."""
        query = self[name]
        async with conn.cursor() as cur:
            if tracer is None:
                await cur.executemany(query.text, params)
            else:
                with _span(query):
                    await cur.executemany(query.text, params)
