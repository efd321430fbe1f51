"""The real server.py over HTTPS: first run, HTTPS-only, keys, rate limits, shutdown, TLS reload, backup."""
import hashlib
import json
import signal
import socket
import sqlite3
import ssl
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from services.tls import write_self_signed
from tests.parley_process import ROOT, ParleyProcess, create_agency_with_subaccount, run_cli
from tests import db_direct


@pytest.fixture
def parley(tmp_path):
    with ParleyProcess(tmp_path / "data", "--rate-limit", "5", "--allow-private-webhooks") as p:
        yield p


def _account(client, key):
    return client.get("/v1/account", params={"apiKey": key})


def test_first_run_prints_a_setup_link_and_never_the_password_or_key(tmp_path):
    """Issue 25 §2: the first start prints a one-time setup link (no password, no API key); the owner chooses
    the password through it and the Settings page shows the key once. Neither the password nor the key is
    ever in the server's stdout, stderr or log, on this start or the next; later starts print no link."""
    data = tmp_path / "data"
    with ParleyProcess(data) as first:
        creds = first.first_run  # the harness used the link as the owner would (tests/parley_process.py)
        assert creds["login"] == "admin@localhost" and creds["setup_url"].startswith("https://")
        assert "/setup/" in creds["setup_url"] and creds["api_key"].startswith("pk_")
        with first.client() as c:
            assert _account(c, creds["api_key"]).status_code == 200
            c.cookies.clear()
            assert c.get(urlsplit(creds["setup_url"]).path).status_code == 404  # spent
    with ParleyProcess(data) as second:
        assert second.first_run is None
        with second.client() as c:
            assert _account(c, creds["api_key"]).status_code == 200
    printed = "".join(first.stdout_lines + second.stdout_lines)
    assert creds["setup_url"] in printed
    log = "".join(p.read_text() for p in tmp_path.glob("server-*.log"))
    assert "/setup/***" in log and urlsplit(creds["setup_url"]).path not in log  # the token is masked
    for secret in (creds["api_key"], creds["password"]):
        assert secret not in printed and secret not in log
    assert "--allow-private-webhooks" not in log  # the WARNING is for servers started with it only


def test_allow_private_webhooks_logs_a_warning_at_start(parley):
    """Issue 26 §3: started with --allow-private-webhooks, the server says at start that it is for local
    testing only."""
    log = Path(parley.log.name).read_text()
    assert "WARNING parley: --allow-private-webhooks is on" in log and "For local testing only" in log


def test_plain_http_is_rejected_with_https_required(parley):
    """Spec §5.4: HTTPS is required. Plain HTTP requests are rejected."""
    key = parley.first_run["api_key"]
    r = httpx.get(f"http://127.0.0.1:{parley.http_port}/v1/account", params={"apiKey": key})
    assert r.status_code == 403
    assert r.json()["error"]["code"] == "HTTPS_REQUIRED"
    r = httpx.post(f"http://127.0.0.1:{parley.http_port}/incomingCustomChannelMessage", json={})
    assert r.status_code == 403
    with parley.client() as c:
        assert "max-age" in _account(c, key).headers["strict-transport-security"]


def test_missing_wrong_and_rotated_keys_are_401(parley):
    """Spec §5.5/5.6: generating a new key invalidates the previous key; a missing or invalid key is 401."""
    created = run_cli(parley.data_dir, "create-account", "--name", "Acme", "--email", "ops@acme.test")
    assert set(created) >= {"account_id", "email", "api_key", "type"} and created["type"] == "standard"
    old = created["api_key"]
    with parley.client() as c:
        assert c.get("/v1/account").status_code == 401
        assert _account(c, "pk_nope").status_code == 401
        assert _account(c, old).json()["id"] == created["account_id"]  # now cached by the server
        rotated = run_cli(parley.data_dir, "rotate-key", "--email", "ops@acme.test")
        assert rotated["account_id"] == created["account_id"] and rotated["api_key"] != old
        r = _account(c, old)  # the very next request
        assert r.status_code == 401 and r.json()["error"]["code"] == "UNAUTHORIZED"
        assert c.get("/v1/account", headers={"x-api-key": old}).status_code == 401
        assert _account(c, rotated["api_key"]).status_code == 200


