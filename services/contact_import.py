"""Contact import jobs as the UI and the CLI see them: drafts made from an upload or a file, their options
(column mapping, default country, list), the preview, start, cancel, progress, files and retention.
Running a job is services/import_runner.py; reading the CSV is services/csv_import.py."""
from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO, Any, TypeVar, TypeVarTuple, cast

from common.errors import Invalid, NotFound
from common.ids import iso, new_id, now_iso, parse_iso, utcnow
from services import contacts, csv_import, lists
from services.contact_fields import region_code
from services.context import JSONObject, Services
from services.import_reader import ReaderProcess
from storage import contact_imports as store
from storage import contacts as contact_store
from storage import lists as list_store
from storage.interface import Row, Store

R = TypeVar("R")
Ts = TypeVarTuple("Ts")
DataDir = str | os.PathLike[str]

BATCH_ROWS = 500            # rows per transaction: 20-50 ms of the writer, so API writes never wait long
PREVIEW_ROWS = 1000         # the preview's sample: the file's first rows
PREVIEW_SHOWN = 10          # of which the page shows this many, as mapped
RECENT_JOBS = 20
DRAFT_TTL = timedelta(hours=24)      # an upload nobody started is deleted after this
FINISHED_TTL = timedelta(days=30)    # a finished job and its error report are deleted this long after it ended
STRAY_FILE_AGE = timedelta(hours=1)  # partial uploads and files no job names, older than this, are deleted
MAX_FILE_NAME = 200
FIELD_LABELS = {"firstName": "First name", "lastName": "Last name", "phone": "Phone", "email": "Email"}
RUNNING = ("queued", "running")


def imports_dir(data_dir: DataDir) -> Path:
    """data/imports (0700, made by the first file written there): uploads and error reports, each 0600."""
    return Path(data_dir) / "imports"


def upload_path(data_dir: DataDir, import_id: str) -> Path:
    return imports_dir(data_dir) / f"{import_id}.csv"


def report_path(data_dir: DataDir, import_id: str) -> Path:
    return imports_dir(data_dir) / f"{import_id}.errors.csv"


def not_found(import_id: str) -> NotFound:
    return NotFound(f"no import with id {import_id}")


async def run_blocking(fn: Callable[[*Ts], R], *args: *Ts) -> R:
    """fn(*args) in the default executor: file I/O and parsing stay off the event loop."""
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


# ---- drafts ------------------------------------------------------------------------------------

async def start_upload(services: Services, account_id: str) -> None:
    """Before any byte of an upload: Conflict when the account's drafts (and uploads still arriving) are at
    --import-drafts-per-account; else the upload counts until end_upload()."""
    await services.import_limits.start_upload(account_id, lambda: store.count_drafts(services.db, account_id))


def end_upload(services: Services, account_id: str) -> None:
    services.import_limits.end_upload(account_id)


async def create_from_upload(services: Services, account_id: str, user_id: str | None, temp_path: Path,
                             file_name: str | None, size: int) -> Row | None:
    """A draft job for an uploaded file (already on disk at temp_path, 0600): the file is checked (UTF-8 CSV
    with a header), moved to imports/<id>.csv, and the mapping guessed. Invalid (and the file deleted) when
    it cannot be imported."""
    try:
        sniffed = await run_blocking(csv_import.sniff, temp_path)
        import_id = new_id("imp")
        target = upload_path(services.settings.data_dir, import_id)
        await run_blocking(os.replace, temp_path, target)
    except BaseException:
        await run_blocking(remove_file, temp_path)
        raise
    try:
        return await _insert_draft(services.db, account_id, import_id, sniffed, runner="server",
                                   file_name=file_name, file_path=f"imports/{target.name}", size=size,
                                   created_by=user_id)
    except BaseException:
        await run_blocking(remove_file, target)
        raise


async def create_for_cli(services: Services, account_id: str, path: DataDir, runner: str, *,
                         list_id: str | None = None, region: str | None = None,
                         overrides: Iterable[str] = ()) -> Row | None:
    """A queued job for the operator's file (read in place, never copied or deleted), with the mapping
    guessed from its header and changed by overrides ("field=Column name or number")."""
    file = Path(path).resolve()
    if not file.is_file():
        raise Invalid(f"no such file: {file}")
    sniffed = await run_blocking(csv_import.sniff, file)
    mapping = apply_overrides(sniffed["header"], csv_import.guess_mapping(sniffed["header"]), overrides)
    options = await check_options(services.db, account_id, sniffed["header"], mapping, region or "",
                                  list_id or "", "")
    return await _insert_draft(services.db, account_id, new_id("imp"), sniffed, runner=runner, file_name=file.name,
                               file_path=str(file), size=file.stat().st_size, status="queued",
                               mapping=options["mapping"], default_region=options["default_region"],
                               list_id=options["list_id"])


