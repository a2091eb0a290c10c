"""A runtime's identity from its runtime credential (T2).

A runtime holds one runtime credential (`awr_...`), made by a target's owner or the
operator (`agentworks runtimes credentials create`), bound to one agent principal and the
targets it serves. It signs nothing: the gateway exchanges it (`POST /api/v1/identity`)
for a short-lived identity scoped to those targets, and `CredentialIdentity` renews that
identity before it expires, so a handler never notices. A revoked or expired credential
is refused at the next exchange; identities already issued end with their lifetime.

`CredentialIdentity` has the interface of `identity.Minter` (`principal`, `token()`,
`metadata()`), so every typed client takes it as its `identity`.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

from agentworks.client.errors import Unauthenticated, Unavailable
from agentworks.client.identity import METADATA_KEY

EXCHANGE_PATH = "/api/v1/identity"
CREDENTIAL_PREFIX = "awr_"


@dataclass(frozen=True)
class Exchanged:
    """What one exchange gave: the identity, whom it names, its targets and expiry."""

    token: str
    principal: str
    targets: tuple[str, ...]
    expires_at: float


def exchange(gateway_url: str, credential: str, *, timeout: float = 10.0) -> Exchanged:
    """Exchange `credential` at the gateway for a scoped identity (blocking).

    Unauthenticated when the gateway refuses the credential (unknown, revoked, expired:
    its message says which); Unavailable when the gateway cannot be reached.
    """
    request = urllib.request.Request(
        gateway_url.rstrip("/") + EXCHANGE_PATH,
        data=b"{}",
        method="POST",
        headers={"Authorization": f"Bearer {credential}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read())["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = f"HTTP {exc.code}"
        if exc.code in (401, 403):
            raise Unauthenticated(f"runtime credential refused by the gateway: {message}") from None
        raise Unavailable(f"the gateway did not exchange the credential: {message}") from None
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        raise Unavailable(
            f"cannot reach the gateway at {gateway_url} to exchange the runtime credential "
            f"({exc}); is AGENTWORKS_GATEWAY_URL right?"
        ) from None
    return Exchanged(
        token=body["identity"],
        principal=body["principal"],
        targets=tuple(body.get("targets", ())),
        expires_at=float(body["expires_at"]),
    )


class CredentialIdentity:
    """Identities for a runtime, exchanged from its credential and renewed at half-life."""

    def __init__(self, gateway_url: str, credential: str, *, timeout: float = 10.0) -> None:
        if not credential.startswith(CREDENTIAL_PREFIX):
            raise ValueError(
                f"a runtime credential starts with {CREDENTIAL_PREFIX!r}: make one with "
                "`agentworks runtimes credentials create`"
            )
        self._gateway_url = gateway_url
        self._credential = credential
        self._timeout = timeout
        self._lock = threading.Lock()
        self._current: Exchanged | None = None
        self._renew_at = 0.0

    def _fresh(self) -> Exchanged:
        with self._lock:
            now = time.time()
            if self._current is None or now >= self._renew_at:
                current = exchange(self._gateway_url, self._credential, timeout=self._timeout)
                self._current = current
                self._renew_at = now + max(1.0, (current.expires_at - now) / 2)
            return self._current

    @property
    def principal(self) -> str:
        """The agent or workflow the credential is bound to (exchanges once if needed)."""
        return self._fresh().principal

    @property
    def targets(self) -> tuple[str, ...]:
        return self._fresh().targets

    def token(self) -> str:
        return self._fresh().token

    def metadata(self) -> tuple[tuple[str, str], ...]:
        return ((METADATA_KEY, self.token()),)
