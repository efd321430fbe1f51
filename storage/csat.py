"""SQL of CSAT (issue 41; services/csat.py): the asks made when conversations are resolved (in the resolution's
transaction), their single answer (a conditional UPDATE: of two answers at once, one wins, on both databases), and
the Reports' read. Every query is scoped to the account, or reaches a row by its token's hash alone."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any, cast

from common.ids import iso, new_id, parse_iso, utcnow
from common.tokens import hash_token, new_token
from storage import accounts as account_store
from storage import contacts as contact_store
from storage import messages, outbound
from storage.db import fetch_all, fetch_one, reads, writes
from storage.dialect import dialect_of
from storage.interface import Connection, Row
from storage.rows import ContactRow
from storage.outbox import enqueue_notification_in_tx

SUBMITTED = "csat.submitted"  # event and notification
SETTING = "csat"  # the account setting {enabled, question} (services/csat.py validates it)
ASK_GAP = timedelta(hours=24)  # a contact is asked at most once within this
ANSWER_DAYS = 7  # an ask's link dies this long after it was asked
MESSAGE_TYPE = "csat"  # the ask's message
CUSTOM_CHANNEL = "custom"  # an ask's channel when the contact's message named none (the custom channel's)
PAGE_PATH = "/csat/"
_ANSWER = "answered_at, rating, comment"


def last_ask_in_tx(cx: Connection, account_id: str, contact_id: str) -> str | None:
    """When the contact was last asked (ISO 8601), or None; holds the contact's CSAT lock to COMMIT (PostgreSQL), so
    that two resolutions committing at once (two processes) cannot both find no recent ask."""
    dialect_of(cx).lock(cx, f"csat:{account_id}:{contact_id}")
    return cx.execute("SELECT MAX(asked_at) FROM csat_asks WHERE account_id = ? AND contact_id = ?",
                      (account_id, contact_id)).fetchone()[0]


def assignee_in_tx(cx: Connection, account_id: str, contact_id: str) -> str | None:
    """Who has the conversation (the agent a CSAT answer is counted for), or None."""
    row = cx.execute("SELECT assignee_user_id FROM conversations WHERE account_id = ? AND contact_id = ?",
                     (account_id, contact_id)).fetchone()
    return row[0] if row else None


def insert_ask_in_tx(cx: Connection, ask: Mapping[str, Any]) -> None:
    cx.execute("INSERT INTO csat_asks (id, account_id, contact_id, agent_user_id, channel, message_id, question,"
               " token_hash, asked_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
               (ask["id"], ask["account_id"], ask["contact_id"], ask["agent_user_id"], ask["channel"],
                ask["message_id"], ask["question"], ask["token_hash"], ask["asked_at"], ask["expires_at"]))


@reads
def ask_by_token(cx: Connection, token_hash: str) -> Row | None:
    """The ask whose page token has this hash: {id, account_id, question, expires_at, answered_at}, or None."""
    return fetch_one(cx, "SELECT id, account_id, question, expires_at, answered_at FROM csat_asks"
                         " WHERE token_hash = ?", (token_hash,))


@reads
def open_ask(cx: Connection, account_id: str, contact_id: str, channel: str, now: str) -> Row | None:
    """The contact's newest unanswered, unexpired ask on this channel: {id, message_id, question}, or None."""
    return fetch_one(cx, "SELECT id, message_id, question FROM csat_asks WHERE account_id = ? AND contact_id = ?"
                         " AND channel = ? AND answered_at IS NULL AND expires_at > ? ORDER BY asked_at DESC, id DESC"
                         " LIMIT 1", (account_id, contact_id, channel, now))


def _answer_in_tx(cx: Connection, where: str, args: Sequence[Any], rating: int, comment: str | None, now: str) -> dict[str, str] | None:
    """Answer the one open ask that where (with args) picks, and emit csat.submitted (event and notification);
    returns {account_id, contact_id} or None when no open ask matched (answered, expired, unknown)."""
    row = cx.execute(f"UPDATE csat_asks SET answered_at = ?, rating = ?, comment = ? WHERE {where}"
                     " AND answered_at IS NULL AND expires_at > ? RETURNING account_id, contact_id",
                     (now, rating, comment, *args, now)).fetchone()
    if row is None:
        return None
    account_id, contact_id = row[0], row[1]
    enqueue_notification_in_tx(cx, account_id, SUBMITTED, {"contactId": contact_id, "rating": rating,
                                                           "comment": comment})
    return {"account_id": account_id, "contact_id": contact_id}


@writes
def answer_by_token(cx: Connection, token_hash: str, rating: int, comment: str | None, now: str) -> dict[str, str] | None:
    """The one-question page's answer: spends the ask whose token has this hash (see _answer_in_tx)."""
    return _answer_in_tx(cx, "token_hash = ?", (token_hash,), rating, comment, now)


