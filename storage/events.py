"""SQL for live events: appended in the transaction of a change (emit_in_tx), read by the hub after commits
(read_after), replayed to a page that reconnects (catch_up), pruned by age (prune)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from json.encoder import encode_basestring_ascii as _encode_string  # C: a quoted, escaped JSON string
from typing import Any, TYPE_CHECKING, cast

from common.ids import new_ids, now_iso
from common.jsontext import compact_json
from storage.db import reads, writes
from storage.dialect import dialect_of
from storage.interface import Connection, execute_at_commit

if TYPE_CHECKING:
    from storage.pg_adapter import PgConnection


# Event types; a new feature adds its own here and emits it with emit_in_tx.
MESSAGE_CREATED = "message.created"          # {messageId, contactId, direction, author, status}
MESSAGE_STATUS = "message.status"            # {messageId, contactId, status}: Pending, Sent or Failed
MESSAGE_UPDATED = "message.updated"          # {messageId, contactId}: something else changed (the bot's outcome)
CONVERSATION_UPDATED = "conversation.updated"  # {contactId}: read, bot paused or resumed; with status and
#                                                assigneeUserId: changed by a person or woken from a snooze
CONVERSATION_ERASED = "conversation.erased"  # {contactId}: the contact was erased (storage/erasure.py)
NOTE_CREATED = "note.created"                # {noteId, contactId}: a private note in the thread (storage/notes.py)
NOTE_DELETED = "note.deleted"                # {noteId, contactId}
# A campaign's batch, one event for many messages (one per message would cost the runner's transactions):
MESSAGES_CREATED = "messages.created"        # {campaignId, contactIds, messageIds}: each of these contacts has a
#                                              new message (messageIds: theirs, in the same order)
MESSAGES_STATUS = "messages.status"          # {campaignId, status, messages: [[contactId, messageId], ...]}
# A campaign's counts or status changed (storage/campaigns.py progress_in_tx), as that transaction left them:
CAMPAIGN_PROGRESS = "campaign.progress"      # {campaignId, status, counts: {total, pending, queued, sent, ...}}
ERASED_EVENT = "erased"                      # {}: an event that named an erased contact, emptied (storage/erasure.py)
BATCH_EVENT_SIZE = 500                       # contacts per batch event at most (a cancel may touch 100,000)


class MessageRef(str):
    """A public event's data that is a message, filled in when the event is read or sent (its id)."""


# Stored type -> the public type it is read (GET /v1/events) and notified (notificationUrls) as; the
# notification types (storage/outbox.py enqueue_notification_in_tx) are stored as themselves.
PUBLIC_TYPES = {MESSAGE_CREATED: "message.created", MESSAGES_CREATED: "message.created",
                MESSAGE_STATUS: "message.updated", MESSAGES_STATUS: "message.updated", MESSAGE_UPDATED: "message.updated",
                CONVERSATION_UPDATED: "conversation.updated", CONVERSATION_ERASED: "contact.erased"}
MESSAGE_TYPES = ("message.created", "message.updated")  # public types whose data is a message


def public_items(event_type: str, data: Mapping[str, Any]) -> list[MessageRef | Mapping[str, Any]]:
    """A stored event's public events, in order: a MessageRef to fill in, or the data as it is."""
    if event_type == MESSAGES_CREATED:
        return [MessageRef(m) for m in data.get("messageIds", ())]
    if event_type == MESSAGES_STATUS:
        return [MessageRef(message_id) for _, message_id in data["messages"]]
    if event_type in (MESSAGE_CREATED, MESSAGE_STATUS, MESSAGE_UPDATED):
        return [MessageRef(data["messageId"])]
    if event_type == CONVERSATION_ERASED:
        return [{"contactId": data["contactId"]}]
    return [data]


def _notify_in_tx(cx: Connection, account_id: str, type: str, data: Mapping[str, Any]) -> None:
    """Every event type can be subscribed in notificationUrls: queue the notifications of a stored event whose
    public type the account has a URL for, in the event's transaction, one per public event, with the same
    data (a message's as {"messageId"}: the delivery fills it in when it sends, services/delivery.py)."""
    public = PUBLIC_TYPES.get(type)
    if public is None:
        return
    url = dialect_of(cx).json_field_param("settings", "notificationUrls")
    row = cx.execute(f"SELECT {url} FROM accounts WHERE id = ?", (public, account_id)).fetchone()
    if not row or not row[0]:
        return
    from storage.outbox import enqueue_many_in_tx, notification_payload  # it appends events with ours
    items = public_items(type, data)
    enqueue_many_in_tx(cx, [{"account_id": account_id, "kind": "notification", "event_type": public,
                             "webhook_id": webhook_id, "payload": notification_payload(
                                 public, webhook_id, account_id,
                                 {"messageId": str(item)} if isinstance(item, MessageRef) else item)}
                            for item, webhook_id in zip(items, new_ids("evt", len(items)))])


