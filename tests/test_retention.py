"""Retention (issue 9, docs/operations.md "Retention"): delivered and finally failed webhooks with their attempts
after --retention-webhook-days, Idempotency-Key answers after 24 h, media files no message names after
--retention-orphan-media-hours; nothing pending or referenced, and nothing younger, is deleted. The
cleanup is driven with an injected clock (run_once(now))."""
import os
import time
from datetime import timedelta

import pytest

from common.ids import iso, new_id, utcnow
from services import media
from services.retention import RULES, RetentionWorker
from storage import csat as csat_store
from storage import messages as message_store
from storage.contacts import insert_contact_in_tx
from storage.db import reads
from storage.messages import insert_message_in_tx
from storage.outbox import enqueue_in_tx

PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000")


pytestmark = pytest.mark.settings(retention_batch_size=3)


@reads
def _rows(cx, sql, *params):
    return [tuple(r) for r in cx.execute(sql, params)]


def _outbound(cx, account_id, status, last_attempt, media_url=None):
    """(In the writer.) A contact, its outbound message and outbox row in `status`, last scheduled at
    `last_attempt`, with one delivery attempt. Returns the outbox id."""
    contact_id, message_id = new_id("ct"), new_id("msg")
    insert_contact_in_tx(cx, {"id": contact_id, "account_id": account_id, "created_at": last_attempt})
    insert_message_in_tx(cx, {"id": message_id, "account_id": account_id, "contact_id": contact_id,
                              "direction": "outbound", "status": "Sent", "body": "b", "message_type": "text",
                              "media_url": media_url, "created_at": last_attempt})
    enqueue_in_tx(cx, account_id=account_id, kind="reply", payload={"messageId": message_id}, message_id=message_id)
    outbox_id = cx.execute("SELECT MAX(id) FROM outbox").fetchone()[0]
    cx.execute("UPDATE outbox SET status = ?, next_attempt_at = ?, attempts = 1 WHERE id = ?",
               (status, last_attempt, outbox_id))
    cx.execute("INSERT INTO delivery_attempts (outbox_id, account_id, at, duration_ms) VALUES (?, ?, ?, 5)",
               (outbox_id, account_id, last_attempt))
    return outbox_id


async def test_finished_webhooks_older_than_the_setting_go_with_their_attempts(services, account):
    """--retention-webhook-days (30): sent and finally failed deliveries whose last attempt is older go,
    in batches (3 rows per write here), with their attempts; pending ones of any age stay, and so do the
    messages (their status and error are on the message row)."""
    now = utcnow()
    old, recent = iso(now - timedelta(days=31)), iso(now - timedelta(days=29))
    account_id = account["account_id"]
    for status in ["sent"] * 5 + ["failed"] * 2:
        await services.db.write(_outbound, account_id, status, old)
    kept = [await services.db.write(_outbound, account_id, "sent", recent),
            await services.db.write(_outbound, account_id, "failed", recent),
            await services.db.write(_outbound, account_id, "pending", old)]
    before = services.db.transactions_committed
    deleted = await RetentionWorker(services, pause=0).run_once(now)
    assert deleted[RULES[0].name] == 7
    assert services.db.transactions_committed - before >= 3  # 7 rows, 3 per write
    assert [r[0] for r in await _rows(services.db, "SELECT id FROM outbox ORDER BY id")] == kept
    assert [r[0] for r in await _rows(services.db, "SELECT outbox_id FROM delivery_attempts ORDER BY outbox_id")] == kept
    assert len(await _rows(services.db, "SELECT id FROM messages WHERE account_id = ?", account_id)) == 10


async def test_zero_days_keeps_webhooks_for_ever(services, account):
    now = utcnow()
    await services.db.write(_outbound, account["account_id"], "sent", iso(now - timedelta(days=3000)))
    forever = services.settings.model_copy(update={"retention_webhook_days": 0})
    worker = RetentionWorker(services, pause=0)
    worker.settings = forever
    assert (await worker.run_once(now))[RULES[0].name] == 0
    assert len(await _rows(services.db, "SELECT id FROM outbox")) == 1


async def test_idempotency_keys_go_after_24_hours(api, services, account):
    """docs/design.md#api-decisions: an Idempotency-Key's answer is replayed "for 24 h": kept that long, deleted after."""
    r = await api.post("/v1/lists", {"name": "Keyed"}, key=account["api_key"], headers={"Idempotency-Key": "r-1"})
    assert r.code == 201
    worker = RetentionWorker(services, pause=0)
    assert (await worker.run_once(utcnow() + timedelta(hours=23)))["Idempotency-Key answers"] == 0
    assert (await worker.run_once(utcnow() + timedelta(hours=25)))["Idempotency-Key answers"] == 1
    assert await _rows(services.db, "SELECT key FROM idempotency_keys") == []


def _csat_ask(cx, account_id, contact_id, asked_at, expires_at):
    """(In the writer.) An ask as the resolution writes it (storage.csat.insert_ask_in_tx); returns its id."""
    ask_id = new_id("csat")
    csat_store.insert_ask_in_tx(cx, {"id": ask_id, "account_id": account_id, "contact_id": contact_id,
                                     "agent_user_id": None, "channel": "custom", "message_id": None,
                                     "question": "How did we do?", "token_hash": new_id("h"), "asked_at": asked_at,
                                     "expires_at": expires_at})
    return ask_id


