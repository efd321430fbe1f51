"""Self-signed certificate generation, renewal and reload (docs/design.md#running); the Mozilla TLS configurations of the\nlistener (sslyze) and of Parley's own clients (issue 27)."""
import datetime
import json
import logging
import os
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import ExtendedKeyUsageOID
from tornado.netutil import Resolver

from services import tls_profile
from services.bot_runner import BotRunner
from services.tls import RENEWAL_CHECK_SECONDS, CertificateSource, needs_renewal
from services.webhook_client import KeepAliveClient
from tests.parley_process import ROOT, ParleyProcess


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


# --- the generated certificate is an end-entity one (issue 27 item 2) ---------------------------------

def test_generated_certificate_is_an_end_entity_for_the_server_only(tmp_path):
    """CA:TRUE made strict clients (rustls, webpki) refuse to pin it, and trusting it trusted a CA whose key
    sits in data/tls/."""
    source = CertificateSource(tmp_path, hosts=["parley.example.org"])
    source.ensure()
    cert = x509.load_pem_x509_certificate(source.cert_path.read_bytes())
    ext = cert.extensions
    assert ext.get_extension_for_class(x509.BasicConstraints).value.ca is False
    usage = ext.get_extension_for_class(x509.KeyUsage).value
    assert usage.digital_signature and not usage.key_cert_sign and not usage.crl_sign
    assert list(ext.get_extension_for_class(x509.ExtendedKeyUsage).value) == [ExtendedKeyUsageOID.SERVER_AUTH]
    names = ext.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {str(ip) for ip in names.get_values_for_type(x509.IPAddress)} == {"127.0.0.1", "::1"}
    assert cert.not_valid_after_utc - cert.not_valid_before_utc <= datetime.timedelta(days=398)


def test_a_ca_certificate_generated_by_an_earlier_version_is_replaced(tmp_path):
    source = CertificateSource(tmp_path)
    source.ensure()
    key = serialization.load_pem_private_key(source.key_path.read_bytes(), None)
    old = x509.load_pem_x509_certificate(source.cert_path.read_bytes())
    builder = x509.CertificateBuilder().subject_name(old.subject).issuer_name(old.issuer).public_key(
        key.public_key()).serial_number(1).not_valid_before(old.not_valid_before_utc).not_valid_after(
        old.not_valid_after_utc).add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
    source.cert_path.write_bytes(builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM))
    assert needs_renewal(source.cert_path)
    source.ensure()
    cert = x509.load_pem_x509_certificate(source.cert_path.read_bytes())
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False


@pytest.fixture(scope="module")
def parley(tmp_path_factory):
    with ParleyProcess(tmp_path_factory.mktemp("tls") / "data", http=False) as server:
        yield server


@pytest.mark.skipif(not shutil.which("curl") or not shutil.which("openssl"), reason="needs curl and openssl")
def test_curl_python_and_openssl_accept_the_pinned_certificate(parley):
    out = subprocess.run(["curl", "-sS", "--cacert", parley.cert, "-o", "/dev/null", "-w", "%{http_code}",
                          parley.base + "/v1/openapi.json"], capture_output=True, text=True, timeout=30)
    assert out.stdout == "200", out.stderr
    context = ssl.create_default_context(cafile=parley.cert)
    with urllib.request.urlopen(parley.base + "/v1/openapi.json", context=context, timeout=30) as answer:
        assert answer.status == 200
    out = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{parley.port}", "-CAfile", parley.cert,
                          "-verify_return_error", "-verify_ip", "127.0.0.1"],
                         input="", capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and "Verify return code: 0 (ok)" in out.stdout, out.stdout + out.stderr


# --- Mozilla's TLS configurations (issue 27 item 1) -------------------------------------------------

