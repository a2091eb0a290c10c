"""Signed identities (A1, A2, T1, T4): minting, verifying, refusing."""

from __future__ import annotations

import base64
import json
import re
import time

import jwt
import pytest

from agentworks.core.errors import InvalidArgument, Unauthenticated
from agentworks.core.identity import Minter, check_principal, mint, verify
from agentworks.core.keys import KeyDirectory, SigningKey, TrustedKeys
from agentworks.core.trust import CLOCK_SKEW_SECONDS, MAX_LIFETIME_SECONDS, STANDARD_SIGNERS


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> KeyDirectory:
    return KeyDirectory(tmp_path_factory.mktemp("keys"))


@pytest.fixture(scope="module")
def gateway(keys) -> SigningKey:
    return keys.ensure("gateway")[0]


@pytest.fixture
def trusted(keys, gateway) -> TrustedKeys:
    keys.ensure("service:scheduler")
    return keys.trusted()


def _signer(principal: str, keys: KeyDirectory) -> SigningKey:
    return keys.ensure(principal if principal.startswith("service:") else "gateway")[0]


@pytest.mark.parametrize(
    "principal",
    ["user:alice", "agent:demo/bot", "workflow:wf-1", "service:scheduler", "user:a.b@c.com"],
)
def test_the_four_principal_kinds_are_accepted_A1(principal, keys):
    """A1: user, agent, workflow and service principals."""
    identity = verify(mint(principal, _signer(principal, keys)), keys.trusted())
    assert identity.principal == principal


@pytest.mark.parametrize(
    "principal", ["alice", "user:", "agent:demo", "robot:x", "user:a b", "agent:/x", ""]
)
def test_malformed_principals_are_refused_A1(principal):
    """A1: anything else is not a principal."""
    with pytest.raises(InvalidArgument, match="is not a principal"):
        check_principal(principal)


def test_roles_and_agent_crew_travel_in_the_token_A2(gateway, trusted):
    """A2: roles are signed with the principal."""
    identity = verify(mint("agent:demo/bot", gateway, roles={"operator"}), trusted)
    assert identity.is_operator
    assert identity.crew == "demo"
    assert verify(mint("user:bob", gateway), trusted).crew is None


def test_missing_forged_and_expired_tokens_are_refused_A2(gateway, trusted):
    """A2: missing, badly signed and expired identities are UNAUTHENTICATED."""
    cases = [
        (None, "missing identity"),
        ("", "missing identity"),
        ("abc", "identity refused: not a signed token"),
        (mint("user:alice", SigningKey.generate("gateway")), "is not a trusted key"),
        (mint("user:alice", gateway, ttl_seconds=10, now=time.time() - 60), "identity expired"),
        (jwt.encode({"sub": "user:alice"}, "k" * 40, algorithm="HS256"), "signed with 'HS256'"),
    ]
    for token, match in cases:
        with pytest.raises(Unauthenticated, match=match):
            verify(token, trusted)


def test_tampered_claims_break_the_signature_A2(gateway, trusted):
    """A2: changing the principal inside a token invalidates it."""
    header, payload, signature = mint("user:alice", gateway).split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
    claims["sub"] = "user:admin"
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    with pytest.raises(Unauthenticated, match="the signature is not by key"):
        verify(f"{header}.{forged}.{signature}", trusted)


def test_minter_reuses_a_token_until_half_its_life(keys, trusted):
    """Minting is cached so each call does not pay for a signature."""
    minter = Minter("service:scheduler", keys.ensure("service:scheduler")[0], ttl_seconds=300)
    assert minter.token() == minter.token()
    assert verify(minter.token(), trusted).principal == "service:scheduler"


def test_no_key_no_identity_A2():
    """A2: without a signing key nothing can be minted."""
    with pytest.raises(Unauthenticated, match="AGENTWORKS_SIGNING_KEY"):
        Minter("user:alice", None)


@pytest.mark.parametrize(
    ("signer", "principal", "roles", "says"),
    [
        ("service:runner", "agent:demo/bot", (), "signer service:runner may not vouch for agent:"),
        ("service:runner", "service:runner", ("operator",), "may not give service:runner the"),
        ("service:scheduler", "service:functions", (), "may not vouch for service:functions"),
        ("service:scheduler", "user:bob", (), "may not vouch for user:bob"),
        ("service:scheduler", "service:scheduler", ("operator",), "may not give"),
        ("service:scheduler", "service:scheduler", ("runtime",), "may not give"),
        ("gateway", "service:scheduler", (), "signer gateway may not vouch for service:"),
        ("gateway", "user:bob", ("runtime",), "may not give user:bob the role(s) runtime"),
    ],
)
def test_a_signer_vouches_only_for_whom_it_may_T1(keys, trusted, signer, principal, roles, says):
    """T1: an identity whose signer may not vouch for its principal or its roles is
    refused UNAUTHENTICATED saying so; a Minter refuses to make one at all."""
    key = keys.ensure(signer)[0]
    with pytest.raises(Unauthenticated, match=re.escape(says)) as refused:
        verify(mint(principal, key, roles=set(roles)), trusted)
    assert refused.value.message.startswith(f"identity refused: signer {signer} may not")
    with pytest.raises(Unauthenticated, match=re.escape(says)):
        Minter(principal, key, roles=set(roles))


