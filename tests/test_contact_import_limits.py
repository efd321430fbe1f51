"""Contact imports under load from one account (issue 18, "one tenant must never stall another"): the
preview's work bounded, one preview reader per account and a few in all, drafts capped per account; the
upload's XSRF check before any byte; formulas escaped in the error report. Fixtures and helpers are
tests/contact_import_helpers.py's."""
import asyncio
import csv
import io
import json
from types import SimpleNamespace

import pytest

from common.errors import Conflict
from services import contact_import, csv_import, import_runner
from services.import_limits import ImportLimits
from services.import_reader import ReaderProcess
from tests.contact_import_helpers import (GOOD_FILE, browser, imports_files, other_browser, owner,  # noqa: F401
                                          settings, stranger, upload_and_start)
from tests.db_direct import value
from tests.raw_http_helpers import MB, Raw, head


def upload_head(browser, length, xsrf=None):
    """The request line and headers of an upload sent over a raw socket (the test sends the body)."""
    cookies = "; ".join(f"{k}={v}" for k, v in browser.cookies.items())
    return head("POST", "/contacts/import/upload?name=raw.csv", length,
                extra=(f"Cookie: {cookies}", f"X-XSRFToken: {xsrf or browser.cookies['_xsrf']}"))


FORMULA_FILE = b"=Phone;@Name;+Note;-Tag\n+1 415;=1+1;+SUM(A1);-2+3\n"
FORMULA_REPORT = [["row", "column", "reason", "'=Phone", "'@Name", "'+Note", "'-Tag"],
                  ["2", "'=Phone", None, "'+1 415", "'=1+1", "'+SUM(A1)", "'-2+3"]]


async def counted_uploads(services, n):
    """Wait until the server counts n uploads still arriving (of any account)."""
    for _ in range(500):
        if sum(services.import_limits.uploading.values()) == n:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"not {n} uploads counted: {dict(services.import_limits.uploading)}")


def report_lines(data):
    """The error report's lines, the reason left out (None): what a spreadsheet would show as text."""
    lines = list(csv.reader(io.StringIO(data.decode("utf-8-sig"))))
    return [lines[0]] + [[*line[:2], None, *line[3:]] for line in lines[1:]]


async def test_the_error_report_escapes_formulas_in_the_header_and_the_cells_from_the_ui_and_the_cli(
        browser, services, owner, tmp_path):
    """Issue 18 item 6: the header row and every cell starting with =, +, -, @ get a quote before them, as
    the campaign recipients' CSV does (common/spreadsheet.safe_cell), in both the UI's and the CLI's report."""
    _, p = await upload_and_start(browser, services, FORMULA_FILE, {"firstName": "1", "lastName": "", "phone": "0",
                                                                    "email": ""})
    assert p["failed"] == 1
    assert report_lines((await browser.get(p["errorReport"])).body) == FORMULA_REPORT
    path = tmp_path / "formulas.csv"
    path.write_bytes(FORMULA_FILE)
    runner = import_runner.cli_runner()
    job = await contact_import.create_for_cli(services, owner["account_id"], path, runner)
    job = await import_runner.run_job(services, job, runner)
    assert (job["status"], job["failed"]) == ("completed", 1)
    report = contact_import.report_path(services.settings.data_dir, job["id"]).read_bytes()
    assert report_lines(report) == FORMULA_REPORT


@pytest.mark.parametrize("settings", [{"import_preview_max_lines": 1000}], indirect=True)
async def test_the_preview_reads_at_most_its_lines_even_when_they_are_blank(browser, services):
    """Issue 18 item 5: a file of blank lines made the preview read all of it (36 s of a core per view for
    50 MB): it stops at --import-preview-max-lines lines, blank ones included, and says it is a sample."""
    data = b"phone\n" + b"\n" * 5000 + b"+14155552671\n"
    page = await browser.get((await browser.upload(data)).json["url"])
    assert page.code == 200
    assert "A sample: the first 0 rows" in page.text and "in its first 1 KB" in page.text
    assert "+14155552671" not in page.text


@pytest.mark.parametrize("settings", [{"max_import_bytes": MB}], indirect=True)
async def test_the_header_is_looked_for_in_the_first_64_kb_only(browser, services):
    """Empty rows before the header were all read while the upload's request waited (a thread of the
    server's process): the header must start in the first 64 KB."""
    r = await browser.upload(b",,\n" * 30_000 + b"phone\n+14155552671\n")
    assert r.code == 400 and "no header row (in its first 64 KB)" in r.json["error"]["message"]
    assert imports_files(services) == []
    assert (await browser.upload(b",,\n" * 20_000 + b"phone\n+14155552671\n")).code == 201


def test_the_preview_stops_at_its_bytes_before_a_record_the_cut_would_end(tmp_path):
    """A quoted field with line breaks that goes on past --import-preview-max-bytes is not a row of the
    sample (it would be half of one); the sample ends at the record before it."""
    path = tmp_path / "long.csv"
    path.write_bytes(b"phone,note\n+14155552671,short\n+14155552672,\"" + b"line\n" * 1000 + b"\"\n")
    batches = list(csv_import.read_batches(path, position=6 + 5, row_number=1, delimiter=",",
                                           header=["phone", "note"], mapping={"phone": 0}, region=None,
                                           batch_size=10, limit_bytes=1000))
    assert [number for batch in batches for number, _ in batch["rows"]] == [2]
    assert batches[-1]["position"] == len(b"phone,note\n+14155552671,short\n")


