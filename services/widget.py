"""The website chat widget (channel `web`, docs/guide.md "Website chat widget", docs/design.md §8): its settings,
its public id and identity secret, and what its visitors may do.

Visitors are not stored: a visitor's token is sealed by the server (services/secretbox.py, so it is opaque and
cannot be forged) and names either an anonymous visitor (vis_…, made with their first message) or an id the
business verified (identify: hex HMAC-SHA256(identity secret, id), compared in constant time). Their messages are
inbound messages of channel `web` from fromId "web:vis_…" or "web:id:<id>", so a visitor's first message makes
their contact as any inbound sender's does, and bot, inbox, reports, events and erasure treat them alike; the
same verified id from two browsers is one fromId, so one contact."""
from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
import secrets
import time
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Optional, cast
from urllib.parse import urlsplit

from cryptography.fernet import InvalidToken
from pydantic import AfterValidator, Field, StrictBool, ValidationError

from common.errors import DomainError, Forbidden, Invalid, RateLimited
from common.ids import new_id, now_iso
from common.validation import Identifier, Strict, validation_message
from common.business_hours import iso_or_none, schedule_of
from services import business_hours, contacts, csat, event_stream, media, messaging, sla, visitor_mail
from services.contact_fields import normalize_email
from services.context import JSONObject
from services.messaging import Message
from storage import widgets as store
from storage.interface import Row, Store

if TYPE_CHECKING:
    from services.context import Services
    from services.secretbox import SecretBox

log = logging.getLogger("parley.widget")

CHANNEL = "web"
SETTING = "widget"
MAX_ORIGINS = 20
MAX_TITLE, MAX_GREETING = 60, 500
MAX_BODY = 2000  # characters in a visitor's message
MAX_IDENTITY = 200  # characters of an identify id, email or name
DEFAULT_TITLE, DEFAULT_COLOR = "Chat with us", "#2563eb"
_COLOR = re.compile(r"#[0-9a-fA-F]{6}")
# An enabled widget as load() gives it: its row (account_id, id, identity_secret), its settings with their defaults
# (WidgetSettings) and the account's business hours (a common.business_hours.Schedule, or None).
Widget = Mapping[str, Any]
# A visitor as their token names them: {"v": "vis_…"} (anonymous) or {"u": id, "e": email, "n": name} (verified).
Visitor = dict[str, str]


def normalize_origin(value: str) -> str:
    """A full origin as browsers send it (scheme://host[:port], no path, query or user), lower-cased and without
    the scheme's default port; ValueError otherwise. The allowed origins become the frame's frame-ancestors."""
    text = value.strip()
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        raise ValueError(f"{value!r} is not an origin like https://www.example.com") from None
    if (parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/") or parts.query
            or parts.fragment or parts.username or parts.password or "*" in text or " " in text
            or text.endswith("/")):
        raise ValueError(f"{value!r} is not a full origin: give scheme and host (and port), nothing more, "
                         f"e.g. https://www.example.com")
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    default = {"http": 80, "https": 443}[parts.scheme]
    return f"{parts.scheme}://{host}" + (f":{port}" if port and port != default else "")


Origin = Annotated[Identifier, AfterValidator(normalize_origin)]


def _distinct(values: list[str]) -> list[str]:
    return list(dict.fromkeys(values))


def _color(value: str) -> str:
    if not _COLOR.fullmatch(value):
        raise ValueError(f"{value!r} is not a hex color like #2563eb")
    return value.lower()