def test_rate_limit_429_with_headers_and_other_keys_unaffected(parley):
    """Spec §8.1: requests are limited per API key per minute; exceeding the limit yields 429 and the
    client retries after the time given in the response headers."""
    other = run_cli(parley.data_dir, "create-account", "--name", "B", "--email", "b@b.test")["api_key"]
    key = parley.first_run["api_key"]
    with parley.client() as c:
        answers = [_account(c, key) for _ in range(6)]
        assert [r.status_code for r in answers] == [200] * 5 + [429]
        limited = answers[-1]
        assert limited.json()["error"]["code"] == "RATE_LIMITED"
        assert int(limited.headers["retry-after"]) >= 1
        assert limited.headers["ratelimit-policy"] == '"default";q=5;w=60'
        assert limited.headers["ratelimit"].startswith('"default";r=0;t=')
        assert limited.headers["x-ratelimit-limit"] == "5" and limited.headers["x-ratelimit-remaining"] == "0"
        assert int(limited.headers["x-ratelimit-reset"]) >= 1
        assert answers[0].headers["x-ratelimit-remaining"] == "4"
        assert _account(c, other).status_code == 200


def test_error_answers_after_authentication_carry_the_rate_limit_headers(parley):
    """A client backing off by the headers reads them on every authenticated answer: a 400, 404 and 409 carry
    the values a success would (send_error() clears the headers set in prepare()); a 401 carries none."""
    key = parley.first_run["api_key"]
    with parley.client() as c:
        missing, wrong = c.get("/v1/account"), _account(c, "pk_nope")
        answers = [_account(c, key),
                   c.post("/v1/contacts", params={"apiKey": key}, json={"firstName": 5, "phone": "+14155552671"}),
                   c.get("/v1/contacts/ct_nope", params={"apiKey": key}),
                   c.post("/v1/account/webhook-test", params={"apiKey": key}),  # no URL set
                   _account(c, key)]
    assert [r.status_code for r in (missing, wrong)] == [401, 401]
    for unauthorized in (missing, wrong):
        assert not [name for name in unauthorized.headers if "ratelimit" in name.lower()]
    assert [r.status_code for r in answers] == [200, 400, 404, 409, 200]
    assert "firstName" in answers[1].json()["error"]["message"]
    assert [r.headers["x-ratelimit-remaining"] for r in answers] == ["4", "3", "2", "1", "0"]
    for r in answers:
        remaining = r.headers["x-ratelimit-remaining"]
        assert r.headers["ratelimit-policy"] == '"default";q=5;w=60' and r.headers["x-ratelimit-limit"] == "5"
        assert r.headers["ratelimit"].startswith(f'"default";r={remaining};t=')
        assert int(r.headers["x-ratelimit-reset"]) >= 1 and "retry-after" not in r.headers


def _tls_socket(port, cafile=None):
    ctx = ssl.create_default_context(cafile=cafile) if cafile else ssl._create_unverified_context()
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    return ctx.wrap_socket(raw, server_hostname="localhost")


def test_sigterm_answers_requests_in_flight_and_exits_0(parley):
    """Graceful shutdown: stop accepting, finish requests in flight, flush the writer, exit 0."""
    key = parley.first_run["api_key"]
    body = json.dumps({"customChannelWebhookUrl": "http://127.0.0.1:9/hook"}).encode()
    s = _tls_socket(parley.port, parley.cert)
    s.sendall(b"PATCH /v1/account/settings?apiKey=" + key.encode() + b" HTTP/1.1\r\nHost: localhost\r\n"
              b"Content-Type: application/json\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n"
              + body[:10])
    time.sleep(0.3)
    parley.proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    # Listening has stopped: new connections are refused while the old one is served.
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", parley.port), timeout=2).close()
    s.sendall(body[10:])
    response = b""
    while b"\r\n\r\n" not in response or not response.rstrip().endswith(b"}"):
        chunk = s.recv(65536)
        if not chunk:
            break
        response += chunk
    s.close()
    assert response.startswith(b"HTTP/1.1 200"), response[:200]
    assert parley.proc.wait(20) == 0
    # The answered write is durable.
    settings = [json.loads(r["settings"]) for r in db_direct.rows(parley, "SELECT settings FROM accounts")]
    assert {"customChannelWebhookUrl": "http://127.0.0.1:9/hook"} in settings


