"""The account's `email` setting and POST /v1/account/email/test (issue 39, docs/api.md "Email"): write-only
passwords encrypted at rest, the webhooks' SSRF rules, and the Test in words against real servers
(tests/mail_server.py: aiosmtpd for SMTP, pymap for IMAP) and a closed port."""
import re

import pytest

from common.errors import Invalid
from services import accounts
from tests.db_direct import connect
from tests.mail_server import PASSWORD, ImapServer, closed_port

SETTINGS = "/v1/account/settings"
TEST = "/v1/account/email/test"


def _raw_settings(services, account_id):
    cx = connect(services)
    try:
        return cx.execute("SELECT settings FROM accounts WHERE id = ?", (account_id,)).fetchone()[0]
    finally:
        cx.close()


async def test_passwords_are_write_only_and_encrypted_at_rest(api, services, account, other_account):
    email = {"address": "Help@Example.com",
             "imap": {"host": "127.0.0.1", "security": "none", "username": "help", "password": "imap-secret-1"},
             "smtp": {"host": "127.0.0.1", "port": 2525, "security": "none", "password": "smtp-secret-2"}}
    r = await api.patch(SETTINGS, {"email": email}, key=account["api_key"])
    assert r.code == 200, r.body
    assert r.json["email"] == {
        "address": "help@example.com",
        "imap": {"host": "127.0.0.1", "port": 143, "security": "none", "username": "help", "folder": "INBOX",
                 "passwordSet": True},
        "smtp": {"host": "127.0.0.1", "port": 2525, "security": "none", "passwordSet": True}}
    raw = _raw_settings(services, account["account_id"])
    assert "imap-secret-1" not in raw and "smtp-secret-2" not in raw and "passwordEncrypted" in raw
    shown = (await api.get("/v1/account", key=account["api_key"])).json["settings"]["email"]
    assert shown == {**r.json["email"], "importStatus": None}  # GET adds how the import goes: not started yet

    # A merge patch: the port alone changes, the passwords stay; null removes one password.
    r = await api.patch(SETTINGS, {"email": {"smtp": {"port": 2526}, "imap": {"password": None}}},
                        key=account["api_key"])
    assert r.code == 200, r.body
    assert r.json["email"]["smtp"]["passwordSet"] is True and r.json["email"]["smtp"]["port"] == 2526
    assert r.json["email"]["imap"]["passwordSet"] is False

    # Refused, naming the field, and nothing changes: a GET answer sent back, a password to a new host.
    for patch, words in (({"smtp": {"passwordSet": True}}, "passwordSet is read-only"),
                         ({"importStatus": None}, "importStatus is read-only"),
                         ({"smtp": {"host": "localhost"}}, "email.smtp.password must be sent again"),
                         ({"smtp": {"port": "25"}}, "email.smtp.port"),
                         ({"imap": {"security": "ssl"}}, "email.imap.security")):
        r = await api.patch(SETTINGS, {"email": patch}, key=account["api_key"])
        assert r.code == 400 and words in r.body.decode(), (patch, r.body)
    assert (await api.get("/v1/account", key=account["api_key"])).json["settings"]["email"]["smtp"]["port"] == 2526

    # Tenancy: another account has no email setting and its test says so.
    assert "email" not in (await api.get("/v1/account", key=other_account["api_key"])).json["settings"]
    r = await api.post(TEST, key=other_account["api_key"])
    assert r.json == {"imap": {"ok": False, "error": r.json["imap"]["error"]},
                      "smtp": {"ok": False, "error": r.json["smtp"]["error"]}}
    assert "SMTP is not configured" in r.json["smtp"]["error"]
    assert "IMAP is not configured" in r.json["imap"]["error"]

    r = await api.patch(SETTINGS, {"email": None}, key=account["api_key"])
    assert r.code == 200 and "email" not in r.json


async def test_private_hosts_and_no_encryption_need_allow_private_webhooks():
    """The SSRF rules of webhooks, without the flag: nothing is resolved for these literals, nothing stored."""
    for email, words in (
            ({"smtp": {"host": "127.0.0.1"}}, "email.smtp.host must be publicly reachable"),
            ({"imap": {"host": "10.1.2.3", "security": "tls"}}, "email.imap.host must be publicly reachable"),
            ({"smtp": {"host": "192.0.2.1", "security": "none"}}, "email.smtp.security none"),
    ):
        with pytest.raises(Invalid) as refused:
            await accounts.validate_settings_changes({"email": {"address": "a@example.com", **email}},
                                                     allow_private=False)
        assert words in refused.value.message and "--allow-private-webhooks" in refused.value.message


