"""Storage: migrations, the single writer's group commit, its failure isolation (docs/design.md#conventions), and the
writer process it runs in."""
import asyncio
import os
import signal
import sqlite3
import threading
import time

import pytest

from storage import db as dbmod
from storage import sqlite_db
from storage.db import (Conflict, Database, StorageUnavailable, StoredResultLost, WriteOutcomeUnknown, as_unavailable,
                        reads, writes)
from tests.parley_process import pid_alive

# Every test here is of the SQLite Database on a file of its own: its writer process, group commit, watchdog.
WRITER = "the SQLite Database and its writer process"


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


@pytest.fixture
def migration(tmp_path, monkeypatch):
    """migration(number, table): a migration file NNNN_<table>.sql creating that table, in a folder of the
    test's own that migrate() reads instead of storage/migrations."""
    folder = tmp_path / "migrations"
    folder.mkdir()
    monkeypatch.setattr(dbmod, "MIGRATIONS", folder)
    return lambda number, table: (folder / f"{number:04d}_{table}.sql").write_text(f"CREATE TABLE {table} (x);\n")


@pytest.mark.sqlite_only(WRITER)
def test_a_migration_numbered_below_the_newest_applied_one_is_still_applied(tmp_path, migration):
    """Branches number their migrations in ranges of their own (docs/architecture.md "Storage and the writer process"): one merged later
    can carry a number below one a database already has. It is applied at the next start, once."""
    migration(1, "a")
    migration(60, "c")
    cx = dbmod.connect_sync(tmp_path / "t.db")
    dbmod.migrate(cx)
    migration(50, "b")  # merged later, numbered lower
    dbmod.migrate(cx)
    dbmod.migrate(cx)  # nothing twice (a second CREATE TABLE b would raise)
    tables = {r[0] for r in cx.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"a", "b", "c"} <= tables
    assert [r[0] for r in cx.execute("SELECT version FROM schema_migrations ORDER BY version")] == [1, 50, 60]
    assert cx.execute("PRAGMA user_version").fetchone()[0] == 60


@pytest.mark.sqlite_only(WRITER)
def test_a_database_from_before_schema_migrations_keeps_what_user_version_says(tmp_path, migration):
    """A database migrated by the user_version-only runner: every number up to user_version counts as
    applied (nothing re-runs), later ones are applied."""
    migration(1, "a")
    migration(2, "b")
    cx = dbmod.connect_sync(tmp_path / "t.db")
    cx.execute("CREATE TABLE a (x)")
    cx.execute("PRAGMA user_version=1")
    dbmod.migrate(cx)
    assert [r[0] for r in cx.execute("SELECT version FROM schema_migrations ORDER BY version")] == [1, 2]
    assert cx.execute("PRAGMA user_version").fetchone()[0] == 2


@pytest.mark.sqlite_only(WRITER)
async def test_migrations_applied_and_tracked_with_user_version(tmp_path):
    db = await _open(tmp_path)
    await db.close()
    cx = sqlite3.connect(tmp_path / "parley.db")
    versions = sorted(int(p.name[:4]) for p in dbmod.MIGRATIONS.glob("[0-9]*.*") if p.suffix in (".sql", ".py"))
    assert cx.execute("PRAGMA user_version").fetchone()[0] == versions[-1]
    assert cx.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {r[0] for r in cx.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"accounts", "users", "api_keys", "outbox", "contacts", "messages"} <= tables
    # Opening again applies nothing twice.
    db = await _open(tmp_path)
    await db.close()


@pytest.mark.sqlite_only(WRITER)
async def test_200_concurrent_writes_commit_in_fewer_transactions(tmp_path):
    """docs/design.md#conventions: many requests' writes commit together (group commit), each answered after its commit."""
    db = await _open(tmp_path)
    try:
        before = db.transactions_committed
        results = await asyncio.gather(*(_insert_probe(db, i) for i in range(200)))
        assert results == list(range(200))
        transactions = db.transactions_committed - before
        # Queued in one turn of the event loop, they go in a few transactions (a quarter of the queue each,
        # STEADY_BATCH at least); 20 leaves room for a different batching policy, not for one per write.
        assert 1 <= transactions <= 20
        assert await _count_probe(db) == 200
    finally:
        await db.close()
    # Durable: a fresh connection sees every answered write.
    assert sqlite3.connect(tmp_path / "parley.db").execute("SELECT COUNT(*) FROM probe").fetchone()[0] == 200


