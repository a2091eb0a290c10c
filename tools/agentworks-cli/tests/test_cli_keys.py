"""`agentworks keys new|init` (T1), run as the CLI subprocess: keys made locally, no gateway."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

from agentworks.core.identity import mint, verify
from agentworks.core.keys import SigningKey, TrustedKeys, keys_from_env
from agentworks.core.settings import Env

AGENTWORKS = str(Path(sys.executable).with_name("agentworks"))


def agentworks(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [AGENTWORKS, *args], capture_output=True, text=True, timeout=60, env={"PATH": ""}
    )


def test_keys_init_makes_a_key_per_signer_and_keeps_them_on_a_second_run_T1(tmp_path):
    """T1: `keys init --dir` makes the gateway's and the services' keys (0600, a directory
    each) and the trusted keys of their public halves; run again, it keeps them."""
    first = agentworks("keys", "init", "--dir", str(tmp_path / "keys"))
    assert first.returncode == 0, first.stderr
    made = json.loads(first.stdout)
    signers = [k["signer"] for k in made["keys"]]
    assert signers == [
        "gateway",
        "service:messaging",
        "service:functions",
        "service:scheduler",
    ]
    assert all(k["made"] for k in made["keys"])
    for key in made["keys"]:
        path = Path(key["private_key"])
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
        loaded, _ = keys_from_env(
            Env(
                "AGENTWORKS",
                {
                    "AGENTWORKS_SIGNING_KEY": str(path),
                    "AGENTWORKS_TRUSTED_KEYS": made["trusted_keys"],
                },
            )
        )
        assert loaded is not None and (loaded.signer, loaded.kid) == (key["signer"], key["kid"])
    again = json.loads(agentworks("keys", "init", "--dir", str(tmp_path / "keys")).stdout)
    assert [(k["kid"], k["made"]) for k in again["keys"]] == [
        (k["kid"], False) for k in made["keys"]
    ]


def test_keys_new_adds_a_second_key_for_a_signer_and_both_are_accepted_T1(tmp_path):
    """T1 rotation, step 1: `keys new --trusted` writes a new private key and adds its
    entry beside the old one; identities signed with either verify. It never overwrites
    a private key, and refuses a signer that is not one."""
    trusted = tmp_path / "trusted-keys.json"
    old = agentworks(
        "keys", "new", "--signer", "gateway", "--out", str(tmp_path / "old.pem"),
        "--trusted", str(trusted),
    )  # fmt: skip
    assert old.returncode == 0, old.stderr
    new = agentworks(
        "keys", "new", "--signer", "gateway", "--kid", "gateway-2", "--out",
        str(tmp_path / "new.pem"), "--trusted", str(trusted),
    )  # fmt: skip
    assert new.returncode == 0, new.stderr
    entry = json.loads(new.stdout)
    assert (entry["kid"], entry["signer"]) == ("gateway-2", "gateway")
    assert entry["public_key"].startswith("-----BEGIN PUBLIC KEY-----")
    assert "give it to gateway only" in new.stderr
    keys = TrustedKeys.load(str(trusted))
    assert sorted(k.kid for k in keys) == sorted([json.loads(old.stdout)["kid"], "gateway-2"])
    for pem in ("old.pem", "new.pem"):
        key = SigningKey.load(str(tmp_path / pem), keys)
        assert verify(mint("user:alice", key), keys).principal == "user:alice"

    again = agentworks("keys", "new", "--signer", "gateway", "--out", str(tmp_path / "new.pem"))
    assert again.returncode == 2 and "is never overwritten" in again.stderr
    wrong = agentworks("keys", "new", "--signer", "admin", "--out", str(tmp_path / "x.pem"))
    assert wrong.returncode == 2 and "signer 'admin' is not one" in wrong.stderr
    assert not (tmp_path / "x.pem").exists()
