"""TLS: a self-signed certificate made on first start and renewed, and reloading certificate files."""
from __future__ import annotations

import datetime
import ipaddress
import logging
import os
import ssl
import time
from collections.abc import Iterable
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from services import tls_profile

log = logging.getLogger("parley.tls")

VALID_DAYS = 90  # browsers accept at most 398; Mozilla's profiles ask for 90
RENEW_BEFORE = datetime.timedelta(days=30)
RENEWAL_CHECK_SECONDS = 3600  # parsing the certificate is the only cost; once an hour is plenty


def _names(hosts: Iterable[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for host in dict.fromkeys(["localhost", "127.0.0.1", "::1", *hosts]):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def write_self_signed(cert_path: Path, key_path: Path, hosts: Iterable[str] = ()) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Parley self-signed")])
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
            .add_extension(x509.SubjectAlternativeName(_names(hosts)), critical=False)
            # An end-entity certificate: pinning it (curl --cacert, cafile=) trusts this server only, never
            # a CA whose key sits in data/tls/. Strict verifiers (rustls, webpki) refuse a CA as a leaf.
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=False,
                                         crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    cert_path.parent.mkdir(parents=True, exist_ok=True)
    # Write to temporary names then rename, so a watcher never sees half a pair.
    tmp_key, tmp_cert = key_path.with_suffix(".tmp-key"), cert_path.with_suffix(".tmp-cert")
    fd = os.open(tmp_key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(key_pem)
    tmp_cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    os.replace(tmp_key, key_path)
    os.replace(tmp_cert, cert_path)
    log.info("wrote self-signed certificate %s valid until %s", cert_path, cert.not_valid_after_utc)


def needs_renewal(cert_path: str | Path, now: datetime.datetime | None = None) -> bool:
    try:
        cert = x509.load_pem_x509_certificate(Path(cert_path).read_bytes())
    except (FileNotFoundError, ValueError):
        return True
    now = now or datetime.datetime.now(datetime.timezone.utc)
    return cert.not_valid_after_utc - now < RENEW_BEFORE or _is_ca(cert)


def _is_ca(cert: x509.Certificate) -> bool:
    """Earlier versions generated a CA:TRUE certificate: it is replaced by an end-entity one."""
    try:
        return cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        return False


class CertificateSource:
    """Where the server's certificate comes from, and the SSLContext built from it.

    ``context`` is rebuilt (once per change) when the files' mtimes change; the server hands the new
    context to new connections, existing ones keep theirs.
    """

    def __init__(self, data_dir: str | Path, cert: str | None = None, key: str | None = None, hosts: Iterable[str] = (), profile: str = "intermediate") -> None:
        self.generated = cert is None
        self.profile = profile
        tls_dir = Path(data_dir) / "tls"
        self.cert_path = Path(cert) if cert else tls_dir / "cert.pem"
        self.key_path = Path(key) if key else tls_dir / "key.pem"
        self.hosts = tuple(hosts)
        self._seen: tuple[int, int] | None = None
        self._renewal_checked = float("-inf")
        self.context: ssl.SSLContext | None = None

    def _mtimes(self) -> tuple[int, int]:
        return (self.cert_path.stat().st_mtime_ns, self.key_path.stat().st_mtime_ns)

    def ensure(self) -> None:
        """Generate or renew the self-signed pair when we own it."""
        self._renewal_checked = time.monotonic()
        if self.generated and (not self.key_path.exists() or needs_renewal(self.cert_path)):
            write_self_signed(self.cert_path, self.key_path, self.hosts)

    def load(self) -> ssl.SSLContext:
        ctx = tls_profile.server_context(self.profile)
        ctx.load_cert_chain(str(self.cert_path), str(self.key_path))
        self._seen = self._mtimes()
        self.context = ctx
        return ctx

    def reload_if_changed(self) -> ssl.SSLContext | None:
        """Returns the new context when the files changed (or a renewal was due), else None."""
        try:
            if time.monotonic() - self._renewal_checked > RENEWAL_CHECK_SECONDS:
                self.ensure()
            if self._mtimes() == self._seen:
                return None
            ctx = self.load()
        except (OSError, ssl.SSLError, ValueError) as exc:
            # A half-written pair: keep serving the old certificate and try again next tick.
            log.warning("certificate not reloaded yet: %s", exc)
            return None
        log.info("reloaded TLS certificate from %s", self.cert_path)
        return ctx
