"""The contact import's tests (tests/test_contact_import*.py, tests/test_contact_erasure_imports.py): a messy
spreadsheet export (GOOD_FILE), a small upload limit (the `settings` fixture), an account's owner and a stranger
each signed in with a form client that uploads (`browser`, `other_browser`), and an upload run to its end. The
fixtures are imported by name: they override conftest's `settings` and ui_fixtures' `browser`."""
import codecs
import json
import os
from urllib.parse import quote

import pytest

from services import accounts, contact_import
from settings import Settings
from tests.ui_helpers import PASSWORD, FormClient, signed_in_client

BOM = codecs.BOM_UTF8
HEADER = "Vorname;Nachname;Mobil;E-Mail"
# Spreadsheet row numbers (the header is row 1) and what each row is.
ROWS = [
    'Ada;Lovelace;+1 415 555 2671;ada@example.com',      # 2 created
    'Ada L.;;+1 (415) 555-2671;',                       # 3 matched: the same phone, spelled otherwise
    ';"Byron; Lord";+1-415-555-2671;byron@example.com',  # 4 matched: a quoted semicolon; nothing overwritten
    'Grace;Hopper;+44 20 7183 8750;grace@example.com',   # 5 created
    'Grace;;+442071838750;',                            # 6 matched
    '',                                                 # 7 blank: skipped, not counted
    'Alan;Turing;4155550000;alan@example.com',          # 8 failed: no country code
    'Bad;Phone;+1 555;bad@example.com',                 # 9 failed: not a number
    'Bob;Bad;+1 212 555 2671;bob@',                     # 10 failed: email
    'Eve;;;not-an-email',                               # 11 failed: email
    'Nobody;Here;;',                                    # 12 failed: neither phone nor email
    'Lin;;;Lin@Example.com',                            # 13 created: email only
    ';Lin;;LIN@example.com',                            # 14 matched by the case-folded email
    'Kim;Existing;+33 1 42 68 53 00;kim@example.com',   # 15 matched: existed before the import
    '=HYPERLINK("http://evil.example");;+1 415;',       # 16 failed: phone; a formula in the report is text
]
GOOD_FILE = BOM + ("\r\n".join([HEADER, *ROWS]) + "\r\n").encode()
MAPPING = {"firstName": "0", "lastName": "1", "phone": "2", "email": "3"}
MAX_IMPORT_BYTES = 8192


@pytest.fixture
def settings(tmp_path, request, database_url):
    """A small max_import_bytes; a test parametrized indirectly gives other settings."""
    return Settings(**{"data_dir": tmp_path / "data", "allow_private_webhooks": True, "http_port": 0,
                       "database_url": database_url,
                       "max_import_bytes": MAX_IMPORT_BYTES, **getattr(request, "param", {})})


class ImportBrowser(FormClient):
    """A form client that also uploads a file the way the import page's script does, and reads its progress."""

    async def upload(self, data, name="contacts.csv", xsrf=True, headers=None):
        headers = {"Content-Type": "text/csv", **(headers or {})}
        if xsrf:
            headers["X-XSRFToken"] = self.cookies["_xsrf"]
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        response = await self.client.fetch(f"/contacts/import/upload?name={quote(name)}", method="POST", body=data,
                                           headers=headers, raise_error=False)
        response.json = json.loads(response.body) if response.body else None
        return response

    async def progress(self, import_id):
        response = await self.get(f"/contacts/import/{import_id}/progress")
        return json.loads(response.body) if response.code == 200 else response


def make_user(io_loop, services, email):
    return io_loop.run_sync(lambda: accounts.create_account(services.db, services.box, services.keys, name=email,
                                                            email=email, password=PASSWORD))


@pytest.fixture
def owner(io_loop, services):
    return make_user(io_loop, services, "owner@import.example")


@pytest.fixture
def stranger(io_loop, services):
    return make_user(io_loop, services, "stranger@other.example")


@pytest.fixture
def browser(io_loop, http_server_client, owner):
    return signed_in_client(io_loop, http_server_client, owner["email"], ImportBrowser)


@pytest.fixture
def other_browser(io_loop, http_server_client, stranger):
    return signed_in_client(io_loop, http_server_client, stranger["email"], ImportBrowser)


def imports_files(services):
    directory = contact_import.imports_dir(services.settings.data_dir)
    return sorted(os.listdir(directory)) if directory.exists() else []


async def upload_and_start(browser, services, data, form=None):
    """Upload through the UI, start with the form, run the job to its end; returns (import id, progress)."""
    r = await browser.upload(data)
    assert r.code == 201, r.body
    import_id = r.json["id"]
    r = await browser.post(f"/contacts/import/{import_id}/start", {**MAPPING, "defaultCountry": "", "list": "",
                                                                   "newListName": "", **(form or {})})
    assert (r.code, r.headers.get("Location")) == (303, f"/contacts/import/{import_id}"), r.text
    await services.imports.drain()
    return import_id, await browser.progress(import_id)
