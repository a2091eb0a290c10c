"""Fixtures of the runtime SDK's tests against an in-process functions service: the same
setup as the functions service's own tests (`tests/fixtures/functions.py`). Test modules
that need another setup define their own fixtures."""

from tests.fixtures.functions import (  # noqa: F401 - fixtures, used by name
    clients,
    demo,
    echo,
    echo_schema,
    functions,
    operator,
    owner,
    runtime,
    summarize,
    summary_schema,
)