@writes
def answer_ask(cx: Connection, account_id: str, ask_id: str, rating: int, comment: str | None, now: str) -> dict[str, str] | None:
    """The widget's answer to the account's ask ask_id (see _answer_in_tx)."""
    return _answer_in_tx(cx, "account_id = ? AND id = ?", (account_id, ask_id), rating, comment, now)


def of_contact_in_tx(cx: Connection, account_id: str, contact_id: str) -> list[Row]:
    """The contact's asks and answers, oldest first (a person's data export)."""
    return fetch_all(cx, f"SELECT channel, question, asked_at, agent_user_id, {_ANSWER} FROM csat_asks"
                         " WHERE account_id = ? AND contact_id = ? ORDER BY asked_at, id", (account_id, contact_id))


@reads
def report_rows(cx: Connection, account_ids: Sequence[str], start: str, end: str) -> list[tuple[Any, ...]]:
    """The answers given in [start, end): [(day, agent user id, the agent as shown (label_sql) or None, the agent's
    name, rating)]."""
    from storage.users import label_sql  # storage.users imports storage modules that import this one's neighbours
    marks = ", ".join("?" for _ in account_ids)
    return [tuple(row) for row in cx.execute(
        f"SELECT SUBSTR(a.answered_at, 1, 10), a.agent_user_id, {label_sql('u')}, u.name, a.rating FROM csat_asks a"
        " LEFT JOIN users u ON u.id = a.agent_user_id AND u.account_id = a.account_id"
        f" WHERE a.account_id IN ({marks}) AND a.answered_at >= ? AND a.answered_at < ?",
        (*account_ids, start, end))]


@writes
def prune_unanswered(cx: Connection, before: str, limit: int) -> int:
    """Retention: at most ``limit`` asks never answered whose link expired before ``before``. An answered ask stays
    (the Reports' scores; a contact's erasure removes it)."""
    row_id = dialect_of(cx).row_id
    return cx.execute(f"DELETE FROM csat_asks WHERE {row_id} IN (SELECT {row_id} FROM csat_asks"
                      " WHERE answered_at IS NULL AND expires_at < ? ORDER BY expires_at LIMIT ?)",
                      (before, limit)).rowcount


# ---- asking (in the resolution's transaction: storage/conversation_status.py change_in_tx) ------------------

def page_url(base_url: str, token: str) -> str:
    return f"{base_url.rstrip('/')}{PAGE_PATH}{token}"


def ask_in_tx(cx: Connection, account_id: str, contact_ids: Sequence[str], base_url: str, at: str | None = None) -> int:
    """These contacts' conversations were resolved in this transaction (at: when, ISO 8601; default now): ask each
    contact, when csat is enabled, the contact has written on a channel we can answer on, has not opted out, and
    was not asked within ASK_GAP. Returns how many were asked."""
    account = account_store.delivery_context_in_tx(cx, account_id)
    # The setting is stored whole, with its defaults (services/csat.py validate_setting); never set: disabled.
    setting = account["settings"].get(SETTING) if account is not None else None
    if account is None or not setting or not setting["enabled"]:  # (no account: nothing is enabled)
        return 0
    now = parse_iso(at) if at else utcnow()
    asked = 0
    for contact_id in contact_ids:
        last = last_ask_in_tx(cx, account_id, contact_id)
        if last is not None and parse_iso(last) > now - ASK_GAP:
            continue
        to_id, channel = messages.reply_target_in_tx(cx, account_id, contact_id) or (None, None)
        if to_id is None:
            continue  # the contact never wrote (a campaign's conversation): nowhere to ask
        on_widget = channel == outbound.WEB_CHANNEL
        if not on_widget and outbound.undeliverable(account["settings"], channel):
            continue  # nowhere to deliver the link (as the outside-hours message): no webhook, or for email no SMTP
        # the conversation's contact: it exists (it wrote, above)
        contact = cast(ContactRow, contact_store.get_contact.sync(cx, account_id, contact_id))
        if contact["opted_out"]:
            continue  # they asked for no more messages: a question is not an answer they wait for
        question = setting["question"]
        reply: dict[str, Any] = {"contact": contact, "body": question, "to_id": to_id, "channel": channel,
                 "message_type": MESSAGE_TYPE}
        token = None if on_widget else new_token()
        if token is not None:
            reply.update(body=f"{question}\n{page_url(base_url, '…')}",
                         delivered_body=f"{question}\n{page_url(base_url, token)}")
        message = outbound.queue_automatic_in_tx(cx, account_id, account, reply)
        insert_ask_in_tx(cx, {
            "id": new_id("csat"), "account_id": account_id, "contact_id": contact_id,
            "agent_user_id": assignee_in_tx(cx, account_id, contact_id),
            "channel": channel or CUSTOM_CHANNEL,
            "message_id": message["id"], "question": question, "token_hash": token and hash_token(token),
            "asked_at": iso(now), "expires_at": iso(now + timedelta(days=ANSWER_DAYS))})
        asked += 1
    return asked
