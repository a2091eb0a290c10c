"""The capability file a command runs with (T3): the execution's current capability,
kept in the call folder while the command runs, mode 0600, rewritten at each heartbeat.

A command reads it (`AGENTWORKS_CAPABILITY_FILE`) to act on its own call past the first
lease (`AGENTWORKS_CAPABILITY` holds the token of the command's start only); the runner
removes it when the command ends, before the folder is uploaded.
"""

from __future__ import annotations

import contextlib
import os
import pathlib

# In the call folder; a dot file, removed before the upload, so never an output.
FILE_NAME = ".agentworks-capability"


def write(path: pathlib.Path, token: str, owner: int | None = None) -> None:
    """Replace the file at `path` with `token`, readable by its owner only, atomically
    (a reader sees the old token or the new one, never a part). `owner`: the uid the
    command runs as when it is not this process's (a sandbox's user, T6)."""
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(descriptor, 0o600)
        if owner is not None and owner != os.geteuid():
            os.fchown(descriptor, owner, -1)
        os.write(descriptor, token.encode())
    finally:
        os.close(descriptor)
    os.replace(temporary, path)


def remove(path: pathlib.Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
