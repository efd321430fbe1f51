"""Storage: migrations, the single writer's group commit, its failure isolation (DESIGN §4), and the
writer process it runs in."""
import asyncio
import os
import signal
import sqlite3
import threading
import time

import pytest

from storage import db as dbmod
from storage.db import Database, StorageUnavailable, reads, writes
from tests.parley_process import pid_alive


@writes
def _insert_probe(cx, value):
    cx.execute("CREATE TABLE IF NOT EXISTS probe (v INTEGER UNIQUE)")
    cx.execute("INSERT INTO probe (v) VALUES (?)", (value,))
    return value


@writes
def _fail_at_commit(cx):
    # A deferred foreign key violation is only detected at COMMIT.
    cx.execute("PRAGMA defer_foreign_keys=ON")
    cx.execute("INSERT INTO users (id, account_id, email, password_hash, created_at)"
               " VALUES ('u', 'no-such-account', 'x@y', 'h', 'now')")


@reads
def _count_probe(cx):
    return cx.execute("SELECT COUNT(*) FROM probe").fetchone()[0]


async def _open(tmp_path):
    return await Database(tmp_path / "parley.db").open()


async def test_migrations_applied_and_tracked_with_user_version(tmp_path):
    db = await _open(tmp_path)
    await db.close()
    cx = sqlite3.connect(tmp_path / "parley.db")
    versions = sorted(int(p.name[:4]) for p in dbmod.MIGRATIONS.glob("[0-9]*.sql"))
    assert cx.execute("PRAGMA user_version").fetchone()[0] == versions[-1]
    assert cx.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {r[0] for r in cx.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"accounts", "users", "api_keys", "outbox", "contacts", "messages"} <= tables
    # Opening again applies nothing twice.
    db = await _open(tmp_path)
    await db.close()


async def test_200_concurrent_writes_commit_in_fewer_transactions(tmp_path):
    """DESIGN §4: many requests' writes commit together (group commit), each answered after its commit."""
    db = await _open(tmp_path)
    try:
        before = db.transactions_committed
        results = await asyncio.gather(*(_insert_probe(db, i) for i in range(200)))
        assert results == list(range(200))
        transactions = db.transactions_committed - before
        assert 1 <= transactions < 200
        assert await _count_probe(db) == 200
    finally:
        await db.close()
    # Durable: a fresh connection sees every answered write.
    assert sqlite3.connect(tmp_path / "parley.db").execute("SELECT COUNT(*) FROM probe").fetchone()[0] == 200


async def test_one_failing_write_rolls_back_alone(tmp_path):
    db = await _open(tmp_path)
    try:
        await _insert_probe(db, 1)
        outcomes = await asyncio.gather(_insert_probe(db, 2), _insert_probe(db, 1), _insert_probe(db, 3),
                                        return_exceptions=True)
        assert outcomes[0] == 2 and outcomes[2] == 3
        assert isinstance(outcomes[1], sqlite3.IntegrityError)
        assert await _count_probe(db) == 3
    finally:
        await db.close()


async def test_close_flushes_queued_writes(tmp_path):
    db = await _open(tmp_path)
    pending = [asyncio.ensure_future(_insert_probe(db, i)) for i in range(50)]
    await asyncio.sleep(0)
    await db.close()
    assert [p.result() for p in pending] == list(range(50))


async def test_failed_commit_rejects_the_batch_and_the_writer_keeps_going(tmp_path):
    """A transaction that cannot commit answers every write in it with the error; nothing is
    acknowledged that is not stored, and later writes still work."""
    db = await _open(tmp_path)
    try:
        await _insert_probe(db, 0)

        with pytest.raises(sqlite3.IntegrityError):
            await _fail_at_commit(db)
        assert await _insert_probe(db, 1) == 1
        assert await _count_probe(db) == 2
    finally:
        await db.close()


# ---- the writer process (storage/writer.py) ---------------------------------------------------

@writes
def _slow_insert(cx, value, seconds):
    cx.execute("CREATE TABLE IF NOT EXISTS probe (v INTEGER UNIQUE)")
    cx.execute("INSERT INTO probe (v) VALUES (?)", (value,))
    time.sleep(seconds)  # still inside the transaction: nothing is committed yet
    return value


@writes
def _broken(cx):
    return {}["missing"]


@writes
def _returns_a_cursor(cx):
    return cx.execute("SELECT 1")


async def _wait_until(predicate, timeout=10):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def test_a_write_function_must_be_module_level(tmp_path):
    """Writes run in the writer process, so they name a module-level function; a closure is refused at
    the call, before anything is queued."""
    db = await _open(tmp_path)
    try:
        with pytest.raises(TypeError, match="module-level function"):
            await db.write(lambda cx: 1)
        assert await _insert_probe(db, 1) == 1
    finally:
        await db.close()