class WidgetSettings(Strict):
    """Account settings `widget` (PATCH /v1/account/settings replaces it whole; null removes it)."""
    enabled: StrictBool = Field(False, description="Visitors may open the chat and write.")
    allowedOrigins: Annotated[list[Origin], AfterValidator(_distinct)] = Field(
        [], max_length=MAX_ORIGINS, description="The sites that may embed it, each a full origin "
        "(\"https://www.example.com\", with its port when not the default): the chat frame's frame-ancestors.")
    title: Optional[Identifier] = Field(None, max_length=MAX_TITLE, description="The frame's heading and the "
                                        "launcher's accessible name (default \"Chat with us\").")
    greeting: Optional[str] = Field(None, max_length=MAX_GREETING, description="Shown above a new conversation.")
    color: Annotated[str, AfterValidator(_color)] = Field(DEFAULT_COLOR, description="A hex color, #rrggbb.")
    requireIdentity: StrictBool = Field(False, description="Only visitors identified with a valid hash may write.")


def configured(settings: Mapping[str, Any] | None) -> JSONObject:
    """The account's widget settings with their defaults (a widget never configured is disabled)."""
    return WidgetSettings.model_validate((settings or {}).get(SETTING) or {}).model_dump()


def from_form(form: Mapping[str, Any]) -> JSONObject:
    """The Settings page's form (text fields, checkboxes as booleans, origins one a line) as the setting's
    value; Invalid naming the field."""
    value = {"enabled": form["enabled"], "requireIdentity": form["requireIdentity"],
             "allowedOrigins": [line.strip() for line in form["allowedOrigins"].splitlines() if line.strip()],
             "title": form["title"].strip() or None, "greeting": form["greeting"].strip() or None,
             "color": form["color"].strip() or DEFAULT_COLOR}
    try:
        return WidgetSettings.model_validate(value).model_dump()
    except ValidationError as exc:
        raise Invalid(validation_message(exc, "widget")) from None


async def ensure(db: Store, account_id: str) -> Row:
    """The account's widget row, made on first ask."""
    # Made, or found, by the write that reads it: it is there.
    return cast(Row, await store.ensure_widget(db, account_id, new_id("wid"), now_iso()))


def snippet(base_url: str, widget_id: str) -> str:
    return f'<script src="{base_url.rstrip("/")}/widget.js" data-widget="{widget_id}" async></script>'


async def describe(db: Store, base_url: str, account_id: str) -> JSONObject:
    """GET /v1/account/widget: {widgetId, snippet, identitySecretSet}."""
    widget = await ensure(db, account_id)
    return {"widgetId": widget["id"], "snippet": snippet(base_url, widget["id"]),
            "identitySecretSet": widget["identity_secret"] is not None}


async def new_identity_secret(db: Store, box: SecretBox, account_id: str,
                              by: Mapping[str, Any] | None = None) -> dict[str, str]:
    """POST /v1/account/widget/identity-secret: a new secret, shown in this answer only (stored encrypted); the
    previous one stops verifying at once."""
    # One write (it makes the widget's row when there is none): an Idempotency-Key covers a request's first write.
    stored = await store.set_identity_secret(db, account_id, new_id("wid"), box.encrypt(secrets.token_hex(32)),
                                             now_iso(), by=by)
    return {"identitySecret": box.decrypt(stored["secret"])}


def identity_hash(secret: str, user_id: str) -> str:
    """What the business's server computes for identify: hex HMAC-SHA256(identity secret, id)."""
    return hmac.new(secret.encode(), user_id.encode(), hashlib.sha256).hexdigest()


# ---- visitors ---------------------------------------------------------------------------------

HISTORY = 100  # messages a chat shows when it opens
ATTACHMENT_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf")
VISITOR_PER_MINUTE, ADDRESS_PER_MINUTE = 12, 60  # messages a visitor, and an address, may send a minute
LIVE_WAIT = 25.0  # seconds a long-poll waits for a reply (proxies cut longer requests)
# A WebSocket's round: nothing to cut it, so longer, and a thousand idle chats read the table 10x less often.
SOCKET_WAIT = 10 * LIVE_WAIT
# Obvious crawlers never create contacts (a search engine that renders pages may run the widget's script).
_CRAWLER = re.compile(r"bot\b|crawl|spider|slurp|facebookexternalhit|bingpreview|mediapartners", re.IGNORECASE)


