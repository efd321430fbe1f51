"""The inbox: conversations by last activity (filter, search, cursor pages), a contact's thread shaped for the
page, marking read, replies typed by a user, manual retries and resuming the bot. No HTTP, no SQL."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from common.errors import Invalid, NotFound
from common.ids import now_iso
from common.bot_config import effective
from services import bot, media, messaging, notes, sla
from services.context import JSONObject, Services
from services.contacts import MAX_QUERY, display_name, search_patterns
from services.csat import MESSAGE_TYPE as CSAT_MESSAGE_TYPE
from services.users import REMOVED_LABEL, author_name
from storage import accounts as account_store
from storage import bot_state
from storage import contacts as contact_store
from storage import conversations as store
from storage import events
from storage import messages as message_store
from storage import widgets as widget_store
from storage.interface import Row, Store
from storage.rows import ContactRow, ConversationRow

PAGE_SIZE = 30
THREAD_PAGE_SIZE = 50
# The views (issue 21: Mine, Unassigned, All, Resolved, Snoozed), the filters before them (issue 25) and the
# conversations the bot handed to a person (issue 43 §8: they look answered otherwise), as tabs.
FILTERS = {"needs_reply": "Needs reply", "handed_off": "Handed off", "mine": "Mine", "unassigned": "Unassigned", "all": "All",
           "due_soon": "Due soon", "resolved": "Resolved", "snoozed": "Snoozed", "unread": "Unread", "failed": "Failed deliveries",
           "paused": "Bot paused"}
DEFAULT_FILTER = "needs_reply"  # the contact wrote last, or a handoff waits: what needs a person now
AUTHOR_LABELS = {"bot": "Bot", "api": "API", "campaign": "Campaign", "auto": "Automatic: outside hours"}
# messages.bot_outcome {outcome, detail} as the thread says it: one label for each of services.bot.OUTCOMES
# (tests/test_inbox.py checks that none is missing).
BOT_OUTCOMES = {"greeting": "Bot answered: greeting", "rule": "Bot answered: rule", "provider": "Bot answered: AI",
                "fallback": "Bot answered: fallback", "handoff": "Bot handed off to a person",
                "provider_failed": "Bot: AI provider failed", "no_answer": "Bot: no rule matched",
                "no_credits": "Bot: no credits left", "paused": "Bot paused: not answered",
                "opted_out": "Bot: contact opted out", "not_sent": "Bot: no webhook to send to",
                "busy": "Bot: too busy, not answered"}


def _conversation_view(row: ConversationRow) -> JSONObject:
    return {"contact_id": row["contact_id"], "name": display_name(row), "phone": row["phone"], "email": row["email"],
            "last_message_id": row["last_message_id"], "last_message_at": row["last_message_at"],
            "last_direction": row["last_direction"], "last_author": row["last_author"],
            "preview": " ".join(row["last_preview"].split()), "channel": row["channel"],
            "unread": row["unread_count"], "failed": row["failed_count"], "opted_out": bool(row["opted_out"]),
            "paused_until": row["paused_until"], **state_view(row)}


def state_view(row: ConversationRow) -> JSONObject:
    """A conversation's status and assignee for the page: {status, snoozed_until, handed_off (since when the bot's
    handoff waits for a person, or None), assignee_user_id, assignee (their name, else their email)}."""
    return {"status": row["status"], "snoozed_until": row["snoozed_until"],
            "handed_off": row["handoff_waiting_since"], "assignee_user_id": row["assignee_user_id"],
            "assignee": row["assignee_email"] and author_name(row["assignee_email"], name=row["assignee_name"]),
            "sla_due_at": row["sla_due_at"], "sla_breached": bool(row["sla_breached"])}


async def list_conversations(services: Services, account_id: str, *, filter: str = DEFAULT_FILTER,
                             query: str | None = None, before: str | None = None, limit: int | None = None,
                             campaign_id: str | None = None, user_id: str | None = None) -> JSONObject:
    """{items, next_before, filter, query, campaign, counts}: conversations by last activity, newest first, with
    how many each view shows. campaign_id: only that campaign's (an unknown or another account's: none);
    user_id: whose conversations Mine shows."""
    limit = limit or PAGE_SIZE
    if filter not in FILTERS:
        raise Invalid(f"filter must be one of {', '.join(FILTERS)}")
    text_like, digits_like = search_patterns(query)
    now = now_iso()
    due_before = sla.due_soon_before(services)
    rows = await store.page(services.db, account_id, now, filter=filter, text_like=text_like,
                            digits_like=digits_like, before=before or None, limit=limit, campaign_id=campaign_id,
                            user_id=user_id, due_before=due_before)
    items = [_conversation_view(r) for r in rows[:limit]]
    return {"items": items, "next_before": items[-1]["last_message_id"] if len(rows) > limit else None,
            "filter": filter, "query": (query or "").strip()[:MAX_QUERY], "campaign": campaign_id or "",
            "counts": await store.counts(services.db, account_id, now, campaign_id, user_id, due_before)}


async def nav_counts(db: Store, account_id: str) -> dict[str, int]:
    """The navigation's counts: {"needsPerson": conversations waiting for a person after a handoff, "unread":
    conversations with unread messages}. Open pages get them again from the live hub (services/live.py)."""
    return (await store.nav_counts(db, [account_id]))[account_id]


async def current_event_id(services: Services, account_id: str) -> int:
    """The account's newest live event number: a page rendered now resumes its WebSocket from here."""
    return await events.last_seq(services.db, account_id)


