"""CSV cells that Parley writes for people to open in a spreadsheet program."""
import csv
import io
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any


def safe_cell(value: object) -> str:
    """A CSV cell a spreadsheet shows as text: a leading =, +, -, @ (a formula), tab or CR gets a quote
    before it. Used by every CSV Parley writes (campaign recipients, the import's error report)."""
    text = "" if value is None else str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


async def csv_pages(header: Sequence[str], fetch: Callable[[Any, int], Awaitable[list[dict]]],
                    cells: Callable[[dict], Iterable[object]], page_size: int = 2000) -> AsyncIterator[str]:
    """A CSV export, yielded a page of text at a time, so that a 100,000-row export never sits in memory: the
    header, then cells(row) of every row fetch(after_id, page_size) returns, page after page in id order (after_id:
    the last row's id, None first). Every cell goes through safe_cell."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow([safe_cell(v) for v in header])
    after = None
    while True:
        rows = await fetch(after, page_size)
        for row in rows:
            writer.writerow([safe_cell(v) for v in cells(row)])
        yield out.getvalue()
        out.seek(0)
        out.truncate()
        if len(rows) < page_size:
            return
        after = rows[-1]["id"]
