"""SQL for bulk contact imports: the job rows, and the batch write that imports rows and moves the job's
position and counts in one transaction (contacts through find_or_create_in_tx, lists through add_member)."""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from common.ids import new_id, now_iso
from storage.contacts import find_or_create_in_tx
from storage.db import fetch_all, fetch_one, reads, writes
from storage.interface import Connection, Row
from storage.lists import add_member_in_tx, get_list

_COLUMNS = ("id, account_id, status, runner, file_name, file_path, file_bytes, delimiter, header, data_start,"
            " mapping, default_region, list_id, new_list_name, position, row_number, rows_read, created,"
            " matched, failed, errors_bytes, run_started_at, run_start_rows, run_start_position, resumed,"
            " message, created_by, created_at, updated_at, finished_at")
_JSON = ("header", "mapping")
ACTIVE = ("queued", "running")            # a runner owns the job, or will
FINISHED = ("completed", "cancelled", "failed", "interrupted")


def _select(where: str) -> str:
    return f"SELECT {_COLUMNS} FROM contact_imports WHERE {where}"


@writes
def insert_import(cx: Connection, row: Mapping[str, Any]) -> Row | None:
    columns = list(row)
    values = [json.dumps(row[c]) if c in _JSON else row[c] for c in columns]
    cx.execute(f"INSERT INTO contact_imports ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
               values)
    return get_import.sync(cx, row["account_id"], row["id"])


@reads
def get_import(cx: Connection, account_id: str, import_id: str) -> Row | None:
    return fetch_one(cx, _select("account_id = ? AND id = ?"), (account_id, import_id), _JSON)


@reads
def recent_imports(cx: Connection, account_id: str, limit: int) -> list[Row]:
    return fetch_all(cx, _select("account_id = ? ORDER BY id DESC LIMIT ?"), (account_id, limit), _JSON)


@reads
def count_drafts(cx: Connection, account_id: str) -> int:
    """The account's uploads not yet started or discarded."""
    return cx.execute("SELECT COUNT(*) FROM contact_imports WHERE account_id = ? AND status = 'uploaded'",
                      (account_id,)).fetchone()[0]


def _one_of(values: Sequence[Any]) -> str:
    return f"({', '.join('?' * len(values))})"


@reads
def active_imports(cx: Connection) -> list[Row]:
    """Every queued or running job, of every account (the server's import worker resumes them)."""
    return fetch_all(cx, _select(f"status IN {_one_of(ACTIVE)} ORDER BY id"), ACTIVE, _JSON)


def update_in_tx(cx: Connection, account_id: str, import_id: str, changes: Mapping[str, Any], *, increments: Mapping[str, int] | None = None) -> Row | None:
    """The one place a job's row changes: its status, position and counts (increments are added to the
    stored values). Returns the row as it is now. A live `import.progress` event belongs here (emitted in
    this transaction), once the events table exists."""
    changes = {**changes, "updated_at": now_iso()}
    assignments = [f"{c} = ?" for c in changes] + [f"{c} = {c} + ?" for c in (increments or {})]
    values = [json.dumps(v) if c in _JSON else v for c, v in changes.items()] + list((increments or {}).values())
    cx.execute(f"UPDATE contact_imports SET {', '.join(assignments)} WHERE account_id = ? AND id = ?",
               (*values, account_id, import_id))
    return get_import.sync(cx, account_id, import_id)


@writes
def save_draft(cx: Connection, account_id: str, import_id: str, changes: Mapping[str, Any], queue: bool = False) -> Row | None:
    """Store the mapping and options of an uploaded job (and, with queue, hand it to the runner).
    Returns the job, or None unless it is this account's and still a draft."""
    job = get_import.sync(cx, account_id, import_id)
    if job is None or job["status"] != "uploaded":
        return None
    return update_in_tx(cx, account_id, import_id, {**changes, **({"status": "queued"} if queue else {})})


@writes
def start_run(cx: Connection, account_id: str, import_id: str, runner: str) -> Row | None:
    """Claim a queued job, or resume a running one, for runner: (re)starts its rate clock. Returns the job,
    or None when it is no longer active (cancelled meanwhile) or belongs to another runner."""
    job = get_import.sync(cx, account_id, import_id)
    if job is None or job["status"] not in ACTIVE or job["runner"] != runner:
        return None
    now = now_iso()
    return update_in_tx(cx, account_id, import_id, {
        "status": "running", "run_started_at": now, "run_start_rows": job["rows_read"],
        "run_start_position": job["position"]}, increments={"resumed": int(job["status"] == "running")})