def emit_in_tx(cx: Connection, account_id: str, type: str, data: Mapping[str, Any]) -> int:
    """Append an event for the account's open pages, inside the caller's transaction: it is seen exactly when
    the change commits, and never when it rolls back. data: a JSON-able dict. Its seq (what pages see) is the
    account's next number, in the same statement (a seek in events_account_seq). Returns the event id."""
    _notify_in_tx(cx, account_id, type, data)
    return _append_in_tx(cx, account_id, type, compact_json(data), now_iso())


def emit_at_commit_in_tx(cx: Connection, account_id: str, type: str, data: Mapping[str, Any]) -> None:
    """emit_in_tx for an event whose id the caller does not need: on PostgreSQL appended with the COMMIT, so
    that the account's event counter, which every other transaction of the account that emits an event waits
    for, is locked for no round trip (a batch of delivery outcomes would hold it through the whole batch)."""
    _notify_in_tx(cx, account_id, type, data)
    _ORDER[dialect_of(cx).name].append_later(cx, account_id, type, compact_json(data), now_iso())


def message_created_in_tx(cx: Connection, message: Mapping[str, Any]) -> None:
    """message.created for a message inserted in this transaction ({messageId, contactId, direction, author,
    status}), its JSON written from the row in hand: json.dumps costs ~30k instructions a call, a tenth of
    the whole inbound write (bench/README "Inbound: where the writer's time goes"). On PostgreSQL it travels
    with the COMMIT (emit_at_commit_in_tx)."""
    data = (f'{{"messageId":{_string(message["id"])},"contactId":{_string(message["contact_id"])},'
            f'"direction":{_string(message["direction"])},"author":{_string(message.get("author"))},'
            f'"status":{_string(message["status"])}}}')
    _notify_in_tx(cx, message["account_id"], MESSAGE_CREATED, {"messageId": message["id"]})
    _ORDER[dialect_of(cx).name].append_later(cx, message["account_id"], MESSAGE_CREATED, data, message["created_at"])


def _string(value: str | None) -> str:
    return "null" if value is None else _encode_string(value)


def _append_in_tx(cx: Connection, account_id: str, type: str, data_json: str, at: str) -> int:
    return _ORDER[dialect_of(cx).name].append(cx, account_id, type, data_json, at)


class _SqliteOrder:
    """SQLite: the single writer commits in id order, so the newest id read is the hub's position, and an
    account's seq is simply its last one plus one."""

    @staticmethod
    def append(cx: Connection, account_id: str, type: str, data_json: str, at: str) -> int:
        return cx.execute("INSERT INTO events (account_id, seq, type, data, created_at) VALUES"
                          " (?, COALESCE((SELECT MAX(seq) FROM events WHERE account_id = ?), 0) + 1, ?, ?, ?)",
                          (account_id, account_id, type, data_json, at)).lastrowid  # type: ignore[attr-defined]

    append_later = append

    @staticmethod
    def position(cx: Connection) -> int:
        return cx.execute("SELECT COALESCE(MAX(id), 0) FROM events").fetchone()[0]

    @staticmethod
    def read_after(cx: Connection, position: int | str, limit: int) -> tuple[list[Any], int | str]:
        rows = cx.execute(f"{_ROW} WHERE id > ? ORDER BY id LIMIT ?", (position, limit)).fetchall()
        return rows, rows[-1][0] if rows else position

    @staticmethod
    def through(position: int | str) -> tuple[str, int | str]:
        return "id <= ?", position


