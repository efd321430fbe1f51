"""Bulk contact import (issue 14; docs/api.md#contacts: "High-volume bulk imports use a separate import feature, not the
API."): the CSV upload streamed to disk, column mapping and preview, the job in batches with the API's
normalization and phone-first dedupe, exact counts, the error report, the list, cancel, resume, tenancy,
the size limit and the retention. In-process tests drive the app over HTTP; test_contact_import_e2e.py
drives the real server (kill -9, the CLI, the browser)."""
import asyncio
import csv
import io
import os
from datetime import timedelta

import pytest

from services import contact_import, csv_import, import_runner
from services.retention import RetentionWorker
from common.ids import iso, utcnow
from tests.contact_import_helpers import (BOM, GOOD_FILE, MAPPING, MAX_IMPORT_BYTES, ImportBrowser,  # noqa: F401
                                          browser, imports_files, other_browser, owner, settings, stranger,
                                          upload_and_start)
from storage import contact_imports as import_store
from tests.db_direct import rows, value

# The rows of GOOD_FILE (tests/contact_import_helpers.py) that fail, by spreadsheet row number, and their column.
FAILED_ROWS = {8: "Mobil", 9: "Mobil", 10: "E-Mail", 11: "E-Mail", 12: "Mobil / E-Mail", 16: "Mobil"}


async def queued_job(browser, services, owner, data, **mapping):
    """Upload data and start it with the given column numbers, without running it; returns the job."""
    import_id = (await browser.upload(data)).json["id"]
    form = {"firstName": "", "lastName": "", "phone": "", "email": "", "defaultCountry": "", "list": "",
            "newListName": "", **{field: str(column) for field, column in mapping.items()}}
    assert (await browser.post(f"/contacts/import/{import_id}/start", form)).code == 303
    return await contact_import.get_job(services.db, owner["account_id"], import_id)


async def test_a_messy_file_gives_exact_counts_an_error_report_and_one_list_membership_each(
        browser, services, api, owner):
    """Issue 14: a CSV with a BOM and semicolons, good rows, duplicate phones in several spellings, invalid
    phones and emails -> exact created/matched/failed, an error report naming each bad row, the list gets
    every good contact once. Spec §2 rule 2 ("A contact with a phone number that already exists is not
    duplicated") holds inside the file too, and for a contact that existed before."""
    key = owner["api_key"]
    await api.patch("/v1/account/settings", {"notificationUrls": {
        "contact.created": "http://127.0.0.1:9/created", "contact.tagged": "http://127.0.0.1:9/tagged"}}, key=key)
    kim = await api.post("/v1/contacts", {"phone": "+33142685300"}, key=key)
    assert kim.code == 201
    outbox_before = value(services, "SELECT COUNT(*) FROM outbox")

    import_id, p = await upload_and_start(browser, services, GOOD_FILE,
                                          {"list": "new", "newListName": "Spreadsheet leads"})
    assert p["status"] == "completed", p
    assert (p["rowsRead"], p["created"], p["matched"], p["failed"]) == (14, 3, 5, 6)
    assert p["created"] + p["matched"] + p["failed"] == p["rowsRead"]
    assert p["percent"] == 100.0

    contacts = {r["k"]: (r["first_name"], r["last_name"], r["email"]) for r in rows(
        services, "SELECT coalesce(phone, email) AS k, first_name, last_name, email FROM contacts WHERE account_id = ?",
        owner["account_id"])}
    assert contacts == {"+14155552671": ("Ada", "Lovelace", "ada@example.com"),     # nothing overwritten
                        "+442071838750": ("Grace", "Hopper", "grace@example.com"),
                        "lin@example.com": ("Lin", "Lin", "lin@example.com"),         # blank filled
                        "+33142685300": ("Kim", "Existing", "kim@example.com")}       # blanks filled
    [leads] = rows(services, "SELECT id, contact_count FROM lists WHERE name = 'Spreadsheet leads'")
    members = rows(services, "SELECT contact_id FROM list_members WHERE list_id = ?", leads["id"])
    assert leads["contact_count"] == len(members) == 4  # every good contact once, the matched ones too
    events = [r["event_type"] for r in rows(services, "SELECT event_type FROM outbox WHERE id > ?", outbox_before)]
    assert sorted(events) == ["contact.created"] * 3 + ["contact.tagged"] * 4

    report = await browser.get(p["errorReport"])
    assert report.code == 200
    assert report.headers["Content-Type"].startswith("text/csv")
    assert "attachment" in report.headers["Content-Disposition"]
    assert report.body.startswith(BOM)
    lines = list(csv.reader(io.StringIO(report.body.decode("utf-8-sig"))))
    assert lines[0] == ["row", "column", "reason", "Vorname", "Nachname", "Mobil", "E-Mail"]
    assert {int(line[0]): line[1] for line in lines[1:]} == FAILED_ROWS
    by_row = {int(line[0]): line for line in lines[1:]}
    assert "country code" in by_row[8][2] and by_row[8][3:] == ["Alan", "Turing", "4155550000", "alan@example.com"]
    assert by_row[10][2].startswith("email is not a valid email address")
    assert "phone or email is required" in by_row[12][2]
    assert by_row[16][3] == "'=HYPERLINK(\"http://evil.example\")"
    assert imports_files(services) == [f"{import_id}.errors.csv"]  # the upload is gone once imported
    assert oct(os.stat(contact_import.report_path(services.settings.data_dir, import_id)).st_mode & 0o777) == "0o600"