async def test_csat_asks_never_answered_go_a_day_after_their_link_expired(services, account):
    """An ask nobody answered goes a day after its link expired; an answered one stays (the Reports' scores), and so
    does one expired less than a day ago or still open."""
    now, account_id = utcnow(), account["account_id"]
    contact_id = await services.db.write(_contact, account_id)

    async def ask(expired_days_ago):
        expires = now - timedelta(days=expired_days_ago)
        return await services.db.write(_csat_ask, account_id, contact_id, iso(expires - timedelta(days=7)), iso(expires))

    gone = [await ask(2), await ask(30)]
    answered = await ask(-1)
    await csat_store.answer_ask(services.db, account_id, answered, 5, None, iso(now - timedelta(days=3)))
    await services.db.write(_age_ask, answered, iso(now - timedelta(days=20)))
    kept = sorted([answered, await ask(0.5), await ask(-3)])
    deleted = await RetentionWorker(services, pause=0).run_once(now)
    assert deleted["CSAT asks never answered"] == len(gone)
    assert [r[0] for r in await _rows(services.db, "SELECT id FROM csat_asks ORDER BY id")] == kept


def _contact(cx, account_id):
    contact_id = new_id("ct")
    insert_contact_in_tx(cx, {"id": contact_id, "account_id": account_id, "created_at": iso(utcnow())})
    return contact_id


def _age_ask(cx, ask_id, expires_at):
    cx.execute("UPDATE csat_asks SET expires_at = ? WHERE id = ?", (expires_at, ask_id))


@pytest.mark.sqlite_only("writer_batches is the SQLite writer process's record")
async def test_batch_records_of_ended_writers_go_after_a_week(services):
    cx = services.db.connect_sync()
    try:
        cx.execute("INSERT INTO writer_batches (writer, batch, at) VALUES ('ended', 9, ?)", (int(time.time()) - 8 * 86400,))
    finally:
        cx.close()
    await services.db.write(_noop)  # this Database's own row, fresh
    deleted = await RetentionWorker(services, pause=0).run_once(utcnow())
    assert deleted["batch records of writers that ended"] == 1
    assert await _rows(services.db, "SELECT writer FROM writer_batches") == [(services.db.token,)]


def _noop(cx):
    return None


def _age(path, hours):
    stamp = time.time() - hours * 3600
    os.utime(path, (stamp, stamp))


async def test_media_files_no_message_names_go_and_named_ones_stay(services, account):
    """Spec §2 media: a stored file is kept while a message names it, however old; a file no message
    names goes once older than --retention-orphan-media-hours (24), and so do leftovers of interrupted
    writes; a recent one stays (its message may be about to commit)."""
    directory = media.media_dir(services.settings)
    named = media.store_bytes(directory, PNG + b"named")
    orphan = media.store_bytes(directory, PNG + b"orphan")
    young = media.store_bytes(directory, PNG + b"young")
    (directory / ".incoming-x").write_bytes(b"half")
    for name in (named, orphan, ".incoming-x"):
        _age(directory / name, 30)
    _age(directory / young, 2)
    await services.db.write(_outbound, account["account_id"], "pending", iso(utcnow()), media.STORED_PREFIX + named)
    deleted = await RetentionWorker(services, pause=0).run_once(utcnow())
    assert deleted["unreferenced media files"] == 2
    assert sorted(p.name for p in directory.iterdir()) == sorted([named, young])


async def test_a_file_stored_again_is_recent_again(services):
    """A repeat of the same bytes (a retried message) refreshes the file's time, so the cleanup does not
    delete it between its store and its message's commit."""
    directory = media.media_dir(services.settings)
    digest = media.store_bytes(directory, PNG)
    _age(directory / digest, 30)
    assert media.store_bytes(directory, PNG) == digest
    assert (await RetentionWorker(services, pause=0).run_once(utcnow()))["unreferenced media files"] == 0
    assert (directory / digest).exists()


async def test_a_file_named_while_being_removed_is_put_back(services, account, monkeypatch):
    """The race the cleanup guards against: the file was listed as unnamed, then a message naming it
    commits before the file is gone. The file is moved aside, checked again, and put back."""
    directory = media.media_dir(services.settings)
    digest = media.store_bytes(directory, PNG + b"race")
    _age(directory / digest, 30)
    worker = RetentionWorker(services, pause=0)
    real = message_store.referenced_media
    calls = []

    async def named_after_listing(db, urls):
        calls.append(urls)
        if len(calls) == 2:  # after the file was moved aside: the message commits now
            await services.db.write(_outbound, account["account_id"], "pending", iso(utcnow()),
                                    media.STORED_PREFIX + digest)
        return await real(db, urls)
    monkeypatch.setattr("services.retention.message_store.referenced_media", named_after_listing)
    assert (await worker.run_once(utcnow()))["unreferenced media files"] == 0
    assert (directory / digest).exists() and len(calls) == 2


async def test_the_server_runs_the_cleanup_as_a_task(services):
    """server.py starts it (main) and Services.close() stops it."""
    services.retention.start()
    await services.retention.stop()
    assert services.retention._task is None


@pytest.mark.sqlite_only("EXPLAIN QUERY PLAN is SQLite's planner")
def test_the_cleanup_uses_indexes(services):
    """Each batch is an index range, never a scan of the table (EXPLAIN QUERY PLAN)."""
    cx = services.db.connect_sync()
    try:
        for sql in ("SELECT id FROM outbox WHERE status IN ('sent', 'failed') AND next_attempt_at < ? LIMIT ?",
                    "SELECT rowid FROM idempotency_keys WHERE created_at < ? ORDER BY created_at LIMIT ?",
                    "SELECT DISTINCT media_url FROM messages WHERE media_url IN (?)",
                    "SELECT rowid FROM csat_asks WHERE answered_at IS NULL AND expires_at < ? ORDER BY expires_at"
                    " LIMIT ?"):
            plan = [row[3] for row in cx.execute("EXPLAIN QUERY PLAN " + sql, ("x",) * sql.count("?"))]
            assert plan and not any(step.startswith("SCAN") for step in plan), (sql, plan)
    finally:
        cx.close()
