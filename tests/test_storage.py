"""Storage: migrations, the single writer's group commit, and its failure isolation (DESIGN §4)."""
import asyncio
import sqlite3

import pytest

from storage import db as dbmod
from storage.db import Database, reads, writes


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
