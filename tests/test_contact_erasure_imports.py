"""Erasure and contact imports (issue 21): a row of the erased person that failed an import stays in that
import's error report; erasing the contact cuts it out (matched by email, or by phone in any spelling) and
leaves the other failed rows."""
import json

from services import contact_import
from tests import db_direct
from tests.contact_import_helpers import browser, owner, settings, upload_and_start  # noqa: F401 (fixtures)

FILE = (b"first,last,phone,email\r\n"
        b"Good,Row,+14155550190,good@example.com\r\n"
        b"Zebulonius,Quarterflashby,12345,quokka.zanzibar@example.org\r\n"
        b"Zebulonius,Again,(415) 555-9876x,\r\n"
        b"Other,Failure,999,other.failure@example.org\r\n")


async def test_erasure_cuts_the_person_out_of_import_error_reports(browser, services, api, owner):
    key = owner["api_key"]
    import_id, progress = await upload_and_start(browser, services, FILE)
    assert progress["failed"] == 3
    report = contact_import.report_path(services.settings.data_dir, import_id)
    assert b"Quarterflashby" in report.read_bytes() and b"(415) 555-9876x" in report.read_bytes()
    person = (await api.post("/v1/contacts", {"phone": "+14155559876", "email": "Quokka.Zanzibar@example.org"},
                             key=key)).json
    r = await api.delete(f"/v1/contacts/{person['id']}", key=key)
    assert r.code == 200, r.body
    text = report.read_bytes()
    assert b"Quarterflashby" not in text and b"quokka" not in text.lower() and b"555-9876" not in text
    assert b"other.failure@example.org" in text and text.count(b"\r\n") == 2  # the header and the other row
    assert (await browser.get(f"/contacts/import/{import_id}/errors.csv")).code == 200


async def test_erasure_replaces_a_header_that_is_the_persons_row(browser, services, api, owner):
    """Issue 36 item 6: a file without a header row keeps its first record, the person's whole row, as the
    import's header; erasing that person turns it into column numbers."""
    r = await browser.upload(b"Zebulonius,Quarterflashby,(415) 555-9876,quokka.zanzibar@example.org\r\n"
                             b"Other,Person,+14155550190,other@example.com\r\n")
    assert r.code == 201, r.body
    header = "SELECT header FROM contact_imports WHERE id = ?"
    assert "Quarterflashby" in db_direct.value(services, header, r.json["id"])
    person = (await api.post("/v1/contacts", {"phone": "+14155559876"}, key=owner["api_key"])).json
    assert (await api.delete(f"/v1/contacts/{person['id']}", key=owner["api_key"])).code == 200
    assert json.loads(db_direct.value(services, header, r.json["id"])) == ["Column 1", "Column 2", "Column 3",
                                                                           "Column 4"]
