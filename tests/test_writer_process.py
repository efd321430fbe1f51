"""What the SQLite writer process does beside its batches (issue 23: what made single batches slow, and every
write queued behind them): its WAL checkpoints run on a thread of their own, not inside the COMMIT that takes
the WAL past SQLite's 1,000 pages (storage/writer.py Checkpointer), and the modules write functions live in are
imported while it starts, not by the first write that needs each (preload); and storage owns every function it runs
(issue 42 §4): it imports no services module."""
import asyncio
import os
import sys

import pytest

from services import accounts, conversation_status, messaging
from storage import writer, writer_supervisor
import storage.inbound  # noqa: F401  (imported here, so the writer preloads it)
from storage.db import Database, connect_sync, writes
from tests.inbound_helpers import inbound
from tests.writer_helpers import loaded_modules

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


def _wal_frames_written(path):
    return os.path.getsize(f"{path}-wal") // (4096 + 24)  # a frame: its page and a 24-byte header


@pytest.mark.sqlite_only(WRITER)
def test_a_long_wal_is_caught_up_by_the_writer_so_that_it_starts_over(tmp_path, monkeypatch):
    """Under steady load the writer commits more while each checkpoint beside it runs, and the WAL starts over
    only at a BEGIN that finds every frame copied: past WAL_RESET_FRAMES the writer copies the rest itself."""
    monkeypatch.setattr(writer, "WAL_RESET_FRAMES", 40)
    path = tmp_path / "parley.db"
    writer_cx = _wal_with_pages(path, 50)
    writer_cx.execute("PRAGMA journal_size_limit=0")  # the file shows where the WAL starts over
    checkpoint_cx = connect_sync(path)
    checkpointer = writer.Checkpointer(path)
    try:
        checkpointer.checkpoint(checkpoint_cx)
        assert checkpointer.wal_long.is_set()
        for _ in range(5):  # committed after the checkpoint: not copied yet
            writer_cx.execute("INSERT INTO blobs (b) VALUES (zeroblob(?))", (BLOB,))
        checkpointer.catch_up(writer_cx)
        assert not checkpointer.wal_long.is_set()
        writer_cx.execute("INSERT INTO blobs (b) VALUES (1)")
        assert _wal_frames_written(path) < 10  # started over (without the catch-up: 50 + 5 + 1 frames and more)
        assert writer_cx.execute("SELECT COUNT(*) FROM blobs").fetchone()[0] == 56
    finally:
        checkpoint_cx.close()
        writer_cx.close()


@writes
def _modules_not_loaded(cx, names):
    return sorted(name for name in names if name not in sys.modules)


@pytest.mark.sqlite_only(WRITER)
async def test_the_writer_imports_the_storage_and_common_modules_before_a_write_needs_them(tmp_path):
    """services.messaging alone took ~0.5 s to import when the inbound write lived there: the first inbound message
    after each start of a writer held every write behind it that long."""
    wanted = ["storage.inbound", "storage.outbound", "common.business_hours", "storage.messages"]
    assert all(name in writer_supervisor.write_modules() for name in wanted)
    db = await Database(tmp_path / "parley.db").open()
    try:
        for _ in range(100):
            missing = await _modules_not_loaded(db, wanted)
            if not missing:
                break
            await asyncio.sleep(0.05)
        assert missing == []
    finally:
        await db.close()


@pytest.mark.sqlite_only(WRITER)
@pytest.mark.writer_process
async def test_the_writer_runs_no_services_module(services, account):
    """Storage owns every function the writer runs; services pass values (issue 42 §4). This process has the
    services imported, as the server has: the writer process preloads none of them, and the writes of an inbound
    message, its reply, the conversation's resolution (with its CSAT ask) and the settings import none either."""
    account_id = account["account_id"]
    assert "services.messaging" in sys.modules
    assert not [name for name in writer_supervisor.write_modules() if name.split(".")[0] == "services"]
    await accounts.update_settings(services.db, account_id, {"customChannelWebhookUrl": "https://example.com/hook",
                                                             "csat": {"enabled": True, "question": "How did we do?"}})
    message = await inbound(services, account_id)
    await messaging.send_reply(services, account_id, message["contact_id"], "Thanks!", author="api")
    await conversation_status.change(services, account_id, [message["contact_id"]], status="resolved")
    assert await loaded_modules(services.db, "services") == []