def sslyze_issues(port, profile):
    """What sslyze's Mozilla check finds on 127.0.0.1:port against "intermediate" or "modern". sslyze runs in its own
    venv (.venv-tools, made by `make test`/`make tools`): it pins cryptography<47, Parley's lock has 50.x."""
    tools_python = Path(os.environ.get("PARLEY_TOOLS_PYTHON", ROOT / ".venv-tools" / "bin" / "python"))
    if not tools_python.exists():
        pytest.fail(f"{tools_python} is missing: `make tools` makes .venv-tools with sslyze (requirements/tools.txt)")
    out = subprocess.run([str(tools_python), str(ROOT / "scripts" / "mozilla_tls_check.py"), "127.0.0.1", str(port),
                          profile], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_sslyze_finds_the_listener_mozilla_intermediate(parley):
    """sslyze --mozilla_config=intermediate found CBC ciphers and the X448 and secp521r1 curves (Python's ssl
    defaults). Only the trust in a self-signed certificate remains, which no configuration can give."""
    issues = sslyze_issues(parley.port, "intermediate")
    assert set(issues) == {"certificate_path_validation"}, issues


def test_sslyze_finds_the_listener_mozilla_modern_with_tls_profile_modern(tmp_path):
    with ParleyProcess(tmp_path / "data", "--tls-profile", "modern", http=False) as server:
        issues = sslyze_issues(server.port, "modern")
    assert set(issues) == {"certificate_path_validation"}, issues


def _handshake(server_context, client_context):
    """Handshake one connection between the two contexts over a socket pair; the client's error or None."""
    left, right = socket.socketpair()
    errors = []

    def serve():
        try:
            with server_context.wrap_socket(right, server_side=True) as tls:
                tls.recv(1)
        except (ssl.SSLError, OSError):
            pass

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with client_context.wrap_socket(left, server_hostname="localhost"):
            pass
    except ssl.SSLError as exc:
        errors.append(exc)
    finally:
        left.close()
        thread.join(10)
    return errors[0] if errors else None


@pytest.mark.parametrize("profile", ["intermediate", "modern"])
def test_parleys_own_clients_refuse_what_the_profile_refuses(tmp_path, profile):
    """Webhooks and the AI provider connect with tls_profile.client_context: a receiver that offers only a
    CBC cipher, only secp521r1 or (for modern) only TLS 1.2 is refused; a default one is accepted."""
    source = CertificateSource(tmp_path)
    source.ensure()

    def receiver(ciphers=None, curve=None, maximum=None):
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(source.cert_path, source.key_path)
        if ciphers:
            context.set_ciphers(ciphers)
        if curve:
            context.set_ecdh_curve(curve)
        if maximum:
            context.maximum_version = maximum
        return context

    client = tls_profile.client_context(profile)
    client.load_verify_locations(source.cert_path)
    assert _handshake(receiver(), client) is None
    cbc_only = receiver("ECDHE-ECDSA-AES128-SHA256", maximum=ssl.TLSVersion.TLSv1_2)
    assert _handshake(cbc_only, client) is not None
    assert _handshake(receiver(curve="secp521r1"), client) is not None
    tls12 = _handshake(receiver(maximum=ssl.TLSVersion.TLSv1_2), client)
    assert (tls12 is None) == (profile == "intermediate")


def _tls_listener(context):
    """A TLS server on 127.0.0.1 that takes one connection (in a thread); (port, thread)."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve():
        with listener:
            connection, _ = listener.accept()
            try:
                with context.wrap_socket(connection, server_side=True) as tls:
                    tls.recv(1)
            except (ssl.SSLError, OSError):
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener.getsockname()[1], thread


async def test_webhook_deliveries_and_the_ai_provider_connect_with_the_profile(tmp_path, settings):
    """The delivery client's handshake with a receiver that has only secp521r1 fails on the groups (before
    any certificate check); with a default receiver it gets as far as the (untrusted) certificate."""
    source = CertificateSource(tmp_path)
    source.ensure()
    errors = {}
    for name, curve in (("secp521r1 only", "secp521r1"), ("default", None)):
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(source.cert_path, source.key_path)
        if curve:
            context.set_ecdh_curve(curve)
        port, thread = _tls_listener(context)
        client = KeepAliveClient(Resolver(), tls_profile="intermediate")
        with pytest.raises(ssl.SSLError) as raised:
            await client.post(f"https://127.0.0.1:{port}/hook", {}, b"", timeout=10, on_chunk=lambda chunk: None)
        client.close()
        thread.join(10)
        errors[name] = str(raised.value)
    assert "CERTIFICATE_VERIFY_FAILED" not in errors["secp521r1 only"], errors
    assert "CERTIFICATE_VERIFY_FAILED" in errors["default"], errors
    provider_tls = BotRunner(SimpleNamespace(settings=settings)).http().defaults["ssl_options"]
    assert provider_tls.minimum_version == ssl.TLSVersion.TLSv1_2
    assert "ECDHE-ECDSA-AES128-SHA256" not in {c["name"] for c in provider_tls.get_ciphers()}


# --- the SSL_CTX pointer is verified before anything touches it (issue 36 item 14) -----------------------

_NOT_AN_SSL_CTX = r'''
import ctypes, logging, ssl, sys
logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
from services import tls_profile
context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
slot = ctypes.c_void_p.from_address(id(context) + object.__basicsize__)  # where CPython keeps SSL_CTX *ctx
real, readable = slot.value, b"readable memory that is no SSL_CTX, long enough to be read whole" * 4
for name, word in [("unmapped", 0xdead0000), ("readable", id(readable) + 32), ("misaligned", real + 1)]:
    slot.value = word  # the layout as a runtime that keeps another field there would have it
    try:
        applied = tls_profile.restrict_groups_and_suites(context)
    finally:
        slot.value = real
    print(name, applied, flush=True)
print("real", tls_profile.restrict_groups_and_suites(context))
'''


def test_a_word_that_is_not_an_ssl_ctx_falls_back_with_a_warning_and_no_crash(tmp_path):
    """Issue 36 §14: the safety check called SSL_CTX_get_options on the pointer it meant to check, so a layout
    other than the expected one crashed the process (SIGSEGV). Now the word is checked first (readable
    through /proc/self/mem, holding the SSL_METHOD the context was made with) and any doubt leaves
    Python's defaults with a WARNING. In a child process: a crash there must not take the suite down."""
    done = subprocess.run([sys.executable, "-c", _NOT_AN_SSL_CTX], capture_output=True, text=True, timeout=60,
                          cwd=ROOT)
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    assert done.stdout.split("\n") == ["unmapped False", "readable False", "misaligned False", "real True", ""]
    warnings = [line for line in done.stderr.splitlines() if line.startswith("WARNING parley.tls:")]
    assert len(warnings) == 3 and all("Python's defaults apply" in line for line in warnings), done.stderr


def test_an_unknown_runtime_gets_pythons_defaults_with_a_warning(tmp_path, monkeypatch, caplog):
    """A CPython whose SSLContext layout this code does not know is a doubt: the profile's versions and TLS 1.2
    ciphers (public API) still apply, groups and TLS 1.3 suites stay Python's defaults, with a WARNING."""
    source = CertificateSource(tmp_path)
    source.ensure()
    assert tls_profile.restrict_groups_and_suites(tls_profile.server_context("modern"))  # this runtime: known
    monkeypatch.setattr(tls_profile, "LAYOUT_VERSIONS", ((3, 0), (3, 1)))
    with caplog.at_level(logging.WARNING, logger="parley.tls"):
        client = tls_profile.client_context("modern")
    assert any("not restricted, Python's defaults apply" in r.getMessage() and "is not one this code knows"
               in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    client.load_verify_locations(source.cert_path)
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(source.cert_path, source.key_path)
    server.set_ecdh_curve("secp521r1")
    assert _handshake(server, client) is None  # Python's default groups: secp521r1 is accepted again
    server.maximum_version = ssl.TLSVersion.TLSv1_2
    assert _handshake(server, client) is not None  # the profile's versions hold