class Unavailable(DomainError):
    status, code = 404, "WIDGET_NOT_FOUND"


class IdentityRequired(DomainError):
    status, code = 403, "IDENTITY_REQUIRED"


async def load(db: Store, widget_id: str) -> dict[str, Any]:
    """{account_id, id, identity_secret, settings (the widget's, with defaults), hours (the account's business
    hours, or None)} of an enabled widget; Unavailable otherwise (an unknown id and a disabled widget answer
    alike)."""
    row = await store.widget_by_id(db, widget_id) if re.fullmatch(r"wid_[0-9a-z]{26}", widget_id) else None
    shown = configured(row["settings"]) if row else None
    if row is None or shown is None or not shown["enabled"]:
        raise Unavailable("this chat is not available")
    return {**row, "settings": shown, "hours": schedule_of(row["settings"])}


def public_config(widget: Widget) -> JSONObject:
    """What the chat frame shows before anything is asked: title, greeting, color, whether identity is needed."""
    shown = widget["settings"]
    return {"widgetId": widget["id"], "title": shown["title"] or DEFAULT_TITLE, "greeting": shown["greeting"],
            "color": shown["color"], "requireIdentity": shown["requireIdentity"]}


def seal(box: SecretBox, widget: Widget, visitor: Visitor) -> str:
    """A visitor's opaque token: {"v": "vis_…"} (anonymous) or {"u": id, "e": email, "n": name} (verified),
    sealed (encrypted and authenticated) for this widget."""
    return box.encrypt(json.dumps({"w": widget["id"], **visitor}, separators=(",", ":")))


def unseal(box: SecretBox, widget: Widget, token: str | None) -> Visitor | None:
    """The visitor a token of this widget names, or None (no token, a forged or another widget's one)."""
    if not token or len(token) > 2000:
        return None
    try:
        visitor = json.loads(box.decrypt(token))
    except (InvalidToken, ValueError, TypeError):
        return None
    return visitor if isinstance(visitor, dict) and visitor.pop("w", None) == widget["id"] else None


def visitor_from_id(box: SecretBox, widget: Widget, token: str | None) -> str | None:
    """The fromId of the visitor a token of this widget names, or None (a live socket's typing is theirs)."""
    visitor = unseal(box, widget, token)
    return from_id(visitor) if visitor is not None else None


def from_id(visitor: Visitor) -> str:
    """The visitor's fromId: one per verified id (so two browsers of one person are one contact), else one per
    anonymous visitor."""
    return f"web:id:{visitor['u']}" if "u" in visitor else f"web:{visitor['v']}"


def visitor_message(services: Services, message: Mapping[str, Any]) -> JSONObject:
    """A message as the visitor sees it: who wrote it (them, or the business), its text and attachment (a signed
    link), never which agent or any id but the message's. message: a stored row or the API's form."""
    if "createdAt" in message:
        created, shown, kind = message["createdAt"], message["media"], message["messageType"]
    else:
        created, kind = message["created_at"], message["message_type"]
        shown = media.public_media(services, message["media_url"], message["media_content_type"])
    return {"id": message["id"], "mine": message["direction"] == "inbound", "author": message["author"],
            "body": message["body"], "media": shown, "createdAt": created, "csat": kind == csat.MESSAGE_TYPE}


