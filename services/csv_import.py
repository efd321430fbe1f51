"""Reading contact CSV files: the encoding and delimiter check, the header-to-field mapping guess, and rows
read in batches from a byte offset, normalized as POST /v1/contacts normalizes them (normalize_contact).
No database and no event loop: this runs in the import's reader process (services/import_reader.py)."""
from __future__ import annotations

import codecs
import csv
import io
import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from os import PathLike
from typing import IO, Any

from common.errors import Invalid
from common.spreadsheet import safe_cell
from services.contact_fields import normalize_contact

FIELDS = ("firstName", "lastName", "phone", "email")
ColumnMapping = dict[str, int | None]  # field -> the column it is read from, or None
# A batch: {start, position, row_number, rows, errors, failed, report} (read_batches)
Batch = dict[str, Any]
DELIMITERS = (",", ";", "\t")
SNIFF_BYTES = 64 * 1024
MAX_LINE_BYTES = 1024 * 1024   # a longer line is not a contact: the file is refused (memory stays bounded)
# The csv module's own cap on one field (an unclosed quote would otherwise gather the rest of the file);
# process-wide, and nothing else in Parley reads CSV.
csv.field_size_limit(MAX_LINE_BYTES)

# Header names (lower case, accents and everything but letters and digits removed) that say which field a
# column is, in English, German, French, Spanish, Italian, Portuguese, Dutch, Polish and the Nordic languages.
# A column whose name is exactly one of these wins over one whose name only contains one.
_NAMES = {
    "firstName": ("firstname", "first", "givenname", "forename", "fname", "name", "vorname", "prenom", "nombre",
                  "nome", "voornaam", "imie", "fornavn", "fornamn", "etunimi"),
    "lastName": ("lastname", "last", "surname", "familyname", "lname", "nachname", "familienname", "nom",
                 "apellido", "apellidos", "cognome", "sobrenome", "achternaam", "nazwisko", "efternavn",
                 "etternavn", "efternamn", "sukunimi"),
    "phone": ("phone", "phonenumber", "mobile", "mobilephone", "mobilenumber", "cell", "cellphone", "tel",
              "telephone", "telefon", "telefonnummer", "handy", "handynummer", "mobil", "mobilnummer",
              "portable", "telefono", "movil", "celular", "cellulare", "telemovel", "telefoonnummer", "mobiel",
              "whatsapp", "msisdn", "numer", "numertelefonu", "puhelin"),
    "email": ("email", "emailaddress", "mail", "emailadresse", "adresseemail", "courriel", "correo",
              "correoelectronico", "epost", "eposti", "sahkoposti", "emailadres"),
}
# Substrings for the second pass ("Mobile phone (work)", "Customer e-mail").
_PARTS = {"firstName": ("firstname", "givenname", "vorname", "prenom"),
          "lastName": ("lastname", "surname", "familyname", "nachname"),
          "phone": ("phone", "mobile", "telef", "handy", "cell", "whatsapp"),
          "email": ("email", "mail", "courriel", "correo")}


def _simplify(name: str | None) -> str:
    text = unicodedata.normalize("NFKD", name or "").encode("ascii", "ignore").decode().lower()
    return re.sub(r"[^a-z0-9]", "", text)


def guess_mapping(header: Sequence[str]) -> ColumnMapping:
    """{field: column index or None} from the header's names: exact names first, then names that contain one."""
    names = [_simplify(cell) for cell in header]
    mapping: ColumnMapping = dict.fromkeys(FIELDS)
    used: set[int] = set()
    for matches in (lambda name, field: name in _NAMES[field],
                    lambda name, field: any(part in name for part in _PARTS[field])):
        for field in FIELDS:
            if mapping[field] is None:
                found = next((i for i, name in enumerate(names) if i not in used and name and matches(name, field)),
                             None)
                mapping[field] = found
                if found is not None:
                    used.add(found)
    return mapping


class RecordReader:
    """CSV records of a file from a byte offset, each with the offset where it ends, so a job can commit
    "everything before byte N is imported" and resume there; with max_bytes or max_lines, only the
    records that end within them. A UTF-8 BOM at offset 0 is skipped; a record
    that is not valid UTF-8 is flagged (decoded with replacement characters), never guessed at."""

    def __init__(self, file: IO[bytes], delimiter: str, position: int = 0, *, max_bytes: int | None = None,
                 max_lines: int | None = None) -> None:
        file.seek(position)
        self.file, self.position, self.bad_text = file, position, False
        self.end = position + max_bytes if max_bytes is not None else None
        self.max_lines, self.cut = max_lines, False
        self.reader = csv.reader(self._lines(), delimiter=delimiter)

    def _lines(self) -> Iterator[str]:
        lines = 0
        while True:
            if (self.end is not None and self.position >= self.end) or lines == self.max_lines:
                self.cut = True  # max_bytes or max_lines read: the records end here
                return
            lines += 1
            raw = self.file.readline(MAX_LINE_BYTES)
            if not raw:
                return
            if len(raw) == MAX_LINE_BYTES and not raw.endswith(b"\n"):
                raise Invalid(f"a line near byte {self.position} is longer than {MAX_LINE_BYTES // 1024} KB: "
                              "is this a CSV file with one contact per line?")
            start, self.position = self.position, self.position + len(raw)
            if start == 0 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8):]
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError:
                self.bad_text = True
                yield raw.decode("utf-8", "replace")

    def __iter__(self) -> Iterator[tuple[list[str] | None, int, str | None]]:
        """(cells or None, the byte offset after the record, problem or None); None cells: not CSV."""
        while True:
            cells: list[str] | None
            try:
                cells = next(self.reader)
                problem = "the row is not valid UTF-8 text" if self.bad_text else None
            except StopIteration:
                return
            except csv.Error as exc:
                cells, problem = None, f"the row is not valid CSV: {exc}"
            if self.cut:
                return  # a record the cut ended (its quoted field went on): not the file's record
            self.bad_text = False
            yield cells, self.position, problem


