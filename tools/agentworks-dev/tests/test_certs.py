"""`python -m agentworks_dev.certs`: compose's one-shot job that makes the throwaway CA and
a certificate per process for mutual TLS (T5)."""

from __future__ import annotations

import ipaddress
import os
import stat

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from agentworks_dev.certs import main


def _cert(path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_the_job_makes_a_ca_and_a_bundle_per_name_and_keeps_them_on_a_rerun_T5(tmp_path, capsys):
    """T5: a CA, and per name tls.crt / tls.key (0600) / ca.crt (the names of a
    cert-manager Secret), signed by the CA, for serving and as a client, valid for the
    name, localhost, 127.0.0.1 and extra SANs; a second run keeps all of it."""
    out = tmp_path / "certs"
    owner = f"{os.getuid()}:{os.getgid()}"
    assert main(["--out", str(out), "--owner", owner, "messaging", "gw=gw.example,10.0.0.7"]) == 0
    ca = _cert(out / "ca" / "ca.crt")
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    for name, extra in (("messaging", []), ("gw", ["gw.example", "10.0.0.7"])):
        bundle = out / name
        assert sorted(p.name for p in bundle.iterdir()) == ["ca.crt", "tls.crt", "tls.key"]
        assert stat.S_IMODE((bundle / "tls.key").stat().st_mode) == 0o600
        assert (bundle / "ca.crt").read_bytes() == (out / "ca" / "ca.crt").read_bytes()
        cert = _cert(bundle / "tls.crt")
        cert.verify_directly_issued_by(ca)
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert set(sans.get_values_for_type(x509.DNSName)) == {name, "localhost", *extra[:1]}
        ips = {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)}
        assert ips == {"127.0.0.1", *extra[1:]}
        assert all(ipaddress.ip_address(ip) for ip in ips)
        usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        assert set(usages) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
    first = (out / "messaging" / "tls.crt").read_bytes()
    capsys.readouterr()
    assert main(["--out", str(out), "messaging", "gw", "scheduler"]) == 0
    said = capsys.readouterr().out
    assert "kept CA" in said and f"kept {out / 'messaging'}" in said
    assert f"made {out / 'scheduler'}" in said
    assert (out / "messaging" / "tls.crt").read_bytes() == first
    _cert(out / "scheduler" / "tls.crt").verify_directly_issued_by(ca)


def test_certificates_ending_soon_are_remade_and_renew_makes_a_new_ca_T5(tmp_path):
    """T5 (rotation): a certificate that ends within --renew-days is made again with the
    same CA; --renew (or AGENTWORKS_CERTS_RENEW=1) makes a new CA and every certificate."""
    out = tmp_path / "certs"
    assert main(["--out", str(out), "--days", "10", "messaging"], {}) == 0
    short = (out / "messaging" / "tls.crt").read_bytes()
    ca = (out / "ca" / "ca.crt").read_bytes()
    assert main(["--out", str(out), "messaging"], {}) == 0
    renewed = (out / "messaging" / "tls.crt").read_bytes()
    assert renewed != short and (out / "ca" / "ca.crt").read_bytes() == ca
    assert main(["--out", str(out), "messaging"], {}) == 0
    assert (out / "messaging" / "tls.crt").read_bytes() == renewed
    assert main(["--out", str(out), "messaging"], {"AGENTWORKS_CERTS_RENEW": "1"}) == 0
    assert (out / "ca" / "ca.crt").read_bytes() != ca
    new_ca = _cert(out / "ca" / "ca.crt")
    _cert(out / "messaging" / "tls.crt").verify_directly_issued_by(new_ca)
    assert (out / "messaging" / "ca.crt").read_bytes() == (out / "ca" / "ca.crt").read_bytes()