async def test_importing_the_same_file_twice_creates_nothing_new(browser, services, owner):
    _, first = await upload_and_start(browser, services, GOOD_FILE)
    before = value(services, "SELECT COUNT(*) FROM contacts")
    _, second = await upload_and_start(browser, services, GOOD_FILE)
    assert (second["created"], second["matched"], second["failed"]) == (0, first["created"] + first["matched"], 6)
    assert value(services, "SELECT COUNT(*) FROM contacts") == before


async def test_the_preview_shows_the_mapped_rows_and_the_counts_and_writes_nothing(browser, services):
    """Issue 14: "A preview before anything is written: the first rows as mapped, and how many rows would be
    created, matched and fail"; the mapping is guessed from the header names."""
    r = await browser.upload(GOOD_FILE, name="leads <b>.csv")
    page = await browser.get(r.json["url"])
    assert page.code == 200
    for field, column in MAPPING.items():  # guessed from Vorname, Nachname, Mobil, E-Mail
        assert f'<option value="{column}" selected>' in page.text.split(f'id="map-{field}"')[1].split("</select>")[0]
    assert "leads &lt;b&gt;.csv" in page.text
    assert "The whole file: 14 rows" in page.text
    assert 'id="preview-created">4<' in page.text and 'id="preview-matched">4<' in page.text  # Kim is new here
    assert 'id="preview-failed">6<' in page.text
    assert "+14155552671" in page.text and "ada@example.com" in page.text
    assert value(services, "SELECT COUNT(*) FROM contacts") == 0
    assert value(services, "SELECT COUNT(*) FROM outbox") == 0
    # A wrong mapping is visible before anything is imported: email read as the phone fails every row.
    r2 = await browser.post(f"{r.json['url']}/preview", {**MAPPING, "phone": "3", "email": "", "defaultCountry": "",
                                                         "list": "", "newListName": ""})
    assert r2.code == 303
    page = await browser.get(r.json["url"])
    assert 'id="preview-created">0<' in page.text and 'id="preview-failed">14<' in page.text
    assert rows(services, "SELECT status FROM contact_imports") == [{"status": "uploaded"}]


async def test_the_preview_of_a_big_file_is_a_labelled_sample(browser, services, monkeypatch):
    monkeypatch.setattr(contact_import, "PREVIEW_ROWS", 5)
    r = await browser.upload(GOOD_FILE)
    page = await browser.get(r.json["url"])
    assert "A sample: the first 5 rows" in page.text
    assert 'id="preview-created">2<' in page.text and 'id="preview-matched">3<' in page.text


async def test_options_are_checked(browser, services, api, stranger, owner):
    r = await browser.upload(GOOD_FILE)
    url = r.json["url"]
    base = {**MAPPING, "defaultCountry": "", "list": "", "newListName": ""}
    foreign_list = (await api.post("/v1/lists", {"name": "Theirs"}, key=stranger["api_key"])).json["id"]
    leads = (await api.post("/v1/lists", {"name": "Leads"}, key=owner["api_key"])).json["id"]
    for form, message in (({"phone": "", "email": ""}, "phone number or the email"),
                          ({"lastName": "0"}, "chosen for two fields"),
                          ({"phone": "9"}, "choose one of the file"),
                          ({"defaultCountry": "XX"}, "not an ISO 3166 country code"),
                          ({"list": "new"}, "new list needs a name"),
                          ({"list": foreign_list}, f"no list with id {foreign_list}"),
                          ({"list": "new", "newListName": " LEADS "}, f"list {leads} is already named")):
        page = await browser.post(f"{url}/start", {**base, **form})
        assert page.code in (400, 404, 409) and message in page.text, (form, page.code)
    assert rows(services, "SELECT status FROM contact_imports") == [{"status": "uploaded"}]
    assert value(services, "SELECT COUNT(*) FROM lists WHERE account_id != ?", stranger["account_id"]) == 1


