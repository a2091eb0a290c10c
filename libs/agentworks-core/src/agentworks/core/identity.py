"""Principals and the signed identity that travels with every internal gRPC call (A1, A2).

An identity is a short-lived JWT signed with Ed25519 (`EdDSA`) by one signer's private
key, sent as the `x-agentworks-identity` metadata entry: `kid` (header) names the key,
`iss` the signer, `sub` the principal, with `roles`, `aud`, `iat` and `exp`. The gateway
mints one per request from a bearer token, a service for itself, a runtime for its
agent (agentworks.core.trust says who may vouch for whom, and for how long). Services
verify with public keys only (agentworks.core.keys) and trust nothing else.
"""

from __future__ import annotations

import re
import time
from contextvars import ContextVar
from dataclasses import dataclass, field

import jwt

from agentworks.core import capability as cap
from agentworks.core.capability import Capability
from agentworks.core.checks import check_lower_case
from agentworks.core.errors import InvalidArgument, Unauthenticated
from agentworks.core.keys import (
    SIGNING_KEY_VARIABLE,
    TRUSTED_KEYS_VARIABLE,
    SigningKey,
    TrustedKeys,
)
from agentworks.core.trust import (
    CLOCK_SKEW_SECONDS,
    MAX_LIFETIME_SECONDS,
    OPERATOR_ROLE,
    RUNTIME_ROLE,
    capability_refusal,
    lifetime_refusal,
    targets_refusal,
    vouching_refusal,
)

METADATA_KEY = "x-agentworks-identity"
AUDIENCE = "agentworks"
ALGORITHM = "EdDSA"
DEFAULT_TTL_SECONDS = 300

# user:<name>, agent:<crew>/<agent>, workflow:<id>, service:<name>
_NAME = r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,127}"
PRINCIPAL_RE = re.compile(
    rf"^(?:user:{_NAME}|agent:{_NAME}/{_NAME}|workflow:{_NAME}|service:{_NAME})$"
)

OPERATOR = OPERATOR_ROLE
# An entry of the `targets` claim (T2).
TARGET_RE = re.compile(rf"^(?:crew|workflow):{_NAME}$")