async def history(services: Services, widget: Widget, token: str | None) -> JSONObject:
    """GET /widget/{id}/messages: {messages (oldest first), cursor (where live updates resume), verified}. A visitor
    who never wrote has none; the cursor is read first, so a message committed meanwhile may come twice (the
    frame keeps one per id), never not at all."""
    cursor = await event_stream.head(services, widget["account_id"])
    visitor = unseal(services.box, widget, token)
    messages: list[JSONObject] = []
    ask: Row | None = None
    if visitor is not None:
        contact_id = await store.visitor_contact_id(services.db, widget["account_id"], from_id(visitor))
        if contact_id is not None:
            messages = [visitor_message(services, m) for m in await store.visitor_messages(
                services.db, widget["account_id"], contact_id, HISTORY)]
            await visitor_mail.shown(services, widget["account_id"], messages, now_iso())  # no mail for these
            ask = await csat.open_ask(services.db, widget["account_id"], contact_id)
    return {"messages": messages, "cursor": cursor, "verified": visitor is not None and "u" in visitor,
            "csat": ask and {"messageId": ask["message_id"], "question": ask["question"]},
            **availability(widget, sla.clock(services)())}


async def answer_csat(services: Services, widget: Widget, token: str | None, rating: object,
                      comment: object) -> JSONObject:
    """POST /widget/{id}/csat: the visitor's answer to the CSAT question their chat shows (services/csat.py).
    Invalid naming rating or comment, Forbidden without a visitor, CSAT_CLOSED when no question is open."""
    csat.checked_answer(rating, comment)
    visitor = unseal(services.box, widget, token)
    if visitor is None:
        raise Forbidden("no visitor: only the chat that was asked can answer")
    contact_id = await store.visitor_contact_id(services.db, widget["account_id"], from_id(visitor))
    await csat.answer_open_ask(services.db, widget["account_id"], contact_id, rating, comment)
    return {"answered": True}


def availability(widget: Widget, now: datetime) -> JSONObject:
    """Whether the business is open at now (its business hours; none: always), and when closed the next opening
    as an ISO time and as the frame's line says it, in the account's zone ("Mon 9:00 (Europe/Berlin)")."""
    schedule = widget["hours"]
    open_now, _, opens = schedule.state(now) if schedule is not None else (True, None, None)
    return {"openNow": open_now, "nextOpenAt": iso_or_none(opens),
            "replyFrom": business_hours.short_opening(schedule, opens, now) if opens else None}


async def identify(services: Services, widget: Widget, token: str | None, *, user_id: str | None,
                   email: str | None = None, name: str | None = None, hash: str | None) -> JSONObject:
    """POST /widget/{id}/identify: a token for this verified id when hash is hex HMAC-SHA256(identity secret, id)
    (constant-time compare); otherwise nothing is bound and the visitor keeps the token it had. Returns {verified,
    token}."""
    user_id = (user_id or "").strip()
    if not user_id or len(user_id) > MAX_IDENTITY:
        raise Invalid(f"id is required: 1 to {MAX_IDENTITY} characters", field="id")
    for field, value in (("email", email), ("name", name)):
        if value is not None and len(value) > MAX_IDENTITY:
            raise Invalid(f"{field} is at most {MAX_IDENTITY} characters", field=field)
    if email:
        normalize_email(email, field="email")
    secret = widget["identity_secret"] and services.box.decrypt(widget["identity_secret"])
    expected = identity_hash(secret, user_id) if secret else None
    if expected is None or not hmac.compare_digest(expected.encode(), (hash or "").strip().lower().encode()):
        return {"verified": False, "token": token if unseal(services.box, widget, token) else None}
    visitor = {"u": user_id, **({"e": email} if email else {}), **({"n": name.strip()} if name and name.strip() else {})}
    before = unseal(services.box, widget, token)
    if before is not None and "v" in before:
        await _keep_the_anonymous_chat(services, widget, before, visitor)
    return {"verified": True, "token": seal(services.box, widget, visitor)}


