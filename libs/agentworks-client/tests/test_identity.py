"""Signed identities (A1, A2): minting, verifying, refusing."""

from __future__ import annotations

import time

import pytest

from agentworks.client.errors import InvalidArgument, Unauthenticated
from agentworks.client.identity import Minter, check_principal, mint, verify

KEY = "k" * 40


@pytest.mark.parametrize(
    "principal",
    ["user:alice", "agent:demo/bot", "workflow:wf-1", "service:scheduler", "user:a.b@c.com"],
)
def test_the_four_principal_kinds_are_accepted_A1(principal):
    """A1: user, agent, workflow and service principals."""
    identity = verify(mint(principal, KEY), KEY)
    assert identity.principal == principal


@pytest.mark.parametrize(
    "principal", ["alice", "user:", "agent:demo", "robot:x", "user:a b", "agent:/x", ""]
)
def test_malformed_principals_are_refused_A1(principal):
    """A1: anything else is not a principal."""
    with pytest.raises(InvalidArgument, match="is not a principal"):
        check_principal(principal)


def test_roles_and_agent_crew_travel_in_the_token_A2():
    """A2: roles are signed with the principal."""
    identity = verify(mint("agent:demo/bot", KEY, roles={"operator"}), KEY)
    assert identity.is_operator
    assert identity.crew == "demo"
    assert verify(mint("user:bob", KEY), KEY).crew is None


@pytest.mark.parametrize(
    ("token", "match"),
    [
        (None, "missing identity"),
        ("", "missing identity"),
        ("abc", "identity refused"),
        (mint("user:alice", "x" * 40), "identity refused"),
        (mint("user:alice", KEY, ttl_seconds=10, now=time.time() - 60), "identity expired"),
    ],
)
def test_missing_forged_and_expired_tokens_are_refused_A2(token, match):
    """A2: missing, badly signed and expired identities are UNAUTHENTICATED."""
    with pytest.raises(Unauthenticated, match=match):
        verify(token, KEY)


def test_tampered_claims_break_the_signature_A2():
    """A2: changing the principal inside a token invalidates it."""
    import base64
    import json

    header, payload, signature = mint("user:alice", KEY).split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
    claims["sub"] = "user:admin"
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    with pytest.raises(Unauthenticated):
        verify(f"{header}.{forged}.{signature}", KEY)


def test_minter_reuses_a_token_until_half_its_life():
    """Minting is cached so each call does not pay for a signature."""
    minter = Minter("service:functions", KEY, ttl_seconds=300)
    assert minter.token() == minter.token()
    assert verify(minter.token(), KEY).principal == "service:functions"


def test_no_key_no_identity_A2():
    """A2: without the operator's key nothing can be minted."""
    with pytest.raises(Unauthenticated, match="AGENTWORKS_INTERNAL_KEY"):
        mint("user:alice", "")
