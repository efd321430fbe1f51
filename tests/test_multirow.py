"""Multi-row statements (storage/interface.py values_rows), as a campaign's batch writes them: the same SQL on
both databases, ``(VALUES ...) AS v`` with columns v.column1, v.column2, ...; on PostgreSQL a statement with
more than 50 parameters goes through a RawCursor with $1, $2, ... (storage/pg_adapter.py numbered)."""
import pytest

from storage.interface import VALUES_ROWS, values_rows


def _select_rows(cx, rows):
    found = []
    for values, args in values_rows(rows):
        # Quoted '?' and '%' are text, not placeholders, on both paths (a placeholder after them too).
        found += [tuple(row) for row in cx.execute(
            f"SELECT v.column1, v.column2, '50% ?' || ? FROM (VALUES {values}) AS v ORDER BY v.column1",
            ("!", *args))]
    return found


def _insert_and_update(cx, pairs):
    cx.execute("CREATE TABLE IF NOT EXISTS multirow_probe (k TEXT PRIMARY KEY, v TEXT NOT NULL, n INTEGER NOT NULL)")
    cx.executemany("INSERT INTO multirow_probe (k, v, n) VALUES (?, ?, ?)", [(k, "old", 0) for k, _ in pairs])
    changed = 0
    for values, args in values_rows(pairs):
        changed += cx.execute(f"UPDATE multirow_probe SET v = v.column2, n = n + 1 FROM (VALUES {values}) AS v"
                              " WHERE multirow_probe.k = v.column1 AND multirow_probe.v = 'old'", args).rowcount
    return changed, [tuple(row) for row in cx.execute("SELECT k, v, n FROM multirow_probe ORDER BY k")]


@pytest.mark.parametrize("count", [2, 30, VALUES_ROWS + 1])  # 4 and 60 parameters (both PostgreSQL paths); 2 chunks
def test_values_rows_select(io_loop, services, count):
    rows = [(f"k{i:04d}", f"v{i}") for i in range(count)]
    found = io_loop.run_sync(lambda: services.db.read(_select_rows, rows))
    assert found == [(k, v, "50% ?!") for k, v in rows]


def test_values_rows_update_from(io_loop, services):
    pairs = [(f"k{i:04d}", f"new{i}") for i in range(VALUES_ROWS + 20)]
    changed, stored = io_loop.run_sync(lambda: services.db.write(_insert_and_update, pairs))
    assert changed == len(pairs)
    assert stored == [(k, v, 1) for k, v in pairs]


def test_numbered_placeholders():
    pg_adapter = pytest.importorskip("storage.pg_adapter")
    assert pg_adapter.numbered("SELECT '?%', ? -- a ? and 5%\n WHERE a LIKE '%s' AND b = ?") == \
        "SELECT '?%', $1 -- a ? and 5%\n WHERE a LIKE '%s' AND b = $2"