class _PostgresOrder:
    """PostgreSQL: concurrent transactions commit in any order, so ids say nothing of what a reader may have
    missed. An account's seq is taken from its row in event_counters, whose lock the transaction holds to
    its COMMIT: the account's events commit in seq order. The hub's position is the snapshot it last read
    in (pg_current_snapshot): what is new since is exactly the events whose transaction that snapshot did
    not see (pg_visible_in_snapshot), however late it committed."""

    _APPEND = ("WITH counter AS (INSERT INTO event_counters (account_id, seq) VALUES (?, 1)"
               " ON CONFLICT (account_id) DO UPDATE SET seq = event_counters.seq + 1 RETURNING seq)"
               " INSERT INTO events (account_id, seq, type, data, created_at) SELECT ?, seq, ?, ?, ? FROM counter")

    @classmethod
    def append(cls, cx: Connection, account_id: str, type: str, data_json: str, at: str) -> int:
        cast("PgConnection", cx).send_at_commit_now()  # the transaction's events keep the order they were emitted in
        return cx.execute(cls._APPEND + " RETURNING id", (account_id, account_id, type, data_json, at)).fetchone()[0]

    @classmethod
    def append_later(cls, cx: Connection, account_id: str, type: str, data_json: str, at: str) -> None:
        execute_at_commit(cx, cls._APPEND, (account_id, account_id, type, data_json, at))

    @staticmethod
    def position(cx: Connection) -> str:
        return cx.execute("SELECT pg_current_snapshot()::text").fetchone()[0]

    @staticmethod
    def read_after(cx: Connection, position: int | str, limit: int) -> tuple[list[Any], int | str]:
        # One statement: the snapshot returned is the one the rows were read in.
        found = cx.execute("SELECT s::text, e.id, e.account_id, e.type, e.data, e.created_at, e.seq"
                           " FROM pg_current_snapshot() AS s LEFT JOIN events e"
                           " ON e.tx >= pg_snapshot_xmin(?::pg_snapshot)"
                           " AND NOT pg_visible_in_snapshot(e.tx, ?::pg_snapshot)"
                           " ORDER BY e.account_id, e.seq", (position, position)).fetchall()
        return [tuple(r[1:]) for r in found if r[1] is not None], found[0][0]

    @staticmethod
    def through(position: int | str) -> tuple[str, int | str]:
        return "pg_visible_in_snapshot(tx, ?::pg_snapshot)", position


_ORDER: dict[str, type[_SqliteOrder] | type[_PostgresOrder]] = {"sqlite": _SqliteOrder, "postgresql": _PostgresOrder}


def emit_batches_in_tx(cx: Connection, account_id: str, type: str, data: Mapping[str, Any], key: str, items: Sequence[Any], also: tuple[str, Sequence[Any]] | None = None) -> None:
    """Emit ``type`` for many messages in as few events as BATCH_EVENT_SIZE allows: each is data with ``key``
    set to a chunk of the list items (and, with also=(key, list), that key to the same chunk of a list as long).
    Nothing when items is empty."""
    for start in range(0, len(items), BATCH_EVENT_SIZE):
        chunk = {key: items[start:start + BATCH_EVENT_SIZE]}
        if also is not None:
            chunk[also[0]] = also[1][start:start + BATCH_EVENT_SIZE]
        emit_at_commit_in_tx(cx, account_id, type, {**data, **chunk})


def message_updated_in_tx(cx: Connection, account_id: str, message_id: str) -> None:
    """message.updated for a message changed in this transaction (e.g. the bot's outcome on an inbound
    message): open threads fetch it again. Nothing when the message is not the account's."""
    row = cx.execute("SELECT contact_id FROM messages WHERE account_id = ? AND id = ?",
                     (account_id, message_id)).fetchone()
    if row is not None:
        emit_in_tx(cx, account_id, MESSAGE_UPDATED, {"messageId": message_id, "contactId": row[0]})


@reads
def last_id(cx: Connection) -> int:
    """The newest event id, of any account (0 before the first event): the hub's reading position, never
    shown to a page."""
    return cx.execute("SELECT COALESCE(MAX(id), 0) FROM events").fetchone()[0]


@reads
def last_seq(cx: Connection, account_id: str) -> int:
    """The account's newest event number (0 before its first): where a page rendered now resumes from."""
    return cx.execute("SELECT COALESCE(MAX(seq), 0) FROM events WHERE account_id = ?", (account_id,)).fetchone()[0]


_ROW = "SELECT id, account_id, type, data, created_at, seq FROM events"


@reads
def position(cx: Connection) -> int | str:
    """The hub's reading position now (nothing before it is new to the hub): never shown to a page."""
    return _ORDER[dialect_of(cx).name].position(cx)


@reads
def read_after(cx: Connection, position: int | str, limit: int) -> tuple[list[Any], int | str]:
    """The events committed since ``position`` (up to ``limit`` on SQLite), each account's in seq order, as
    (id, account_id, type, data JSON text, created_at, seq) tuples (the hub splices the JSON into its frames
    without decoding it), and the position after them: (rows, position)."""
    return _ORDER[dialect_of(cx).name].read_after(cx, position, limit)


