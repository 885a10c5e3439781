"""Helpers for the TLS tests: a CA and certificates made here, and one mosquitto with a listener per case.

:func:`make_pki` writes, with the ``cryptography`` package: a CA, another CA (a broker certificate
it did not sign is "unknown CA"), broker certificates for 127.0.0.1 (good, expired, and one issued
for another host name) and client certificates for mutual TLS (signed by the CA, and by the other
one). :class:`TlsBroker` is one mosquitto process with a password file and one listener per case.
The tests here check the helpers themselves.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.edgert.test_cloud_support import MOSQUITTO, end, free_port, needs_mosquitto, started, wait_port

try:
    import cryptography  # noqa: F401
    HAVE_CRYPTOGRAPHY = True
except ImportError:  # pragma: no cover - in the test extra
    HAVE_CRYPTOGRAPHY = False

needs_cryptography = pytest.mark.skipif(not HAVE_CRYPTOGRAPHY, reason="the tests' CA is made with the cryptography "
                                                                       "package: pip install cryptography")

#: The broker's user and password (in its password file).
USER, PASSWORD = "edge", "s3cret-pw"


@dataclass(frozen=True)
class Pki:
    """PEM files: ``ca`` / ``other_ca`` (certificates), and for each leaf ``NAME`` (cert) + ``NAME_key``."""

    dir: Path
    ca: Path
    other_ca: Path
    broker: Path
    broker_key: Path
    expired: Path
    expired_key: Path
    other_host: Path
    other_host_key: Path
    client: Path
    client_key: Path
    stranger: Path
    stranger_key: Path


def make_pki(d: Path) -> Pki:
    """A CA, another CA, and the leaf certificates of :class:`Pki` (EC P-256, SHA-256), written under ``d``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    d.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.timezone.utc)

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def write(stem: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey | None) -> tuple[Path, Path]:
        c, k = d / f"{stem}.pem", d / f"{stem}.key"
        c.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        if key is not None:
            k.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()))
        return c, k

    def ca(cn: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (x509.CertificateBuilder().subject_name(name(cn)).issuer_name(name(cn)).public_key(key.public_key())
                .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(days=1))
                .not_valid_after(now + dt.timedelta(days=30))
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                             content_commitment=False, key_encipherment=False,
                                             data_encipherment=False, key_agreement=False, encipher_only=False,
                                             decipher_only=False), critical=True)
                .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
                .sign(key, hashes.SHA256()))
        return cert, key

    def leaf(cn: str, issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey], *, server: bool,
             sans: list[x509.GeneralName], days: tuple[int, int] = (-1, 30)) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        key = ec.generate_private_key(ec.SECP256R1())
        b = (x509.CertificateBuilder().subject_name(name(cn)).issuer_name(issuer[0].subject)
             .public_key(key.public_key()).serial_number(x509.random_serial_number())
             .not_valid_before(now + dt.timedelta(days=days[0])).not_valid_after(now + dt.timedelta(days=days[1]))
             .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
             .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH if server
                                                   else ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
             .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer[1].public_key()),
                            critical=False))
        if sans:
            b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return b.sign(issuer[1], hashes.SHA256()), key

    the_ca, other = ca("edgert test CA"), ca("another CA")
    here = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
    files: dict[str, Path] = {}
    files["ca"], _ = write("ca", the_ca[0], None)
    files["other_ca"], _ = write("other_ca", other[0], None)
    for stem, cert_key in (
            ("broker", leaf("127.0.0.1", the_ca, server=True, sans=here)),
            ("expired", leaf("127.0.0.1", the_ca, server=True, sans=here, days=(-30, -1))),
            ("other_host", leaf("broker.example", the_ca, server=True, sans=[x509.DNSName("broker.example")])),
            ("client", leaf("edgert-device", the_ca, server=False, sans=[])),
            ("stranger", leaf("stranger", other, server=False, sans=[]))):
        files[stem], files[f"{stem}_key"] = write(stem, *cert_key)
    for p in d.iterdir():   # as root, mosquitto may read them as its own user
        p.chmod(0o644)
    return Pki(dir=d, **files)