async def _keep_the_anonymous_chat(services: Services, widget: Widget, anonymous: Visitor,
                                   identified: Visitor) -> None:
    """An anonymous visitor who wrote identifies: their chat goes with them. Their contact becomes the id's (the
    id's first sight), or is merged into the id's contact (its fields kept where both have one)."""
    account_id = widget["account_id"]
    chat = await store.visitor_contact_id(services.db, account_id, from_id(anonymous))
    if chat is None:
        return
    known = await store.add_visitor_identity(services.db, account_id, from_id(identified), chat)
    if known != chat:
        try:
            await contacts.merge_contacts(services.db, account_id, known, chat,
                                          {"email": "this", "phone": "this"})
        except DomainError as exc:  # merged or erased meanwhile: the identify stands, the old chat stays apart
            log.warning("widget identify: the anonymous chat was not merged (%s)", exc)


async def give_email(services: Services, widget: Widget, token: str | None, email: object) -> JSONObject:
    """POST /widget/{id}/email: the email a visitor leaves (outside hours, so the business can answer there).
    Kept in their token, so their first message makes their contact with it (nothing is stored before the
    visitor writes); a visitor who wrote already has it on their contact at once when the contact has none and
    no other contact has it (the rule of inbound messages: fill blanks, never take another's). Returns {email,
    token}; Invalid naming email for a bad one."""
    if not isinstance(email, str) or len(email) > MAX_IDENTITY:
        raise Invalid(f"email must be an email address of at most {MAX_IDENTITY} characters", field="email")
    email = normalize_email(email, field="email")
    visitor = unseal(services.box, widget, token) or {"v": new_id("vis")}
    visitor["e"] = email
    contact_id = await store.visitor_contact_id(services.db, widget["account_id"], from_id(visitor))
    if contact_id is not None:  # they wrote already (else nothing is written, not even a rate limit's count)
        allowed, headers = await services.limiter.hit_shared(f"widget-visitor:{from_id(visitor)}",
                                                             VISITOR_PER_MINUTE)
        if not allowed:
            raise RateLimited(f"Too many tries. Please wait {headers['Retry-After']} seconds.",
                              headers={"Retry-After": headers["Retry-After"]})
        await store.fill_visitor_email(services.db, widget["account_id"], contact_id, email)
    return {"email": email, "token": seal(services.box, widget, visitor)}


async def send(services: Services, widget: Widget, token: str | None, *, body: object, honeypot: str | None = None,
               remote_ip: str | None, user_agent: str | None, media_url: str | None = None,
               media_content_type: str | None = None) -> tuple[JSONObject, Message | None]:
    """POST /widget/{id}/messages: the visitor's message, an inbound message of channel web (its first makes the
    visitor and their contact), with an attachment (an image or a PDF, as a data: URL, sniffed and size-limited
    as other media). Returns ({message, token}, the stored message for after_inbound, or None when the
    honeypot was filled: then nothing is stored and the answer looks the same to a bot)."""
    text = body if isinstance(body, str) else None
    if text is None or not text.strip():
        raise Invalid("body is required", field="body")
    if len(text) > MAX_BODY:
        raise Invalid(f"body is too long: at most {MAX_BODY} characters", field="body")
    if media_url is not None:
        if not media_url.startswith("data:"):
            raise Invalid("mediaUrl must be the file itself, as a data: URL", field="mediaUrl")
        if (media_content_type or "").split(";")[0].strip().lower() not in ATTACHMENT_TYPES:
            raise Invalid(f"mediaContentType must be one of {', '.join(ATTACHMENT_TYPES)}", field="mediaContentType")
    if _CRAWLER.search(user_agent or ""):
        raise Forbidden("crawlers cannot write in the chat")
    visitor = unseal(services.box, widget, token)
    if widget["settings"]["requireIdentity"] and (visitor is None or "u" not in visitor):
        raise IdentityRequired("sign in on this site to chat with us: this chat is for identified visitors")
    if honeypot:
        return {"message": None, "token": token}, None
    if visitor is None:
        visitor = {"v": new_id("vis")}
        token = seal(services.box, widget, visitor)
    for key, limit in ((f"widget-visitor:{from_id(visitor)}", VISITOR_PER_MINUTE),
                       (f"widget-address:{widget['id']}:{remote_ip}", ADDRESS_PER_MINUTE)):
        allowed, headers = await services.limiter.hit_shared(key, limit)
        if not allowed:
            raise RateLimited(f"You are sending messages too quickly. Please wait {headers['Retry-After']} seconds.",
                              headers={"Retry-After": headers["Retry-After"]})
    first, last = _split_name(visitor.get("n"))
    message, _ = await messaging.receive_inbound(
        services, widget["account_id"], message_sid=new_id("web"), from_id=from_id(visitor), to_id=widget["id"],
        body=text, channel=CHANNEL, first_name=first, last_name=last, email=visitor.get("e"), media_url=media_url,
        media_content_type=media_content_type)
    return {"message": visitor_message(services, message), "token": token}, message