async def _insert_draft(db: Store, account_id: str, import_id: str, sniffed: Mapping[str, Any], *, runner: str,
                        file_name: str | None, file_path: str, size: int, status: str = "uploaded",
                        created_by: str | None = None, mapping: Mapping[str, int | None] | None = None,
                        default_region: str | None = None, list_id: str | None = None) -> Row | None:
    """A new job; its default region, unless given, is the account's default country (issue 43 §9: the job page
    offers it preselected, the CLI's --default-country overrides it)."""
    now = now_iso()
    if default_region is None:
        default_region = await contacts.account_default_country(db, account_id)
    return await store.insert_import(db, {
        "id": import_id, "account_id": account_id, "status": status, "runner": runner,
        "file_name": (file_name or "upload.csv")[:MAX_FILE_NAME], "file_path": file_path, "file_bytes": size,
        "delimiter": sniffed["delimiter"], "header": sniffed["header"], "data_start": sniffed["data_start"],
        "mapping": mapping or csv_import.guess_mapping(sniffed["header"]), "default_region": default_region,
        "list_id": list_id, "position": sniffed["data_start"], "created_by": created_by, "created_at": now,
        "updated_at": now})


def apply_overrides(header: Sequence[str], mapping: Mapping[str, int | None],
                    overrides: Iterable[str]) -> dict[str, int | None]:
    """The CLI's --map field=Column (a header name, case-insensitive, or a 1-based number; empty: skip it)."""
    mapping = dict(mapping)
    names = [cell.casefold() for cell in header]
    for override in overrides:
        field, _, column = override.partition("=")
        field, column = field.strip(), column.strip()
        if field not in csv_import.FIELDS:
            raise Invalid(f"--map {override}: the field must be one of {', '.join(csv_import.FIELDS)}")
        if not column:
            mapping[field] = None
        elif column.isdigit() and 1 <= int(column) <= len(header):
            mapping[field] = int(column) - 1
        elif column.casefold() in names:
            mapping[field] = names.index(column.casefold())
        else:
            raise Invalid(f"--map {override}: the file has no column {column!r} (its columns: {', '.join(header)})")
    return mapping


async def check_options(db: Store, account_id: str, header: Sequence[str], mapping: Mapping[str, object],
                        region: str | None, list_choice: str | None, new_list_name: str | None) -> dict[str, Any]:
    """The options of a job, checked: {mapping, default_region, list_id, new_list_name}. mapping: field ->
    column index or None; region "" for none; list_choice "" (none), "new" (new_list_name) or a list id."""
    clean: dict[str, int | None] = {}
    for field in csv_import.FIELDS:
        index = mapping.get(field)
        if index is not None and not (isinstance(index, int) and 0 <= index < len(header)):
            raise Invalid(f"{FIELD_LABELS[field]}: choose one of the file's columns", field=field)
        if index is not None and index in clean.values():
            raise Invalid(f"column {csv_import.column_name(header, index)!r} is chosen for two fields", field=field)
        clean[field] = index
    if clean["phone"] is None and clean["email"] is None:
        raise Invalid("choose the column with the phone number or the email (a contact needs one of them)",
                      field="phone")
    options: dict[str, Any] = {"mapping": clean, "default_region": region_code(region) if region else None, "list_id": None,
               "new_list_name": None}
    list_choice = (list_choice or "").strip()
    if list_choice == "new":
        name = (new_list_name or "").strip()
        if not name or len(name) > lists.MAX_NAME_LENGTH:
            raise Invalid(f"the new list needs a name of 1 to {lists.MAX_NAME_LENGTH} characters", field="newListName")
        options["new_list_name"] = name
    elif list_choice:
        options["list_id"] = (await lists.get_list(db, account_id, list_choice))["id"]
    return options


def parse_mapping(form_values: Mapping[str, str | None]) -> dict[str, int | None]:
    """{field: "" or a column index as text} from a form -> {field: int or None}; Invalid for junk."""
    mapping: dict[str, int | None] = {}
    for field in csv_import.FIELDS:
        text = (form_values.get(field) or "").strip()
        if text and not (text.isascii() and text.isdigit()):
            raise Invalid(f"{FIELD_LABELS[field]}: choose one of the file's columns", field=field)
        mapping[field] = int(text) if text else None
    return mapping


async def save_options(services: Services, account_id: str, import_id: str, options: Mapping[str, Any], *,
                       start: bool = False) -> Row:
    """Store a draft's options; with start, create the new list if one was asked for and queue the job.
    NotFound unless it is this account's draft."""
    job = await get_job(services.db, account_id, import_id)
    if job["status"] != "uploaded":
        raise Invalid("this import has already started; its options cannot change")
    if start and options["new_list_name"]:
        options = {**options, "list_id": (await lists.create_list(services.db, account_id,
                                                                   options["new_list_name"]))["id"],
                   "new_list_name": None}
    saved = await store.save_draft(services.db, account_id, import_id, options, queue=start)
    if saved is None:
        raise Invalid("this import has already started or was discarded")
    if start and services.imports is not None:
        services.imports.notify()
    return saved


