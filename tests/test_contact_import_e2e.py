"""Bulk contact import against the real server.py over HTTPS: kill -9 in the middle of a big import, then a
restart; the import-contacts command beside the running server (and killed); a browser that uploads a file
and watches the progress bar reach 100 %."""
import json
import os
import signal
import subprocess
import sys
import threading
import time

from tests.parley_process import ROOT, ParleyProcess, run_cli
from tests.ui_helpers import sign_in
from tests import db_direct

# PostgreSQL imports row by row at ~400 rows/s on 2 cores (SQLite: thousands), so its half of the suite takes a
# smaller file: still several seconds of importing for the kill -9 and the API writes to land in the middle of.
ROWS = 6_000 if os.environ.get("PARLEY_TEST_DATABASE_URL") else 25_000
MAPPING = {"firstName": "0", "lastName": "1", "phone": "2", "email": "3", "defaultCountry": "", "list": "new",
           "newListName": "Imported"}


def big_csv(path, rows=ROWS):
    """rows data rows: every 97th an invalid phone, every 50th the phone of the row 25 before it spelled
    otherwise (matched, across batches); returns (bad row numbers, distinct good phones)."""
    bad, phones = set(), set()
    with open(path, "w", encoding="utf-8") as f:
        f.write("\ufeffFirst name;Last name;Mobile;E-mail\n")
        for i in range(rows):
            row_number = i + 2
            if i % 97 == 0:
                phone = "0212 555 000"
                bad.add(row_number)
            elif i % 50 == 0 and (i - 25) % 97 != 0:
                j = i - 25
                phone = f"+1 (212) {200 + j // 10000:03d}-{j % 10000:04d}"
            else:
                phone = f"+1212{200 + i // 10000:03d}{i % 10000:04d}"
                phones.add(phone)
            f.write(f"Big;Person {i};{phone};person{i}@example.com\n")
    return bad, phones


def db_rows(db_path, sql, *params):
    """The rows as tuples, from the SQLite file at db_path or the test's PostgreSQL database."""
    cx = db_direct.connect(db_path)
    try:
        return [tuple(row) for row in cx.execute(sql, params).fetchall()]
    finally:
        cx.close()


def ui_client(parley, login, password):
    client = parley.client()
    client.get("/login")
    r = client.post("/login", data={"email": login, "password": password, "_xsrf": client.cookies["_xsrf"]})
    assert r.status_code == 303, r.text
    return client


def upload(client, path):
    with open(path, "rb") as f:
        r = client.post("/contacts/import/upload", params={"name": os.path.basename(path)}, content=f,
                        headers={"X-XSRFToken": client.cookies["_xsrf"], "Content-Type": "text/csv"})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def check_import(db_path, account_id, job, bad, phones, api_contacts=0):
    """Nothing half-imported: the counts add up, every contact the file made is in the list once (and
    api_contacts others were made through the API meanwhile)."""
    if db_direct.on_sqlite():
        assert db_rows(db_path, "PRAGMA integrity_check") == [("ok",)]
    assert (job["rowsRead"], job["created"], job["matched"], job["failed"]) == (
        ROWS, len(phones), ROWS - len(phones) - len(bad), len(bad))
    assert db_rows(db_path, "SELECT COUNT(*), COUNT(DISTINCT phone) FROM contacts WHERE account_id = ? AND phone"
                            " IS NOT NULL", account_id) == [(len(phones), len(phones))]
    assert db_rows(db_path, "SELECT COUNT(*) FROM contacts WHERE account_id = ? AND phone IS NULL",
                   account_id) == [(api_contacts,)]
    [(list_id, count)] = db_rows(db_path, "SELECT id, contact_count FROM lists WHERE account_id = ? AND name = ?",
                                 account_id, "Imported")
    assert count == len(phones)
    assert db_rows(db_path, "SELECT COUNT(*) FROM contacts c WHERE account_id = ? AND phone IS NOT NULL AND NOT"
                            " EXISTS (SELECT 1 FROM list_members m WHERE m.list_id = ? AND m.contact_id = c.id)",
                   account_id, list_id) == [(0,)]


def report_rows(text):
    return [int(line.split(",", 1)[0]) for line in text.lstrip("\ufeff").splitlines()[1:]]