async def test_a_default_country_reads_national_numbers(browser, services):
    data = BOM + b"Name,Telefon\r\nHans,030 901820\r\nJo,+1 415 555 2671\r\nX,12\r\n"
    _, p = await upload_and_start(browser, services, data, {"firstName": "0", "lastName": "", "phone": "1",
                                                            "email": "", "defaultCountry": "DE"})
    assert (p["created"], p["failed"]) == (2, 1)
    assert sorted(r["phone"] for r in rows(services, "SELECT phone FROM contacts")) == ["+14155552671", "+4930901820"]
    _, p = await upload_and_start(browser, services, data, {"firstName": "0", "lastName": "", "phone": "1",
                                                            "email": ""})
    assert (p["matched"], p["failed"]) == (1, 2)  # without one, the API's rule: "+" is required


async def test_duplicates_across_batches_are_matched_and_a_stopped_run_resumes_where_it_ended(
        io_loop, browser, services, owner):
    """Batches of 2 rows: the second spelling of a phone comes in a later batch and is matched; a run stopped
    after two batches (a restart) resumes at its committed position: nothing twice, counts add up."""
    phones = [f"+1 415 555 {2600 + i:04d}" for i in range(7)]
    lines = [f"P{i},+1415555{2600 + i:04d},p{i}@example.com" for i in range(7)] + \
            [f"Q{i},{phones[i]}," for i in range(7)] + ["bad,123,", "worse,,x@"]
    data = ("first,phone,email\n" + "\n".join(lines) + "\n").encode()
    job = await queued_job(browser, services, owner, data, firstName=0, phone=1, email=2)
    import_id = job["id"]
    batches = []

    def stop_after_two():
        return len(batches) >= 2

    job = await import_runner.run_job(services, job, import_runner.SERVER, should_stop=stop_after_two,
                                      on_progress=batches.append, batch_rows=2)
    assert job["status"] == "running" and job["rows_read"] == 4
    assert value(services, "SELECT COUNT(*) FROM contacts") == 4
    job = await import_runner.run_job(services, job, import_runner.SERVER, batch_rows=2)
    assert job["status"] == "completed" and job["resumed"] == 1
    assert (job["rows_read"], job["created"], job["matched"], job["failed"]) == (16, 7, 7, 2)
    assert value(services, "SELECT COUNT(*) FROM contacts") == 7
    report = (await browser.get(f"/contacts/import/{import_id}/errors.csv")).body.decode("utf-8-sig")
    assert [line[0] for line in csv.reader(io.StringIO(report))][1:] == ["16", "17"]


async def test_report_lines_of_a_batch_that_never_committed_are_cut_back(browser, services, owner):
    """The error report is appended before its batch commits; a crash in between leaves lines the job never
    counted. The next run cuts the file back to the committed length, so each bad row is reported once."""
    job = await queued_job(browser, services, owner, b"phone\n+14155552671\nbad\n+14155552672\nworse\n", phone=0)
    import_id = job["id"]
    done = []
    job = await import_runner.run_job(services, job, import_runner.SERVER, should_stop=lambda: bool(done),
                                      on_progress=done.append, batch_rows=2)
    path = contact_import.report_path(services.settings.data_dir, import_id)
    assert job["failed"] == 1 and path.stat().st_size == job["errors_bytes"]
    with open(path, "ab") as f:  # the next batch's lines, written before a crash cut its commit short
        f.write(b"5,phone,written but never committed\r\n")
    job = await import_runner.run_job(services, job, import_runner.SERVER, batch_rows=2)
    assert (job["status"], job["failed"]) == ("completed", 2)
    lines = path.read_bytes().decode("utf-8-sig").splitlines()
    assert [line.split(",")[0] for line in lines] == ["row", "3", "5"]
    assert "never committed" not in lines[2]
    assert path.stat().st_size == job["errors_bytes"]