def _served_fingerprint(port):
    s = _tls_socket(port)
    der = s.getpeercert(binary_form=True)
    s.close()
    return hashlib.sha256(der).hexdigest()


def _file_fingerprint(cert_path):
    return hashlib.sha256(ssl.PEM_cert_to_DER_cert(cert_path.read_text())).hexdigest()


def test_replaced_certificate_is_served_without_restart(tmp_path):
    """Certificate files are watched and reloaded: new connections get the new certificate."""
    cert, key = tmp_path / "tls" / "site.pem", tmp_path / "tls" / "site.key"
    write_self_signed(cert, key, ["first.test"])
    with ParleyProcess(tmp_path / "data", "--tls-cert", str(cert), "--tls-key", str(key)) as p:
        first = _file_fingerprint(cert)
        assert _served_fingerprint(p.port) == first
        old_connection = _tls_socket(p.port)
        write_self_signed(cert, key, ["second.test"])
        second = _file_fingerprint(cert)
        assert second != first
        deadline = time.monotonic() + 15
        while _served_fingerprint(p.port) != second:
            assert time.monotonic() < deadline, "new certificate not served"
            time.sleep(0.2)
        assert p.proc.poll() is None  # no restart
        assert hashlib.sha256(old_connection.getpeercert(binary_form=True)).hexdigest() == first
        old_connection.close()


@pytest.mark.sqlite_only("backup is SQLite's online backup (on PostgreSQL it points to pg_dump)")
def test_backup_while_running_holds_the_data(parley, tmp_path):
    """docs/design.md#running: `backup OUT` → online SQLite backup of a running instance."""
    created = run_cli(parley.data_dir, "create-account", "--name", "Kept", "--email", "kept@x.test")
    with parley.client() as c:
        assert c.patch("/v1/account/settings", params={"apiKey": created["api_key"]},
                       json={"customChannelWebhookUrl": "http://127.0.0.1:9/kept"}).status_code == 200
    out = tmp_path / "backup.db"
    result = run_cli(parley.data_dir, "backup", str(out))
    assert result["backup"] == str(out) and result["bytes"] > 0
    cx = sqlite3.connect(out)
    assert cx.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    row = cx.execute("SELECT id, settings FROM accounts WHERE email = 'kept@x.test'").fetchone()
    assert row[0] == created["account_id"] and "127.0.0.1:9/kept" in row[1]


def test_agency_and_subaccount_from_the_cli(tmp_path):
    data = tmp_path / "data"
    agency, sub = create_agency_with_subaccount(data, "a@agency.test", "c@client.test")
    with ParleyProcess(data) as p, p.client() as c:
        assert _account(c, sub["api_key"]).json()["parentAgencyId"] == agency["account_id"]


def test_api_key_is_masked_in_the_access_log(parley):
    key = parley.first_run["api_key"]
    with parley.client() as c:
        assert _account(c, key).status_code == 200
        assert _account(c, key + "x").status_code == 401
    parley.stop()
    log = parley.log.name
    text = open(log).read()
    assert "apiKey=***" in text
    assert key not in text


def test_a_port_in_use_ends_the_server_cleanly_with_one_line(tmp_path):
    """Issue 9: main() had no try/finally, so a failed listen skipped closing the services. Now the writer
    process is stopped before the server exits, and the log says why in one line."""
    data = tmp_path / "data"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, str(ROOT / "server.py"), "serve", "--data-dir", str(data),
                               "--host", "127.0.0.1", "--port", str(port), "--http-port", "0"],
                              capture_output=True, text=True, timeout=60, cwd=ROOT)
        leftovers = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmdline_has(p, str(data))]
    assert done.returncode == 1, done.stderr
    assert "cannot serve" in done.stderr and "Address already in use" in done.stderr
    assert "Traceback" not in done.stderr
    assert leftovers == [], "the writer process outlived the server"


def _cmdline_has(proc_dir, text):
    try:
        return text in (proc_dir / "cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False
