"""Benchmark tooling, not the app: write many contacts and messages straight into a stopped Parley's
database, fast (one transaction, executemany, synchronous=OFF), shaped as the app writes them.

Contact i has phone preloaded_phone(i) (bench/load.lua computes the same), email benchI@example.com.
Messages are inbound custom-channel messages spread over the first `message_contacts` contacts, each
of which gets its channel identity (fromId "bench-preload-K"), as the inbound endpoint would do.
"""
import base64
import sqlite3
import time

from common.ids import now_iso
from storage.search import index_pending

_CROCKFORD = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", b"0123456789abcdefghjkmnpqrstvwxyz")


def preloaded_phone(i):
    return f"+1212{200 + i // 10000:03d}{i % 10000:04d}"


class IdMaker:
    """common.ids.new_id's format (10 chars of milliseconds, 16 random), about 5x faster for bulk."""

    def __init__(self, prefix):
        self.prefix = prefix
        self.random = open("/dev/urandom", "rb")

    def __call__(self):
        millis = int(time.time() * 1000)
        head = "".join("0123456789abcdefghjkmnpqrstvwxyz"[(millis >> (5 * k)) & 31] for k in range(9, -1, -1))
        tail = base64.b32encode(self.random.read(10)).translate(_CROCKFORD).decode()
        return f"{self.prefix}_{head}{tail}"


def _check_columns(cx, table, provided):
    """Fail clearly when a migration added a NOT NULL column without a default that we do not fill."""
    for _, name, _, notnull, default, pk in cx.execute(f"PRAGMA table_info({table})"):
        if notnull and default is None and not pk and name not in provided:
            raise SystemExit(f"bench/preload.py: {table}.{name} is NOT NULL without a default; teach preload it")


def preload(db_path, account_id, *, contacts, messages=0, message_contacts=100_000, chunk=50_000):
    """Insert `contacts` contacts and `messages` messages for the account; returns (contacts, messages, seconds)."""
    started = time.monotonic()
    cx = sqlite3.connect(str(db_path), isolation_level=None)
    cx.execute("PRAGMA synchronous=OFF")
    cx.execute("PRAGMA cache_size=-262144")  # 256 MB for the index builds; this connection only
    contact_cols = ("id", "account_id", "first_name", "last_name", "phone", "email", "created_at")
    message_cols = ("id", "account_id", "contact_id", "direction", "status", "body", "channel", "message_type",
                    "external_id", "from_id", "to_id", "created_at")
    _check_columns(cx, "contacts", contact_cols)
    _check_columns(cx, "messages", message_cols)
    _check_columns(cx, "channel_identities", ("account_id", "from_id", "contact_id"))
    now = now_iso()
    contact_id, message_id = IdMaker("ct"), IdMaker("msg")
    ids = []
    cx.execute("BEGIN")
    try:
        for start in range(0, contacts, chunk):
            rows = []
            for i in range(start, min(start + chunk, contacts)):
                cid = contact_id()
                if i < message_contacts:
                    ids.append(cid)
                rows.append((cid, account_id, "Bench", f"Contact {i}", preloaded_phone(i), f"bench{i}@example.com", now))
            cx.executemany(f"INSERT INTO contacts ({', '.join(contact_cols)}) VALUES ({', '.join('?' * len(contact_cols))})", rows)
        if messages:
            senders = ids[:max(1, min(len(ids), messages))]
            cx.executemany("INSERT INTO channel_identities (account_id, from_id, contact_id) VALUES (?, ?, ?)",
                           ((account_id, f"bench-preload-{k}", cid) for k, cid in enumerate(senders)))
            for start in range(0, messages, chunk):
                rows = []
                for i in range(start, min(start + chunk, messages)):
                    k = i % len(senders)
                    rows.append((message_id(), account_id, senders[k], "inbound", "received",
                                 f"Preloaded message {i}: is the blue one still in stock?", "bench", "text",
                                 f"preload-{i}", f"bench-preload-{k}", "parley-bench", now))
                cx.executemany(f"INSERT INTO messages ({', '.join(message_cols)}) VALUES ({', '.join('?' * len(message_cols))})", rows)
                index_pending(cx, len(rows))  # the search index, as the server's writer writes it
            # The inbox's conversation per contact, as the inbound path keeps it (all unread); SQLite takes the
            # bare columns from the row with MAX(id).
            cx.execute("INSERT INTO conversations (account_id, contact_id, last_message_id, last_message_at,"
                       " last_direction, last_author, last_preview, channel, unread_count, failed_count)"
                       " SELECT account_id, contact_id, MAX(id), created_at, direction, 'contact', substr(body, 1, 140),"
                       " channel, COUNT(*), 0 FROM messages WHERE account_id = ? GROUP BY contact_id", (account_id,))
        cx.execute("COMMIT")
    except BaseException:
        cx.execute("ROLLBACK")
        raise
    cx.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    cx.close()
    return contacts, messages, time.monotonic() - started
