"""A runtime's identity from a runtime credential (T2): exchanged at the gateway.

A runtime credential (`awr_` + 43 random characters, made by a target's owner or the
operator) is bound to one agent principal and the targets it serves. The runtime holds
no signing key: it sends the credential as a bearer token to `POST /api/v1/identity` of
the gateway and gets back a short-lived identity the gateway signed, scoped to those
targets (`targets` claim). `CredentialIdentity` does that exchange and renews the
identity at half its lifetime in a background thread, so the handlers never notice; it
offers the same `metadata()` as `Minter` to the typed clients.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agentworks.core import errors
from agentworks.core.identity import METADATA_KEY, Minter

CREDENTIAL_PREFIX = "awr_"
EXCHANGE_PATH = "/api/v1/identity"
# An identity is renewed this long before it expires at the latest, even when the
# background renewal failed: blocking the caller then is better than a refused call.
_RENEW_MARGIN_SECONDS = 5.0


@dataclass(frozen=True)
class Exchanged:
    """What one exchange returned."""

    token: str
    principal: str
    targets: tuple[str, ...]
    expires_at: float  # seconds since the epoch


def check_credential(credential: str) -> str:
    """The credential, stripped, if it looks like a runtime credential; else InvalidArgument."""
    credential = (credential or "").strip()
    if (
        not credential.startswith(CREDENTIAL_PREFIX)
        or len(credential) < len(CREDENTIAL_PREFIX) + 32
    ):
        raise errors.InvalidArgument(
            f"a runtime credential starts with {CREDENTIAL_PREFIX!r} and carries at least 32 "
            "random characters: create one with `agentworks runtimes credentials create`",
            reason=errors.Reason.CREDENTIALS_INVALID,
            metadata={"credential": "runtime credential"},
        )
    return credential


def exchange(
    gateway_url: str, credential: str, *, timeout: float = 10.0, ca_file: str | None = None
) -> Exchanged:
    """Trade `credential` for a signed identity at the gateway (blocking).

    Raises the gateway's refusal (Unauthenticated for an unknown, revoked or expired
    credential, saying which), or Unavailable when the gateway cannot be reached.
    """
    url = gateway_url.rstrip("/") + EXCHANGE_PATH
    request = urllib.request.Request(
        url,
        data=b"{}",
        method="POST",
        headers={"Authorization": f"Bearer {credential}", "Content-Type": "application/json"},
    )
    context = ssl.create_default_context(cafile=ca_file) if url.startswith("https:") else None
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
            body = json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        raise _refusal(exc) from None
    except (OSError, ValueError) as exc:
        raise errors.Unavailable(
            f"the gateway at {gateway_url} could not exchange the runtime credential ({exc}); "
            "check AGENTWORKS_GATEWAY_URL and retry shortly",
            reason=errors.Reason.UNREACHABLE,
            metadata={"url": gateway_url},
        ) from None
    return Exchanged(
        token=str(body["identity"]),
        principal=str(body["principal"]),
        targets=tuple(body.get("targets") or ()),
        expires_at=_seconds(body["expires_at"]),
    )


def _seconds(value: object) -> float:
    """An expiry as seconds since the epoch: RFC 3339 text (the gateway's) or a number."""
    if isinstance(value, int | float):
        return float(value)
    return datetime.fromisoformat(str(value)).timestamp()


def _refusal(exc: urllib.error.HTTPError) -> errors.AgentWorksError:
    try:
        error = json.loads(exc.read() or b"{}").get("error") or {}
    except ValueError:
        error = {}
    message = error.get("message") or f"the gateway answered {exc.code} {exc.reason}"
    # The gateway's reason and metadata (docs/errors.md), kept as they came.
    metadata = error.get("metadata")
    said: dict[str, Any] = {
        "reason": str(error.get("reason") or ""),
        "metadata": {str(k): str(v) for k, v in metadata.items()}
        if isinstance(metadata, dict)
        else None,
    }
    if exc.code == 401:
        return errors.Unauthenticated(message, **said)
    if exc.code == 403:
        return errors.PermissionDenied(message, **said)
    if exc.code in (400, 404):
        return errors.InvalidArgument(message, **said)
    return errors.Unavailable(f"{message}; retry shortly", **said)


class CredentialIdentity:
    """The identity of a runtime holding a runtime credential, renewed in the background.

    The first `metadata()` (or `principal`) exchanges the credential, blocking (`await
    prepare()` does it in a thread, for an event loop); from half
    the identity's lifetime on, a background thread exchanges it again while calls go on
    with the current one. Only when an identity is about to expire without a renewal does
    a call wait for one. With `expected_principal` the credential must be for it.
    """

    def __init__(
        self,
        gateway_url: str,
        credential: str,
        *,
        expected_principal: str = "",
        timeout: float = 10.0,
        ca_file: str | None = None,
    ) -> None:
        self._credential = check_credential(credential)
        if not gateway_url:
            raise errors.InvalidArgument(
                "a runtime credential needs the gateway to exchange it at: "
                "set AGENTWORKS_GATEWAY_URL (e.g. http://127.0.0.1:8080)",
                reason=errors.Reason.NOT_CONFIGURED,
                metadata={"setting": "AGENTWORKS_GATEWAY_URL"},
            )
        self.gateway_url = gateway_url
        self._expected = expected_principal
        self._timeout = timeout
        self._ca_file = ca_file
        self._lock = threading.Lock()
        self._current: Exchanged | None = None
        self._renew_at = 0.0
        self._renewing: threading.Thread | None = None
        self.last_error: errors.AgentWorksError | None = None

    def _exchange(self) -> Exchanged:
        result = exchange(
            self.gateway_url, self._credential, timeout=self._timeout, ca_file=self._ca_file
        )
        if self._expected and result.principal != self._expected:
            raise errors.Unauthenticated(
                f"the runtime credential is for {result.principal}, not for "
                f"{self._expected} (AGENTWORKS_RUNTIME_PRINCIPAL): use that principal's "
                "credential, or leave the principal unset",
                reason=errors.Reason.CREDENTIALS_INVALID,
                metadata={"credential": "runtime credential", "principal": result.principal},
            )
        now = time.time()
        with self._lock:
            self._current = result
            self._renew_at = now + max(0.0, result.expires_at - now) / 2
        return result

    def _renew_in_background(self) -> None:
        try:
            self._exchange()
            self.last_error = None
        except errors.AgentWorksError as exc:
            self.last_error = exc  # the next call retries; it blocks only near the expiry
            with self._lock:
                self._renew_at = time.time() + 1.0

    def current(self) -> Exchanged:
        """The current exchange, renewed as needed (see the class)."""
        now = time.time()
        current = self._current
        if current is None or now >= current.expires_at - _RENEW_MARGIN_SECONDS:
            return self._exchange()
        if now >= self._renew_at and not (self._renewing and self._renewing.is_alive()):
            self._renewing = threading.Thread(
                target=self._renew_in_background, name="agentworks-credential", daemon=True
            )
            self._renewing.start()
        return current

    async def prepare(self) -> Exchanged:
        """Exchange now (in a thread) unless a current identity is held: call it before
        the first request from an event loop, so the first exchange blocks no loop."""
        return await asyncio.to_thread(self.current)

    @property
    def principal(self) -> str:
        """The principal the credential is bound to (the expected one, when given: the
        first exchange checks it)."""
        return self._expected or self.current().principal

    @property
    def targets(self) -> tuple[str, ...]:
        """The targets the credential serves."""
        return self.current().targets

    def token(self) -> str:
        return self.current().token

    def metadata(self) -> tuple[tuple[str, str], ...]:
        return ((METADATA_KEY, self.token()),)


# What a runtime's workers call the services with: a credential's exchanged identity, or
# (a runtime run as a service of the deployment, with its own `service:<name>` key) its
# own signed one.
RuntimeIdentity = Minter | CredentialIdentity
