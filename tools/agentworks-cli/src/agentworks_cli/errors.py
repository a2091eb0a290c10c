"""The CLI's exit codes (documented in docs/cli.md) and its usage error.

0 ok · 1 other error · 2 usage or invalid argument · 3 authentication or permission
4 not found · 5 busy (limit reached) · 6 refused (conflict, failed precondition)
7 unavailable (gateway or service unreachable, deadline exceeded)
8 a waited-for function call ended failed, interrupted or cancelled
130 interrupted (Ctrl-C), as shells report a command SIGINT ended
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_AUTH = 3
EXIT_NOT_FOUND = 4
EXIT_BUSY = 5
EXIT_REFUSED = 6
EXIT_UNAVAILABLE = 7
EXIT_CALL_ENDED = 8
EXIT_INTERRUPTED = 130

# gRPC status name (as the API reports it) -> exit code.
EXIT_CODES = {
    "INVALID_ARGUMENT": EXIT_USAGE,
    "OUT_OF_RANGE": EXIT_USAGE,
    "UNAUTHENTICATED": EXIT_AUTH,
    "PERMISSION_DENIED": EXIT_AUTH,
    "NOT_FOUND": EXIT_NOT_FOUND,
    "RESOURCE_EXHAUSTED": EXIT_BUSY,
    "ALREADY_EXISTS": EXIT_REFUSED,
    "FAILED_PRECONDITION": EXIT_REFUSED,
    "ABORTED": EXIT_REFUSED,
    "UNAVAILABLE": EXIT_UNAVAILABLE,
    "DEADLINE_EXCEEDED": EXIT_UNAVAILABLE,
}

EXIT_CODE_DOC = [
    (EXIT_OK, "success"),
    (EXIT_ERROR, "any other error (INTERNAL, UNKNOWN, an unexpected answer)"),
    (EXIT_USAGE, "usage error, or the request was refused as INVALID_ARGUMENT"),
    (EXIT_AUTH, "no token, unknown or revoked token (UNAUTHENTICATED), or PERMISSION_DENIED"),
    (EXIT_NOT_FOUND, "NOT_FOUND (unknown inbox, target, token, call ...)"),
    (EXIT_BUSY, "RESOURCE_EXHAUSTED: a limit is reached, retry later"),
    (EXIT_REFUSED, "ALREADY_EXISTS or FAILED_PRECONDITION (e.g. agent messaging is off)"),
    (EXIT_UNAVAILABLE, "the gateway or a service is unreachable (UNAVAILABLE, DEADLINE_EXCEEDED)"),
    (
        EXIT_CALL_ENDED,
        "`call --wait`: the function call ended failed, interrupted or cancelled",
    ),
    (EXIT_INTERRUPTED, "interrupted by Ctrl-C (any command, `messages read --follow` too)"),
]


class UsageError(Exception):
    """A problem with how the CLI was called or configured (before any request)."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code
