"""The runtime's settings are range-checked and its log settings refused when unknown (P4, P6)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from agentworks.core.settings import ConfigError
from agentworks.runtime.config import RuntimeConfig


@pytest.fixture
def base(signing_keys) -> dict[str, str]:
    """A usable runtime environment: an agent, a crew, and a key that may sign for the
    agent (the gateway's, standing in for the identity a runtime credential is exchanged
    for, T2)."""
    return {
        **signing_keys.env("gateway"),
        "AGENTWORKS_RUNTIME_PRINCIPAL": "agent:demo/bot",
        "AGENTWORKS_RUNTIME_TARGETS": "crew:demo",
    }


@pytest.mark.parametrize(
    ("setting", "bad", "message"),
    [
        ("AGENTWORKS_RUNTIME_WAIT_SECONDS", "26", "must be between 0 and 25, got '26'"),
        ("AGENTWORKS_RUNTIME_LEASE_SECONDS", "4", "must be between 5 and 300, got '4'"),
        ("AGENTWORKS_RUNTIME_CONCURRENCY", "0", "must be between 1 and 1000, got '0'"),
        ("AGENTWORKS_RUNTIME_CONCURRENCY", "two", "must be an integer, got 'two'"),
        ("LOG_LEVEL", "verbose", "must be one of debug, info, warning, warn, error, critical"),
        ("LOG_JSON", "ture", "must be true or false (also 1/0, yes/no, on/off), got 'ture'"),
        ("AGENTWORKS_RUNTIME_METRICS_LISTEN", "9464", "must look like host:port"),
    ],
)
def test_out_of_range_settings_are_refused_naming_the_variable_P4_P6(base, setting, bad, message):
    """P4 P6: the runtime refuses a setting out of its range or an unknown log word,
    naming the variable."""
    with pytest.raises(ConfigError) as refused:
        RuntimeConfig.from_env({**base, setting: bad})
    assert str(refused.value).startswith(f"{setting} {message}")


def test_a_bad_setting_stops_the_runtime_with_one_line_P4(base):
    """P4: `agentworks-runtime demo` with AGENTWORKS_RUNTIME_CONCURRENCY=0 prints one line
    naming it and exits with status 2."""
    done = subprocess.run(
        [sys.executable, "-m", "agentworks.runtime", "demo"],
        env={**os.environ, **base, "AGENTWORKS_RUNTIME_CONCURRENCY": "0"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr == (
        "agentworks-runtime: AGENTWORKS_RUNTIME_CONCURRENCY must be between 1 and 1000, got '0'\n"
    )


@pytest.mark.parametrize(
    ("principal", "says"),
    [
        ("user:bob", "signer service:runner may not vouch for user:bob"),
        ("agent:demo/bot", "signer service:runner may not vouch for agent:demo/bot"),
        ("service:functions", "signer service:runner may not vouch for service:functions"),
    ],
)
def test_a_runtime_cannot_be_configured_to_act_as_another_than_its_key_vouches_for_T1(
    base, signing_keys, principal, says
):
    """T1: a runtime run as a service of the deployment signs with its own key, which
    vouches for that service only: told to act as a user, an agent or another service,
    it does not start, saying so."""
    env = {**base, **signing_keys.env("service:runner"), "AGENTWORKS_RUNTIME_PRINCIPAL": principal}
    with pytest.raises(ValueError, match=says) as refused:
        RuntimeConfig.from_env(env)
    assert str(refused.value).startswith(f"AGENTWORKS_RUNTIME_PRINCIPAL {principal} cannot be")


def test_a_runtime_without_a_credential_or_a_key_does_not_start_T1_T2(base):
    """T1 T2: no AGENTWORKS_RUNTIME_CREDENTIAL (nor a signing key), no runtime."""
    env = {k: v for k, v in base.items() if k != "AGENTWORKS_SIGNING_KEY"}
    with pytest.raises(ValueError, match="AGENTWORKS_RUNTIME_CREDENTIAL is not set"):
        RuntimeConfig.from_env(env)


def test_with_a_runtime_credential_the_runtime_needs_no_signing_key_T2(tmp_path):
    """T2: AGENTWORKS_RUNTIME_CREDENTIAL (or _FILE) and AGENTWORKS_GATEWAY_URL make the
    runtime's identity a CredentialIdentity; no signing key is read or needed, and the
    gateway URL is required."""
    from agentworks.client.credentials import CredentialIdentity

    secret = "awr_" + "k" * 43
    path = tmp_path / "credential"
    path.write_text(secret + "\n")
    env = {
        "AGENTWORKS_RUNTIME_CREDENTIAL_FILE": str(path),
        "AGENTWORKS_GATEWAY_URL": "http://127.0.0.1:1",
        "AGENTWORKS_RUNTIME_TARGETS": "crew:demo",
        "AGENTWORKS_SIGNING_KEY": "/nowhere/key.pem",
    }
    config = RuntimeConfig.from_env(env)
    assert config.credential == secret and config.signing_key is None
    assert secret not in repr(config)
    identity = config.minter()
    assert isinstance(identity, CredentialIdentity) and identity.gateway_url.endswith(":1")
    with pytest.raises(ValueError, match="AGENTWORKS_GATEWAY_URL is not set"):
        RuntimeConfig.from_env({**env, "AGENTWORKS_GATEWAY_URL": ""})
    with pytest.raises(ValueError, match="AGENTWORKS_RUNTIME_CREDENTIAL_FILE '/nowhere'"):
        RuntimeConfig.from_env({**env, "AGENTWORKS_RUNTIME_CREDENTIAL_FILE": "/nowhere"})
    with pytest.raises(ValueError, match="AGENTWORKS_RUNTIME_CREDENTIAL: a runtime credential"):
        RuntimeConfig.from_env({**env, "AGENTWORKS_RUNTIME_CREDENTIAL": "aw_x"})


def test_a_runtime_serves_its_metrics_where_it_is_told_P4(base):
    """P4: AGENTWORKS_RUNTIME_METRICS_LISTEN is where the runtime serves /metrics (none
    when unset); a port another process holds stops it with one line naming the
    variable, status 2."""
    import socket

    assert RuntimeConfig.from_env(base).metrics_listen == ""
    listen = {**base, "AGENTWORKS_RUNTIME_METRICS_LISTEN": "127.0.0.1:9999"}
    assert RuntimeConfig.from_env(listen).metrics_listen == "127.0.0.1:9999"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "agentworks.runtime", "demo"],
            env={**os.environ, **base, "AGENTWORKS_RUNTIME_METRICS_LISTEN": f"127.0.0.1:{port}"},
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        f"agentworks-runtime: cannot serve metrics on 127.0.0.1:{port} "
        "(AGENTWORKS_RUNTIME_METRICS_LISTEN): Address already in use\n"
    )