# ---- reading -----------------------------------------------------------------------------------

async def get_job(db: Store, account_id: str, import_id: str) -> Row:
    job = await store.get_import(db, account_id, import_id)
    if job is None:
        raise not_found(import_id)
    return job


async def recent_jobs(db: Store, account_id: str) -> list[Row]:
    return await store.recent_imports(db, account_id, RECENT_JOBS)


async def list_choices(db: Store, account_id: str) -> list[dict[str, Any]]:
    """The account's lists for the list menu (at most 1,000, oldest first)."""
    return [list_store.public_list(row) for row in await list_store.page_lists(db, account_id, None, 1000)]


def progress(job: Mapping[str, Any], now: datetime | None = None) -> JSONObject:
    """What the progress bar shows: counts, percent of the file, rows per second and seconds left in this
    run. created + matched + failed = rowsRead at every moment (one transaction moves them all)."""
    total = max(0, job["file_bytes"] - job["data_start"])
    done = max(0, job["position"] - job["data_start"])
    finished = job["status"] in store.FINISHED
    percent = 100.0 if job["status"] == "completed" or total == 0 else min(100.0, round(100 * done / total, 1))
    rate = seconds_left = None
    if job["run_started_at"] and job["status"] != "queued":
        end = parse_iso(job["finished_at"] or job["updated_at"]) if finished else (now or utcnow())
        elapsed = (end - parse_iso(job["run_started_at"])).total_seconds()
        if elapsed > 0.5:
            rate = round((job["rows_read"] - job["run_start_rows"]) / elapsed, 1)
            bytes_rate = (job["position"] - job["run_start_position"]) / elapsed
            if job["status"] == "running" and bytes_rate > 0:
                seconds_left = round((job["file_bytes"] - job["position"]) / bytes_rate)
    return {"id": job["id"], "status": job["status"], "fileName": job["file_name"], "fileBytes": job["file_bytes"],
            "percent": percent, "rowsRead": job["rows_read"], "created": job["created"], "matched": job["matched"],
            "failed": job["failed"], "rowsPerSecond": rate, "secondsLeft": seconds_left, "resumed": job["resumed"],
            "message": job["message"], "listId": job["list_id"],
            "errorReport": f"/contacts/import/{job['id']}/errors.csv" if job["errors_bytes"] else None,
            "createdAt": job["created_at"], "updatedAt": job["updated_at"], "finishedAt": job["finished_at"]}


async def preview(services: Services, job: Mapping[str, Any]) -> JSONObject:
    """The job's first PREVIEW_ROWS rows read with its options, nothing written: the first rows as mapped,
    the first errors, and how many rows of the sample would be created, matched and fail (against the
    contacts stored now, and earlier rows of the sample: a phone seen twice is matched the second time).
    Bounded: at most --import-preview-max-bytes / -max-lines of the file, by one reader per account and
    --import-preview-readers in all (RateLimited / Unavailable when there is no room now)."""
    settings = services.settings
    rows: list[tuple[int, dict[str, Any]]] = []
    errors: list[tuple[int, str, str]] = []
    failed, end = 0, job["position"]
    with services.import_limits.preview_reader(job["account_id"]):
        reader = await ReaderProcess.start(**reader_request(
            settings.data_dir, job, PREVIEW_ROWS, limit_rows=PREVIEW_ROWS,
            limit_bytes=settings.import_preview_max_bytes, limit_lines=settings.import_preview_max_lines))
        try:
            async for batch in reader.batches():
                rows += batch["rows"]
                errors += batch["errors"]
                failed += batch["failed"]
                end = batch["position"]
        finally:
            await reader.close()
    phones, emails = await contact_store.existing_phones_and_emails(
        services.db, job["account_id"], [v["phone"] for _, v in rows if v["phone"]],
        [v["email"] for _, v in rows if v["email"] and not v["phone"]])
    seen_phones: set[str] = set()
    seen_emails: set[str] = set()
    outcomes: list[str] = []
    for _, values in rows:  # the same decision find_or_create_in_tx makes: the phone first, else the email
        if values["phone"]:
            matched = values["phone"] in phones or values["phone"] in seen_phones
            seen_phones.add(values["phone"])
        else:
            matched = values["email"] in emails or values["email"] in seen_emails
        if values["email"]:
            seen_emails.add(values["email"])
        outcomes.append("matched" if matched else "created")
    shown = sorted([(number, values, outcome, None) for (number, values), outcome in zip(rows, outcomes)] +
                   [(number, None, "failed", f"{column}: {reason}" if column else reason)
                    for number, column, reason in errors], key=lambda item: item[0])[:PREVIEW_SHOWN]
    return {"rows": shown, "errors": errors[:PREVIEW_SHOWN], "sample": len(rows) + failed,
            "wholeFile": end >= job["file_bytes"], "bytesRead": end - job["position"],
            "created": outcomes.count("created"), "matched": outcomes.count("matched"), "failed": failed}


