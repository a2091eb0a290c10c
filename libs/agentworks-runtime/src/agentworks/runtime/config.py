"""The runtime's configuration, read once from `AGENTWORKS_*` environment variables."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass

from agentworks.client.credentials import CredentialIdentity, check_credential
from agentworks.core.errors import InvalidArgument
from agentworks.core.identity import Minter, check_principal
from agentworks.core.keys import (
    SIGNING_KEY_VARIABLE,
    TRUSTED_KEYS_VARIABLE,
    SigningKey,
    keys_from_env,
)
from agentworks.core.limits import MAX_WAIT_SECONDS as MAX_WAIT_SECONDS
from agentworks.core.settings import LOG_LEVELS, Env
from agentworks.core.tls import Tls
from agentworks.core.trust import vouching_refusal

# ClaimTurn bounds (messaging.proto): wait 0-MAX_WAIT_SECONDS (limits), lease 5-300 s.
MIN_LEASE_SECONDS = 5
MAX_LEASE_SECONDS = 300
# Turns one runtime process handles at once.
MAX_CONCURRENCY = 1000
# B9: turns of different conversations a runtime runs at once when not told
# (AGENTWORKS_RUNTIME_CONCURRENCY), and how long one turn may take before its handler
# is ended (AGENTWORKS_RUNTIME_TURN_SECONDS; the turn is then completed as failed).
DEFAULT_TURN_CONCURRENCY = 4
DEFAULT_TURN_SECONDS = 600
MAX_TURN_SECONDS = 24 * 3600
# After the first SIGTERM, how long work in hand may take before it is cancelled.
DEFAULT_DRAIN_SECONDS = 30
MAX_DRAIN_SECONDS = 3600


def split_targets(value: str) -> tuple[str, ...]:
    """`crew:a, workflow:b` as a tuple of target names, blanks dropped."""
    return tuple(t.strip() for t in value.split(",") if t.strip())


def _drain_seconds(env: Env) -> int:
    return env.get_int(
        "RUNTIME_DRAIN_SECONDS", DEFAULT_DRAIN_SECONDS, minimum=0, maximum=MAX_DRAIN_SECONDS
    )


CREDENTIAL_VARIABLE = "AGENTWORKS_RUNTIME_CREDENTIAL"
CREDENTIAL_FILE_VARIABLE = "AGENTWORKS_RUNTIME_CREDENTIAL_FILE"
GATEWAY_URL_VARIABLE = "AGENTWORKS_GATEWAY_URL"


def _credential(env: Env) -> str:
    """AGENTWORKS_RUNTIME_CREDENTIAL, else the contents of the file that
    AGENTWORKS_RUNTIME_CREDENTIAL_FILE names; "" when neither is set."""
    credential = env.get_str("RUNTIME_CREDENTIAL")
    path = env.get_str("RUNTIME_CREDENTIAL_FILE")
    if credential or not path:
        return credential
    try:
        with open(path, encoding="utf-8") as file:
            return file.read().strip()
    except OSError as exc:
        raise ValueError(
            f"{CREDENTIAL_FILE_VARIABLE} {path!r} cannot be read ({exc.strerror}): point it at "
            "the file holding the runtime credential (awr_...)"
        ) from None


def drain_seconds_from_env(environ: Mapping[str, str] | None = None) -> int:
    """AGENTWORKS_RUNTIME_DRAIN_SECONDS (0-3600, default 30): after the first SIGTERM,
    how long the work in hand may take before it is cancelled. Raises ValueError
    (ConfigError) naming the variable when it is not such a number."""
    return _drain_seconds(Env("AGENTWORKS", dict(os.environ if environ is None else environ)))


@dataclass(frozen=True)
class RuntimeConfig:
    """Where the runtime connects, who it is, and which targets it serves."""

    messaging_address: str
    # Without a runtime credential, the key this runtime signs its identity with
    # (AGENTWORKS_SIGNING_KEY, found in AGENTWORKS_TRUSTED_KEYS), whose signer must vouch
    # for its principal (agentworks.core.trust): a runtime the operator runs as a service
    # of the deployment signs as that `service:<name>`.
    signing_key: SigningKey | None
    principal: str
    targets: tuple[str, ...]
    # Function executions (R1): ExecutionWorker claims from here.
    functions_address: str = ""
    # Wake-ups (S1): TurnContext.wake_me asks this scheduler; empty disables them.
    scheduler_address: str = ""
    # Project root of function executions: calls run in <root>/.calls/<call_id>/ (F4).
    root: str = "."
    wait_seconds: int = 20
    lease_seconds: int = 30
    # Turns / executions handled at once; 0 (not set): one turn at a time, and as many
    # executions as the targets' running limits allow (ExecutionWorker, F5).
    concurrency: int = 0
    # B9: the most one turn's handler may take (seconds) before it is ended.
    turn_seconds: int = DEFAULT_TURN_SECONDS
    health_file: str = ""
    drain_seconds: int = DEFAULT_DRAIN_SECONDS
    log_level: str = "info"
    log_json: bool = True
    # AGENTWORKS_TLS_*: TLS (and the certificate for mutual TLS) on the calls (T5).
    tls: Tls = dataclasses.field(default_factory=Tls)
    # The command runner's sandbox (T6): "bwrap", or "none" to run commands without one;
    # the bubblewrap program; the sandbox user when the runner is root.
    sandbox: str = "bwrap"
    bwrap: str = "bwrap"
    sandbox_uid: int = 65534
    # AGENTWORKS_RUNTIME_* variables that are no setting (typos), for a warning at start.
    unknown_settings: tuple[str, ...] = ()
    # A runtime credential (T2; AGENTWORKS_RUNTIME_CREDENTIAL or _FILE), exchanged at the
    # gateway (AGENTWORKS_GATEWAY_URL) for the runtime's identity: with it no signing key
    # is read or needed.
    credential: str = dataclasses.field(default="", repr=False)
    gateway_url: str = ""
    # host:port where the runtime serves its Prometheus /metrics (`agentworks.runtime.
    # metrics`); empty: none.
    metrics_listen: str = ""

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        default_principal: str = "",
        default_targets: tuple[str, ...] = (),
    ) -> RuntimeConfig:
        """Build the config from `AGENTWORKS_*` variables (defaults for the demo crew)."""
        env = Env("AGENTWORKS", dict(os.environ if environ is None else environ))
        config = cls(
            messaging_address=env.get_str("MESSAGING_ADDRESS", "127.0.0.1:50051"),
            signing_key=None,
            principal=env.get_str("RUNTIME_PRINCIPAL", default_principal),
            targets=split_targets(env.get_str("RUNTIME_TARGETS")) or default_targets,
            functions_address=env.get_str("FUNCTIONS_ADDRESS", "127.0.0.1:50052"),
            scheduler_address=env.get_str("SCHEDULER_ADDRESS", "127.0.0.1:50053"),
            root=env.get_str("RUNTIME_ROOT", "."),
            wait_seconds=env.get_int(
                "RUNTIME_WAIT_SECONDS", 20, minimum=0, maximum=MAX_WAIT_SECONDS
            ),
            lease_seconds=env.get_int(
                "RUNTIME_LEASE_SECONDS", 30, minimum=MIN_LEASE_SECONDS, maximum=MAX_LEASE_SECONDS
            ),
            concurrency=env.get_int("RUNTIME_CONCURRENCY", 0, minimum=1, maximum=MAX_CONCURRENCY),
            turn_seconds=env.get_int(
                "RUNTIME_TURN_SECONDS", DEFAULT_TURN_SECONDS, minimum=1, maximum=MAX_TURN_SECONDS
            ),
            health_file=env.get_str("RUNTIME_HEALTH_FILE"),
            drain_seconds=_drain_seconds(env),
            log_level=env.get_choice("LOG_LEVEL", "info", LOG_LEVELS, shared=True),
            log_json=env.get_bool("LOG_JSON", True, shared=True),
            tls=Tls.from_env(env, server=False),
            sandbox=env.get_choice("RUNTIME_SANDBOX", "bwrap", ("bwrap", "none")),
            bwrap=env.get_str("RUNTIME_BWRAP", "bwrap"),
            sandbox_uid=env.get_int("RUNTIME_SANDBOX_UID", 65534, minimum=1, maximum=2**31 - 2),
            metrics_listen=env.get_address("RUNTIME_METRICS_LISTEN", empty_host=True),
        )
        credential = _credential(env)
        config = dataclasses.replace(
            config,
            credential=credential,
            gateway_url=env.get_str("GATEWAY_URL"),
            signing_key=None if credential else keys_from_env(env)[0],
            unknown_settings=tuple(env.unknown("RUNTIME_")),
        )
        config.validate()
        return config

    @property
    def turn_concurrency(self) -> int:
        """Turns handled at once (B9): AGENTWORKS_RUNTIME_CONCURRENCY, else
        `DEFAULT_TURN_CONCURRENCY` (each of a different conversation)."""
        return self.concurrency or DEFAULT_TURN_CONCURRENCY

    def minter(self) -> Minter | CredentialIdentity:
        """The runtime's identity: exchanged for its runtime credential at the gateway
        (its principal must be AGENTWORKS_RUNTIME_PRINCIPAL when that is set), else its
        principal signed with its key."""
        if self.credential:
            return CredentialIdentity(
                self.gateway_url, self.credential, expected_principal=self.principal
            )
        return Minter(self.principal, self.signing_key)

    def _validate_credential(self) -> None:
        try:
            check_credential(self.credential)
        except InvalidArgument as exc:
            raise ValueError(f"{CREDENTIAL_VARIABLE}: {exc.message}") from None
        if not self.gateway_url:
            raise ValueError(
                f"{GATEWAY_URL_VARIABLE} is not set: the runtime exchanges its credential "
                "at the gateway, e.g. http://127.0.0.1:8080"
            )
        if self.principal:
            try:
                check_principal(self.principal, "AGENTWORKS_RUNTIME_PRINCIPAL")
            except InvalidArgument as exc:
                raise ValueError(exc.message) from None

    def validate(self) -> None:
        """Raise ValueError naming the variable to fix when a setting is unusable."""
        if self.credential:
            self._validate_credential()
        elif self.signing_key is None:
            raise ValueError(
                f"{CREDENTIAL_VARIABLE} is not set: the runtime exchanges its runtime "
                "credential at the gateway for its identity (or, run as a service of the "
                f"deployment, signs with its own key: {SIGNING_KEY_VARIABLE}, found in "
                f"{TRUSTED_KEYS_VARIABLE})"
            )
        if self.signing_key is not None:
            self._validate_key(self.signing_key)
        if not self.targets:
            raise ValueError(
                "AGENTWORKS_RUNTIME_TARGETS is not set: a comma-separated list such as crew:demo"
            )
        for target in self.targets:
            kind, sep, name = target.partition(":")
            if not sep or kind not in ("crew", "workflow") or not name:
                raise ValueError(
                    f"AGENTWORKS_RUNTIME_TARGETS entry {target!r} must look like "
                    "crew:<name> or workflow:<id>"
                )
        if not 0 <= self.wait_seconds <= MAX_WAIT_SECONDS:
            raise ValueError(
                f"AGENTWORKS_RUNTIME_WAIT_SECONDS must be 0-{MAX_WAIT_SECONDS}, "
                f"got {self.wait_seconds}"
            )
        if not MIN_LEASE_SECONDS <= self.lease_seconds <= MAX_LEASE_SECONDS:
            raise ValueError(
                f"AGENTWORKS_RUNTIME_LEASE_SECONDS must be {MIN_LEASE_SECONDS}-"
                f"{MAX_LEASE_SECONDS}, got {self.lease_seconds}"
            )
        if not 0 <= self.drain_seconds <= MAX_DRAIN_SECONDS:
            raise ValueError(
                f"AGENTWORKS_RUNTIME_DRAIN_SECONDS must be 0-{MAX_DRAIN_SECONDS}, "
                f"got {self.drain_seconds}"
            )
        if not 0 <= self.concurrency <= MAX_CONCURRENCY:
            raise ValueError(
                f"AGENTWORKS_RUNTIME_CONCURRENCY must be 1-{MAX_CONCURRENCY}, "
                f"got {self.concurrency}"
            )

    def _validate_key(self, key: SigningKey) -> None:
        if not self.principal:
            raise ValueError(
                "AGENTWORKS_RUNTIME_PRINCIPAL is not set: use agent:<crew>/<agent>, "
                "e.g. agent:demo/demo-bot"
            )
        try:
            check_principal(self.principal, "AGENTWORKS_RUNTIME_PRINCIPAL")
        except InvalidArgument as exc:
            raise ValueError(exc.message) from None
        why = vouching_refusal(key.signer, self.principal, ())
        if why:
            raise ValueError(
                f"AGENTWORKS_RUNTIME_PRINCIPAL {self.principal} cannot be signed with "
                f"{SIGNING_KEY_VARIABLE} (key {key.kid!r}): {why}"
            )
