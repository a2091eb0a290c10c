"""The identity of a process holding a capability (T3): a command the runner started.

    from agentworks.client import FunctionsClient
    from agentworks.core.capability_identity import CapabilityIdentity

    identity = CapabilityIdentity.from_env()      # AGENTWORKS_CAPABILITY(_FILE)
    address = os.environ.get("AGENTWORKS_FUNCTIONS_ADDRESS", "127.0.0.1:50052")
    async with FunctionsClient(address, identity=identity) as functions:
        await functions.report(os.environ["AGENTWORKS_CALL_ID"], progress="half way")

It sends the capability as the request's identity, read again from the capability file
when the file changes (the runner rewrites it at each heartbeat as the lease renews), so
a long command keeps a valid one. It signs nothing: the process has no key.
"""

from __future__ import annotations

import os
import pathlib

from agentworks.core.capability import CAPABILITY_FILE_VARIABLE, CAPABILITY_VARIABLE
from agentworks.core.errors import Unauthenticated
from agentworks.core.identity import METADATA_KEY, Forwarded


class CapabilityIdentity(Forwarded):
    """Sends a capability token (from a file, kept current, or given once): a token
    someone else signed, sent on as it is, as `Forwarded` does."""

    def __init__(self, token: str = "", *, path: str | os.PathLike[str] | None = None) -> None:
        if not token and path is None:
            raise Unauthenticated(
                f"no capability: set {CAPABILITY_VARIABLE} or {CAPABILITY_FILE_VARIABLE} "
                "(the command runner does for the commands it starts)"
            )
        self._token = token
        self._path = pathlib.Path(path) if path is not None else None
        self._seen: tuple[int, int] | None = None

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> CapabilityIdentity:
        env = os.environ if environ is None else environ
        path = env.get(CAPABILITY_FILE_VARIABLE) or None
        return cls(env.get(CAPABILITY_VARIABLE, ""), path=path)

    def token(self) -> str:
        if self._path is not None:
            try:
                stat = self._path.stat()
                seen = (stat.st_mtime_ns, stat.st_size)
                if seen != self._seen:
                    self._token = self._path.read_text().strip() or self._token
                    self._seen = seen
            except OSError:
                pass  # gone: the command has ended, or the folder was removed; keep the last
        if not self._token:
            raise Unauthenticated(f"the capability file {self._path} is empty or unreadable")
        return self._token

    def metadata(self) -> tuple[tuple[str, str], ...]:
        return ((METADATA_KEY, self.token()),)