def test_who_each_signer_vouches_for_T1(keys, gateway):
    """T1: the gateway for users, agents, workflows, itself and operators; a service for
    itself; a runtime service itself with the runtime role. Nothing else signs."""
    runner = keys.ensure("service:runner")[0]
    trusted = keys.trusted()
    accepted = [
        (gateway, "user:alice", {"operator"}),
        (gateway, "agent:demo/bot", set()),
        (gateway, "workflow:wf", set()),
        (gateway, "service:gateway", set()),
        (keys.ensure("service:scheduler")[0], "service:scheduler", set()),
        (runner, "service:runner", {"runtime"}),
    ]
    for key, principal, roles in accepted:
        identity = verify(mint(principal, key, roles=roles), trusted)
        assert (identity.principal, identity.roles) == (principal, frozenset(roles))


def test_an_over_long_or_future_identity_is_refused_saying_why_T4(gateway, trusted):
    """T4: exp - iat above the 300 s maximum, or iat more than the 30 s skew ahead, is
    refused; within the skew both ways it passes."""
    now = float(int(time.time()))  # whole seconds, as iat and exp are
    with pytest.raises(Unauthenticated, match="lifetime is 301 s, over the maximum of 300 s"):
        verify(mint("user:alice", gateway, ttl_seconds=MAX_LIFETIME_SECONDS + 1), trusted)
    with pytest.raises(Unauthenticated, match="lifetime is 315360000 s"):
        verify(mint("user:alice", gateway, ttl_seconds=10 * 365 * 86400), trusted)
    ahead = CLOCK_SKEW_SECONDS + 30
    with pytest.raises(Unauthenticated, match=f"issued {ahead} s in the future"):
        verify(mint("user:alice", gateway, now=now + ahead), trusted, now=now)
    within = mint("user:alice", gateway, now=now + CLOCK_SKEW_SECONDS - 5)
    assert verify(within, trusted, now=now).principal == "user:alice"
    late = mint("user:alice", gateway, ttl_seconds=60, now=now - 60 - CLOCK_SKEW_SECONDS + 5)
    assert verify(late, trusted, now=now).principal == "user:alice"
    with pytest.raises(ValueError, match="at most 300 s"):
        Minter("user:alice", gateway, ttl_seconds=MAX_LIFETIME_SECONDS + 1)


def test_a_foreign_key_is_refused_even_under_a_trusted_kid_T1(gateway, trusted):
    """T1: a valid signature from a key outside the trusted set is refused, whether it
    names a kid of its own or a trusted one; an issuer that is not the key's signer too."""
    stranger = SigningKey.generate("gateway")
    with pytest.raises(Unauthenticated, match=f"key '{stranger.kid}' is not a trusted key"):
        verify(mint("user:alice", stranger), trusted)
    posing = SigningKey(gateway.kid, "gateway", stranger.private_key)
    with pytest.raises(Unauthenticated, match=f"the signature is not by key '{gateway.kid}'"):
        verify(mint("user:alice", posing), trusted)
    lying = SigningKey(gateway.kid, "service:scheduler", gateway.private_key)
    with pytest.raises(Unauthenticated, match="names issuer 'service:scheduler'"):
        verify(mint("agent:demo/bot", lying), trusted)


def test_two_keys_of_one_signer_are_both_accepted_and_a_removed_one_stops_T1(tmp_path):
    """T1: rotation: while the trusted keys list an old and a new gateway key, identities
    of both pass; once the file lists only the new one (re-read without a restart),
    the old one's are refused."""
    from agentworks.core.keys import add_trusted_key, write_trusted_keys

    old, new = SigningKey.generate("gateway"), SigningKey.generate("gateway")
    path = tmp_path / "trusted-keys.json"
    write_trusted_keys(path, [old.trusted])
    trusted = TrustedKeys.load(str(path))
    assert verify(mint("user:alice", old), trusted).principal == "user:alice"
    add_trusted_key(path, new.trusted)
    # An unknown kid makes the verifier look at the file again at once.
    assert verify(mint("user:bob", new), trusted).principal == "user:bob"
    assert verify(mint("user:carol", old), trusted).principal == "user:carol"
    write_trusted_keys(path, [new.trusted])
    trusted.refresh(now_if_changed=True)
    with pytest.raises(Unauthenticated, match=f"key '{old.kid}' is not a trusted key"):
        verify(mint("user:alice", old), trusted)
    assert verify(mint("user:bob", new), trusted).principal == "user:bob"


def test_the_retired_runtime_signer_signs_nothing_and_its_entries_are_skipped_T1_T2(tmp_path):
    """T1 T2: `runtime` is no signer any more (runtimes get identities for their runtime
    credentials): no key can be made for it, and a `runtime` entry left in a trusted-keys
    file is skipped, so an identity its key signs is refused as by an unknown key."""
    assert "runtime" not in STANDARD_SIGNERS
    with pytest.raises(ValueError, match="signer 'runtime' is not one: use gateway or service:"):
        SigningKey.generate("runtime")
    keys = KeyDirectory(tmp_path)
    gateway = keys.ensure("gateway")[0]
    leftover = SigningKey("runtime-old", "runtime", SigningKey.generate("gateway").private_key)
    entries = json.loads(keys.trusted_path.read_text())
    keys.trusted_path.write_text(json.dumps([*entries, leftover.trusted.entry()]))
    trusted = keys.trusted()
    assert [key.signer for key in trusted] == ["gateway"]
    with pytest.raises(Unauthenticated, match="key 'runtime-old' is not a trusted key"):
        verify(mint("agent:demo/bot", leftover), trusted)
    assert verify(mint("agent:demo/bot", gateway), trusted).principal == "agent:demo/bot"
