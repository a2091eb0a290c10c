"""The keys that sign and verify identities (A2, T1): Ed25519, one private key per signer.

- A signer holds its private key, a PEM file (`AGENTWORKS_SIGNING_KEY`), and no one else's.
- Everyone holds the *trusted keys*, a JSON file (`AGENTWORKS_TRUSTED_KEYS`) of public
  keys: `[{"kid": ..., "signer": ..., "public_key": "-----BEGIN PUBLIC KEY-----..."}]`.
  It names each key's signer, so a process finds its own kid and signer name by looking
  its public key up there, and a verifier needs no secret at all. A signer may have
  several entries (rotation: add the new key, switch the signer to it, remove the old).
  The file is read again when it changes (checked every RELOAD_SECONDS, and at once
  when an identity names a kid it does not know), so rotating needs no restart.

`KeyDirectory` makes a key per signer and the trusted-keys file for them in one
directory: what `agentworks keys init`, `agentworks up` and the tests use.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import structlog
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from agentworks.core.remembered import Remembered
from agentworks.core.settings import ConfigError, Env
from agentworks.core.trust import RETIRED_SIGNERS, check_signer, file_name

log = structlog.get_logger("agentworks.keys")

SIGNING_KEY_VARIABLE = "AGENTWORKS_SIGNING_KEY"
TRUSTED_KEYS_VARIABLE = "AGENTWORKS_TRUSTED_KEYS"
TRUSTED_KEYS_FILE = "trusted-keys.json"
SIGNING_KEY_FILE = "signing-key.pem"
# How often a verifier looks whether the trusted-keys file changed.
RELOAD_SECONDS = 5.0


def _raw(public_key: Ed25519PublicKey) -> bytes:
    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def default_kid(signer: str, public_key: Ed25519PublicKey) -> str:
    """`<signer file name>-<12 hex digits of the key's SHA-256>`: readable and stable."""
    return f"{file_name(signer)}-{hashlib.sha256(_raw(public_key)).hexdigest()[:12]}"


@dataclass(frozen=True)
class TrustedKey:
    """One public key, the signer it belongs to, and its key id."""

    kid: str
    signer: str
    public_key: Ed25519PublicKey = field(compare=False, repr=False)

    def entry(self) -> dict[str, str]:
        """Its entry in the trusted-keys file."""
        pem = self.public_key.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        return {"kid": self.kid, "signer": self.signer, "public_key": pem.decode()}


def parse_trusted_keys(text: str, source: str) -> dict[str, TrustedKey]:
    """The trusted-keys file's entries by kid; a ConfigError naming `source` and the entry
    when it is not a list of {kid, signer, public_key} with Ed25519 public keys."""
    try:
        entries = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{source} is not JSON: {exc}") from None
    if not isinstance(entries, list):
        raise ConfigError(f"{source} must hold a JSON list of {{kid, signer, public_key}}")
    found: dict[str, TrustedKey] = {}
    seen: dict[bytes, str] = {}
    for number, entry in enumerate(entries):
        where = f"{source} entry {number}"
        if not isinstance(entry, dict) or set(entry) != {"kid", "signer", "public_key"}:
            raise ConfigError(f"{where} must have exactly the keys kid, signer and public_key")
        kid, signer, pem = entry["kid"], entry["signer"], entry["public_key"]
        if not isinstance(kid, str) or not kid or len(kid) > 128:
            raise ConfigError(f"{where}: kid must be a non-empty string of at most 128 characters")
        if kid in found:
            raise ConfigError(f"{where}: kid {kid!r} is listed twice")
        if signer in RETIRED_SIGNERS:
            continue  # trusted for nothing any more (agentworks.core.trust)
        try:
            check_signer(signer)
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        try:
            public_key = serialization.load_pem_public_key(str(pem).encode())
        except ValueError:
            public_key = None
        if not isinstance(public_key, Ed25519PublicKey):
            raise ConfigError(f"{where}: public_key must be an Ed25519 public key in PEM")
        raw = _raw(public_key)
        if raw in seen:
            raise ConfigError(f"{where}: the public key of {kid!r} is also listed as {seen[raw]!r}")
        seen[raw] = kid
        found[kid] = TrustedKey(kid, signer, public_key)
    return found


class TrustedKeys:
    """The public keys identities are verified with, by kid; read again when the file
    changes. A file that turns unreadable or invalid keeps the keys read before (and
    says so in the log), so a bad edit does not lock every caller out."""

    def __init__(self, keys: Iterable[TrustedKey], path: str = "") -> None:
        self.path = path
        self._keys = {key.kid: key for key in keys}
        self._stamp = self._stat() if path else None
        self._next_check = time.monotonic() + RELOAD_SECONDS
        self._lock = threading.Lock()
        # The tokens verified with these keys (agentworks.core.remembered); replaced by
        # an empty store whenever the keys change, so nothing verified before outlives it.
        self.remembered = Remembered()

    @classmethod
    def load(cls, path: str, variable: str = TRUSTED_KEYS_VARIABLE) -> TrustedKeys:
        """Read the trusted-keys file `path` (named by `variable`); ConfigError if unusable."""
        try:
            text = pathlib.Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"{variable}: cannot read {path}: {exc.strerror or exc}") from None
        return cls(parse_trusted_keys(text, f"{variable} ({path})").values(), path)

    def _stat(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def refresh(self, *, now_if_changed: bool = False) -> None:
        """Read the file again if it changed: at most every RELOAD_SECONDS, or at once
        with `now_if_changed` (an unknown kid: the key may just have been added)."""
        if not self.path:
            return
        moment = time.monotonic()
        if not now_if_changed and moment < self._next_check:
            return
        with self._lock:
            self._next_check = moment + RELOAD_SECONDS
            stamp = self._stat()
            if stamp is None or stamp == self._stamp:
                return
            self._stamp = stamp
            try:
                text = pathlib.Path(self.path).read_text(encoding="utf-8")
                keys = parse_trusted_keys(text, self.path)
            except (OSError, ConfigError) as exc:
                log.warning("trusted_keys.unreadable", path=self.path, error=str(exc))
                return
            if keys.keys() != self._keys.keys() or any(
                _raw(k.public_key) != _raw(self._keys[kid].public_key)
                or k.signer != self._keys[kid].signer
                for kid, k in keys.items()
            ):
                self._keys = keys
                self.remembered = Remembered(self.remembered.max_entries)
                log.info("trusted_keys.reloaded", path=self.path, kids=",".join(sorted(keys)))

    def get(self, kid: str) -> TrustedKey | None:
        """The trusted key `kid`, or None."""
        self.refresh()
        key = self._keys.get(kid)
        if key is None:
            self.refresh(now_if_changed=True)
            key = self._keys.get(kid)
        return key

    def find(self, public_key: Ed25519PublicKey) -> TrustedKey | None:
        """The entry of this public key, or None."""
        raw = _raw(public_key)
        return next((k for k in self._keys.values() if _raw(k.public_key) == raw), None)

    def __iter__(self) -> Iterator[TrustedKey]:
        return iter(list(self._keys.values()))

    def __len__(self) -> int:
        return len(self._keys)


@dataclass(frozen=True)
class SigningKey:
    """A signer's private key, with the kid and signer name its trusted entry gives it."""

    kid: str
    signer: str
    private_key: Ed25519PrivateKey = field(compare=False, repr=False)

    @property
    def trusted(self) -> TrustedKey:
        """The public half, as a trusted-keys entry."""
        return TrustedKey(self.kid, self.signer, self.private_key.public_key())

    def pem(self) -> bytes:
        """The private key as unencrypted PKCS#8 PEM (what AGENTWORKS_SIGNING_KEY names)."""
        return self.private_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    @classmethod
    def generate(cls, signer: str, kid: str = "") -> SigningKey:
        """A new key pair for `signer`; the kid defaults to `default_kid`."""
        private_key = Ed25519PrivateKey.generate()
        return cls(
            kid or default_kid(signer, private_key.public_key()), check_signer(signer), private_key
        )

    @classmethod
    def load(
        cls, path: str, trusted: TrustedKeys, variable: str = SIGNING_KEY_VARIABLE
    ) -> SigningKey:
        """Read the PEM private key `path` and find its entry in `trusted`; ConfigError
        when the file is unusable or its public key is not trusted."""
        private_key = read_private_key(path, variable)
        entry = trusted.find(private_key.public_key())
        if entry is None:
            raise ConfigError(
                f"the public key of {variable} ({path}) is not in the trusted keys "
                f"({trusted.path or 'given'}): add its entry there first, so that its "
                "identities can be verified"
            )
        return cls(entry.kid, entry.signer, private_key)


