"""The writer process's WAL checkpoints run beside it, not inside its COMMITs (storage/writer.py Checkpointer,
issue 23): the batch that took the WAL past SQLite's 1,000 pages no longer stalls every write queued behind it."""
import asyncio
import os

import pytest

from storage import writer
from storage.db import Database, connect_sync, writes

WRITER = "the SQLite writer process's WAL"
BLOB = 4000  # bytes: one page of its own each (an overflow page)


@writes
def _insert_blob(cx, size):
    cx.execute("CREATE TABLE IF NOT EXISTS blobs (b BLOB)")
    cx.execute("INSERT INTO blobs (b) VALUES (zeroblob(?))", (size,))


@pytest.mark.sqlite_only(WRITER)
async def test_committed_pages_reach_the_database_file_without_a_commit_checkpointing(tmp_path):
    path = tmp_path / "parley.db"
    db = await Database(path).open()
    try:
        await _insert_blob(db, 1)
        before = os.path.getsize(path)
        # 300 pages: far below the 1,000 after which SQLite's own checkpoint would run inside a COMMIT, so only
        # the Checkpointer copies them into the database file while the server runs.
        await asyncio.gather(*(_insert_blob(db, BLOB) for _ in range(300)))
        for _ in range(100):
            if os.path.getsize(path) - before >= 300 * BLOB:
                break
            await asyncio.sleep(0.05)
        assert os.path.getsize(path) - before >= 300 * BLOB
    finally:
        await db.close()


def _wal_with_pages(path, pages):
    cx = connect_sync(path)
    cx.execute("PRAGMA wal_autocheckpoint=0")
    cx.execute("CREATE TABLE blobs (b BLOB)")
    for _ in range(pages):
        cx.execute("INSERT INTO blobs (b) VALUES (zeroblob(?))", (BLOB,))
    return cx


@pytest.mark.sqlite_only(WRITER)
def test_a_passive_checkpoint_copies_the_pages_and_leaves_the_wal_for_the_writer_to_reuse(tmp_path):
    path = tmp_path / "parley.db"
    writer_cx = _wal_with_pages(path, 50)
    checkpoint_cx = connect_sync(path)
    try:
        wal_bytes = os.path.getsize(f"{path}-wal")
        writer.Checkpointer(path).checkpoint(checkpoint_cx)
        assert os.path.getsize(path) >= 50 * BLOB
        assert os.path.getsize(f"{path}-wal") == wal_bytes  # PASSIVE: not truncated, never waited for the writer
    finally:
        checkpoint_cx.close()
        writer_cx.close()


@pytest.mark.sqlite_only(WRITER)
def test_a_wal_past_the_limit_is_truncated(tmp_path, monkeypatch):
    path = tmp_path / "parley.db"
    writer_cx = _wal_with_pages(path, 50)
    checkpoint_cx = connect_sync(path)
    try:
        monkeypatch.setattr(writer, "WAL_LIMIT_BYTES", 50 * BLOB)
        writer.Checkpointer(path).checkpoint(checkpoint_cx)
        assert os.path.getsize(f"{path}-wal") == 0
        assert os.path.getsize(path) >= 50 * BLOB
    finally:
        checkpoint_cx.close()
        writer_cx.close()
