"""Admin UI sessions kept server-side (issue 9): sign-out, a new API key and a new password end them;
the cookie's id is stored hashed; sign-in is limited per address whatever the email."""
import hashlib
import os
import re
import threading
import time
from datetime import timedelta
from urllib.parse import urlsplit

import argon2
from tornado.web import create_signed_value, decode_signed_value

from common.ids import utcnow
from services import accounts, keys, one_time_links, sessions
from services.keys import hash_token
from tests.ui_helpers import PASSWORD, FormClient
from tests import db_direct

COOKIE = "parley_session"
NEW_PASSWORD = "a much longer passphrase"


async def second_browser(http_server_client, email, password=PASSWORD):
    other = FormClient(http_server_client)
    assert (await other.login(email, password)).code == 303
    return other


async def test_a_session_cookie_is_dead_after_sign_out(signed_in):
    """The cookie a browser had before signing out (copied, or replayed by whoever stole it) no longer works."""
    stolen = signed_in.cookies[COOKIE]
    assert (await signed_in.post("/logout")).code == 303
    signed_in.cookies[COOKIE] = stolen
    r = await signed_in.get("/settings")
    assert r.code == 302 and r.headers["Location"].startswith("/login")


async def test_the_cookie_carries_a_random_id_stored_only_hashed(signed_in, app, services, ui_account):
    session_id = decode_signed_value(app.settings["cookie_secret"], COOKIE,
                                     signed_in.cookies[COOKIE].strip('"')).decode()
    assert len(session_id) >= 43 and ui_account["account_id"] not in session_id  # 32 random bytes
    dump = db_direct.dump_text(services)
    assert session_id not in dump and hash_token(session_id) in dump


async def test_a_signed_cookie_for_an_unknown_session_is_not_a_session(browser, app, ui_account):
    forged = create_signed_value(app.settings["cookie_secret"], COOKIE, "made-up-session-id").decode()
    browser.cookies[COOKIE] = forged
    assert (await browser.get("/settings")).code == 302


async def test_a_new_api_key_ends_the_accounts_other_sessions_and_keeps_this_one(signed_in, http_server_client,
                                                                               ui_account):
    other = await second_browser(http_server_client, ui_account["email"])
    assert (await other.get("/settings")).code == 200
    assert (await signed_in.post("/settings/api-key")).code == 200
    assert (await signed_in.get("/settings")).code == 200
    assert (await other.get("/settings")).code == 302


async def test_a_key_rotated_from_the_cli_ends_every_session(signed_in, services, ui_account):
    await accounts.rotate_key(services.db, services.keys, ui_account["account_id"])  # what rotate-key runs
    assert (await signed_in.get("/settings")).code == 302


async def test_sessions_of_another_account_survive_a_rotation(signed_in, http_server_client, services):
    other_account = await accounts.create_account(services.db, services.box, services.keys, name="Other",
                                                  email="other@acme.example", password=PASSWORD)
    other = await second_browser(http_server_client, other_account["email"])
    assert (await signed_in.post("/settings/api-key")).code == 200
    assert (await other.get("/settings")).code == 200


async def test_change_password_keeps_this_session_ends_the_others_and_the_old_password(
        signed_in, http_server_client, ui_account):
    other = await second_browser(http_server_client, ui_account["email"])
    r = await signed_in.post("/settings/password", {"current_password": PASSWORD, "new_password": NEW_PASSWORD,
                                                    "new_password_again": NEW_PASSWORD})
    assert (r.code, r.headers["Location"]) == (303, "/settings")
    page = await signed_in.get("/settings")
    assert page.code == 200 and "Password changed." in page.text
    assert (await other.get("/settings")).code == 302
    fresh = FormClient(http_server_client)
    assert (await fresh.login(ui_account["email"], PASSWORD)).code == 401
    assert (await fresh.login(ui_account["email"], NEW_PASSWORD)).code == 303


async def test_change_password_refuses_and_changes_nothing(signed_in, http_server_client, ui_account):
    other = await second_browser(http_server_client, ui_account["email"])
    cases = [({"current_password": "wrong", "new_password": NEW_PASSWORD, "new_password_again": NEW_PASSWORD},
              "Current password is not right."),
             ({"current_password": PASSWORD, "new_password": "short", "new_password_again": "short"},
              "New password must have 10 to 1024 characters."),
             ({"current_password": PASSWORD, "new_password": NEW_PASSWORD, "new_password_again": NEW_PASSWORD + "x"},
              "New password and its repetition differ.")]
    for form, message in cases:
        r = await signed_in.post("/settings/password", form)
        assert r.code == 400 and message in r.text
        assert NEW_PASSWORD not in r.text and PASSWORD not in r.text  # never echoed back
    assert (await other.get("/settings")).code == 200
    fresh = FormClient(http_server_client)
    assert (await fresh.login(ui_account["email"], PASSWORD)).code == 303


async def test_change_password_needs_the_xsrf_field_and_a_session(signed_in, http_server_client):
    form = {"current_password": PASSWORD, "new_password": NEW_PASSWORD, "new_password_again": NEW_PASSWORD}
    assert (await signed_in.post("/settings/password", form, xsrf=False)).code == 403
    stranger = FormClient(http_server_client)
    await stranger.get("/login")  # an _xsrf cookie, no session
    assert (await stranger.post("/settings/password", form)).code == 403


