"""Principals and the signed identity that travels with every internal gRPC call (A1, A2).

An identity is a short-lived HS256 JWT signed with the operator's internal key, sent as
the `x-agentworks-identity` metadata entry. The gateway mints one per request from a
bearer token; runtimes and services mint their own with the key they were given.
Services trust nothing else: a principal name that is not signed is refused.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field

import jwt

from agentworks.client.errors import InvalidArgument, Unauthenticated

METADATA_KEY = "x-agentworks-identity"
AUDIENCE = "agentworks"
DEFAULT_TTL_SECONDS = 300

# user:<name>, agent:<crew>/<agent>, workflow:<id>, service:<name>
_NAME = r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,127}"
PRINCIPAL_RE = re.compile(
    rf"^(?:user:{_NAME}|agent:{_NAME}/{_NAME}|workflow:{_NAME}|service:{_NAME})$"
)

OPERATOR = "operator"


def check_principal(principal: str, field_name: str = "principal") -> str:
    """Return the principal if it is well formed, else raise InvalidArgument."""
    if not PRINCIPAL_RE.match(principal or ""):
        raise InvalidArgument(
            f"{field_name} {principal!r} is not a principal: use user:<name>, "
            "agent:<crew>/<agent>, workflow:<id> or service:<name>"
        )
    return principal


@dataclass(frozen=True)
class Identity:
    """Who is calling, and with which roles."""

    principal: str
    roles: frozenset[str] = field(default_factory=frozenset)

    @property
    def kind(self) -> str:
        return self.principal.split(":", 1)[0]

    @property
    def is_operator(self) -> bool:
        return OPERATOR in self.roles

    @property
    def is_service(self) -> bool:
        return self.kind == "service"

    @property
    def crew(self) -> str | None:
        """The crew an `agent:<crew>/<agent>` principal belongs to."""
        if self.kind != "agent":
            return None
        return self.principal.split(":", 1)[1].split("/", 1)[0]

    def serves(self, target_kind: str, target_name: str) -> bool:
        """Whether this principal acts as the target's agents: claims its turns and
        executions, replies and reports for it. The target's own crew agents or its
        workflow, or a service with the `runtime` role."""
        if self.is_service and "runtime" in self.roles:
            return True
        if target_kind == "crew":
            return self.crew == target_name
        return self.principal == f"workflow:{target_name}"


def mint(
    principal: str,
    key: str,
    *,
    roles: frozenset[str] | set[str] = frozenset(),
    ttl_seconds: int = DEFAULT_TTL_SECONDS,
    now: float | None = None,
) -> str:
    """Sign an identity token for `principal`, valid for `ttl_seconds`."""
    if not key:
        raise Unauthenticated("no internal key configured: set AGENTWORKS_INTERNAL_KEY")
    check_principal(principal)
    issued = int(now if now is not None else time.time())
    claims = {
        "sub": principal,
        "aud": AUDIENCE,
        "iat": issued,
        "exp": issued + ttl_seconds,
        "roles": sorted(roles),
    }
    return jwt.encode(claims, key, algorithm="HS256")


def verify(token: str | None, key: str, accepted: Sequence[str] = ()) -> Identity:
    """Check a token's signature and expiry and return its identity.

    `key` is the internal key; identities signed with one of the `accepted` keys pass
    too, so that the key can be rotated without a window of refusals. A caller reuses
    its token for minutes, so a verified token is remembered (bounded, per key) and only
    its expiry is checked again: the signature check is most of the cost of an
    identity, and it cannot change for the same token and key.
    """
    if not token:
        raise Unauthenticated(f"missing identity: send a signed {METADATA_KEY} metadata entry")
    try:
        identity, expires = _verified(token, key)
    except Unauthenticated as refused:
        for other in accepted:
            try:
                identity, expires = _verified(token, other)
                break
            except Unauthenticated:
                continue
        else:
            raise refused from None
    if time.time() >= expires:
        raise Unauthenticated("identity expired: mint a new one and retry")
    return identity


@functools.lru_cache(maxsize=4096)
def _verified(token: str, key: str) -> tuple[Identity, float]:
    try:
        claims = jwt.decode(
            token,
            key,
            algorithms=["HS256"],
            audience=AUDIENCE,
            options={"require": ["sub", "exp", "iat", "aud"]},
        )
    except jwt.ExpiredSignatureError as exc:
        raise Unauthenticated("identity expired: mint a new one and retry") from exc
    except jwt.PyJWTError as exc:
        raise Unauthenticated(f"identity refused: {exc}") from exc
    principal = claims["sub"]
    if not isinstance(principal, str) or not PRINCIPAL_RE.match(principal):
        raise Unauthenticated("identity refused: malformed principal")
    roles = claims.get("roles") or []
    identity = Identity(principal=principal, roles=frozenset(str(r) for r in roles))
    return identity, float(claims["exp"])


class Minter:
    """Mints identities for one principal and reuses each until shortly before expiry."""

    def __init__(
        self,
        principal: str,
        key: str,
        *,
        roles: frozenset[str] | set[str] = frozenset(),
        ttl_seconds: int = DEFAULT_TTL_SECONDS,
    ) -> None:
        self.principal = check_principal(principal)
        self._key = key
        self._roles = frozenset(roles)
        self._ttl = ttl_seconds
        self._token = ""
        self._renew_at = 0.0

    def token(self) -> str:
        now = time.time()
        if now >= self._renew_at:
            self._token = mint(self.principal, self._key, roles=self._roles, ttl_seconds=self._ttl)
            self._renew_at = now + self._ttl / 2
        return self._token

    def metadata(self) -> tuple[tuple[str, str], ...]:
        return ((METADATA_KEY, self.token()),)


current_identity: ContextVar[Identity | None] = ContextVar("agentworks_identity", default=None)


def caller() -> Identity:
    """The identity of the request being served (set by the server interceptor)."""
    identity = current_identity.get()
    if identity is None:
        raise Unauthenticated("no identity bound to this request")
    return identity
