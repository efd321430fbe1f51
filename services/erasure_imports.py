"""Erasure and contact imports: an import's error report (kept FINISHED_TTL after the import ended) holds
the rows that failed, so it may hold the erased person (a row with their email and a bad phone, say). After
an erasure, the records of the account's ended imports' reports that name the person's email or phone are
cut out; the rest of each report stays. Uploads are deleted when their import ends (services/import_runner)."""
from __future__ import annotations

import csv
import io
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from services.contact_import import report_path, run_blocking
from storage import contact_imports as store
from storage.interface import Store

_BOM = b"\xef\xbb\xbf"
_MIN_PHONE_DIGITS = 7  # fewer digits than this in a cell is no phone number


def _digits(text: str) -> str:
    return re.sub(r"\D", "", text)


def _names_person(cells: Iterable[str], email: str, phone_digits: str) -> bool:
    for cell in cells:
        if email and email in cell.casefold():
            return True
        digits = _digits(cell)
        if phone_digits and len(digits) >= _MIN_PHONE_DIGITS and (
                phone_digits.endswith(digits) or digits.endswith(phone_digits)):
            return True
    return False


def scrub_report(path: Path, email: str, phone: str | None) -> int:
    """Rewrite the CSV report at path without the records naming email (case-folded) or phone (E.164; a cell
    with its last digits, in any spelling, counts); the records removed (0: the file is left as it was)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return 0
    bom = _BOM if data.startswith(_BOM) else b""
    records = list(csv.reader(io.StringIO(data[len(bom):].decode("utf-8"), newline="")))
    phone_digits = _digits(phone or "")
    kept = [cells for n, cells in enumerate(records) if n == 0 or not _names_person(cells, email, phone_digits)]
    if len(kept) == len(records):
        return 0
    out = io.StringIO()
    csv.writer(out, lineterminator="\r\n").writerows(kept)
    tmp = path.with_name(".scrub-" + path.name)
    with open(tmp, "wb") as f:
        f.write(bom + out.getvalue().encode("utf-8"))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return len(records) - len(kept)


async def scrub_import_reports(db: Store, data_dir: str | Path, account_id: str, contact: Mapping[str, Any]) -> int:
    """Cut the contact (a storage row, read before its erasure) out of the account's imports' headers and its
    ended imports' error reports; the headers replaced and records removed."""
    email = (contact.get("email") or "").casefold()
    phone_digits = _digits(contact.get("phone") or "")
    removed = 0
    # A file without a header row: its first record, kept as the header, is a person's whole row. One naming the
    # erased person becomes column numbers (the mapping refers to columns by position).
    for import_id, header in await store.headers(db, account_id):
        if _names_person(header, email, phone_digits):
            await store.replace_header(db, account_id, import_id, [f"Column {n}" for n in range(1, len(header) + 1)])
            removed += 1
    for import_id in await store.ended_with_report(db, account_id):
        removed += await run_blocking(scrub_report, report_path(data_dir, import_id), email, contact.get("phone"))
    return removed