async def test_cancel_stops_after_the_current_batch_and_keeps_what_was_imported(browser, services, owner):
    data = ("phone\n" + "\n".join(f"+1415555{3000 + i:04d}" for i in range(10)) + "\n").encode()
    job = await queued_job(browser, services, owner, data, phone=0)
    import_id = job["id"]
    cancelled = []

    def cancel_once(job):
        if not cancelled:
            cancelled.append(asyncio.ensure_future(browser.post(f"/contacts/import/{import_id}/cancel")))

    job = await import_runner.run_job(services, job, import_runner.SERVER, on_progress=cancel_once, batch_rows=2,
                                      pause=0.05)
    assert (await cancelled[0]).code == 303
    p = await browser.progress(import_id)
    assert p["status"] == "cancelled" and 2 <= p["rowsRead"] < 10, p
    assert p["created"] + p["matched"] + p["failed"] == p["rowsRead"]
    assert value(services, "SELECT COUNT(*) FROM contacts") == p["created"]
    assert imports_files(services) == []  # the upload is deleted
    page = await browser.get(f"/contacts/import/{import_id}")
    assert "Cancelled" in page.text and "cancelled by a user" in page.text
    again = await browser.post(f"/contacts/import/{import_id}/cancel")
    assert "already ended" in (await browser.get(again.headers["Location"])).text


async def test_discarding_a_draft_deletes_its_upload(browser, services):
    r = await browser.upload(GOOD_FILE)
    assert imports_files(services) == [f"{r.json['id']}.csv"]
    assert (await browser.post(f"{r.json['url']}/cancel")).code == 303
    assert imports_files(services) == []
    assert (await browser.progress(r.json["id"]))["status"] == "cancelled"


async def test_another_account_cannot_see_or_touch_an_import(browser, other_browser, services):
    """House rule: another account's id is a 404, like an unknown id; it learns nothing, changes nothing."""
    import_id, p = await upload_and_start(browser, services, GOOD_FILE)
    draft = (await browser.upload(GOOD_FILE)).json["id"]
    for job_id in (import_id, draft, "imp_nonexistent"):
        for path in ("", "/progress", "/errors.csv"):
            r = await other_browser.get(f"/contacts/import/{job_id}{path}")
            assert r.code == 404, (job_id, path, r.code)
            assert "owner@import.example" not in r.text and "Vorname" not in r.text
        for action in ("cancel", "start", "preview"):
            r = await other_browser.post(f"/contacts/import/{job_id}/{action}", {**MAPPING, "defaultCountry": "",
                                                                               "list": "", "newListName": ""})
            assert r.code == 404, (job_id, action, r.code)
    assert "contacts.csv" not in (await other_browser.get("/contacts/import")).text
    assert (await browser.progress(draft))["status"] == "uploaded"
    assert value(services, "SELECT COUNT(*) FROM contacts") == p["created"]


async def test_an_upload_above_max_import_bytes_is_413_and_nothing_is_kept(browser, services):
    r = await browser.upload(b"phone\n" + b"+14155552671\n" * (MAX_IMPORT_BYTES // 13 + 1))
    assert r.code == 413 and r.json["error"]["code"] == "PAYLOAD_TOO_LARGE"
    assert imports_files(services) == []
    assert value(services, "SELECT COUNT(*) FROM contact_imports") == 0
    page = await browser.get("/contacts/import")  # the page says the limit, which import.js also checks
    assert f'data-max-bytes="{MAX_IMPORT_BYTES}"' in page.text


async def test_a_chunked_upload_is_cut_off_at_max_import_bytes_and_nothing_is_kept(browser, services):
    """Without a Content-Length the size is known only while it arrives: the connection is closed at the
    limit, and the part received is deleted."""
    async def produce(write):
        for _ in range(4):
            await write(b"+14155552671\n" * 300)  # 3,900 bytes a chunk, 15,600 in all

    headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in browser.cookies.items()),
               "X-XSRFToken": browser.cookies["_xsrf"], "Content-Type": "text/csv"}
    r = await browser.client.fetch("/contacts/import/upload", method="POST", body_producer=produce, headers=headers,
                                   raise_error=False)
    assert r.code != 201
    for _ in range(100):  # the handler deletes the part when it sees the connection close
        if imports_files(services) == []:
            break
        await asyncio.sleep(0.05)
    assert imports_files(services) == []
    assert value(services, "SELECT COUNT(*) FROM contact_imports") == 0


async def test_an_upload_needs_the_session_and_the_xsrf_header_before_any_byte_is_stored(
        http_server_client, browser, services):
    r = await browser.upload(GOOD_FILE, xsrf=False)
    assert r.code == 403
    stranger = ImportBrowser(http_server_client)
    await stranger.get("/login")  # an XSRF cookie, but no session
    r = await stranger.upload(GOOD_FILE)
    assert r.code == 403 and r.json["error"]["code"] == "FORBIDDEN"
    assert imports_files(services) == []
    assert value(services, "SELECT COUNT(*) FROM contact_imports") == 0