def read_private_key(path: str, variable: str = SIGNING_KEY_VARIABLE) -> Ed25519PrivateKey:
    """The Ed25519 private key in the PEM file `path`; ConfigError naming `variable`."""
    try:
        data = pathlib.Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"{variable}: cannot read {path}: {exc.strerror or exc}") from None
    try:
        private_key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError):
        private_key = None
    if not isinstance(private_key, Ed25519PrivateKey):
        raise ConfigError(
            f"{variable} ({path}) is not an unencrypted Ed25519 private key in PEM "
            "(`agentworks keys new` makes one)"
        )
    return private_key


def _setting(env: Env, name: str) -> tuple[str, str]:
    """`<PREFIX>_<name>`, else `AGENTWORKS_<name>`: (variable, value)."""
    value = env.get_str(name)
    if value:
        return env.variable(name), value
    shared = f"AGENTWORKS_{name}"
    return shared, env.environ.get(shared, "")


def keys_from_env(env: Env) -> tuple[SigningKey | None, TrustedKeys | None]:
    """The process's signing key and the trusted keys, from `<PREFIX>_SIGNING_KEY` /
    `<PREFIX>_TRUSTED_KEYS` else `AGENTWORKS_SIGNING_KEY` / `AGENTWORKS_TRUSTED_KEYS`;
    None for what is not set. ConfigError names the variable at fault."""
    trusted_variable, trusted_path = _setting(env, "TRUSTED_KEYS")
    signing_variable, signing_path = _setting(env, "SIGNING_KEY")
    trusted = TrustedKeys.load(trusted_path, trusted_variable) if trusted_path else None
    if not signing_path:
        return None, trusted
    if trusted is None:
        raise ConfigError(
            f"{signing_variable} is set but {trusted_variable} is not: the trusted keys name "
            "the signer and kid of the signing key"
        )
    return SigningKey.load(signing_path, trusted, signing_variable), trusted