@pytest.mark.sqlite_only(WRITER)
async def test_one_failing_write_rolls_back_alone(tmp_path):
    db = await _open(tmp_path)
    try:
        await _insert_probe(db, 1)
        outcomes = await asyncio.gather(_insert_probe(db, 2), _insert_probe(db, 1), _insert_probe(db, 3),
                                        return_exceptions=True)
        assert outcomes[0] == 2 and outcomes[2] == 3
        assert isinstance(outcomes[1], Conflict)  # the driver's unique violation, as the seam's
        assert await _count_probe(db) == 3
    finally:
        await db.close()


@pytest.mark.sqlite_only(WRITER)
async def test_close_flushes_queued_writes(tmp_path):
    db = await _open(tmp_path)
    pending = [asyncio.ensure_future(_insert_probe(db, i)) for i in range(50)]
    await asyncio.sleep(0)
    await db.close()
    assert [p.result() for p in pending] == list(range(50))


@pytest.mark.sqlite_only(WRITER)
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



def _transaction_seen(cx, name):
    """The number of the last committed batch as this write's transaction sees it: the same for the writes of
    one transaction, larger for each later one (every transaction records its number in writer_batches)."""
    cx.execute("CREATE TABLE IF NOT EXISTS probe (v INTEGER UNIQUE)")
    row = cx.execute("SELECT MAX(batch) FROM writer_batches").fetchone()
    return name, row[0] or 0


@pytest.mark.sqlite_only(WRITER)
async def test_background_writes_run_alone_and_alternate_with_the_others(tmp_path):
    """Database.write_background (a campaign's batches): each runs in a transaction of its own, and such
    transactions alternate with those of the other writes, so that a write queued behind a background one
    waits for at most one of them, and a background write for at most one transaction of the others."""
    db = await _open(tmp_path)
    try:
        await _insert_probe(db, 0)
        started = tmp_path / "started"
        held = asyncio.ensure_future(_slow_insert(db, 1, 0.5, str(started)))
        await _wait_until(started.exists)  # the writer is busy: everything below queues
        background = [asyncio.ensure_future(db.write_background(_transaction_seen, f"b{i}")) for i in range(3)]
        many = sqlite_db.STEADY_BATCH * 3  # more than a transaction takes while no background write waits
        others = [asyncio.ensure_future(db.write(_transaction_seen, f"w{i}")) for i in range(many)]
        await held
        seen = dict(await asyncio.gather(*background, *others))
        assert len({seen[f"w{i}"] for i in range(many)}) == 1  # the others share one transaction
        assert len({seen["b0"], seen["b1"], seen["b2"], seen["w0"]}) == 4  # each background one runs alone
        # b0 right after the held transaction, then the others (queued before b1), then b1, then b2.
        assert seen["b0"] < seen["w0"] < seen["b1"] < seen["b2"]
    finally:
        await db.close()


