"""Verified identities remembered (issue 40): a cached result never outlives its token's
expiry, a key's removal or rotation, or its signer's retirement (T1, T4)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from agentworks.core.errors import Unauthenticated
from agentworks.core.identity import mint, verify
from agentworks.core.keys import SigningKey, TrustedKeys, write_trusted_keys
from agentworks.core.remembered import REMEMBER_SECONDS, Remembered
from agentworks.core.trust import CLOCK_SKEW_SECONDS


def _trusted(tmp_path: Path, *keys: SigningKey) -> tuple[TrustedKeys, Path]:
    path = tmp_path / "trusted-keys.json"
    write_trusted_keys(path, [key.trusted for key in keys])
    return TrustedKeys.load(str(path)), path


def test_an_expired_token_is_refused_although_it_was_remembered_T4(tmp_path):
    """T4: the attacker replays a token that was verified (and remembered) while valid:
    once its expiry and the clock skew have passed, it is refused as expired."""
    gateway = SigningKey.generate("gateway")
    trusted, _ = _trusted(tmp_path, gateway)
    now = time.time()
    token = mint("user:alice", gateway, ttl_seconds=20, now=now)
    assert verify(token, trusted, now=now).principal == "user:alice"
    assert token in trusted.remembered
    # Still inside exp + skew: the remembered result serves.
    assert verify(token, trusted, now=now + 20 + CLOCK_SKEW_SECONDS - 1).principal == "user:alice"
    with pytest.raises(Unauthenticated, match="identity expired"):
        verify(token, trusted, now=now + 20 + CLOCK_SKEW_SECONDS)
    with pytest.raises(Unauthenticated, match="identity expired"):
        verify(token, trusted, now=now + 3600)


def test_a_remembered_token_of_a_key_removed_from_the_trusted_keys_is_refused_T1(tmp_path):
    """T1: rotation: the same token, verified and remembered while its key was trusted, is
    refused once the trusted keys no longer list that key (re-read, no restart); the new
    key's tokens still pass."""
    old, new = SigningKey.generate("gateway"), SigningKey.generate("gateway")
    trusted, path = _trusted(tmp_path, old, new)
    token = mint("user:alice", old)
    assert verify(token, trusted).principal == "user:alice"
    assert token in trusted.remembered
    write_trusted_keys(path, [new.trusted])
    trusted.refresh(now_if_changed=True)
    with pytest.raises(Unauthenticated, match=f"key '{old.kid}' is not a trusted key"):
        verify(token, trusted)
    assert verify(mint("user:bob", new), trusted).principal == "user:bob"


def test_a_remembered_token_is_refused_once_its_key_is_found_gone_on_the_timed_reload_T1(
    tmp_path, monkeypatch
):
    """T1: without anyone asking for a reload, the verifier's own periodic look at the
    file (RELOAD_SECONDS) drops what it remembered with the removed key."""
    from agentworks.core import keys as keys_module

    old, new = SigningKey.generate("gateway"), SigningKey.generate("gateway")
    trusted, path = _trusted(tmp_path, old, new)
    token = mint("user:alice", old)
    assert verify(token, trusted).principal == "user:alice"
    write_trusted_keys(path, [new.trusted])
    later = time.monotonic() + keys_module.RELOAD_SECONDS + 1
    monkeypatch.setattr(keys_module.time, "monotonic", lambda: later)
    with pytest.raises(Unauthenticated, match="is not a trusted key"):
        verify(token, trusted)


def test_a_remembered_token_of_a_signer_since_retired_is_refused_T1_T2(tmp_path):
    """T1 T2: a key trusted as the gateway's, whose entry is then changed to the retired
    `runtime` signer: its remembered tokens are refused after the reload, as the entry
    is skipped."""
    gateway = SigningKey.generate("gateway")
    trusted, path = _trusted(tmp_path, gateway)
    token = mint("agent:demo/bot", gateway)
    assert verify(token, trusted).principal == "agent:demo/bot"
    entry = {**gateway.trusted.entry(), "signer": "runtime"}
    other = SigningKey.generate("gateway")
    path.write_text(json.dumps([entry, other.trusted.entry()]))
    trusted.refresh(now_if_changed=True)
    with pytest.raises(Unauthenticated, match="is not a trusted key"):
        verify(token, trusted)


def test_a_remembered_identity_is_verified_again_after_remember_seconds_T4(tmp_path):
    """T4: an entry is believed at most REMEMBER_SECONDS, even for a token that lives
    longer; then the token is verified in full again (and remembered anew)."""
    gateway = SigningKey.generate("gateway")
    trusted, _ = _trusted(tmp_path, gateway)
    now = time.time()
    token = mint("user:alice", gateway, ttl_seconds=300, now=now)
    verify(token, trusted, now=now)
    store = trusted.remembered
    assert store.get(token, now + REMEMBER_SECONDS - 1) is not None
    assert store.get(token, now + REMEMBER_SECONDS) is None
    assert token not in store
    assert verify(token, trusted, now=now + REMEMBER_SECONDS).principal == "user:alice"
    assert token in store


def test_the_store_is_bounded_and_drops_the_least_recently_used_first():
    """The store holds at most its size; the entry used least recently leaves first."""
    store = Remembered(max_entries=3)
    for token in ("a", "b", "c"):
        store.put(token, token.upper(), now=0.0, expires=100.0)
    assert store.get("a", 1.0) == "A"  # "b" is now the least recently used
    store.put("d", "D", now=1.0, expires=100.0)
    assert len(store) == 3
    assert "b" not in store
    assert [store.get(t, 2.0) for t in ("a", "c", "d")] == ["A", "C", "D"]
    # Nothing already past its time is stored at all.
    store.put("e", "E", now=5.0, expires=5.0)
    assert "e" not in store


def test_many_callers_keep_the_verifier_within_its_bound(tmp_path):
    """More distinct tokens than the bound: the store stays at its size and every token
    still verifies (the ones dropped are verified again)."""
    gateway = SigningKey.generate("gateway")
    path = tmp_path / "trusted-keys.json"
    write_trusted_keys(path, [gateway.trusted])
    trusted = TrustedKeys.load(str(path))
    trusted.remembered = Remembered(8)
    tokens = [mint(f"user:u{n}", gateway) for n in range(20)]
    for token in tokens + tokens:
        verify(token, trusted)
        assert len(trusted.remembered) <= 8
    assert tokens[-1] in trusted.remembered and tokens[0] not in trusted.remembered