@writes
def apply_batch(cx: Connection, account_id: str, import_id: str, batch: Mapping[str, Any], list_id: str | None) -> dict[str, Any]:
    """Import one batch of rows (batch: {start, position, row_number, rows: [contact fields], failed,
    errors_bytes}) and move the job past it, all in this transaction. Each row is found or created as by
    POST /v1/contacts (phone first, blanks filled, contact.created) and added to the list (contact.tagged
    once per membership). Returns {"applied": bool, "status", "created", "matched"}; applied is True
    also when this very batch was committed before (a retry after an unknown outcome)."""
    job = get_import.sync(cx, account_id, import_id)
    if job is None or job["status"] != "running" or job["position"] != batch["start"]:
        done = job is not None and job["position"] == batch["position"] and job["position"] != batch["start"]
        return {"applied": done, "status": job and job["status"], "created": 0, "matched": 0, "job": job}
    now = now_iso()
    lst: Mapping[str, Any] | None = get_list.sync(cx, account_id, list_id) if list_id else None
    created = 0
    for values in batch["rows"]:
        contact, was_created = find_or_create_in_tx(cx, {**values, "id": new_id("ct"), "account_id": account_id,
                                                         "created_at": now}, refuse_taken_email=False)
        created += was_created
        if lst is not None:
            _, lst = add_member_in_tx(cx, account_id, lst, contact, now)
    matched = len(batch["rows"]) - created
    job = update_in_tx(cx, account_id, import_id, {
        "position": batch["position"], "row_number": batch["row_number"], "errors_bytes": batch["errors_bytes"]},
        increments={"rows_read": len(batch["rows"]) + batch["failed"], "created": created, "matched": matched,
                    "failed": batch["failed"]})
    return {"applied": True, "status": "running", "created": created, "matched": matched, "job": job}


@writes
def finish(cx: Connection, account_id: str, import_id: str, status: str, message: str | None = None, *, from_statuses: Sequence[str] = ("running",)) -> Row | None:
    """Move a job to a final status (completed, failed, interrupted, cancelled) unless another change got
    there first. Returns the job as it is now, or None for another account's id."""
    job = get_import.sync(cx, account_id, import_id)
    if job is None or job["status"] not in from_statuses:
        return job
    return update_in_tx(cx, account_id, import_id, {"status": status, "message": message,
                                                     "finished_at": now_iso()})


@reads
def expired_imports(cx: Connection, drafts_before: str, finished_before: str) -> list[Row]:
    """Jobs the retention removes: drafts never started, uploaded before drafts_before; finished jobs
    (and their error reports) that ended before finished_before."""
    return fetch_all(cx, "SELECT id, account_id, status, runner FROM contact_imports WHERE"
                         " (status = 'uploaded' AND created_at < ?)"
                         f" OR (status IN {_one_of(FINISHED)} AND finished_at < ?)",
                     (drafts_before, *FINISHED, finished_before))


@writes
def delete_imports(cx: Connection, jobs: Sequence[tuple[str, str]]) -> list[str]:
    """Delete these jobs, each (id, status) only if its status is still the one read (expired_imports): a draft
    started meanwhile is running, and stays with its file. Returns the ids deleted."""
    return [import_id for import_id, status in jobs
            if cx.execute("DELETE FROM contact_imports WHERE id = ? AND status = ?", (import_id, status)).rowcount]


@reads
def import_ids(cx: Connection) -> set[str]:
    return {row[0] for row in cx.execute("SELECT id FROM contact_imports")}


@reads
def headers(cx: Connection, account_id: str) -> list[tuple[str, Any]]:
    """(id, first record's cells) of each of the account's imports: a file without a header row has a person
    there (erasure replaces one that names the erased person)."""
    return [(r[0], json.loads(r[1])) for r in cx.execute(
        "SELECT id, header FROM contact_imports WHERE account_id = ?", (account_id,))]


@writes
def replace_header(cx: Connection, account_id: str, import_id: str, header: Any) -> None:
    cx.execute("UPDATE contact_imports SET header = ? WHERE account_id = ? AND id = ?",
               (json.dumps(header), account_id, import_id))


@reads
def ended_with_report(cx: Connection, account_id: str) -> list[str]:
    """Ids of the account's imports that ended for good (completed, cancelled, failed: never resumed) with an
    error report (erasure scrubs the person's rows from them)."""
    return [r[0] for r in cx.execute(
        "SELECT id FROM contact_imports WHERE account_id = ? AND status IN ('completed', 'cancelled', 'failed')"
        " AND errors_bytes > 0", (account_id,))]