async def test_a_killed_writer_fails_its_batch_with_503_and_a_new_writer_takes_over(tmp_path, monkeypatch):
    """kill -9 of the writer process mid-transaction: the writes in flight were not committed and are
    answered 503 (the client may retry); a new writer starts, and writes that arrive while it starts
    wait for it and commit."""
    db = await _open(tmp_path)
    start_writer = Database._start_writer

    async def start_slowly(self):
        await asyncio.sleep(0.3)  # a slow restart, so that writes certainly arrive while there is no writer
        await start_writer(self)
    monkeypatch.setattr(Database, "_start_writer", start_slowly)
    try:
        await _insert_probe(db, 1)
        first_pid = db.writer_pid
        slow = asyncio.ensure_future(_slow_insert(db, 2, 30))
        await asyncio.sleep(0.5)  # the batch is in the writer now, its transaction open
        os.kill(first_pid, signal.SIGKILL)
        with pytest.raises(StorageUnavailable) as refused:
            await asyncio.wait_for(slow, 10)
        assert refused.value.status == 503
        # Queued while the new writer starts: they wait for it, then commit.
        later = await asyncio.wait_for(asyncio.gather(*(_insert_probe(db, v) for v in range(3, 13))), 10)
        assert later == list(range(3, 13))
        assert db.writer_pid not in (None, first_pid)
        assert sorted(await db.read(lambda cx: [r[0] for r in cx.execute("SELECT v FROM probe")])) == [1, *later]
    finally:
        await db.close()


async def test_the_writer_ignores_ctrl_c_and_sigterm_and_stops_when_the_database_closes(tmp_path):
    """Ctrl-C (or a service manager's SIGTERM) reaches every process of the group: the writer leaves the
    stopping to the server, which flushes queued writes first; close() then ends the writer."""
    db = await _open(tmp_path)
    await _insert_probe(db, 100)  # the writer is up and serving
    pid = db.writer_pid
    os.kill(pid, signal.SIGINT)
    os.kill(pid, signal.SIGTERM)
    await asyncio.sleep(0.2)
    assert pid_alive(pid)
    pending = [asyncio.ensure_future(_insert_probe(db, i)) for i in range(20)]
    await asyncio.sleep(0)
    await db.close()
    assert [p.result() for p in pending] == list(range(20))
    assert db.writer_pid is None
    await _wait_until(lambda: not pid_alive(pid))


async def test_a_fault_in_a_write_function_reaches_the_caller_with_the_writers_traceback(tmp_path):
    db = await _open(tmp_path)
    try:
        with pytest.raises(KeyError) as fault:
            await _broken(db)
        notes = "\n".join(getattr(fault.value, "__notes__", []))
        assert "in the writer process" in notes and "_broken" in notes
        assert await _insert_probe(db, 1) == 1
    finally:
        await db.close()


async def test_results_and_arguments_that_cannot_cross_the_process_are_errors_not_hangs(tmp_path):
    db = await _open(tmp_path)
    try:
        with pytest.raises(RuntimeError, match="could not be returned"):
            await _returns_a_cursor(db)
        outcomes = await asyncio.gather(_insert_probe(db, 1), _insert_probe(db, threading.Lock()),
                                        _insert_probe(db, 2), return_exceptions=True)
        assert outcomes[0] == 1 and outcomes[2] == 2
        assert isinstance(outcomes[1], TypeError) and "cannot be sent to the writer" in str(outcomes[1])
    finally:
        await db.close()


async def test_a_writer_that_cannot_start_is_retried_later_and_writes_fail_fast_meanwhile(tmp_path):
    """Writers that die before serving anything (here the database's directory is gone) are not
    restarted in a tight loop: the restarts back off, every write meanwhile answers 503 at once
    instead of waiting, and writes commit again once a writer can open the database."""
    data = tmp_path / "data"
    db = await Database(data / "parley.db").open()
    try:
        await _insert_probe(db, 1)
        data.rename(tmp_path / "away")
        os.kill(db.writer_pid, signal.SIGKILL)
        refused_at_once = False
        for _ in range(100):
            started = time.monotonic()
            try:
                await asyncio.wait_for(_insert_probe(db, 2), 10)
            except StorageUnavailable:
                if time.monotonic() - started < 0.1:
                    refused_at_once = True
                    break
            await asyncio.sleep(0.05)
        assert refused_at_once
        (tmp_path / "away").rename(data)
        deadline = time.monotonic() + 30
        while True:
            try:
                assert await _insert_probe(db, 3) == 3
                break
            except StorageUnavailable:
                assert time.monotonic() < deadline, "the writer never came back"
                await asyncio.sleep(0.1)
        assert sorted(await db.read(lambda cx: [r[0] for r in cx.execute("SELECT v FROM probe")])) == [1, 3]
    finally:
        await db.close()
