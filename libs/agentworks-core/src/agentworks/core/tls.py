"""TLS and mutual TLS on gRPC hops (T5): the PEM files a process is given, read once.

One `Tls` per process, from `<PREFIX>_TLS_*` variables, else the shared `AGENTWORKS_TLS_*`
ones (a runtime's prefix is `AGENTWORKS`, so it reads those directly):

| setting | as a server | as a client |
|---|---|---|
| `TLS_CERT_FILE`, `TLS_KEY_FILE` | serve TLS with this certificate | present it (mutual TLS) |
| `TLS_CA_FILE` | | call over TLS, trusting servers this CA signed |
| `TLS_CLIENT_CA_FILE` | require a client certificate this CA signed (mutual TLS) | |
| `TLS_SERVER_NAME` | | the name checked in server certificates instead of the host |

With none of them set, everything is plain text (`agentworks up` on loopback). A file that
cannot be read or holds no PEM of the right kind, a certificate without its key (or a key
without its certificate), or a client CA on a server without a certificate is refused at
start with a `ConfigError` naming the variable. The files are read once: a rotated
certificate takes effect when the process restarts (docs/operations.md, "TLS").
"""

from __future__ import annotations

import pathlib
import ssl
from dataclasses import dataclass
from typing import Any

import grpc

from agentworks.core.settings import ConfigError, Env

SHARED_PREFIX = "AGENTWORKS"
CERT_FILE = "TLS_CERT_FILE"
KEY_FILE = "TLS_KEY_FILE"
CA_FILE = "TLS_CA_FILE"
CLIENT_CA_FILE = "TLS_CLIENT_CA_FILE"
SERVER_NAME = "TLS_SERVER_NAME"
# Every TLS setting's name, without a prefix.
SETTINGS = (CERT_FILE, KEY_FILE, CA_FILE, CLIENT_CA_FILE, SERVER_NAME)

_CERTIFICATE_PEM = b"-----BEGIN CERTIFICATE-----"
_KEY_PEM = b"PRIVATE KEY-----"


@dataclass(frozen=True)
class Tls:
    """One process's TLS material (PEM bytes), empty where not given."""

    # This process's certificate chain and private key: served by a server, presented to
    # servers by a client (mutual TLS).
    cert: bytes = b""
    key: bytes = b""
    # The CA whose certificates a client trusts; outgoing calls use TLS when it is set.
    ca: bytes = b""
    # A server requires a client certificate from this CA (mutual TLS) when it is set.
    client_ca: bytes = b""
    # Checked in server certificates instead of the address's host (an IP, a list).
    server_name: str = ""

    @property
    def serves_tls(self) -> bool:
        """Whether a server with these settings serves TLS (it has a certificate)."""
        return bool(self.cert)

    @property
    def calls_tls(self) -> bool:
        """Whether a client with these settings calls over TLS (it trusts a CA)."""
        return bool(self.ca)

    def describe(self, *, server: bool) -> str:
        """`plain text`, `TLS` or `mutual TLS`: what this process serves, or calls with."""
        if server:
            on, mutual = self.serves_tls, bool(self.client_ca)
        else:
            on, mutual = self.calls_tls, bool(self.cert)
        return "plain text" if not on else "mutual TLS" if mutual else "TLS"

    def channel_credentials(self) -> grpc.ChannelCredentials:
        """Credentials for a TLS channel: trust `ca`, present `cert` when there is one."""
        return grpc.ssl_channel_credentials(
            root_certificates=self.ca,
            private_key=self.key or None,
            certificate_chain=self.cert or None,
        )

    def channel_options(self) -> list[tuple[str, Any]]:
        """The channel options TLS adds: the server name to check, when one is set."""
        if not self.server_name:
            return []
        return [("grpc.ssl_target_name_override", self.server_name)]

    def server_credentials(self) -> grpc.ServerCredentials:
        """Credentials for a TLS port: `cert`, and with `client_ca` a required client
        certificate that CA signed."""
        return grpc.ssl_server_credentials(
            [(self.key, self.cert)],
            root_certificates=self.client_ca or None,
            require_client_auth=bool(self.client_ca),
        )

    @classmethod
    def from_env(cls, env: Env, *, server: bool = True) -> Tls:
        """Read the TLS settings of `env`'s process (see the module docstring); a client
        only (`server=False`) has no `TLS_CLIENT_CA_FILE`."""
        shared = env if env.prefix == SHARED_PREFIX else Env(SHARED_PREFIX, env.environ)
        names = [n for n in SETTINGS if server or n != CLIENT_CA_FILE]
        found = {name: _setting(env, shared, name) for name in names}
        cert_var, cert_path = found[CERT_FILE]
        key_var, key_path = found[KEY_FILE]
        if bool(cert_path) != bool(key_path):
            given, missing = (cert_var, key_var) if cert_path else (key_var, cert_var)
            raise ConfigError(
                f"{given} is set but {missing} is not: a certificate and its private key "
                "go together"
            )
        client_var, client_path = found.get(CLIENT_CA_FILE, ("", ""))
        if client_path and not cert_path:
            raise ConfigError(
                f"{client_var} turns on mutual TLS, which needs the server's own "
                f"certificate: set {cert_var} and {key_var} too"
            )
        if cert_path:
            _check_pair(cert_var, cert_path, key_var, key_path)
        ca_var, ca_path = found[CA_FILE]
        return cls(
            cert=_read(cert_var, cert_path, _CERTIFICATE_PEM, "PEM certificate"),
            key=_read(key_var, key_path, _KEY_PEM, "PEM private key"),
            ca=_read(ca_var, ca_path, _CERTIFICATE_PEM, "PEM CA certificate"),
            client_ca=_read(client_var, client_path, _CERTIFICATE_PEM, "PEM CA certificate"),
            server_name=found[SERVER_NAME][1],
        )


def _setting(env: Env, shared: Env, name: str) -> tuple[str, str]:
    """(variable, value) of a TLS setting: `<PREFIX>_<name>`, else `AGENTWORKS_<name>`;
    an unset one is named both ways."""
    value = env.get_str(name).strip()
    if value or shared is env:
        return env.variable(name), value
    value = shared.get_str(name).strip()
    if value:
        return shared.variable(name), value
    return f"{env.variable(name)} (or {shared.variable(name)})", ""


def _check_pair(cert_var: str, cert_path: str, key_var: str, key_path: str) -> None:
    """A `ConfigError` unless the key belongs to the certificate (gRPC would only say,
    at the first handshake or as "failed to bind", that it cannot use them)."""
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_cert_chain(
            cert_path, key_path, password=_no_passphrase
        )
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise ConfigError(
            f"{key_var} ({key_path}) is not the private key of the certificate in "
            f"{cert_var} ({cert_path}), or they cannot be used: {exc}"
        ) from None


def _no_passphrase() -> str:
    raise ValueError("the key is encrypted; gRPC needs it without a passphrase")


def _read(variable: str, path: str, marker: bytes, what: str) -> bytes:
    """The file's bytes, or a `ConfigError` naming `variable` when it cannot be read or
    holds no `what`; empty when `path` is."""
    if not path:
        return b""
    try:
        data = pathlib.Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"{variable} names {path}, which cannot be read: {exc.strerror or exc}"
        ) from None
    if marker not in data:
        raise ConfigError(f"{variable} names {path}, which holds no {what}")
    return data