def reader_request(data_dir: DataDir, job: Mapping[str, Any], batch_size: int, **limits: int) -> dict[str, Any]:
    """The reader process's request for the job's file from its committed position (limits: read_batches'
    limit_rows, limit_bytes, limit_lines)."""
    path = Path(job["file_path"])
    return {"path": str(path if path.is_absolute() else Path(data_dir) / path), "position": job["position"],
            "row_number": job["row_number"], "delimiter": job["delimiter"], "header": job["header"],
            "mapping": job["mapping"], "region": job["default_region"], "batch_size": batch_size, **limits}


# ---- stopping and files ------------------------------------------------------------------------

async def cancel(services: Services, account_id: str, import_id: str) -> Row:
    """Cancel a draft, a queued or a running job: rows already committed stay imported; a running job stops
    before its next batch. NotFound for another account's id; Invalid when it has already ended."""
    job = await get_job(services.db, account_id, import_id)
    after = cast(Row, await store.finish(services.db, account_id, import_id, "cancelled", "cancelled by a user",
                                         from_statuses=("uploaded", *RUNNING)))  # the account's job: found above
    if after["status"] != "cancelled" or job["status"] == "cancelled":
        raise Invalid(f"this import has already ended ({after['status']})")
    if job["status"] != "running":  # a running job's runner deletes the upload when it stops
        await delete_upload(services.settings.data_dir, after)
    return after


async def interrupt(services: Services, job: Mapping[str, Any], message: str) -> Row | None:
    """Mark a running job interrupted (its runner stopped before the end); rows committed stay imported."""
    return await store.finish(services.db, job["account_id"], job["id"], "interrupted", message,
                              from_statuses=RUNNING)


def remove_file(path: str | os.PathLike[str]) -> int:
    """Delete path if it exists; returns 1 if it did."""
    try:
        os.unlink(path)
        return 1
    except FileNotFoundError:
        return 0


async def delete_upload(data_dir: DataDir, job: Mapping[str, Any]) -> None:
    """The uploaded file of a job (never a CLI job's own file)."""
    if job["runner"] == "server":
        await run_blocking(remove_file, upload_path(data_dir, job["id"]))


async def open_report(data_dir: DataDir, account_id: str, job: Mapping[str, Any]) -> IO[bytes]:
    """The error report file of this account's job, opened for reading, or NotFound."""
    if job["account_id"] != account_id or not job["errors_bytes"]:
        raise NotFound(f"import {job['id']} has no error report")
    try:
        return await run_blocking(open, report_path(data_dir, job["id"]), "rb")
    except FileNotFoundError:
        raise NotFound(f"import {job['id']} has no error report any more") from None


async def cleanup(db: Store, data_dir: DataDir, now: datetime | None = None) -> dict[str, int]:
    """Retention: drafts nobody started (after DRAFT_TTL) and finished jobs with their error reports (after
    FINISHED_TTL) are deleted, rows and files; so are partial uploads and files no job names (after
    STRAY_FILE_AGE). Returns {"jobs", "files"} deleted. Safe to run at any time, from any process."""
    now = now or utcnow()
    expired = await store.expired_imports(db, iso(now - DRAFT_TTL), iso(now - FINISHED_TTL))
    # The rows first, each only while still expired, then the files of those deleted: a draft started between the
    # read and the delete keeps its row and its upload (it was deleted under the running job before).
    deleted = set(await store.delete_imports(db, [(job["id"], job["status"]) for job in expired])) if expired else set()
    files = 0
    for job in expired:
        if job["id"] not in deleted:
            continue
        files += await run_blocking(remove_file, report_path(data_dir, job["id"]))
        if job["runner"] == "server":
            files += await run_blocking(remove_file, upload_path(data_dir, job["id"]))
    known = await store.import_ids(db)
    files += await run_blocking(_delete_strays, imports_dir(data_dir), known, (now - STRAY_FILE_AGE).timestamp())
    return {"jobs": len(deleted), "files": files}


def _delete_strays(directory: Path, known: set[str], before: float) -> int:
    if not directory.is_dir():
        return 0
    deleted = 0
    for entry in os.scandir(directory):
        job_id = entry.name.split(".", 1)[0]
        stray = entry.name.startswith(".upload-") or job_id not in known
        if stray and entry.is_file() and entry.stat().st_mtime < before:
            deleted += remove_file(entry.path)
    return deleted
