"""Fixtures shared by every test in the repository, as plugins.

Database fixtures (`database_url`, `signing_keys`, `identity`) come from the
`agentworks.server.testing` plugin. The services started in-process (`start_messaging`,
`messaging`, `start_functions`, `start_scheduler`) come from `tests.fixtures.services`;
the gateway stack (gateway, tokens, CLI, MCP sessions), for the gateway and CLI tests,
from `tests.fixtures.gateway`; throwaway CAs and certificates (`pki`, `foreign_pki`, T5)
from `tests.fixtures.tls`; the web console's suite, browser and screenshots (`console_suite`,
`browser`, `screenshot`, V6) from `tests.fixtures.console`.
"""

from __future__ import annotations

pytest_plugins = [
    "tests.fixtures.services",
    "tests.fixtures.gateway",
    "tests.fixtures.tls",
    "tests.fixtures.console",
]
