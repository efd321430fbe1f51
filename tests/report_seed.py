"""Backdated activity for the Reports (tests/test_reports.py checks the figures against it; scripts/screenshots.py
fills the demo's charts with it): messages over several days from contacts, the bot and people, bot outcomes,
webhook deliveries with retries, a campaign with replies and opt-outs. Written with plain SQL on its own
connection, like rows a running server stored on those days."""
import json
import random
from datetime import datetime, timedelta, timezone

from common.ids import first_id_at, iso, new_id
from storage import contacts as contact_store

OUTCOMES = ("rule", "rule", "greeting", "provider", "provider", "handoff", "provider_failed", "no_answer", "paused")


def id_at(prefix, dt):
    """An id as new_id(prefix) makes it at dt (time-ordered like the server's)."""
    return first_id_at(prefix, dt)[:-16] + new_id("x")[-16:]


def recent_on_one_day(ago, span, now=None):
    """A time about ``ago`` before now such that it and ``span`` after it fall on one day (UTC) and not after now:
    a report counts a response on its own day, so a conversation seeded across midnight splits over two days
    (the reports tests failed when CI ran just after midnight). Query the returned time's date."""
    now = now or datetime.now(timezone.utc)
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    at = now - ago
    if at.date() == (at + span).date():
        return at
    if midnight + span < now:
        return midnight + timedelta(seconds=1)
    return midnight - span - timedelta(minutes=1)  # today is too young: all of it yesterday