def check_new_principal(principal: str, field_name: str = "principal") -> str:
    """A principal being named for the first time (a target's owner, a token's or a
    runtime credential's principal): well formed and lower-case (B10)."""
    return check_lower_case(check_principal(principal, field_name), field_name)


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
    # The signed token this identity was verified from (empty when built otherwise): a
    # service asking another on the caller's behalf forwards it, since it may not sign
    # for the caller itself (T1).
    token: str = field(default="", compare=False, repr=False)
    # Set for a runtime's identity exchanged for a runtime credential (T2): the targets
    # ("crew:x", "workflow:y") it serves; it acts for no other. None: not scoped.
    targets: frozenset[str] | None = None
    # Set when the identity is a capability (T3): it allows this item's operations only.
    capability: Capability | None = None

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
        workflow, or a service with the `runtime` role. A scoped identity (`targets`,
        T2) serves only the targets in its set."""
        if self.targets is not None and f"{target_kind}:{target_name}" not in self.targets:
            return False
        if self.is_service and RUNTIME_ROLE in self.roles:
            return True
        if target_kind == "crew":
            return self.crew == target_name
        return self.principal == f"workflow:{target_name}"


def mint(
    principal: str,
    key: SigningKey,
    *,
    roles: frozenset[str] | set[str] = frozenset(),
    ttl_seconds: int = DEFAULT_TTL_SECONDS,
    now: float | None = None,
    targets: frozenset[str] | set[str] | None = None,
    capability: Capability | None = None,
) -> str:
    """Sign an identity token for `principal` with `key`, valid for `ttl_seconds`; with
    `capability`, one bound to that turn or execution (T3, its `cap` claim).

    Nothing checks here that the key's signer may vouch for the principal (the verifier
    does, and `Minter` does up front); tests mint what services must refuse. With
    `targets` the identity carries a `targets` claim (sorted): it serves only those (T2).
    """
    if key is None:
        raise Unauthenticated(f"no signing key configured: set {SIGNING_KEY_VARIABLE}")
    check_principal(principal)
    issued = int(now if now is not None else time.time())
    claims = {
        "sub": principal,
        "aud": AUDIENCE,
        "iss": key.signer,
        "iat": issued,
        "exp": issued + ttl_seconds,
        "roles": sorted(roles),
    }
    if targets is not None:
        claims["targets"] = sorted(targets)
    if capability is not None:
        claims[cap.CLAIM] = capability.claim()
    return jwt.encode(claims, key.private_key, algorithm=ALGORITHM, headers={"kid": key.kid})


def _refused(why: str) -> Unauthenticated:
    return Unauthenticated(f"identity refused: {why}")


def verify(token: str | None, trusted: TrustedKeys, now: float | None = None) -> Identity:
    """Check a token's signature, signer, lifetime and expiry; return its identity.

    The token's `kid` names the trusted key that must have signed it; that key's signer
    must be the token's `iss` and may vouch only for what `agentworks.core.trust`
    allows. A caller reuses its token for minutes, so a verified token is remembered
    (agentworks.core.remembered: bounded, least recently used first out, per
    trusted-keys set and forgotten when the keys change) until its expiry or
    REMEMBER_SECONDS, whichever is first; after that it is verified again in full,
    which refuses it once it has expired.
    """
    if not token:
        raise Unauthenticated(f"missing identity: send a signed {METADATA_KEY} metadata entry")
    moment = time.time() if now is None else now
    trusted.refresh()
    # Taken before verifying: a reload meanwhile replaces the store, and what was
    # verified with the old keys lands in the old one, which nothing reads any more.
    remembered = trusted.remembered
    identity: Identity | None = remembered.get(token, moment)
    if identity is None:
        identity, expires = _verified(token, trusted, moment)
        remembered.put(token, identity, moment, expires + CLOCK_SKEW_SECONDS)
    return identity


def _verified(token: str, trusted: TrustedKeys, now: float) -> tuple[Identity, float]:
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError as exc:
        raise _refused(f"not a signed token ({exc})") from None
    if header.get("alg") != ALGORITHM:
        raise _refused(f"signed with {header.get('alg')!r}; identities are {ALGORITHM} (Ed25519)")
    kid = header.get("kid")
    if not isinstance(kid, str) or not kid:
        raise _refused("no kid header: the token does not name the key that signed it")
    key = trusted.get(kid)
    if key is None:
        raise _refused(
            f"key {kid!r} is not a trusted key (not in {TRUSTED_KEYS_VARIABLE}): "
            "the signer is unknown here"
        )
    try:
        claims = jwt.decode(
            token,
            key.public_key,
            algorithms=[ALGORITHM],
            audience=AUDIENCE,
            options={
                "require": ["sub", "exp", "iat", "aud", "iss"],
                # Checked below, with the stated skew and in words that say why.
                "verify_exp": False,
                "verify_iat": False,
                "verify_nbf": False,
            },
        )
    except jwt.InvalidSignatureError:
        raise _refused(f"the signature is not by key {kid!r} ({key.signer})") from None
    except jwt.PyJWTError as exc:
        raise _refused(str(exc)) from None
    if claims["iss"] != key.signer:
        raise _refused(f"it names issuer {claims['iss']!r}, but key {kid!r} is {key.signer}'s")
    issued, expires = claims["iat"], claims["exp"]
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (issued, expires)):
        raise _refused("iat and exp must be numbers")
    why = lifetime_refusal(float(issued), float(expires), now)
    if why:
        raise _refused(why)
    if now >= expires + CLOCK_SKEW_SECONDS:
        raise Unauthenticated("identity expired: mint a new one and retry")
    principal = claims["sub"]
    if not isinstance(principal, str) or not PRINCIPAL_RE.match(principal):
        raise _refused("malformed principal")
    roles = claims.get("roles") or []
    if not isinstance(roles, list):
        raise _refused("roles must be a list")
    targets = _targets_claim(claims)
    bound = None
    if cap.CLAIM in claims:
        try:
            bound = cap.from_claim(claims[cap.CLAIM])
        except ValueError as exc:
            raise _refused(str(exc)) from None
    identity = Identity(
        principal=principal,
        roles=frozenset(str(r) for r in roles),
        token=token,
        targets=targets,
        capability=bound,
    )
    if bound is not None:
        why = capability_refusal(key.signer, identity.principal, identity.roles, bound.kind)
    else:
        why = vouching_refusal(key.signer, identity.principal, identity.roles)
    if why is None and targets is not None:
        why = targets_refusal(key.signer, targets)
    if why:
        raise _refused(why)
    return identity, float(expires)


def _targets_claim(claims: dict[str, object]) -> frozenset[str] | None:
    """The `targets` claim (T2) as a set, None when there is none; refused if malformed."""
    if "targets" not in claims:
        return None
    targets = claims["targets"]
    if not isinstance(targets, list) or not all(
        isinstance(t, str) and TARGET_RE.match(t) for t in targets
    ):
        raise _refused('targets must be a list of "crew:<name>" or "workflow:<id>"')
    return frozenset(targets)


class Minter:
    """Mints identities for one principal and reuses each until shortly before expiry.

    Refuses (`Unauthenticated`) at once a principal or roles its key's signer may not
    vouch for, and a lifetime over MAX_LIFETIME_SECONDS: every service would refuse them.
    """

    def __init__(
        self,
        principal: str,
        key: SigningKey | None,
        *,
        roles: frozenset[str] | set[str] = frozenset(),
        ttl_seconds: int = DEFAULT_TTL_SECONDS,
        targets: frozenset[str] | set[str] | None = None,
    ) -> None:
        self.principal = check_principal(principal)
        if key is None:
            raise Unauthenticated(f"no signing key configured: set {SIGNING_KEY_VARIABLE}")
        why = vouching_refusal(key.signer, principal, roles) or (
            targets_refusal(key.signer, targets) if targets is not None else None
        )
        if why:
            raise Unauthenticated(why)
        if not 0 < ttl_seconds <= MAX_LIFETIME_SECONDS:
            raise ValueError(
                f"an identity lives at most {MAX_LIFETIME_SECONDS} s, got {ttl_seconds} s"
            )
        self._key = key
        self._roles = frozenset(roles)
        self._targets = frozenset(targets) if targets is not None else None
        self._ttl = ttl_seconds
        self._token = ""
        self._renew_at = 0.0

    @property
    def signer(self) -> str:
        return self._key.signer

    def token(self) -> str:
        now = time.time()
        if now >= self._renew_at:
            self._token = mint(
                self.principal,
                self._key,
                roles=self._roles,
                ttl_seconds=self._ttl,
                targets=self._targets,
            )
            self._renew_at = now + self._ttl / 2
        return self._token

    def metadata(self) -> tuple[tuple[str, str], ...]:
        return ((METADATA_KEY, self.token()),)


class Forwarded:
    """An identity someone else signed, sent on as it came: how a service asks another
    on its caller's behalf without signing for the caller (`Identity.token`)."""

    def __init__(self, token: str) -> None:
        if not token:
            raise Unauthenticated("no signed identity of the caller to forward")
        self._metadata = ((METADATA_KEY, token),)

    def metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata


current_identity: ContextVar[Identity | None] = ContextVar("agentworks_identity", default=None)


def caller() -> Identity:
    """The identity of the request being served (set by the server interceptor)."""
    identity = current_identity.get()
    if identity is None:
        raise Unauthenticated("no identity bound to this request")
    return identity