def test_kill_9_in_the_middle_of_an_import_then_a_restart_resumes_it_with_nothing_half_imported(tmp_path):
    """Issue 14: "a restart of the server resumes an interrupted job ... (no half-imported row)"; the counts
    add up: created + matched + failed = rows read."""
    data = tmp_path / "data"
    path = tmp_path / "big.csv"
    bad, phones = big_csv(path)
    parley = ParleyProcess(data, http=False).start()
    first_run = parley.first_run
    try:
        client = ui_client(parley, first_run["login"], first_run["password"])
        import_id = upload(client, path)
        r = client.post(f"/contacts/import/{import_id}/start", data={**MAPPING, "_xsrf": client.cookies["_xsrf"]})
        assert r.status_code == 303
        wait_for(lambda: client.get(f"/contacts/import/{import_id}/progress").json()["rowsRead"] >= 3000, 120,
                 "the import to get going")
        parley.proc.send_signal(signal.SIGKILL)
        parley.proc.wait(10)
        client.close()
    finally:
        parley.stop()
    [(status, rows_read, position)] = db_rows(data / "parley.db", "SELECT status, rows_read, position FROM"
                                                                  " contact_imports WHERE id = ?", import_id)
    assert status == "running" and 0 < rows_read < ROWS, (status, rows_read)

    parley = ParleyProcess(data, http=False).start()
    try:
        client = ui_client(parley, first_run["login"], first_run["password"])
        job = wait_for(lambda: (lambda p: p if p["status"] != "running" else None)(
            client.get(f"/contacts/import/{import_id}/progress").json()), 240, "the resumed import to end")
        assert job["status"] == "completed" and job["resumed"] == 1, job
        check_import(data / "parley.db", first_run["account_id"], job, bad, phones)
        report = client.get(job["errorReport"])
        assert report.status_code == 200 and report_rows(report.text) == sorted(bad)
        page = client.get(f"/contacts/import/{import_id}").text
        assert "Resumed 1 time(s) after a server restart" in page
        client.close()
    finally:
        parley.stop()
    assert not (data / "imports" / f"{import_id}.csv").exists()  # the upload is deleted once imported


def cli_command(data, *args):
    return [sys.executable, str(ROOT / "server.py"), "import-contacts", *args, "--data-dir", str(data),
            "--log-level", "warning"]


def cli(data, *args):
    return subprocess.run(cli_command(data, *args), capture_output=True, text=True, timeout=600, cwd=ROOT)


def cli_on_a_terminal(data, *args):
    """Run the command with stderr on a pseudo-terminal; returns (stdout, what the terminal showed)."""
    master, slave = os.openpty()
    screen = []

    def read_screen():
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the command ended and closed the terminal
                return
            if not chunk:
                return
            screen.append(chunk)

    reader = threading.Thread(target=read_screen)
    reader.start()
    try:
        out = subprocess.run(cli_command(data, *args), stdout=subprocess.PIPE, stderr=slave, text=True, timeout=600,
                             cwd=ROOT)
    finally:
        os.close(slave)
        reader.join(10)
        os.close(master)
    assert out.returncode == 0
    return out.stdout, b"".join(screen)


def test_the_cli_imports_beside_the_running_server_and_api_writes_go_on(tmp_path):
    """Issue 14: `python server.py import-contacts --email ACCOUNT_EMAIL FILE.csv [--list LIST_ID]` while the
    server runs; last on stdout one JSON line with integer counts and the error report's path. The API
    keeps answering writes meanwhile (the two writer processes share SQLite)."""
    data = tmp_path / "data"
    path = tmp_path / "big.csv"
    bad, phones = big_csv(path)
    with ParleyProcess(data, "--rate-limit", "100000", http=False) as parley:
        account = run_cli(data, "create-account", "--name", "Ops", "--email", "ops@import.example")
        key = account["api_key"]
        with parley.client() as api:
            list_id = api.post("/v1/lists", params={"apiKey": key}, json={"name": "Imported"}).json()["id"]
            statuses, stop = [], threading.Event()

            def api_writes():
                with parley.client() as writer:
                    n = 0
                    while not stop.is_set():
                        n += 1
                        r = writer.post("/v1/contacts", params={"apiKey": key},
                                        json={"email": f"api{n}@writes.example"})
                        statuses.append(r.status_code)

            thread = threading.Thread(target=api_writes)
            thread.start()
            try:
                out = cli(data, "--email", "OPS@import.example", str(path), "--list", list_id)
            finally:
                stop.set()
                thread.join()
        assert out.returncode == 0, out.stderr
        summary = json.loads(out.stdout.strip().splitlines()[-1])
        # No terminal: no progress bar; the one line says which database it used and the server it follows.
        assert out.stderr.startswith("parley import-contacts") and len(out.stderr.splitlines()) == 1, out.stderr
        assert set(statuses) == {201} and len(statuses) > 5, statuses[:20]
        for name in ("created", "matched", "failed", "rows"):
            assert isinstance(summary[name], int)
        job = {"rowsRead": summary["rows"], "created": summary["created"], "matched": summary["matched"],
               "failed": summary["failed"]}
        check_import(data / "parley.db", account["account_id"], job, bad, phones, api_contacts=len(statuses))
        report = summary["error_report"]
        assert summary["status"] == "completed" and report.startswith(str(data.resolve()))
        assert oct(os.stat(report).st_mode & 0o777) == "0o600"
        assert report_rows(open(report, encoding="utf-8").read()) == sorted(bad)
        assert path.exists()  # the operator's own file is never deleted

        # Again, with the progress bar on a terminal: nothing new is created.
        stdout, screen = cli_on_a_terminal(data, "--email", "ops@import.example", str(path), "--list", list_id)
        again = json.loads(stdout.strip().splitlines()[-1])
        assert (again["created"], again["matched"], again["failed"]) == (0, ROWS - len(bad), len(bad))
        assert b"\r[" in screen and b"100.0 %" in screen and f"{ROWS} rows".encode() in screen