class Seeder:
    def __init__(self, cx, account_id, *, seed=22, user_names=("ana", "raj")):
        self.cx, self.account_id, self.rng = cx, account_id, random.Random(seed)
        self.users = []
        for n, name in enumerate(user_names):
            email = f"{name}.{account_id[-6:]}@demo.example"
            user_id = new_id("usr")
            # The first has a name (reports show it), the next only an email (reports fall back to it).
            cx.execute("INSERT INTO users (id, account_id, email, name, password_hash, is_owner, created_at)"
                       " VALUES (?, ?, ?, ?, 'x', 0, ?)", (user_id, account_id, email,
                                                          f"{name.title()} Silva" if n == 0 else None,
                                                          iso(datetime.now(timezone.utc))))
            self.users.append(user_id)
        self.outbox = 0

    def contact(self, at, name):
        contact_id = id_at("ct", at)
        self.cx.execute("INSERT INTO contacts (id, account_id, first_name, created_at) VALUES (?, ?, ?, ?)",
                        (contact_id, self.account_id, name, iso(at)))
        return contact_id

    def message(self, contact_id, at, direction, author, *, user_id=None, outcome=None, campaign_key=None,
                attempts=()):
        """One message; an outbound one gets an outbox row and these delivery attempts (True: succeeded)."""
        message_id = id_at("msg", at)
        self.cx.execute(
            "INSERT INTO messages (id, account_id, contact_id, direction, status, body, author, author_user_id,"
            " bot_outcome, campaign_id, created_at) VALUES (?, ?, ?, ?, ?, 'hello', ?, ?, ?, ?, ?)",
            (message_id, self.account_id, contact_id, direction, "received" if direction == "inbound" else "Sent",
             author, user_id, json.dumps({"outcome": outcome, "detail": None, "replyId": None}) if outcome else None,
             campaign_key, iso(at)))
        if attempts:
            outbox_id = self.cx.execute(
                "INSERT INTO outbox (account_id, kind, message_id, webhook_id, payload, status, attempts,"
                " next_attempt_at, created_at) VALUES (?, 'reply', ?, ?, '{}', ?, ?, ?, ?) RETURNING id",
                (self.account_id, message_id, new_id("wh"), "sent" if attempts[-1] else "failed", len(attempts),
                 iso(at), iso(at))).fetchone()[0]
            for k, ok in enumerate(attempts):
                self.cx.execute("INSERT INTO delivery_attempts (outbox_id, account_id, at, http_status, error,"
                                " duration_ms) VALUES (?, ?, ?, ?, ?, 12)",
                                (outbox_id, self.account_id, iso(at + timedelta(minutes=7 * k)), 200 if ok else 503,
                                 None if ok else "HTTP 503"))
        return message_id

    def _attempts(self):
        return self.rng.choice(((True,), (True,), (True,), (False, True), (False, False, True), (False,)))

    def conversations(self, first_day, days, contacts_per_day=4):
        """Each day: new contacts write; the bot answers some at once, people answer later (one of the two users),
        some contacts write twice before an answer, some answers are API messages (not a first response)."""
        rng = self.rng
        for d in range(days):
            day = first_day + timedelta(days=d)
            for n in range(contacts_per_day + rng.randrange(3)):
                at = day + timedelta(hours=8 + rng.randrange(10), minutes=rng.randrange(60), seconds=rng.randrange(60))
                contact_id = self.contact(at, f"Contact {d}-{n}")
                outcome = rng.choice(OUTCOMES)
                self.message(contact_id, at, "inbound", "contact", outcome=outcome)
                if outcome in ("rule", "greeting", "provider"):
                    self.message(contact_id, at + timedelta(milliseconds=300 + rng.randrange(4000)), "outbound",
                                 "bot", attempts=self._attempts())
                at += timedelta(minutes=1 + rng.randrange(30))
                for _ in range(1 + rng.randrange(2)):  # one or two messages before a person answers
                    self.message(contact_id, at, "inbound", "contact", outcome="paused")
                    at += timedelta(seconds=20 + rng.randrange(200))
                at += timedelta(seconds=rng.randrange(5400))
                self.message(contact_id, at, "outbound", "user", user_id=rng.choice(self.users),
                             attempts=self._attempts())
                if rng.random() < 0.4:
                    self.message(contact_id, at + timedelta(minutes=2), "outbound", "api", attempts=self._attempts())

    def campaign(self, at, name, recipients, *, replies=3, skipped=1, opt_outs=2):
        """A finished campaign to `recipients` new contacts: messages with deliveries, `skipped` skipped as opted
        out, `replies` contacts answering (one twice), and `opt_outs` contacts opting out by reply over the next
        days (through the server's own opt-out write)."""
        list_id = id_at("lst", at)
        self.cx.execute("INSERT INTO lists (id, account_id, name, created_at) VALUES (?, ?, ?, ?)",
                        (list_id, self.account_id, name, iso(at)))
        campaign_id, key = id_at("cmp", at), f"{name.lower().replace(' ', '-')}"
        contacts = [self.contact(at, f"{name} {i}") for i in range(recipients)]
        sent = failed = 0
        rows = []
        for i, contact_id in enumerate(contacts):
            if i < skipped:
                rows.append((contact_id, "skipped", None))
                continue
            attempts = self._attempts()
            message_id = self.message(contact_id, at + timedelta(seconds=i), "outbound", "campaign",
                                      campaign_key=key, attempts=attempts)
            sent, failed = sent + attempts[-1], failed + (not attempts[-1])
            rows.append((contact_id, "sent" if attempts[-1] else "failed", message_id))
        self.cx.execute("INSERT INTO campaigns (id, account_id, name, list_id, campaign_key, body, rate_per_minute,"
                        " status, start_at, started_at, finished_at, created_at, total, sent, failed, skipped)"
                        " VALUES (?, ?, ?, ?, ?, 'Hi', 60, 'completed', ?, ?, ?, ?, ?, ?, ?, ?)",
                        (campaign_id, self.account_id, name, list_id, key, iso(at), iso(at),
                         iso(at + timedelta(minutes=5)), iso(at), recipients, sent, failed, skipped))
        self.cx.executemany("INSERT INTO campaign_recipients (campaign_id, contact_id, status, message_id)"
                            " VALUES (?, ?, ?, ?)", [(campaign_id, *row) for row in rows])
        answering = [c for c, status, _ in rows if status != "skipped"]
        for i, contact_id in enumerate(answering[:replies]):
            reply_at = at + timedelta(hours=1 + i)
            self.message(contact_id, reply_at, "inbound", "contact", campaign_key=key)
            if i == 0:
                self.message(contact_id, reply_at + timedelta(minutes=5), "inbound", "contact", campaign_key=key)
        for i, contact_id in enumerate(answering[-opt_outs:] if opt_outs else []):
            contact_store.set_opted_out_in_tx(self.cx, self.account_id, contact_id, True, via="reply", by="STOP",
                                              at=iso(at + timedelta(days=i, hours=2)))
        return campaign_id


def seed_history(cx, account_id, *, days=14, end=None, seed=22):
    """`days` days of activity ending the day before `end` (default today, UTC) for the account, in one
    transaction; returns the first day (a datetime at 00:00 UTC)."""
    end = (end or datetime.now(timezone.utc)).replace(hour=0, minute=0, second=0, microsecond=0)
    first = end - timedelta(days=days)
    cx.execute("BEGIN IMMEDIATE")
    seeder = Seeder(cx, account_id, seed=seed)
    seeder.conversations(first, days)
    seeder.campaign(first + timedelta(days=days // 2, hours=10), "Spring sale", 12)
    # Backdated rows lie below the fold's watermarks: the summaries start over (the next fold counts everything).
    for table in ("report_daily", "report_response_buckets", "report_campaign_replies", "report_watermarks",
                  "report_bot_pending"):
        cx.execute(f"DELETE FROM {table}")
    cx.execute("COMMIT")
    return first