class TlsBroker:
    """One mosquitto: a password file (``USER``/``PASSWORD``) and one loopback listener per case.

    ``ports``: ``tls`` (the broker certificate), ``plain`` (no TLS), ``mtls`` (TLS that requires a
    client certificate signed by the CA), ``expired`` and ``other_host`` (those certificates).
    """

    CASES = ("tls", "plain", "mtls", "expired", "other_host")

    def __init__(self, tmp: Path, pki: Pki) -> None:
        assert MOSQUITTO is not None
        self.pki = pki
        self.ports = {case: free_port() for case in self.CASES}
        pw = tmp / "passwd"
        pw.write_text(f"{USER}:{PASSWORD}\n")
        subprocess.run(["mosquitto_passwd", "-U", str(pw)], check=True, capture_output=True)
        pw.chmod(0o644)
        certs = {"tls": (pki.broker, pki.broker_key), "mtls": (pki.broker, pki.broker_key),
                 "expired": (pki.expired, pki.expired_key), "other_host": (pki.other_host, pki.other_host_key)}
        lines = ["persistence false", "set_tcp_nodelay true", "allow_anonymous false", f"password_file {pw}",
                 # as root, mosquitto would switch to user "mosquitto", who cannot read pytest's temp dirs
                 "user root" if os.geteuid() == 0 else ""]
        for case, port in self.ports.items():
            lines.append(f"listener {port} 127.0.0.1")
            if case in certs:
                lines += [f"certfile {certs[case][0]}", f"keyfile {certs[case][1]}"]
            if case == "mtls":
                lines += [f"cafile {pki.ca}", "require_certificate true"]
        self.conf = tmp / "mosquitto-tls.conf"
        self.conf.write_text("\n".join(x for x in lines if x) + "\n")
        self.log = tmp / "mosquitto-tls.log"
        with open(self.log, "ab") as fh:
            self.proc = started(subprocess.Popen([MOSQUITTO, "-c", str(self.conf)], stdout=fh, stderr=subprocess.STDOUT))
        try:
            for port in self.ports.values():
                wait_port(port)
        except TimeoutError:
            self.stop()
            raise RuntimeError(f"mosquitto did not start:\n{self.log.read_text(errors='replace')}") from None

    def url(self, case: str, *, scheme: str = "mqtts", user: str = USER, password: str | None = PASSWORD,
            **options: object) -> str:
        """``SCHEME://USER:PASSWORD@127.0.0.1:PORT?OPTIONS`` for the listener of ``case``."""
        cred = f"{user}:{password}@" if password is not None else f"{user}@"
        query = "&".join(f"{k}={v}" for k, v in options.items())
        return f"{scheme}://{cred}127.0.0.1:{self.ports[case]}" + (f"?{query}" if query else "")

    def stop(self) -> None:
        """Stop it and wait until its ports refuse connections."""
        end(self.proc)
        for port in self.ports.values():
            wait_port(port, up=False)


def test_the_pki_verifies_as_made(tls_pki: Pki) -> None:
    from cryptography import x509

    pki = tls_pki
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    assert ctx.cert_store_stats()["x509_ca"] == 1
    expired = x509.load_pem_x509_certificate(pki.expired.read_bytes())
    assert expired.not_valid_after_utc < dt.datetime.now(dt.timezone.utc)
    assert x509.load_pem_x509_certificate(pki.stranger.read_bytes()).issuer.rfc4514_string() == "CN=another CA"


@needs_mosquitto
def test_the_tls_broker_listens_on_every_case_and_stops(tmp_path: Path, tls_pki: Pki) -> None:
    b = TlsBroker(tmp_path, tls_pki)
    try:
        assert b.proc.poll() is None
        for case in TlsBroker.CASES:
            assert f"listener {b.ports[case]} 127.0.0.1" in b.conf.read_text()
    finally:
        b.stop()
    assert b.proc.poll() is not None