async def test_files_that_are_not_a_utf8_csv_are_refused_with_the_reason(browser, services):
    for data, reason in (("phone\n+14155552671\n".encode("utf-16"), "not UTF-8 text"),
                         ("Téléphone\n+14155552671\n".encode("latin-1"), "not UTF-8 text"),
                         (b"PK\x03\x04\x14\x00\x06\x00" + b"\x00" * 40, "not UTF-8 text"),
                         (b"\r\n \r\n", "the file is empty"),
                         (b"", "the file is empty")):
        r = await browser.upload(data)
        assert r.code == 400 and reason in r.json["error"]["message"], (data[:10], r.body)
    assert imports_files(services) == []


def test_column_names_are_recognized_in_several_languages():
    guess = csv_import.guess_mapping
    assert guess(["First name", "Last name", "Mobile", "E-mail"]) == {"firstName": 0, "lastName": 1, "phone": 2, "email": 3}
    assert guess(["Prénom", "Nom", "Téléphone portable", "Courriel"]) == {"firstName": 0, "lastName": 1, "phone": 2,
                                                                          "email": 3}
    assert guess(["Nombre", "Apellidos", "Teléfono", "Correo electrónico"]) == {"firstName": 0, "lastName": 1,
                                                                                 "phone": 2, "email": 3}
    assert guess(["E-Mail-Adresse", "Handynummer", "Nachname", "Vorname", "Firma"]) == {
        "firstName": 3, "lastName": 2, "phone": 1, "email": 0}
    assert guess(["id", "Company", "Notes"]) == {"firstName": None, "lastName": None, "phone": None, "email": None}


def test_a_file_with_an_endless_line_fails_the_job_without_reading_it_into_memory(tmp_path, monkeypatch):
    monkeypatch.setattr(csv_import, "MAX_LINE_BYTES", 1024)
    path = tmp_path / "x.csv"
    path.write_bytes(b"phone\n" + b"1" * 5000)
    with pytest.raises(Exception, match="longer than"):
        list(csv_import.read_batches(path, position=6, row_number=1, delimiter=",", header=["phone"],
                                     mapping={"phone": 0}, region=None, batch_size=10))


async def test_retention_deletes_old_jobs_their_files_and_stray_uploads(browser, services, owner):
    data_dir = services.settings.data_dir
    finished, _ = await upload_and_start(browser, services, GOOD_FILE)
    draft = (await browser.upload(GOOD_FILE)).json["id"]
    directory = contact_import.imports_dir(data_dir)
    stray = directory / ".upload-abandoned"
    stray.write_bytes(b"half an upload")
    orphan = directory / "imp_gone.csv"
    orphan.write_bytes(b"phone\n")
    assert await contact_import.cleanup(services.db, data_dir) == {"jobs": 0, "files": 0}  # all too young
    removed = await contact_import.cleanup(services.db, data_dir, now=utcnow() + timedelta(hours=25))
    assert removed == {"jobs": 1, "files": 3}  # the draft and its upload, the stray upload, the orphan
    assert imports_files(services) == [f"{finished}.errors.csv"]
    assert [r["id"] for r in rows(services, "SELECT id FROM contact_imports")] == [finished]
    # The server runs it as part of the retention cleanup (services/retention.py).
    deleted = await RetentionWorker(services, pause=0).run_once(utcnow() + timedelta(days=31))
    assert (deleted["import jobs"], deleted["import files"]) == (1, 1) and imports_files(services) == []
    assert draft  # (deleted above)


async def test_retention_keeps_a_draft_started_after_it_was_read_as_expired(browser, services, owner):
    """The cleanup reads the expired jobs, then deletes them: a draft started in between is no draft by then, and
    keeps its row (its runner would find it gone) and its files (its reader would fail)."""
    expired_at = iso(utcnow() + timedelta(hours=1))  # every draft uploaded now reads as expired
    draft = (await browser.upload(GOOD_FILE)).json["id"]
    expired = await import_store.expired_imports(services.db, expired_at, iso(utcnow() - timedelta(days=1)))
    assert [(job["id"], job["status"]) for job in expired] == [(draft, "uploaded")]
    r = await browser.post(f"/contacts/import/{draft}/start", {**MAPPING, "defaultCountry": "", "list": "",
                                                               "newListName": ""})
    assert r.code == 303, r.text  # started meanwhile
    assert await import_store.delete_imports(services.db, [(draft, "uploaded")]) == []
    assert [r["id"] for r in rows(services, "SELECT id FROM contact_imports")] == [draft]
    await services.imports.drain()
    assert (await browser.progress(draft))["status"] == "completed"