def _delimiter(first_line: str) -> str:
    counts = {d: first_line.count(d) for d in DELIMITERS}
    best = max(DELIMITERS, key=lambda d: counts[d])
    return best if counts[best] else ","


def sniff(path: str | PathLike[str]) -> dict[str, Any]:
    """{delimiter, header, data_start} of a CSV file, or Invalid saying why it cannot be imported."""
    with open(path, "rb") as f:
        head = f.read(SNIFF_BYTES)
        if not head.strip():
            raise Invalid("the file is empty")
        if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)) or b"\0" in head:
            raise Invalid("the file is not UTF-8 text (a spreadsheet or UTF-16 file?): save it as \"CSV UTF-8\"")
        try:
            text = codecs.getincrementaldecoder("utf-8")().decode(head.removeprefix(codecs.BOM_UTF8), final=False)
        except UnicodeDecodeError:
            raise Invalid("the file is not UTF-8 text: save it as \"CSV UTF-8\" (comma or semicolon separated)") from None
        delimiter = _delimiter(text.lstrip("\r\n").split("\n", 1)[0])
        # The header starts in the first SNIFF_BYTES: a file of empty rows (",,\n") is not read to its end
        # while the upload's request waits (in a thread of the server's process).
        for cells, end, problem in RecordReader(f, delimiter, max_bytes=SNIFF_BYTES):
            if cells is None or problem:
                raise Invalid(f"the header row cannot be read: {problem}")
            if any(cell.strip() for cell in cells):
                return {"delimiter": delimiter, "header": [cell.strip() for cell in cells], "data_start": end}
    raise Invalid(f"the file has no header row (in its first {SNIFF_BYTES // 1024} KB)")


def column_name(header: Sequence[str], index: int) -> str:
    return (header[index] if index < len(header) else "") or f"column {index + 1}"


def _error_column(header: Sequence[str], mapping: Mapping[str, int | None], field: str | None) -> str:
    """The column(s) an error names: the mapped column of the field at fault, or of phone and email."""
    fields = [field] if field in FIELDS else ["phone", "email"]
    names = [column_name(header, index) for index in (mapping.get(f) for f in fields) if index is not None]
    return " / ".join(names) or " / ".join(fields)


def report_header(header: Sequence[str]) -> bytes:
    """The error report's first line: row, column, reason, then the file's own columns (UTF-8 with a BOM,
    which spreadsheet programs need to read UTF-8)."""
    return codecs.BOM_UTF8 + _csv_line(["row", "column", "reason", *header])


def _csv_line(cells: Iterable[object]) -> bytes:
    """One line of the error report, every cell as text (the file's own cells, its header and the column
    names in "column" may all be formulas)."""
    out = io.StringIO()
    csv.writer(out, lineterminator="\r\n").writerow(map(safe_cell, cells))
    return out.getvalue().encode("utf-8")


def read_batches(path: str | PathLike[str], *, position: int, row_number: int, delimiter: str, header: Sequence[str],
                 mapping: Mapping[str, int | None], region: str | None, batch_size: int, limit_rows: int | None = None,
                 limit_bytes: int | None = None, limit_lines: int | None = None) -> Iterator[Batch]:
    """Batches of up to batch_size rows from byte `position` (row_number: records read before it, the header
    being row 1): {start, position, row_number, rows: [(row number, {first_name, last_name, phone, email})],
    errors: [(row number, column, reason)], failed, report (the error report's lines, bytes)}. Each batch
    starts where the one before ended. Blank rows are skipped and not counted. Stops after limit_rows rows,
    limit_bytes bytes or limit_lines lines (blank ones too), whichever comes first (the preview's sample)."""
    get = {field: index for field, index in mapping.items() if index is not None}
    seen = 0
    with open(path, "rb") as f:
        batch = _new_batch(position, row_number)
        for cells, end, problem in RecordReader(f, delimiter, position, max_bytes=limit_bytes,
                                                max_lines=limit_lines):
            batch["position"], batch["row_number"] = end, batch["row_number"] + 1
            if cells is not None and not problem and not any(cell.strip() for cell in cells):
                continue
            number = batch["row_number"]
            try:
                if problem or cells is None:  # (a record without cells always has its problem)
                    raise Invalid(problem or "the row cannot be read")
                values = {f: cells[i] if i < len(cells) else None for f, i in get.items()}
                batch["rows"].append((number, normalize_contact(
                    first_name=values.get("firstName"), last_name=values.get("lastName"),
                    phone=values.get("phone"), email=values.get("email"), region=region)))
            except Invalid as exc:
                column = _error_column(header, mapping, exc.field) if not problem else ""
                batch["errors"].append((number, column, exc.message))
                batch["failed"] += 1
                batch["report"].append(_csv_line([number, column, exc.message, *(cells or [])]))
            seen += 1
            if seen == limit_rows:
                yield _close(batch)
                return
            if len(batch["rows"]) + batch["failed"] >= batch_size:
                yield _close(batch)
                batch = _new_batch(end, batch["row_number"])
        if batch["position"] > batch["start"]:
            yield _close(batch)


def _new_batch(position: int, row_number: int) -> Batch:
    return {"start": position, "position": position, "row_number": row_number, "rows": [], "errors": [],
            "failed": 0, "report": []}


def _close(batch: Batch) -> Batch:
    batch["report"] = b"".join(batch["report"])
    return batch
