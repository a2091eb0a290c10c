"""Who may sign identities for whom, and for how long (A2, T1, T4): the one place the
policy lives.

Every identity is signed by a *signer*, named by the trusted-keys entry of the key that
signed it (agentworks.core.keys). Each signer vouches for:

- `gateway`: `user:*`, `agent:*`, `workflow:*` (the external callers whose token it
  checked) and `service:gateway` (itself); the one role it may give is `operator`.
- `service:messaging`, `service:functions`, `service:scheduler`: itself, with no role.
  Messaging and functions also vouch for the agent or workflow that claimed a turn or
  an execution, inside that item's capability only (T3, `capability_refusal`).
- another `service:<name>`: itself, with no role but `runtime` (a runtime the operator
  runs as a service of the deployment, its key put in the trusted set by the operator,
  serves every target).

Only the gateway may issue a `targets` claim (a runtime credential's scope, T2): a
runtime acts with the identities the gateway gives for its runtime credential and holds
no signing key. The interim `runtime` signer that came before is retired
(`RETIRED_SIGNERS`): an entry of it left in a trusted-keys file is skipped, so what its
key signs is refused as signed by an unknown key.

An identity lives at most MAX_LIFETIME_SECONDS (exp - iat); the clocks of signer and
verifier may differ by up to CLOCK_SKEW_SECONDS, no more: an identity issued further in
the future is refused, and one is still accepted that long after its expiry.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# Longest identity a service accepts (exp - iat), and the clock difference it tolerates.
MAX_LIFETIME_SECONDS = 300
CLOCK_SKEW_SECONDS = 30

GATEWAY = "gateway"
SERVICE_PREFIX = "service:"

OPERATOR_ROLE = "operator"
RUNTIME_ROLE = "runtime"

_NAME = r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,127}"
SIGNER_RE = re.compile(rf"^(?:{GATEWAY}|service:{_NAME})$")
# Signers no longer trusted for anything; their entries in a trusted-keys file are skipped.
RETIRED_SIGNERS = frozenset({"runtime"})

# The principal kinds each signer may vouch for (besides a service itself, below).
_KINDS = {GATEWAY: ("user", "agent", "workflow")}
_ROLES = {GATEWAY: frozenset({OPERATOR_ROLE})}
# The platform services need no role; another service signer is a runtime the operator
# runs as a service (its key is in the trusted set only if the operator put it there).
PLATFORM_SERVICES = ("service:messaging", "service:functions", "service:scheduler")
_SERVICE_ROLES = frozenset({RUNTIME_ROLE})

# What `agentworks keys init` and `agentworks up` make a key for.
STANDARD_SIGNERS = (
    GATEWAY,
    "service:messaging",
    "service:functions",
    "service:scheduler",
)


def check_signer(signer: str) -> str:
    """The signer name if it is one (gateway, service:<name>), else ValueError."""
    if not isinstance(signer, str) or not SIGNER_RE.match(signer):
        raise ValueError(f"signer {signer!r} is not one: use gateway or service:<name>")
    return signer


def file_name(signer: str) -> str:
    """A file or Secret name for the signer's key (`service:messaging` -> `service-messaging`)."""
    return check_signer(signer).replace(":", "-")


def vouches_for(signer: str) -> str:
    """What the signer may vouch for, in words, for refusals and docs."""
    if signer == GATEWAY:
        return (
            "user:<name>, agent:<crew>/<agent>, workflow:<id> and service:gateway, "
            "with the operator role"
        )
    if signer in PLATFORM_SERVICES:
        return f"{signer} itself only, with no role"
    return f"{signer} itself only, with no role but {RUNTIME_ROLE}"


def vouching_refusal(signer: str, principal: str, roles: Iterable[str]) -> str | None:
    """Why `signer` may not vouch for `principal` with `roles`; None when it may."""
    kind = principal.split(":", 1)[0]
    if signer.startswith(SERVICE_PREFIX):
        allowed_principal = principal == signer
        allowed_roles = frozenset() if signer in PLATFORM_SERVICES else _SERVICE_ROLES
    else:
        allowed_principal = kind in _KINDS.get(signer, ()) or (
            signer == GATEWAY and principal == SERVICE_PREFIX + GATEWAY
        )
        allowed_roles = _ROLES.get(signer, frozenset())
    if not allowed_principal:
        return (
            f"signer {signer} may not vouch for {principal} (it vouches for {vouches_for(signer)})"
        )
    extra = sorted(set(roles) - allowed_roles)
    if extra:
        return (
            f"signer {signer} may not give {principal} the role(s) {', '.join(extra)} "
            f"(it vouches for {vouches_for(signer)})"
        )
    return None


def targets_refusal(signer: str, targets: Iterable[str]) -> str | None:
    """Why `signer` may not issue a `targets` claim (T2); None when it may. Only the
    gateway scopes an identity, when it exchanges a runtime credential for one."""
    if signer == GATEWAY:
        return None
    return (
        f"signer {signer} may not issue a targets claim ({', '.join(sorted(targets))}): "
        "only the gateway scopes identities, for exchanged runtime credentials"
    )


def lifetime_refusal(issued_at: float, expires_at: float, now: float) -> str | None:
    """Why an identity issued at `issued_at` and expiring at `expires_at` is refused at
    `now` for its lifetime or its issue time (T4); None when it is not. Expiry itself is
    the caller's to check (it is the one check that changes over time)."""
    lifetime = expires_at - issued_at
    if lifetime > MAX_LIFETIME_SECONDS:
        return (
            f"its lifetime is {lifetime:.0f} s, over the maximum of {MAX_LIFETIME_SECONDS} s: "
            f"mint identities of at most {MAX_LIFETIME_SECONDS} s"
        )
    if lifetime <= 0:
        return "it expires before it was issued"
    ahead = issued_at - now
    if ahead > CLOCK_SKEW_SECONDS:
        return (
            f"it was issued {ahead:.0f} s in the future (more than the {CLOCK_SKEW_SECONDS} s "
            "of clock skew allowed): check the signer's clock"
        )
    return None


# Capabilities (T3): a platform service vouches for an agent or workflow principal only
# inside a capability of the kind of item it leases, bound to one item; no other signer
# may sign a capability, and a capability carries no role.
CAPABILITY_SIGNERS = {"turn": "service:messaging", "execution": "service:functions"}
CAPABILITY_PRINCIPAL_KINDS = ("agent", "workflow")


def capability_refusal(signer: str, principal: str, roles: Iterable[str], kind: str) -> str | None:
    """Why `signer` may not sign a `kind` capability for `principal` with `roles`; None
    when it may. Only the service leasing that kind of item signs one (messaging: turn,
    functions: execution), for the agent or workflow that claimed it, with no role."""
    issuer = CAPABILITY_SIGNERS.get(kind)
    if issuer is None:
        return f"capability kind {kind!r} is not one (turn or execution)"
    if signer != issuer:
        return f"signer {signer} may not sign a {kind} capability (only {issuer} does)"
    if principal.split(":", 1)[0] not in CAPABILITY_PRINCIPAL_KINDS:
        return (
            f"a capability is for the agent or workflow that claimed the {kind}, "
            f"not for {principal}"
        )
    if set(roles):
        return "a capability carries no role"
    return None
