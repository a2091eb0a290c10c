"""A throwaway CA and a certificate per process, for TLS and mutual TLS on gRPC (T5).

    python -m agentworks_dev.certs --out DIR NAME[=SAN,SAN...] ...

makes `DIR/ca/ca.crt` and `DIR/ca/ca.key` (the CA, kept so that more certificates can be
issued later), and for each NAME `DIR/NAME/tls.crt`, `tls.key` and `ca.crt`: the names
cert-manager gives a Secret's keys, so a process reads the same paths in compose and in
Kubernetes. Each certificate is good for serving and for presenting as a client
(serverAuth and clientAuth), for NAME, `localhost`, `127.0.0.1` and the extra SANs (DNS
names or IP addresses). What exists is kept: a certificate is made when missing, of
another CA, or ending within `--renew-days` (30); the CA (10 years) likewise; `--renew`
(or AGENTWORKS_CERTS_RENEW=1) makes everything again, a new CA too. So compose's
one-shot job runs on every `docker compose up`. `tests/fixtures/tls.py` uses the same
functions for the tests' CAs.
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import os
import pathlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_DAYS = 3650
DEFAULT_DAYS = 365
# A certificate (or the CA) that ends within this many days is made again.
RENEW_DAYS = 30
DEFAULT_SANS = ("localhost", "127.0.0.1")
CA_NAME = "AgentWorks throwaway CA"


@dataclass(frozen=True)
class Issued:
    """A certificate and its private key, PEM-encoded."""

    cert: bytes
    key: bytes


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def new_ca(name: str = CA_NAME, *, days: int = CA_DAYS) -> Issued:
    """A self-signed CA (P-256), allowed to sign end-entity certificates only."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return Issued(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def _san(value: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(value))
    except ValueError:
        return x509.DNSName(value)


def issue(ca: Issued, name: str, sans: Sequence[str] = (), *, days: int = DEFAULT_DAYS) -> Issued:
    """A certificate for `name` signed by `ca`, for servers and clients alike, valid for
    `name` and `sans` (DNS names or IP addresses)."""
    ca_cert = x509.load_pem_x509_certificate(ca.cert)
    ca_key = serialization.load_pem_private_key(ca.key, password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    names = list(dict.fromkeys([name, *sans]))
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName([_san(n) for n in names]), critical=False)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    return Issued(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def _write(path: pathlib.Path, data: bytes, mode: int) -> None:
    """Write `data` to `path` with `mode`, replacing it atomically."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.chmod(tmp, mode)  # the umask may have narrowed it
    os.replace(tmp, path)


def write_bundle(directory: pathlib.Path, issued: Issued, ca_cert: bytes) -> None:
    """`tls.crt`, `tls.key` (mode 0600) and `ca.crt` in `directory`, as cert-manager does."""
    directory.mkdir(parents=True, exist_ok=True)
    _write(directory / "ca.crt", ca_cert, 0o644)
    _write(directory / "tls.crt", issued.cert, 0o644)
    _write(directory / "tls.key", issued.key, 0o600)


def _expires_within(cert: bytes, days: int) -> bool:
    """Whether the PEM certificate `cert` ends within `days` days (or is unreadable)."""
    try:
        ends = x509.load_pem_x509_certificate(cert).not_valid_after_utc
    except ValueError:
        return True
    return ends - _now() < datetime.timedelta(days=days)


def load_or_make_ca(
    directory: pathlib.Path, *, renew: bool = False, renew_days: int = 0
) -> tuple[Issued, bool]:
    """The CA kept in `directory` (`ca.crt`, `ca.key`), made first when missing, when
    `renew`, or when it ends within `renew_days`; and whether it was made now."""
    cert, key = directory / "ca.crt", directory / "ca.key"
    if not renew and cert.is_file() and key.is_file():
        kept = Issued(cert.read_bytes(), key.read_bytes())
        if not _expires_within(kept.cert, renew_days):
            return kept, False
    directory.mkdir(parents=True, exist_ok=True)
    ca = new_ca()
    _write(key, ca.key, 0o600)
    _write(cert, ca.cert, 0o644)
    return ca, True


def _current(directory: pathlib.Path, ca: Issued, renew_days: int) -> bool:
    """Whether `directory` holds a bundle of `ca` that does not end within `renew_days`."""
    files = [directory / name for name in ("tls.crt", "tls.key", "ca.crt")]
    if not all(f.is_file() for f in files) or files[2].read_bytes() != ca.cert:
        return False
    return not _expires_within(files[0].read_bytes(), renew_days)


def _chown(directory: pathlib.Path, owner: str) -> None:
    """Give `directory` and its files to `owner` (`uid[:gid]`)."""
    uid, _, gid = owner.partition(":")
    for path in (directory, *directory.iterdir()):
        os.chown(path, int(uid), int(gid or uid))


def _parse_name(spec: str) -> tuple[str, list[str]]:
    name, _, extra = spec.partition("=")
    if not name or "/" in name or name in (".", "..", "ca"):
        raise SystemExit(f"agentworks_dev.certs: {spec!r} is not a usable name")
    return name, [s.strip() for s in extra.split(",") if s.strip()]


def parse_args(
    argv: Sequence[str] | None = None, environ: dict[str, str] | None = None
) -> argparse.Namespace:
    """The command line of `python -m agentworks_dev.certs` (flags, then environment)."""
    environ = dict(os.environ if environ is None else environ)
    parser = argparse.ArgumentParser(
        prog="python -m agentworks_dev.certs",
        description="Make a throwaway CA and a TLS certificate per process (T5).",
    )
    parser.add_argument("--out", required=True, help="directory to write into")
    parser.add_argument(
        "--days", type=int, default=DEFAULT_DAYS, help=f"certificate lifetime ({DEFAULT_DAYS})"
    )
    parser.add_argument(
        "--renew-days",
        type=int,
        default=RENEW_DAYS,
        help=f"remake a certificate that ends within this many days ({RENEW_DAYS})",
    )
    parser.add_argument(
        "--renew",
        action="store_true",
        default=environ.get("AGENTWORKS_CERTS_RENEW", "").lower() in ("1", "true", "yes", "on"),
        help="make everything again, a new CA too (env AGENTWORKS_CERTS_RENEW=1)",
    )
    parser.add_argument("--owner", default="", help="uid[:gid] to give the files to")
    parser.add_argument("names", nargs="+", metavar="NAME[=SAN,SAN...]")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None, environ: dict[str, str] | None = None) -> int:
    """Make what is missing or ending soon under `--out`; one line per CA and bundle."""
    args = parse_args(argv, environ)
    out = pathlib.Path(args.out)
    ca, made = load_or_make_ca(out / "ca", renew=args.renew, renew_days=args.renew_days)
    print(f"{'made' if made else 'kept'} CA {out / 'ca' / 'ca.crt'}", flush=True)
    for spec in args.names:
        name, extra = _parse_name(spec)
        target = out / name
        if _current(target, ca, args.renew_days):
            print(f"kept {target}", flush=True)
            continue
        write_bundle(target, issue(ca, name, [*DEFAULT_SANS, *extra], days=args.days), ca.cert)
        if args.owner:
            _chown(target, args.owner)
        print(f"made {target}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
