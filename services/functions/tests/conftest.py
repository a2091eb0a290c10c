"""The functions service in-process, clients per principal, crew:demo and its functions
(defined once in `tests/fixtures/functions.py`, shared with the runtime SDK's tests)."""

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
    turn_caller,
)