async def test_password_changes_are_limited_like_sign_ins(signed_in):
    form = {"current_password": "guess", "new_password": NEW_PASSWORD, "new_password_again": NEW_PASSWORD}
    codes = [(await signed_in.post("/settings/password", form)).code for _ in range(11)]
    assert codes[:10] == [400] * 10 and codes[10] == 429


async def test_sign_in_is_limited_per_address_whatever_the_email(browser, ui_account):
    """Trying one password against many emails from one address is limited too (30 in a burst)."""
    codes = []
    started = time.monotonic()
    while 429 not in codes and len(codes) < 40:
        codes.append((await browser.login(f"user{len(codes)}@acme.example", "guess")).code)
    # 30 in a burst, plus the one every 2 s that the attempts' own time (scrypt, slower on a busy machine)
    # earned back.
    earned = int((time.monotonic() - started) / 2) + 1
    assert 30 <= codes.index(429) <= 30 + earned and set(codes[:-1]) == {401}, (codes, earned)
    # Even the right password now waits. The budget earns one attempt back every 2 s, and the 429 may have
    # come with most of one earned already (under load, the next request can start that much later): so of
    # two tries at once, at most one gets in, and the other waits.
    tries = [await browser.login(ui_account["email"]) for _ in range(2)]
    waited = [r for r in tries if r.code == 429]
    assert waited and all(r.code in (303, 429) for r in tries), [r.code for r in tries]
    assert int(waited[0].headers["Retry-After"]) >= 1


async def test_an_expired_session_is_not_a_session(services, ui_account):
    user = {"id": (await accounts.sign_in(services.db, ui_account["email"], PASSWORD))[0]["id"],
            "account_id": ui_account["account_id"]}
    old = await sessions.start(services.db, user, now=utcnow() - timedelta(days=sessions.SESSION_DAYS, seconds=1))
    assert await sessions.user_for(services.db, old) is None
    live = await sessions.start(services.db, user)
    assert (await sessions.user_for(services.db, live))["account_id"] == ui_account["account_id"]
    rows = db_direct.value(services, "SELECT COUNT(*) FROM sessions")
    assert rows == 1  # starting a session deleted the expired one


def _legacy_scrypt(password):
    """The hash Parley stored before argon2id: scrypt, N=2^14, r=8, p=1, and no parameters in the string."""
    salt = os.urandom(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, n=2**14, r=8, p=1, dklen=32)
    return f"scrypt${salt.hex()}${digest.hex()}"


_TODAYS_HASH = re.compile(r"\$argon2id\$v=19\$m=19456,t=2,p=1\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}")


async def test_passwords_are_argon2id_and_older_hashes_upgrade_at_the_next_sign_in(
        signed_in, http_server_client, ui_account, services, settings):
    """Issue 36 §13: passwords were scrypt with N=2^14 and no parameters stored. Now argon2id, its parameters in
    the stored PHC string. A scrypt hash (or argon2id of weaker parameters) still signs in, and that sign-in
    stores today's hash of the same password: no session or link of the user ends (not a password change).
    A failed sign-in changes nothing."""
    email = ui_account["email"]

    def stored():
        return db_direct.value(settings, "SELECT password_hash FROM users WHERE email = ?", email)

    assert _TODAYS_HASH.fullmatch(stored()), stored()
    link = await one_time_links.issue_reset_for_email(services.db, settings.base_url, email)
    weaker = argon2.PasswordHasher(time_cost=1, memory_cost=8192, parallelism=1).hash(PASSWORD)
    for old in (_legacy_scrypt(PASSWORD), weaker):
        db_direct.execute(settings, "UPDATE users SET password_hash = ? WHERE email = ?", old, email)
        assert (await FormClient(http_server_client).login(email, "not the password")).code == 401
        assert stored() == old
        assert (await FormClient(http_server_client).login(email)).code == 303
        upgraded = stored()
        assert _TODAYS_HASH.fullmatch(upgraded) and keys.verify_password(PASSWORD, upgraded)
        assert (await FormClient(http_server_client).login(email)).code == 303
        assert stored() == upgraded  # today's hash stays as it is
        assert (await signed_in.get("/settings")).code == 200
    assert (await FormClient(http_server_client).get(urlsplit(link["signInUrl"]).path)).code == 200


async def test_password_hashing_runs_off_the_event_loop(http_server_client, ui_account, monkeypatch):
    """Issue 36 §13: argon2id (like scrypt before it) is CPU-heavy: sign-in, the rehash and a password change
    hash in the executor, never on the event loop's thread."""
    threads = []
    for name in ("hash_password", "verify_password"):
        real = getattr(keys, name)

        def spy(*args, real=real):
            threads.append(threading.get_ident())
            return real(*args)
        monkeypatch.setattr(keys, name, spy)
    loop_thread = threading.get_ident()
    browser = FormClient(http_server_client)
    assert (await browser.login(ui_account["email"])).code == 303
    r = await browser.post("/settings/password", {"current_password": PASSWORD, "new_password": NEW_PASSWORD,
                                                  "new_password_again": NEW_PASSWORD})
    assert r.code == 303
    assert len(threads) >= 3 and loop_thread not in threads