async def test_the_test_logs_in_and_says_in_words_what_fails(api, account, mail_server, imap_server):
    email = {"address": "parley@example.com", "smtp": mail_server.settings(), "imap": imap_server.settings()}
    r = await api.patch(SETTINGS, {"email": email}, key=account["api_key"])
    assert r.code == 200, r.body
    r = await api.post(TEST, key=account["api_key"])
    assert r.code == 200, r.body
    assert r.json == {"imap": {"ok": True, "error": None}, "smtp": {"ok": True, "error": None}}

    await api.patch(SETTINGS, {"email": {"smtp": {"password": PASSWORD + "-wrong"},
                                         "imap": {"password": "wrong", "folder": "Support"}}}, key=account["api_key"])
    r = await api.post(TEST, key=account["api_key"])
    assert r.json["smtp"]["ok"] is False
    assert r.json["smtp"]["error"].startswith("SMTP login refused: 535 "), r.json
    assert r.json["imap"] == {"ok": False, "error": "IMAP login refused: [AUTHENTICATIONFAILED] Invalid "
                                                    "authentication credentials."}
    await api.patch(SETTINGS, {"email": {"imap": {"password": ImapServer.PASSWORD}}}, key=account["api_key"])
    r = await api.post(TEST, key=account["api_key"])
    assert r.json["imap"] == {"ok": False, "error": "IMAP folder 'Support' cannot be opened: [NONEXISTENT] Mailbox "
                                                    "does not exist."}

    port = closed_port()
    await api.patch(SETTINGS, {"email": {"imap": {"port": port}}}, key=account["api_key"])
    r = await api.post(TEST, key=account["api_key"])
    assert r.json["imap"] == {"ok": False, "error": f"could not connect to 127.0.0.1:{port}: "
                                                    "ConnectionRefusedError: Connection refused"}
    assert mail_server.messages == []  # the test sends nothing


async def test_the_settings_page_saves_the_mailbox_keeps_passwords_and_tests_it(signed_in, services, ui_account,
                                                                                mail_server):
    form = {"address": "parley@example.com", "imap.host": "", "imap.security": "tls", "imap.port": "",
            "imap.username": "", "imap.password": "", "imap.folder": "", "smtp.host": "127.0.0.1",
            "smtp.security": "none", "smtp.port": str(mail_server.port), "smtp.username": "parley@example.com",
            "smtp.password": PASSWORD}
    r = await signed_in.post("/settings/email", form)
    assert r.code == 303, r.text
    page = (await signed_in.get("/settings")).text
    assert f'value="{mail_server.port}"' in page and PASSWORD not in page and "stored: leave empty" in page
    # Saved again with the password field empty: the stored password stays, and the Test logs in with it.
    r = await signed_in.post("/settings/email", {**form, "smtp.password": ""})
    assert r.code == 303, r.text
    r = await signed_in.post("/settings/email/test", {})
    assert r.code == 200
    assert re.search(r'id="email-test-smtp">\s*<strong>SMTP: works</strong>', r.text), r.text
    assert "IMAP: does not work</strong>: IMAP is not configured" in r.text
    # A bad field: the page again, naming it, and nothing changes.
    r = await signed_in.post("/settings/email", {**form, "smtp.port": "70000"})
    assert r.code == 400 and "email.smtp.port" in r.text
    assert "passwordEncrypted" in _raw_settings(services, ui_account["account_id"])


async def test_imap_starttls_checks_the_certificate(api, account, tmp_path, monkeypatch):
    """STARTTLS (which Parley adds to aioimaplib): a certificate nobody vouches for is refused in words; trusted
    (SSL_CERT_FILE: the system's trust store), the login goes through; TLS on a STARTTLS port says so."""
    server = ImapServer(tls_dir=tmp_path).start()
    try:
        imap = server.settings(security="starttls")
        await api.patch(SETTINGS, {"email": {"address": "parley@example.com", "imap": imap}}, key=account["api_key"])
        r = await api.post(TEST, key=account["api_key"])
        assert r.json["imap"] == {"ok": False, "error": f"could not connect to 127.0.0.1:{server.port}: TLS: "
                                                        "self-signed certificate"}
        monkeypatch.setenv("SSL_CERT_FILE", str(server.cert))
        r = await api.post(TEST, key=account["api_key"])
        assert r.json["imap"] == {"ok": True, "error": None}
        await api.patch(SETTINGS, {"email": {"imap": {"security": "tls"}}}, key=account["api_key"])
        r = await api.post(TEST, key=account["api_key"])
        assert r.json["imap"]["ok"] is False
        assert "this port does not start with TLS: try security starttls" in r.json["imap"]["error"]
    finally:
        server.stop()