def signing_key_from_env(environ: Mapping[str, str] | None = None) -> SigningKey:
    """AGENTWORKS_SIGNING_KEY, found in AGENTWORKS_TRUSTED_KEYS: the key a service (or a
    runtime the operator runs as `service:<name>`) signs with. ConfigError when it is not
    set or not usable."""
    env = Env("AGENTWORKS", dict(os.environ if environ is None else environ))
    key, _ = keys_from_env(env)
    if key is None:
        raise ConfigError(
            f"{SIGNING_KEY_VARIABLE} is not set: name the signer's private key (PEM), "
            f"and {TRUSTED_KEYS_VARIABLE} the trusted keys"
        )
    return key


def _write(path: pathlib.Path, data: bytes, mode: int) -> None:
    """Replace `path` atomically with a new file of `mode`."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def write_private_key(path: pathlib.Path | str, key: SigningKey) -> None:
    """Write the private key to `path`, readable by its owner only (0600)."""
    _write(pathlib.Path(path), key.pem(), 0o600)


def write_trusted_keys(path: pathlib.Path | str, keys: Iterable[TrustedKey]) -> None:
    """Write the trusted-keys file (public keys only: 0644)."""
    text = json.dumps([k.entry() for k in keys], indent=2) + "\n"
    _write(pathlib.Path(path), text.encode(), 0o644)


def add_trusted_key(path: pathlib.Path | str, key: TrustedKey) -> None:
    """Add `key` to the trusted-keys file `path` (made if absent); a kid or a public key
    already there is a ValueError."""
    path = pathlib.Path(path)
    existing = (
        parse_trusted_keys(path.read_text(encoding="utf-8"), str(path)) if path.exists() else {}
    )
    if key.kid in existing:
        raise ValueError(f"kid {key.kid!r} is already in {path}")
    write_trusted_keys(path, [*existing.values(), key])


class KeyDirectory:
    """A key per signer under one directory, `<dir>/<signer file name>/signing-key.pem`,
    and the trusted-keys file listing them (`<dir>/trusted-keys.json` unless given).

    For `agentworks up`, compose's key job and the tests: in a deployment each signer's
    key lives only with that signer (a Secret each), and this directory is where the
    operator made them.
    """

    def __init__(
        self, directory: pathlib.Path | str, trusted_path: pathlib.Path | str = ""
    ) -> None:
        self.directory = pathlib.Path(directory)
        self.trusted_path = pathlib.Path(trusted_path or self.directory / TRUSTED_KEYS_FILE)
        self._lock = threading.Lock()

    def key_path(self, signer: str) -> pathlib.Path:
        return self.directory / file_name(signer) / SIGNING_KEY_FILE

    def _trusted(self) -> dict[str, TrustedKey]:
        if not self.trusted_path.exists():
            return {}
        return parse_trusted_keys(
            self.trusted_path.read_text(encoding="utf-8"), str(self.trusted_path)
        )

    def ensure(self, signer: str) -> tuple[SigningKey, bool]:
        """The signer's key, made (and added to the trusted keys) if it has none; (key,
        made). A key whose entry was removed from the trusted keys is listed again."""
        with self._lock:
            path = self.key_path(signer)
            trusted = self._trusted()
            if path.exists():
                private_key = read_private_key(str(path), str(path))
                entry = TrustedKeys(trusted.values()).find(private_key.public_key())
                if entry is not None:
                    return SigningKey(entry.kid, entry.signer, private_key), False
                key = SigningKey(default_kid(signer, private_key.public_key()), signer, private_key)
                write_trusted_keys(self.trusted_path, [*trusted.values(), key.trusted])
                return key, False
            key = SigningKey.generate(signer)
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            write_private_key(path, key)
            self.trusted_path.parent.mkdir(parents=True, exist_ok=True)
            write_trusted_keys(self.trusted_path, [*trusted.values(), key.trusted])
            return key, True

    def load(self, signer: str) -> SigningKey:
        """The signer's key as made before (ConfigError when there is none)."""
        path = self.key_path(signer)
        if not path.exists():
            raise ConfigError(f"{path} does not exist: `agentworks up` (or keys init) makes it")
        return SigningKey.load(str(path), TrustedKeys.load(str(self.trusted_path)), str(path))

    def env(self, signer: str) -> dict[str, str]:
        """AGENTWORKS_SIGNING_KEY (this signer's key only) and AGENTWORKS_TRUSTED_KEYS."""
        self.ensure(signer)
        return {
            SIGNING_KEY_VARIABLE: str(self.key_path(signer)),
            TRUSTED_KEYS_VARIABLE: str(self.trusted_path),
        }

    def trusted(self) -> TrustedKeys:
        return TrustedKeys.load(str(self.trusted_path))
