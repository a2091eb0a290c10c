"""Scoped identities (T2): the `targets` claim, who may issue it, what it serves."""

from __future__ import annotations

import pytest

from agentworks.client.credentials import CredentialIdentity, check_credential
from agentworks.core.errors import InvalidArgument, Unauthenticated
from agentworks.core.identity import Identity, Minter, mint, verify
from agentworks.core.keys import KeyDirectory


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> KeyDirectory:
    directory = KeyDirectory(tmp_path_factory.mktemp("keys"))
    for signer in ("gateway", "service:runner", "service:messaging"):
        directory.ensure(signer)
    return directory


def test_a_gateway_identity_carries_its_targets_and_serves_only_them_T2(keys):
    """T2: the targets claim travels sorted, is read back as a set, and limits serves()."""
    gateway = keys.ensure("gateway")[0]
    token = mint("agent:a/bot", gateway, targets={"crew:a"})
    identity = verify(token, keys.trusted())
    assert identity.targets == frozenset({"crew:a"})
    assert identity.roles == frozenset()
    assert identity.serves("crew", "a")
    assert not identity.serves("crew", "b")
    assert not identity.serves("workflow", "a")
    unscoped = verify(mint("agent:a/bot", gateway), keys.trusted())
    assert unscoped.targets is None and unscoped.serves("crew", "a")


def test_a_scope_never_widens_the_principal_rule_T2(keys):
    """T2: a target in the set that the principal does not serve is still refused."""
    identity = Identity(principal="agent:a/bot", targets=frozenset({"crew:b"}))
    assert not identity.serves("crew", "b")
    assert not identity.serves("crew", "a")


@pytest.mark.parametrize("signer", ["service:runner", "service:messaging"])
def test_only_the_gateway_may_issue_a_targets_claim_T2(keys, signer):
    """T2: a targets claim from any other signer is refused UNAUTHENTICATED saying why,
    and a Minter refuses to make one."""
    key = keys.ensure(signer)[0]
    principal = signer
    with pytest.raises(Unauthenticated, match="may not issue a targets claim"):
        verify(mint(principal, key, targets={"crew:a"}), keys.trusted())
    with pytest.raises(Unauthenticated, match="may not issue a targets claim"):
        Minter(principal, key, targets={"crew:a"})


def test_a_malformed_targets_claim_is_refused_T2(keys):
    """T2: targets must be crew:/workflow: names."""
    gateway = keys.ensure("gateway")[0]
    with pytest.raises(Unauthenticated, match="targets must be a list"):
        verify(mint("agent:a/bot", gateway, targets={"inbox:x"}), keys.trusted())


def test_a_credential_must_look_like_one_and_needs_a_gateway_T2():
    """T2: `awr_` + at least 32 characters, and a gateway URL to exchange it at."""
    with pytest.raises(InvalidArgument, match="starts with 'awr_'"):
        check_credential("aw_" + "x" * 43)
    with pytest.raises(InvalidArgument, match="AGENTWORKS_GATEWAY_URL"):
        CredentialIdentity("", "awr_" + "x" * 43)
