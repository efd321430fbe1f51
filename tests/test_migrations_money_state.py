"""Migrations 0111 and 0112 on data written before them (issue 18 items 11 and 12): grants made twice under
one key keep their rows but the later one loses the key, so the unique index can exist; a campaign's
recipients failed with a retry still pending become retrying, and the counts follow the recipients."""

import pytest

from storage.db import migrate
from tests.migration_helpers import database_before

NOW = "2026-01-01T00:00:00.000Z"
pytestmark = pytest.mark.sqlite_only("migrates an SQLite file of its own")


def test_existing_duplicate_grants_and_failed_recipients_are_carried_over(tmp_path, monkeypatch):
    cx = database_before(tmp_path, monkeypatch, 110)
    try:
        cx.executemany("INSERT INTO credit_transactions (account_id, kind, amount, balance_after, description,"
                       " granted_by, idempotency_key, created_at) VALUES ('acc_sub', 'grant', 100, ?, ?, 'acc_ag',"
                       " 'rch_1', ?)", [(100, None, NOW), (200, "again", NOW)])
        cx.execute("INSERT INTO campaigns (id, account_id, name, list_id, campaign_key, body, rate_per_minute, status,"
                   " start_at, created_at, total, failed, sent) VALUES ('cmp_1', 'acc_1', 'c', 'lst_1', 'cmp_1', 'b',"
                   " 60, 'completed', ?, ?, 3, 2, 1)", (NOW, NOW))
        for n, (status, outbox_status) in enumerate((("failed", "pending"), ("failed", "failed"), ("sent", "sent"))):
            cx.execute("INSERT INTO campaign_recipients (campaign_id, contact_id, status, message_id)"
                       " VALUES ('cmp_1', ?, ?, ?)", (f"ct_{n}", status, f"msg_{n}"))
            cx.execute("INSERT INTO outbox (account_id, kind, message_id, webhook_id, payload, status, next_attempt_at,"
                       " created_at, campaign_id) VALUES ('acc_1', 'reply', ?, ?, '{}', ?, ?, ?, 'cmp_1')",
                       (f"msg_{n}", f"wh_{n}", outbox_status, NOW, NOW))
        migrate(cx)
        grants = [tuple(r) for r in cx.execute("SELECT idempotency_key, description FROM credit_transactions ORDER BY id")]
        assert grants == [("rch_1", None),
                          (None, "again [granted again under Idempotency-Key rch_1 before keys were unique]")]
        statuses = [tuple(r) for r in cx.execute("SELECT contact_id, status FROM campaign_recipients ORDER BY 1")]
        assert statuses == [("ct_0", "retrying"), ("ct_1", "failed"), ("ct_2", "sent")]
        counts = tuple(cx.execute("SELECT failed, retrying, sent, total FROM campaigns").fetchone())
        assert counts == (1, 1, 1, 3)
    finally:
        cx.close()
