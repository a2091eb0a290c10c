"""Named queries (issue 36): each service's SQL in one queries.sql, procrastinate's
shape, run on `Database.raw()` connections (P1)."""

from __future__ import annotations

import pytest

from agentworks.server.db import Database
from agentworks.server.queries import Queries, parse_queries

TEXT = """-- A file's own comment.

-- ===================================== a section
-- one --
-- What it does.
SELECT %(x)s::int AS x;

-- many (prepared) --
SELECT g FROM generate_series(1, %(n)s) g ORDER BY g
-- ===================================== another section
"""


def test_a_queries_file_is_named_statements_with_their_descriptions_P1():
    """P1: headers name the statements; descriptions and section lines are not part of
    them; `(prepared)` marks a hot statement, the others are never prepared."""
    queries = parse_queries(TEXT)
    assert queries["one"].text == "SELECT %(x)s::int AS x"
    assert queries["one"].prepare is False
    assert queries["many"].text == "SELECT g FROM generate_series(1, %(n)s) g ORDER BY g"
    assert queries["many"].prepare is None


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("SELECT 1;\n-- a --\nSELECT 2", "outside any"),
        ("-- a --\n-- only a description\n", "has no statement"),
        ("-- a --\nSELECT 1;\n-- a --\nSELECT 2", "defined twice"),
    ],
)
def test_a_malformed_queries_file_is_refused_when_loaded_P1(text, words):
    """P1: a statement without a name, a name without a statement or a name twice fails
    at import, not in a request."""
    with pytest.raises(ValueError, match=words):
        parse_queries(text, "test.sql")


async def test_named_queries_run_on_raw_connections_P1(database_url):
    """P1: one, all, value, execute and execute_many on a `Database.raw()` connection."""
    queries = Queries(parse_queries(TEXT), "test")
    db = Database(database_url, pool_size=1)
    try:
        async with db.raw() as pg:
            assert (await queries.one(pg, "one", {"x": 7})).x == 7
            assert [r.g for r in await queries.all(pg, "many", {"n": 3})] == [1, 2, 3]
            assert await queries.value(pg, "many", {"n": 0}) is None
            assert await queries.execute(pg, "many", {"n": 2}) == 2
            await queries.execute_many(pg, "one", [{"x": 1}, {"x": 2}])
        with pytest.raises(KeyError, match="no query 'other' in test"):
            queries["other"]
    finally:
        await db.close()
