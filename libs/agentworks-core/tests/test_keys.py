"""Signing keys and the trusted-keys file (T1): what is accepted, what is refused, and how."""

from __future__ import annotations

import json
import stat

import pytest

from agentworks.core.keys import (
    KeyDirectory,
    SigningKey,
    TrustedKeys,
    keys_from_env,
    write_private_key,
    write_trusted_keys,
)
from agentworks.core.settings import ConfigError, Env


def test_a_key_directory_keeps_one_private_key_per_signer_and_lists_them_all_T1(tmp_path):
    """T1: each signer's private key in a file of its own (0600), and one trusted-keys
    file of every public key; asking again returns the same key."""
    keys = KeyDirectory(tmp_path)
    gateway, made = keys.ensure("gateway")
    assert made and gateway.signer == "gateway" and gateway.kid.startswith("gateway-")
    runner, _ = keys.ensure("service:runner")
    assert keys.ensure("gateway") == (gateway, False)
    path = keys.key_path("gateway")
    assert path == tmp_path / "gateway" / "signing-key.pem"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    entries = json.loads(keys.trusted_path.read_text())
    assert [(e["kid"], e["signer"]) for e in entries] == [
        (gateway.kid, "gateway"),
        (runner.kid, "service:runner"),
    ]
    assert all("PRIVATE" not in e["public_key"] for e in entries)
    env = keys.env("service:runner")
    assert env == {
        "AGENTWORKS_SIGNING_KEY": str(keys.key_path("service:runner")),
        "AGENTWORKS_TRUSTED_KEYS": str(keys.trusted_path),
    }
    loaded, trusted = keys_from_env(Env("AGENTWORKS", env))
    assert loaded == runner and trusted is not None and len(trusted) == 2


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("not json", "is not JSON"),
        ('{"kid": "a"}', "must hold a JSON list"),
        ('[{"kid": "a", "signer": "gateway"}]', "entry 0 must have exactly the keys"),
        ('[{"kid": "", "signer": "gateway", "public_key": "x"}]', "kid must be a non-empty"),
        ('[{"kid": "a", "signer": "admin", "public_key": "x"}]', "signer 'admin' is not one"),
        ('[{"kid": "a", "signer": "gateway", "public_key": "x"}]', "must be an Ed25519 public"),
    ],
)
def test_an_unusable_trusted_keys_file_is_refused_naming_it_T1(tmp_path, content, says):
    """T1: a trusted-keys file that is not a list of {kid, signer, public_key} with
    Ed25519 public keys stops the start, naming the variable and the entry."""
    path = tmp_path / "trusted.json"
    path.write_text(content)
    with pytest.raises(ConfigError, match=says) as refused:
        TrustedKeys.load(str(path))
    assert str(refused.value).startswith("AGENTWORKS_TRUSTED_KEYS")


def test_a_kid_or_a_public_key_listed_twice_is_refused_T1(tmp_path):
    """T1: one kid names one key, and one key has one entry."""
    key = SigningKey.generate("gateway")
    entry = key.trusted.entry()
    path = tmp_path / "trusted.json"
    path.write_text(json.dumps([entry, entry]))
    with pytest.raises(ConfigError, match="is listed twice"):
        TrustedKeys.load(str(path))
    path.write_text(json.dumps([entry, {**entry, "kid": "other"}]))
    with pytest.raises(ConfigError, match="is also listed as"):
        TrustedKeys.load(str(path))


def test_a_signing_key_must_be_in_the_trusted_keys_and_be_a_private_key_T1(tmp_path):
    """T1: a process finds its signer and kid in the trusted keys; a key not listed
    there, a file that is no Ed25519 private key, or a key without trusted keys is refused
    naming the variable."""
    listed, unlisted = SigningKey.generate("service:messaging"), SigningKey.generate("gateway")
    trusted = tmp_path / "trusted.json"
    write_trusted_keys(trusted, [listed.trusted])
    write_private_key(tmp_path / "listed.pem", listed)
    write_private_key(tmp_path / "unlisted.pem", unlisted)
    (tmp_path / "garbage.pem").write_text("-----BEGIN PRIVATE KEY-----\nxx\n")
    env = {"MESSAGING_TRUSTED_KEYS": str(trusted)}
    key, _ = keys_from_env(
        Env("MESSAGING", {**env, "AGENTWORKS_SIGNING_KEY": str(tmp_path / "listed.pem")})
    )
    assert key == listed
    with pytest.raises(ConfigError, match="is not in the trusted keys"):
        keys_from_env(
            Env("MESSAGING", {**env, "MESSAGING_SIGNING_KEY": str(tmp_path / "unlisted.pem")})
        )
    with pytest.raises(
        ConfigError, match=r"^MESSAGING_SIGNING_KEY .* is not an unencrypted Ed25519"
    ):
        keys_from_env(
            Env("MESSAGING", {**env, "MESSAGING_SIGNING_KEY": str(tmp_path / "garbage.pem")})
        )
    with pytest.raises(
        ConfigError, match="AGENTWORKS_SIGNING_KEY is set but AGENTWORKS_TRUSTED_KEYS is not"
    ):
        keys_from_env(Env("MESSAGING", {"AGENTWORKS_SIGNING_KEY": str(tmp_path / "listed.pem")}))
    assert keys_from_env(Env("MESSAGING", {})) == (None, None)