@pytest.mark.sqlite_only(WRITER)
async def test_a_short_queue_goes_in_small_transactions_two_in_flight(tmp_path):
    """storage/sqlite_db.py STEADY_BATCH: while few writes wait, a transaction takes at most STEADY_BATCH of them
    (each is answered only after its transaction's COMMIT, so a small one answers sooner), and the next is sent at
    once, so that PIPELINE transactions are in flight; a long queue goes in quarters."""
    db = await _open(tmp_path)
    try:
        await _insert_probe(db, 0)
        async def transaction_sizes(n):  # n writes queued in one turn: how many each transaction took, in order
            seen = [batch for _, batch in await asyncio.gather(*(db.write(_transaction_seen, i) for i in range(n)))]
            return [seen.count(batch) for batch in sorted(set(seen))]

        sizes = await transaction_sizes(sqlite_db.STEADY_BATCH * 2 + 5)
        assert sizes == [sqlite_db.STEADY_BATCH, sqlite_db.STEADY_BATCH, 5], sizes
        n = sqlite_db.STEADY_BATCH * 8  # a quarter of it, then a quarter of the rest
        sizes = await transaction_sizes(n)
        assert sizes[:2] == [n // 4, (n - n // 4) // 4], sizes
        assert sum(sizes) == n
    finally:
        await db.close()


@pytest.mark.sqlite_only(WRITER)
async def test_writes_behind_a_running_background_one_all_go_in_one_transaction(tmp_path):
    """While a background write (a campaign's batch) runs and none waits, every waiting write still goes into the
    next transaction, however many (up to MAX_BATCH): split into small ones, the rest would wait for the
    runner's next background write (the test above has the case of one waiting)."""
    db = await _open(tmp_path)
    try:
        await _insert_probe(db, 0)
        started = tmp_path / "started"
        held = asyncio.ensure_future(db.write_background(_slow_insert, 2, 0.5, str(started)))
        await _wait_until(started.exists)
        seen = await asyncio.gather(*(db.write(_transaction_seen, i) for i in range(sqlite_db.STEADY_BATCH * 3)))
        await held
        assert len({batch for _, batch in seen}) == 1
    finally:
        await db.close()


# ---- the writer process (storage/writer.py) ---------------------------------------------------

@writes
def _slow_insert(cx, value, seconds, started=None):
    cx.execute("CREATE TABLE IF NOT EXISTS probe (v INTEGER UNIQUE)")
    cx.execute("INSERT INTO probe (v) VALUES (?)", (value,))
    if started:
        open(started, "w").close()  # tells the test the transaction is open
    time.sleep(seconds)  # still inside the transaction: nothing is committed yet
    return value


@writes
def _insert_then_die(cx, value):
    """Like _insert_probe; PARLEY_WRITER_FAULT names it, so the writer dies right after its COMMIT."""
    return _insert_probe.sync(cx, value)


@writes
def _slow_insert_then_die(cx, value, seconds):
    """_slow_insert that PARLEY_WRITER_FAULT names: the writer dies right after its COMMIT."""
    return _slow_insert.sync(cx, value, seconds)


def _probe_values(cx):
    return sorted(r[0] for r in cx.execute("SELECT v FROM probe"))


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


@pytest.mark.sqlite_only(WRITER)
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


@pytest.mark.sqlite_only(WRITER)
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
        commits = []
        db.add_commit_listener(lambda: commits.append(1))
        first_pid = db.writer_pid
        started = tmp_path / "started"
        slow = asyncio.ensure_future(_slow_insert(db, 2, 30, str(started)))
        await _wait_until(started.exists)  # the batch is in the writer now, its transaction open
        os.kill(first_pid, signal.SIGKILL)
        with pytest.raises(StorageUnavailable) as refused:
            await asyncio.wait_for(slow, 10)
        assert refused.value.status == 503 and refused.value.message == dbmod.NOT_WRITTEN
        assert commits == []  # the commit listeners (the live events hub) hear of committed batches only
        # Queued while the new writer starts: they wait for it, then commit.
        later = await asyncio.wait_for(asyncio.gather(*(_insert_probe(db, v) for v in range(3, 13))), 10)
        assert later == list(range(3, 13))
        assert db.writer_pid not in (None, first_pid)
        assert sorted(await db.read(lambda cx: [r[0] for r in cx.execute("SELECT v FROM probe")])) == [1, *later]
    finally:
        await db.close()


@pytest.mark.sqlite_only(WRITER)
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


@pytest.mark.sqlite_only(WRITER)
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


@pytest.mark.sqlite_only(WRITER)
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


@pytest.mark.sqlite_only(WRITER)
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
        for _ in range(200):
            try:
                await asyncio.wait_for(_insert_probe(db, 2), 10)
            except StorageUnavailable as refused:
                # This refusal is raised by write() itself, before anything is queued (no waiting).
                if "is restarting" in refused.message:
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


# ---- what a caller is told when the writer is lost (issue 9) -----------------------------------

@pytest.mark.sqlite_only(WRITER)
async def test_a_writer_killed_after_commit_tells_each_caller_the_truth(tmp_path, monkeypatch):
    """The writer dies after COMMIT and before its answer arrives (the test-only fault hook kills it
    there). The batch's record in writer_batches says it committed: its callers are told their write
    is stored (StoredResultLost), except the call that rolled back inside it, which is told nothing was
    written. Nothing is lost or doubled, and a new writer serves the next writes."""
    monkeypatch.setenv("PARLEY_WRITER_FAULT", "kill-after-commit:tests.test_storage._insert_then_die")
    db = await _open(tmp_path)
    try:
        await _insert_probe(db, 1)
        commits = []
        db.add_commit_listener(lambda: commits.append(db.transactions_committed))
        first_pid = db.writer_pid
        outcomes = await asyncio.wait_for(asyncio.gather(
            _insert_then_die(db, 2), _insert_probe(db, 3), _insert_probe(db, 1), return_exceptions=True), 20)
        assert [type(o) for o in outcomes] == [StoredResultLost, StoredResultLost, StorageUnavailable], outcomes
        assert len(commits) == 1  # the batch settled as stored is a commit: the live events hub reads it
        assert outcomes[0].status == 503 and outcomes[0].message == dbmod.STORED
        assert "Idempotency-Key" in outcomes[0].message and "stored" in outcomes[0].message
        assert outcomes[2].message == dbmod.NOT_WRITTEN  # the duplicate rolled back inside the batch
        assert await db.read(_probe_values) == [1, 2, 3]
        assert await asyncio.wait_for(_insert_probe(db, 4), 20) == 4
        assert db.writer_pid != first_pid
    finally:
        await db.close()


@pytest.mark.sqlite_only(WRITER)
async def test_a_writer_killed_after_commit_with_the_next_batch_sent_tells_both_batches_the_truth(tmp_path,
                                                                                                  monkeypatch):
    """The next transaction is sent to the writer before the running one is answered (sqlite_db.PIPELINE).
    The writer dies after the first one's COMMIT, with the second waiting unread in its socket: the first
    batch's caller is told its write is stored, and the second batch, never read, is written by the next
    writer (once: the value is unique)."""
    monkeypatch.setenv("PARLEY_WRITER_FAULT", "kill-after-commit:tests.test_storage._slow_insert_then_die")
    db = await _open(tmp_path)
    try:
        await _insert_probe(db, 1)
        first = asyncio.ensure_future(_slow_insert_then_die(db, 2, 0.5))
        await _wait_until(lambda: len(db._flights) == 1)
        second = asyncio.ensure_future(_insert_probe(db, 3))
        await _wait_until(lambda: len(db._flights) == 2)  # sent before the first one's answer
        outcomes = await asyncio.wait_for(asyncio.gather(first, second, return_exceptions=True), 20)
        assert isinstance(outcomes[0], StoredResultLost) and outcomes[1] == 3, outcomes
        assert await db.read(_probe_values) == [1, 2, 3]
    finally:
        await db.close()


@pytest.mark.sqlite_only(WRITER)
async def test_a_writer_lost_whose_record_cannot_be_read_says_the_outcome_is_unknown(tmp_path, monkeypatch):
    """When what the lost writer committed cannot be read, the caller is told exactly that, in DESIGN
    §3's words, never "nothing was written"."""
    db = await _open(tmp_path)
    read = Database.read

    async def failing_record_read(self, fn, *args, **kwargs):
        if fn is dbmod._batch_record:
            raise sqlite3.OperationalError("disk I/O error (test)")
        return await read(self, fn, *args, **kwargs)
    monkeypatch.setattr(Database, "read", failing_record_read)
    try:
        await _insert_probe(db, 1)
        started = tmp_path / "started"
        slow = asyncio.ensure_future(_slow_insert(db, 2, 30, str(started)))
        await _wait_until(started.exists)
        os.kill(db.writer_pid, signal.SIGKILL)
        with pytest.raises(WriteOutcomeUnknown) as unknown:
            await asyncio.wait_for(slow, 20)
        assert unknown.value.status == 503
        assert unknown.value.message == "the write may or may not be stored; retry with the same Idempotency-Key"
    finally:
        await db.close()


@pytest.mark.sqlite_only(WRITER)
async def test_a_stopped_writer_is_replaced_by_the_watchdog_and_writes_go_on(tmp_path):
    """SIGSTOP of the writer (a stuck disk, a hung process): the batch it holds is answered within the
    watchdog limit (here 1 s) with what became of it (nothing: the writer never read it), the writer
    is replaced, and the writes queued behind it commit on the new one. (The deadline of wait_for is
    a bound against hanging for ever, not a timing assertion.)"""
    db = await _open(tmp_path)
    try:
        await _insert_probe(db, 1)  # the writer has started and imported this module: its batches are quick
        db.stall_seconds = 1.0
        stopped = db.writer_pid
        os.kill(stopped, signal.SIGSTOP)
        held = asyncio.ensure_future(_insert_probe(db, 2))
        await _wait_until(lambda: db._in_flight is not None)  # sent: the stopped writer holds it, 1 s watchdog
        # The next batches go to a new writer, whose first one waits for its interpreter to start: on a
        # busy machine that can take longer than the 1 s that was right for the stopped one.
        db.stall_seconds = 30.0
        queued = [asyncio.ensure_future(_insert_probe(db, v)) for v in range(3, 8)]
        with pytest.raises(StorageUnavailable) as refused:
            await asyncio.wait_for(held, 20)
        assert refused.value.message == dbmod.NOT_WRITTEN
        assert await asyncio.wait_for(asyncio.gather(*queued), 20) == list(range(3, 8))
        assert db.writer_pid != stopped
        await _wait_until(lambda: not pid_alive(stopped))
        assert await db.read(_probe_values) == [1, 3, 4, 5, 6, 7]
        assert await _insert_probe(db, 2) == 2  # the refused write, retried
    finally:
        await db.close()


@pytest.mark.sqlite_only(WRITER)
async def test_a_writer_stopped_and_continued_within_the_limit_keeps_every_write(tmp_path):
    db = await Database(tmp_path / "parley.db", stall_seconds=30.0).open()
    try:
        await _insert_probe(db, 1)
        pid = db.writer_pid
        os.kill(pid, signal.SIGSTOP)
        writes = [asyncio.ensure_future(_insert_probe(db, v)) for v in range(2, 6)]
        await asyncio.sleep(0.2)
        assert not any(w.done() for w in writes)
        os.kill(pid, signal.SIGCONT)
        assert await asyncio.wait_for(asyncio.gather(*writes), 20) == [2, 3, 4, 5]
        assert db.writer_pid == pid
    finally:
        await db.close()


@pytest.mark.sqlite_only(WRITER)
async def test_the_write_queue_is_bounded_and_refuses_at_once_when_full(tmp_path):
    """At most max_pending writes wait for the writer; the next is refused (503, nothing written)
    without waiting: its coroutine ends in its first step. The waiting ones commit once it moves."""
    db = await Database(tmp_path / "parley.db", max_pending=3).open()
    try:
        await _insert_probe(db, 1)
        pid = db.writer_pid
        os.kill(pid, signal.SIGSTOP)
        held = []
        for value in range(2, 2 + dbmod.PIPELINE):  # in flight (sent, one transaction each): not waiting
            held.append(asyncio.ensure_future(_insert_probe(db, value)))
            await _wait_until(lambda: len(db._flights) == len(held))
        waiting = [asyncio.ensure_future(_insert_probe(db, v)) for v in (10, 11, 12)]
        await asyncio.sleep(0)
        refused = asyncio.ensure_future(_insert_probe(db, 13))
        await asyncio.sleep(0)
        assert refused.done() and isinstance(refused.exception(), StorageUnavailable)
        assert refused.exception().message == dbmod.QUEUE_FULL
        os.kill(pid, signal.SIGCONT)
        stored = [*range(2, 2 + dbmod.PIPELINE), 10, 11, 12]
        assert await asyncio.wait_for(asyncio.gather(*held, *waiting), 20) == stored
        assert await db.read(_probe_values) == [1, *stored]
    finally:
        await db.close()


@pytest.mark.sqlite_only(WRITER)
async def test_close_has_a_deadline_even_when_the_writer_hangs(tmp_path):
    """close() flushes queued writes for at most its timeout; then the held batch is settled (nothing
    was written) and queued writes are refused, and the stopped writer is killed, not waited for."""
    db = await Database(tmp_path / "parley.db", stall_seconds=60.0).open()
    await _insert_probe(db, 1)
    pid = db.writer_pid
    os.kill(pid, signal.SIGSTOP)
    held = asyncio.ensure_future(_insert_probe(db, 2))
    await asyncio.sleep(0)
    queued = asyncio.ensure_future(_insert_probe(db, 3))
    await asyncio.sleep(0)
    await asyncio.wait_for(db.close(timeout=0.5), 30)
    outcomes = await asyncio.gather(held, queued, return_exceptions=True)
    assert [o.message for o in outcomes] == [dbmod.NOT_WRITTEN, dbmod.CLOSING]
    await _wait_until(lambda: not pid_alive(pid))
    cx = sqlite3.connect(tmp_path / "parley.db")
    assert [r[0] for r in cx.execute("SELECT v FROM probe")] == [1]


@pytest.mark.sqlite_only(WRITER)
def test_a_locked_database_is_503_busy_not_a_fault():
    """SQLITE_BUSY (another process, e.g. an ops command, held the write lock past the busy timeout) is
    a 503 that says nothing was written, like a full disk."""
    busy = sqlite3.OperationalError("database is locked")
    busy.sqlite_errorcode = sqlite3.SQLITE_BUSY
    refused = as_unavailable(busy)
    assert isinstance(refused, StorageUnavailable) and refused.status == 503
    assert refused.message == "storage is locked by another process; nothing was written, retry later"


def test_the_writer_s_reply_frames_are_read_whole_and_once_wherever_a_read_splits_them():
    """storage/writer_supervisor.py reads whole frames in place and buffers only a frame cut by a read."""
    from storage.writer_supervisor import _WriterConnection, encode_frame
    replies = [("done", [(True, n * "x")]) for n in range(5)]
    frames = b"".join(encode_frame(reply) for reply in replies)
    for cut in range(len(frames) + 1):
        got = []
        connection = _WriterConnection(got.append, None)
        connection.data_received(frames[:cut])
        connection.data_received(frames[cut:])
        assert got == replies and not connection.buffer, cut
    got = []
    connection = _WriterConnection(got.append, None)
    for byte in frames:
        connection.data_received(bytes([byte]))
    assert got == replies and not connection.buffer