@reads
def catch_up(cx: Connection, account_id: str, after_seq: int, through_id: int | str, limit: int, skip_types: Sequence[str] = ()) -> tuple[list[Any], bool, int]:
    """What a page of the account that saw its events up to number after_seq missed, up to through_id (the
    hub's position): returns (rows, resumable, seq_at_through). resumable is False when after_seq is older
    than the account's oldest event kept (pruned since) or newer than its newest (another database, a
    restored backup). rows: at most ``limit`` + 1 events of this account, shaped like read_after's, so the
    caller can tell when there are too many to replay; none of skip_types (no page is shown them).
    seq_at_through: the account's number at through_id."""
    oldest, newest = cx.execute("SELECT MIN(seq), MAX(seq) FROM events WHERE account_id = ?",
                                (account_id,)).fetchone()
    if newest is None:
        return [], after_seq == 0, 0
    if after_seq < oldest - 1 or after_seq > newest:
        return [], False, 0
    seen, through = _ORDER[dialect_of(cx).name].through(through_id)
    skip = f" AND type NOT IN ({', '.join('?' for _ in skip_types)})" if skip_types else ""
    rows = cx.execute(f"{_ROW} WHERE account_id = ? AND seq > ? AND {seen}{skip} ORDER BY seq LIMIT ?",
                      (account_id, after_seq, through, *skip_types, limit + 1)).fetchall()
    # seq grows in commit order within an account: from its newest event back, the first the hub has read
    # (the events committed since the hub last read are few).
    at_through = cx.execute(f"SELECT seq FROM events WHERE account_id = ? AND {seen} ORDER BY seq DESC LIMIT 1",
                            (account_id, through)).fetchone()
    return rows, True, at_through[0] if at_through else 0


@writes
def prune(cx: Connection, older_than: str, limit: int) -> int:
    """Delete about ``limit`` of the oldest events created before ``older_than`` (ISO 8601 UTC), and of each
    account only a prefix by seq: never an event with a newer one before it (created_at is taken before the
    commit that gives seq on PostgreSQL, so it can go back a little where seq goes on; deleting such an event
    alone would leave a hole that a cursor or a page before it would skip without being told), and never an
    account's newest event (its seq is where the account's next one counts from; the newest of all is one of
    them, and its id is where the next id counts from). Returns how many were deleted: the retention cleanup
    (services/retention.py RULES) calls again while it returns ``limit``. A page that last saw a deleted event
    is told to reload, a cursor 410."""
    deleted = 0
    candidates = cx.execute("SELECT account_id, MAX(seq) FROM (SELECT account_id, seq FROM events WHERE created_at < ?"
                            " ORDER BY id LIMIT ?) AS c GROUP BY account_id", (older_than, limit)).fetchall()
    for account_id, through in candidates:
        # The account's first event not old enough, up to the batch's newest (an index range of about the batch).
        newer = cx.execute("SELECT MIN(seq) FROM events WHERE account_id = ? AND seq <= ? AND created_at >= ?",
                           (account_id, through, older_than)).fetchone()[0]
        last = cx.execute("SELECT MAX(seq) FROM events WHERE account_id = ?", (account_id,)).fetchone()[0]
        upto = min(through + 1, last, newer if newer is not None else last)
        deleted += cx.execute("DELETE FROM events WHERE account_id = ? AND seq < ?", (account_id, upto)).rowcount
    return deleted


@reads
def account_page(cx: Connection, account_id: str, after_seq: int, types: Sequence[str], limit: int) -> tuple[list[Any], int | None, int | None]:
    """GET /v1/events' rows: the account's events numbered after ``after_seq`` whose type is in ``types``,
    in seq order (commit order on both databases: on PostgreSQL an account's events commit in seq order, the
    counter's lock held to COMMIT, so a reader sees a prefix of them), at most ``limit``; with the account's
    oldest and newest number kept ((None, None) before its first event), read before the rows (a row read
    after is never older than what they say): (rows, oldest, newest)."""
    oldest, newest = cx.execute("SELECT MIN(seq), MAX(seq) FROM events WHERE account_id = ?",
                                (account_id,)).fetchone()
    if newest is None:
        return [], None, None
    marks = ", ".join("?" for _ in types)
    rows = cx.execute(f"{_ROW} WHERE account_id = ? AND seq > ? AND seq <= ? AND type IN ({marks})"
                      " ORDER BY seq LIMIT ?", (account_id, after_seq, newest, *types, limit)).fetchall()
    return rows, oldest, newest