def media_view(services: Services, media_url: str | None, content_type: str | None) -> JSONObject | None:
    """A message's media for the page: stored files through a same-origin signed path (the page's CSP allows
    only 'self'), shown inline when they are images; other URLs as links."""
    if not media_url:
        return None
    if media_url.startswith(media.STORED_PREFIX):
        stored_type = cast(str, content_type)  # a stored file's type is stored with it (media.accept_media)
        url = media.signed_path(media.signing_key(services.box), media_url[len(media.STORED_PREFIX):],
                                stored_type, services.settings.media_url_ttl_seconds)
        return {"url": url, "content_type": stored_type, "inline": stored_type.startswith("image/")}
    return {"url": media_url, "content_type": content_type, "inline": False}


def _bot_outcome_view(outcome: Mapping[str, Any] | None) -> JSONObject | None:
    if not outcome:
        return None
    key = outcome.get("outcome")
    return {"key": key, "label": BOT_OUTCOMES.get(key or "", f"Bot: {outcome.get('outcome')}"),
            "detail": outcome.get("detail")}


def message_view(services: Services, row: Row, contact_name: str) -> JSONObject:
    """A thread message shaped for the page: who wrote it, its delivery state and the bot's outcome."""
    author = row["author"] or ("contact" if row["direction"] == "inbound" else "api")
    if author == "contact":
        author_label = contact_name
    elif author == "user":
        author_label = ("User" if not row["author_email"] else REMOVED_LABEL if row["author_email"] == REMOVED_LABEL
                        else f"User {author_name(row['author_email'], row['author_as'], row['author_user_name'])}")
    elif author == "campaign" and row["campaign_id"]:
        author_label = f"Campaign {row['campaign_id']}"
    elif author == "auto" and row["message_type"] == CSAT_MESSAGE_TYPE:
        author_label = "Automatic: CSAT question"
    else:
        author_label = AUTHOR_LABELS.get(author, author)
    error = row["error"] or {}
    outbound = row["direction"] == "outbound"
    return {"id": row["id"], "direction": row["direction"], "author": author, "author_label": author_label,
            "body": row["body"], "created_at": row["created_at"], "channel": row["channel"],
            "message_type": row["message_type"], "status": row["status"],
            "delivery": {"status": row["status"], "error": error.get("error") if row["status"] == "Failed" else None,
                         "http_status": error.get("httpStatus") if row["status"] == "Failed" else None,
                         "next_attempt_at": error.get("nextAttemptAt") if row["status"] == "Failed" else None,
                         "can_retry": row["status"] == "Failed"} if outbound else None,
            "media": media_view(services, row["media_url"], row["media_content_type"]),
            "bot": _bot_outcome_view(row["bot_outcome"]) if not outbound else None,
            # an email's subject, its quoted history (trimmed off the body, shown on request) and whether it was
            # sent by a machine (an out-of-office: stored, never answered)
            "mail": row.get("mail") or None}


async def _contact(services: Services, account_id: str, contact_id: str) -> ContactRow:
    contact = await contact_store.get_contact(services.db, account_id, contact_id)
    if contact is None:
        raise NotFound(f"no contact with id {contact_id}", code="CONTACT_NOT_FOUND")
    return contact