def _split_name(name: str | None) -> tuple[str | None, str | None]:
    if not name:
        return None, None
    first, _, last = name.partition(" ")
    return first, last or None


async def updates(services: Services, widget: Widget, token: str | None, after: str, wait: float) -> JSONObject:
    """Live updates (GET /widget/{id}/updates, and each round of /widget/{id}/live): the messages of the
    visitor's conversation committed after the cursor, read from the account's event stream
    (services/event_stream.py), waiting up to ``wait`` seconds for one. Returns {messages, cursor}: the cursor
    to resume from, also after a drop (a reply sent while the visitor was away comes then)."""
    account_id = widget["account_id"]
    position = event_stream.decode_cursor(account_id, after)
    visitor = unseal(services.box, widget, token)
    if visitor is None:
        raise Forbidden("no visitor: send a message first")
    hub, deadline = services.hub, time.monotonic() + wait
    contact_id = await store.visitor_contact_id(services.db, account_id, from_id(visitor))
    # Woken by events naming the visitor's contact only (not by every message of the account: with a thousand
    # chats open, each event woke them all, bench/scenarios/widget.py); before their first message, by any.
    woken = await hub.watch(account_id, mention=contact_id)
    try:
        while True:
            if contact_id is None:  # made by the visitor's first message (merged into another: that one)
                contact_id = woken.mention = await store.visitor_contact_id(services.db, account_id,
                                                                            from_id(visitor))
            # Visitors waiting at one position (every open chat of the account, after a commit) share one read.
            result = await event_stream.shared_page(services, account_id, position, _MESSAGE_SOURCES,
                                                    event_stream.MAX_LIMIT)
            position = event_stream.decode_cursor(account_id, result["nextCursor"])
            mine = [visitor_message(services, e["data"]) for e in result["data"]
                    if e["data"]["contactId"] == contact_id and e["data"]["channel"] == CHANNEL]
            remaining = deadline - time.monotonic()
            if mine:
                await visitor_mail.shown(services, account_id, mine, now_iso())  # the chat shows them: no mail
            if mine or remaining <= 0 or hub.stopping:
                return {"messages": mine, "cursor": result["nextCursor"]}
            if result["data"]:
                continue  # a full page of others' events: read on before waiting
            if await woken.wait(remaining):
                # Woken by an event naming the contact: if none of it is a message for the visitor, the contact
                # may have been merged into another (contact.merged names both): look it up again.
                contact_id = None
            woken.clear()
    finally:
        hub.unwatch(account_id, woken)


_MESSAGE_SOURCES = event_stream.SOURCES["message.created"]


def parse_wait(text: str | None) -> float:
    """?wait= of the long-poll: seconds, 0-30 (default LIVE_WAIT); Invalid naming wait otherwise."""
    if text is None:
        return LIVE_WAIT
    try:
        value = float(text) if text.isascii() and len(text) <= 8 else -1
    except ValueError:
        value = -1
    if not 0 <= value <= event_stream.MAX_WAIT:
        raise Invalid(f"wait must be a number of seconds from 0 to {event_stream.MAX_WAIT}", field="wait")
    return value
