"""SQL for the website chat widget's row (migration 0640): its public id and its encrypted identity secret."""
from storage.audit import record_by
from storage.contacts import fill_blanks_in_tx, get_contact
from storage.db import fetch_all, fetch_one, reads, writes

_COLUMNS = "account_id, id, identity_secret, created_at"


@writes
def ensure_widget(cx, account_id, widget_id, created_at):
    """The account's widget row, made with widget_id when it has none (two first asks at once make one)."""
    cx.execute("INSERT INTO widgets (account_id, id, created_at) VALUES (?, ?, ?) ON CONFLICT (account_id) DO NOTHING",
               (account_id, widget_id, created_at))
    return fetch_one(cx, f"SELECT {_COLUMNS} FROM widgets WHERE account_id = ?", (account_id,))


@reads
def get_widget(cx, account_id):
    return fetch_one(cx, f"SELECT {_COLUMNS} FROM widgets WHERE account_id = ?", (account_id,))


@reads
def widget_by_id(cx, widget_id):
    """The widget with this public id and its account's settings, or None: what a visitor's request needs."""
    return fetch_one(cx, "SELECT w.account_id, w.id, w.identity_secret, a.settings FROM widgets w"
                         " JOIN accounts a ON a.id = w.account_id WHERE w.id = ?", (widget_id,),
                     json_columns=("settings",))


@writes
def set_identity_secret(cx, account_id, widget_id, secret, created_at, by=None):
    """secret (encrypted) becomes the widget's identity secret, replacing any; returns it as stored (an
    Idempotency-Key retry is answered from it)."""
    ensure_widget.sync(cx, account_id, widget_id, created_at)
    cx.execute("UPDATE widgets SET identity_secret = ? WHERE account_id = ?", (secret, account_id))
    record_by(cx, by, account_id=account_id, action="widget.identity_secret.rotated")
    return {"secret": secret}


@reads
def visitor_contact_id(cx, account_id, from_id):
    """The contact a visitor's fromId ("web:…") maps to, or None before their first message (or after erasure)."""
    row = cx.execute("SELECT contact_id FROM channel_identities WHERE account_id = ? AND from_id = ?",
                     (account_id, from_id)).fetchone()
    return row[0] if row else None


@writes
def add_visitor_identity(cx, account_id, from_id, contact_id):
    """The fromId (an identified visitor's) names contact_id too, unless it names a contact already (two
    identifies at once: the first wins). Returns the contact the fromId names."""
    cx.execute("INSERT INTO channel_identities (account_id, from_id, contact_id) VALUES (?, ?, ?)"
               " ON CONFLICT DO NOTHING", (account_id, from_id, contact_id))
    return cx.execute("SELECT contact_id FROM channel_identities WHERE account_id = ? AND from_id = ?",
                      (account_id, from_id)).fetchone()[0]


@reads
def visitor_messages(cx, account_id, contact_id, limit):
    """The contact's newest ``limit`` messages on the widget's channel, oldest first: what the visitor's chat shows
    (messages_account_contact's index, read backwards)."""
    rows = fetch_all(cx, "SELECT id, direction, author, body, media_url, media_content_type, created_at, message_type"
                         " FROM messages"
                         " WHERE account_id = ?"
                         " AND contact_id = ? AND channel = 'web' ORDER BY id DESC LIMIT ?",
                     (account_id, contact_id, limit))
    return rows[::-1]


@reads
def web_identity(cx, account_id, contact_id):
    """How the contact is known on the widget: "verified" (an identified visitor), "not verified" (anonymous
    visitors only), or None (never wrote from the widget)."""
    ids = [row[0] for row in cx.execute("SELECT from_id FROM channel_identities WHERE account_id = ? AND contact_id = ?"
                                        " AND from_id LIKE 'web:%'", (account_id, contact_id))]
    if not ids:
        return None
    return "verified" if any(i.startswith("web:id:") for i in ids) else "not verified"


@writes
def fill_visitor_email(cx, account_id, contact_id, email):
    """The email a visitor left, on their contact when it has none and no other contact has it (fill_blanks_in_tx's
    rule: another's address is neither taken nor its holder told)."""
    contact = get_contact.sync(cx, account_id, contact_id)
    if contact:
        fill_blanks_in_tx(cx, contact, {"email": email})


@reads
def web_from_ids(cx, account_id, contact_id):
    """The widget visitors' fromIds ("web:…") that map to the contact: who an agent's typing is shown to."""
    return [row[0] for row in cx.execute("SELECT from_id FROM channel_identities WHERE account_id = ? AND contact_id = ?"
                                         " AND from_id LIKE 'web:%' LIMIT 20", (account_id, contact_id))]