def test_a_killed_import_contacts_command_is_marked_interrupted_by_the_server(tmp_path):
    """Issue 14: a restart "resumes or clearly marks an interrupted job": the command's job cannot be resumed
    by the server (the file is the operator's), so the server marks it interrupted, saying how to go on."""
    data = tmp_path / "data"
    path = tmp_path / "big.csv"
    big_csv(path)
    with ParleyProcess(data, http=False) as parley:
        account = run_cli(data, "create-account", "--name", "Ops", "--email", "ops@import.example")
        command = subprocess.Popen([sys.executable, str(ROOT / "server.py"), "import-contacts", "--email",
                                    "ops@import.example", str(path), "--data-dir", str(data)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
        try:
            wait_for(lambda: db_rows(data / "parley.db", "SELECT rows_read FROM contact_imports WHERE rows_read > 0"),
                     120, "the command to import")
        finally:
            command.kill()
            command.wait()
        [(import_id, status, message, rows_read, created, matched, failed)] = wait_for(
            lambda: db_rows(data / "parley.db", "SELECT id, status, message, rows_read, created, matched, failed"
                                                " FROM contact_imports WHERE status != 'running'"),
            60, "the server to notice")
        assert status == "interrupted" and "import-contacts" in message and "run it again" in message
        assert rows_read == created + matched + failed > 0
        assert db_rows(data / "parley.db", "SELECT COUNT(*) FROM contacts WHERE account_id = ?",
                       account["account_id"]) == [(created,)]
        assert parley.proc.poll() is None


# ---- the browser ------------------------------------------------------------------------------

def test_browser_uploads_a_file_and_watches_the_progress_bar_reach_100(tmp_path, chromium):
    path = tmp_path / "contacts.csv"
    rows = 3000
    with open(path, "w", encoding="utf-8") as f:
        f.write("First name,Last name,Mobile phone,E-mail address\n")
        for i in range(rows):
            f.write(f"Web,Person {i},+1 646 {200 + i // 10000:03d} {i % 10000:04d},web{i}@example.com\n")
        f.write("Bad,Row,12345,\n")
    with ParleyProcess(tmp_path / "data", http=False) as parley:
        context = chromium.new_context(ignore_https_errors=True)
        context.set_default_timeout(30_000)
        page = context.new_page()
        console_errors = []
        page.on("console", lambda m: m.type == "error" and console_errors.append(m.text))
        try:
            sign_in(page, parley)
            page.click("nav >> text=Contacts")  # the import is one of the Contacts page's actions
            page.click("text=Import contacts")
            page.set_input_files("#import-file", str(path))
            page.click("button:has-text('Upload')")
            page.wait_for_url("**/contacts/import/imp_*")
            assert "The whole file" not in page.inner_text("#import-preview")  # 3,001 rows: a sample
            assert page.inner_text("#preview-created") == "1000"
            assert page.input_value("#map-phone") == "2" and page.input_value("#map-email") == "3"
            page.click("button:has-text('Start import')")
            seen = set()
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline:
                try:
                    seen.add(page.evaluate("document.getElementById('import-bar').value"))
                except Exception:
                    pass  # the page reloads when the import ends
                if 100 in seen:
                    break
                time.sleep(0.2)
            assert 100 in seen, seen
            page.wait_for_load_state()
            page.wait_for_selector("text=Completed")
            counts = page.inner_text("#import-progress")
            assert "3001" in counts and "3000" in counts  # rows read, created
            assert page.is_visible("#error-report")
            assert console_errors == []  # the script ran under the CSP, no inline code
        finally:
            context.close()
