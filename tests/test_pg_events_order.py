"""Live events on PostgreSQL (storage/events.py _PostgresOrder): an account's seq follows its commits (the hub's
reading by snapshot: tests/test_live_commit_order.py). Run with PARLEY_TEST_DATABASE_URL."""
import threading

import pytest

from storage import events


@pytest.fixture
def pg(services):
    if not services.settings.uses_postgres:
        pytest.skip("PostgreSQL only (PARLEY_TEST_DATABASE_URL)")
    return services


async def test_an_accounts_seq_follows_its_commit_order(pg, account):
    """Two writers of one account: the second waits for the first's COMMIT (its counter row is locked), so
    seq order is commit order and a page never sees seq n+1 before n."""
    account_id = account["account_id"]
    position = await events.position(pg.db)
    first, second = pg.db.connect_sync(), pg.db.connect_sync()
    try:
        first.execute("BEGIN")
        events.emit_in_tx(first, account_id, events.CONVERSATION_UPDATED, {"n": 1})
        second.execute("BEGIN")
        done = threading.Event()

        def write_second():
            events.emit_in_tx(second, account_id, events.CONVERSATION_UPDATED, {"n": 2})
            second.execute("COMMIT")
            done.set()
        thread = threading.Thread(target=write_second)
        thread.start()
        assert not done.wait(0.5)  # waits for the first's counter row
        rows, position = await events.read_after(pg.db, position, 100)
        assert rows == []
        first.execute("COMMIT")
        thread.join(10)
        assert done.is_set()
    finally:
        first.close()
        second.close()
    rows, _ = await events.read_after(pg.db, position, 100)
    assert [(r[3], r[5]) for r in rows] == [('{"n":1}', 1), ('{"n":2}', 2)]