async def test_one_preview_reader_per_account_and_a_few_in_all(browser, other_browser, services, monkeypatch):
    """Issue 18 item 5: 60 concurrent views started 31 reader processes. A second view of the same account
    while its reader runs gets the page without the preview and 429 saying why; another account still gets
    its preview, up to --import-preview-readers readers in all (then 503)."""
    first_url, second_url = [(await browser.upload(GOOD_FILE)).json["url"] for _ in range(2)]
    other_url = (await other_browser.upload(GOOD_FILE)).json["url"]
    real_start, started, held, release = ReaderProcess.start, [], asyncio.Event(), asyncio.Event()

    async def start(**request):  # the first reader waits until the test lets it go
        started.append(request)
        if len(started) == 1:
            held.set()
            await release.wait()
        return await real_start(**request)

    monkeypatch.setattr(ReaderProcess, "start", staticmethod(start))
    first = asyncio.ensure_future(browser.get(first_url))
    await held.wait()
    busy = await browser.get(second_url)
    assert busy.code == 429 and "another preview of this account" in busy.text and busy.headers["Retry-After"]
    assert 'id="map-phone"' in busy.text and "No preview." in busy.text  # the options are still there
    assert len(started) == 1
    assert 'id="preview-created">4<' in (await other_browser.get(other_url)).text
    services.import_limits.max_readers = 1
    full = await other_browser.get(other_url)
    assert full.code == 503 and "too many import previews" in full.text
    release.set()
    assert 'id="preview-created">4<' in (await first).text
    assert 'id="preview-created">4<' in (await browser.get(second_url)).text  # the reader's room is given back
    assert len(started) == 3


@pytest.mark.parametrize("settings", [{"import_drafts_per_account": 2}], indirect=True)
async def test_drafts_per_account_are_capped_counting_uploads_still_arriving(
        browser, other_browser, services, http_server_port):
    """Issue 18 item 5: an account has at most --import-drafts-per-account drafts (uploads still arriving
    count); one more is 409 before any byte is stored; starting or discarding one makes room; other accounts
    are not affected."""
    first = (await browser.upload(GOOD_FILE)).json
    raw = await Raw.open(http_server_port[1])  # the second, still arriving
    try:
        await raw.send(upload_head(browser, len(GOOD_FILE)))
        await raw.send(GOOD_FILE[:100])
        await counted_uploads(services, 1)  # the server has the head: the upload is counted
        refused = await browser.upload(GOOD_FILE)
        assert refused.code == 409 and refused.json["error"]["code"] == "TOO_MANY_DRAFTS"
        assert "already has 2 imports waiting to be started" in refused.json["error"]["message"]
        await raw.send(GOOD_FILE[100:])
        assert (await raw.response())[0] == 201
    finally:
        raw.close()
    assert (await browser.upload(GOOD_FILE)).code == 409
    assert len(imports_files(services)) == 2 and value(services, "SELECT COUNT(*) FROM contact_imports") == 2
    assert (await other_browser.upload(GOOD_FILE)).code == 201
    assert (await browser.post(f"{first['url']}/cancel")).code == 303
    assert (await browser.upload(GOOD_FILE)).code == 201


async def test_two_uploads_that_start_together_with_room_for_one_one_is_refused():
    """The drafts are counted in the database (an await): uploads counting at once all found room for one
    and the account ended with more drafts than its cap. Now one upload of an account starts at a time."""
    limits = ImportLimits(SimpleNamespace(import_preview_readers=1, import_drafts_per_account=2))

    async def one_draft_stored():
        await asyncio.sleep(0.01)  # the database read: the other uploads start meanwhile
        return 1

    outcomes = await asyncio.gather(*(limits.start_upload("acct", one_draft_stored) for _ in range(4)),
                                    return_exceptions=True)
    assert [o for o in outcomes if o is not None and not isinstance(o, Conflict)] == []
    assert sum(o is None for o in outcomes) == 1 and limits.uploading["acct"] == 1


@pytest.mark.parametrize("settings", [{"max_import_bytes": 64 * MB}], indirect=True)
async def test_a_wrong_xsrf_token_is_refused_before_a_byte_of_the_file_is_read(
        browser, services, http_server_port, settings):
    """Issue 18 item 8: the token is a header, so the 403 comes from prepare(), while the client is still
    sending: no upload file is made, and none of the body is written (before, 28 MB went to disk first)."""
    size = 28 * MB
    raw = await Raw.open(http_server_port[1])
    try:
        await raw.send(upload_head(browser, size, xsrf="2|00000000|wrong|1700000000"))
        await raw.send(b"phone\n" + b"+14155552671\n" * 20_000)  # 260 KB of it, then the answer
        status, headers, body = await raw.response()
    finally:
        raw.close()
    assert status == 403 and "xsrf" in json.loads(body)["error"]["message"].lower()
    assert headers["connection"] == "close"
    assert not contact_import.imports_dir(settings.data_dir).exists()  # no upload file was ever made
    assert value(services, "SELECT COUNT(*) FROM contact_imports") == 0