async def get_thread(services: Services, account_id: str, contact_id: str, *, before: str | None = None) -> JSONObject:
    """The thread page: {contact, name, messages (oldest first), timeline (the messages with the team's notes
    of the same stretch of time), earlier (cursor for older ones), pause, newest_id}. Another account's
    contact is NotFound."""
    contact = await _contact(services, account_id, contact_id)
    name = display_name(contact)
    rows = await message_store.thread_page(services.db, account_id, contact_id, before=before or None,
                                           limit=THREAD_PAGE_SIZE)
    shown = rows[:THREAD_PAGE_SIZE]
    messages = [message_view(services, r, name) for r in reversed(shown)]
    earlier = shown[-1]["id"] if len(rows) > THREAD_PAGE_SIZE else None
    timeline = await notes.with_notes(services.db, account_id, contact_id, messages, has_earlier=bool(earlier),
                                      before=before or None)
    return {"contact": contact, "name": name, "messages": messages, "timeline": timeline, "earlier": earlier,
            "newest_id": shown[0]["id"] if shown and not before else None,
            **await _bot_state(services, account_id, contact_id),
            # The website chat widget's visitors: whether the site verified who they are (services/widget.py).
            "web_identity": await widget_store.web_identity(services.db, account_id, contact_id),
            "conversation": await store.get(services.db, account_id, contact_id, now_iso())}


async def get_conversation(services: Services, account_id: str, contact_id: str) -> ConversationRow | None:
    """The conversation row of the account's contact (None before its first message)."""
    return await store.get(services.db, account_id, contact_id, now_iso())


async def _bot_state(services: Services, account_id: str, contact_id: str) -> JSONObject:
    """{pause, bot_on}: the contact's pause, and whether the account's bot is on (the thread's banner says which
    is true: off for the account, paused for this contact, or answering)."""
    account = await account_store.get_account(services.db, account_id)
    return {"pause": await bot_state.get_pause(services.db, account_id, contact_id, now_iso()),
            "bot_on": bool(effective((account or {}).get("settings", {}).get("bot"))["active"])}


async def get_bot_state(services: Services, account_id: str, contact_id: str) -> JSONObject:
    """{contact, pause, bot_on}: the thread's bot banner."""
    contact = await _contact(services, account_id, contact_id)
    return {"contact": contact, **await _bot_state(services, account_id, contact_id)}


async def messages_after(services: Services, account_id: str, contact_id: str, after: str | None) -> list[JSONObject]:
    """The thread's messages newer than ``after`` (a live page appends them; empty: from the first), oldest
    first."""
    contact = await _contact(services, account_id, contact_id)
    name = display_name(contact)
    rows = await message_store.thread_page(services.db, account_id, contact_id, after=after or "",
                                           limit=THREAD_PAGE_SIZE)
    return [message_view(services, r, name) for r in rows[:THREAD_PAGE_SIZE]]


async def get_message(services: Services, account_id: str, contact_id: str, message_id: str) -> JSONObject:
    """One message of the thread (a live page replaces it after a status or bot change)."""
    contact = await _contact(services, account_id, contact_id)
    row = await message_store.get_thread_message(services.db, account_id, message_id)
    if row is None or row["contact_id"] != contact_id:
        raise NotFound(f"no message with id {message_id}")
    return message_view(services, row, display_name(contact))


async def mark_read(services: Services, account_id: str, contact_id: str, through_message_id: str | None) -> None:
    """The thread was read up to this message: its unread count goes to 0 (unless a newer one arrived)."""
    await _contact(services, account_id, contact_id)
    if through_message_id:
        await store.mark_read(services.db, account_id, contact_id, through_message_id)


async def reply(services: Services, account_id: str, user: Mapping[str, Any], contact_id: str,
                body: str) -> JSONObject:
    """A reply typed in the thread: an outbound message through the outbox to the Custom Channel Webhook,
    written by this user (the bot branch pauses the bot for the contact in the same transaction)."""
    await _contact(services, account_id, contact_id)
    return await messaging.send_reply(services, account_id, contact_id, body, author="user",
                                      author_user_id=user["id"])


async def retry(services: Services, account_id: str, message_id: str) -> JSONObject:
    """Send a Failed message again now (the thread's Retry, POST /v1/messages/{id}/retry)."""
    return await services.delivery.retry_now(account_id, message_id)


async def resume_bot(services: Services, account_id: str, contact_id: str) -> bool:
    """The thread's "Resume bot": end the contact's pause. True when there was one."""
    await _contact(services, account_id, contact_id)
    return await bot.resume(services, account_id, contact_id)
