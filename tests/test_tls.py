"""Self-signed certificate generation, renewal and reload (DESIGN §2)."""
import datetime
import ssl

from cryptography import x509

from services.tls import RENEWAL_CHECK_SECONDS, CertificateSource, needs_renewal


def test_generated_certificate_covers_localhost_and_public_host(tmp_path):
    source = CertificateSource(tmp_path, hosts=["parley.example.org"])
    source.ensure()
    cert = x509.load_pem_x509_certificate(source.cert_path.read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {"localhost", "parley.example.org"} <= set(names.get_values_for_type(x509.DNSName))
    assert isinstance(source.load(), ssl.SSLContext)
    assert oct(source.key_path.stat().st_mode & 0o777) == "0o600"


def test_renewed_before_expiry(tmp_path):
    source = CertificateSource(tmp_path)
    source.ensure()
    source.load()
    assert not needs_renewal(source.cert_path)
    later = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=70)
    assert needs_renewal(source.cert_path, now=later)
    assert source.reload_if_changed() is None  # nothing changed, nothing rebuilt
    source.cert_path.write_bytes(b"")  # a damaged generated certificate is made anew at the next check
    source._renewal_checked -= RENEWAL_CHECK_SECONDS + 1
    assert isinstance(source.reload_if_changed(), ssl.SSLContext)
    assert not needs_renewal(source.cert_path)


def test_a_broken_given_certificate_keeps_the_old_context(tmp_path):
    given = CertificateSource(tmp_path / "first")
    given.ensure()
    source = CertificateSource(tmp_path, cert=given.cert_path, key=given.key_path)
    context = source.load()
    given.cert_path.write_text("-----BEGIN CERTIFICATE-----\nhalf written")
    assert source.reload_if_changed() is None
    assert source.context is context
