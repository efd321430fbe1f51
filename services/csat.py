"""CSAT (issue 41; docs/guide.md "Customer satisfaction (CSAT)"): account settings ``csat: {enabled, question}``;
when a person resolves a conversation, its contact is asked once how we did, on the channel they last wrote on.

- The ask is made in the resolution's own transaction (storage/csat.py ask_in_tx): its row in csat_asks and
  its outbound message (author auto, messageType csat) commit with the resolution or not at all, and the outbox
  delivers the message as any reply (retries, other processes' workers). Nothing is left to do after the commit.
- At most one ask per resolution (only a change to resolved asks: resolving a resolved conversation changes
  nothing), and none within ASK_GAP of the contact's previous ask: checked under the contact's lock
  (storage/csat.py), so two processes resolving at once cannot both ask.
- On the website chat widget the chat shows the question with rating buttons 1-5 and a comment box, answered
  over the visitor's API (services/widget.py). Elsewhere the message carries a link to a one-question page,
  /csat/<token>: a random token of which only the SHA-256 is stored; the message as stored (the thread, the API,
  search) shows the link without it, and only the delivery's payload carries it. Answering spends the ask (one
  conditional UPDATE); it dies after ANSWER_DAYS.
- An answer {rating 1-5, comment} is kept on its ask with the contact, the conversation and the agent who had it
  at resolution, and emits csat.submitted {contactId, rating, comment} (event and notification)."""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import date, timedelta
from typing import Annotated, Any

from pydantic import AfterValidator, Field, StrictBool, ValidationError

from common.errors import DomainError, Invalid
from common.ids import now_iso
from common.validation import IdentifierNotBlank, Strict, validation_message
from services import keys, messaging
from services.context import JSONObject
from services.users import author_name
from storage import csat as store
from storage.csat import ANSWER_DAYS, SETTING
from storage.csat import ASK_GAP as ASK_GAP, MESSAGE_TYPE as MESSAGE_TYPE  # the widget's and the cleanup's
from storage.interface import Row, Store

DEFAULT_QUESTION = "How would you rate our help?"
MAX_QUESTION = 300
MAX_COMMENT = 1000
RATINGS = (1, 2, 3, 4, 5)
SATISFIED = 4  # a rating of 4 or 5 counts as satisfied (the CSAT score: their share of the answers)
TOKEN_PATTERN = r"[A-Za-z0-9_-]{20,100}"
NO_AGENT = "No agent (unassigned)"
# A comment keeps its line breaks and tabs; any other C0/C1 control character is refused.
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def _question(value: str) -> str:
    """The question trimmed; ValueError when nothing is left."""
    if not value.strip():
        raise ValueError("question cannot be empty")
    return value.strip()


class CsatSettings(Strict):
    """Account settings `csat` (PATCH /v1/account/settings replaces it whole; null removes it: off)."""
    enabled: StrictBool = Field(False, description="Ask the contact how we did when a person resolves their "
                                                   "conversation (at most once a day per contact).")
    question: Annotated[IdentifierNotBlank, AfterValidator(_question)] = Field(DEFAULT_QUESTION, max_length=MAX_QUESTION,
                                         description=f"The question asked (default \"{DEFAULT_QUESTION}\").")


def configured(value: Mapping[str, Any] | None) -> JSONObject:
    """The stored csat setting with its defaults (never set: disabled)."""
    return CsatSettings.model_validate(value or {}).model_dump()


def validate_setting(value: object) -> JSONObject | None:
    """The csat setting to store from the API's or the form's value (None removes it); Invalid naming the field."""
    if value is None:
        return None
    try:
        return CsatSettings.model_validate(value).model_dump()
    except ValidationError as exc:
        raise Invalid(validation_message(exc, SETTING)) from None


# ---- answering -------------------------------------------------------------------------------------------------

def checked_answer(rating: object, comment: object) -> tuple[int, str | None]:
    """(rating, comment) as stored: rating a whole number 1-5, comment trimmed (None when empty), at most
    MAX_COMMENT characters, no control characters but line breaks and tabs. Invalid naming the field."""
    if isinstance(rating, bool) or not isinstance(rating, int) or rating not in RATINGS:
        raise Invalid("rating must be a whole number from 1 to 5", field="rating")
    if comment is not None:
        if not isinstance(comment, str):
            raise Invalid("comment must be text", field="comment")
        comment = comment.replace("\r\n", "\n").strip()
        if len(comment) > MAX_COMMENT:
            raise Invalid(f"comment is too long: at most {MAX_COMMENT} characters", field="comment")
        found = _CONTROL.search(comment)
        if found:
            raise Invalid(f"comment must not contain control characters (U+{ord(found.group()):04X})",
                          field="comment")
    return rating, comment or None


def rating_of_form(text: str | None) -> int | str | None:
    """A form's rating field as a number when it is one (else as typed: checked_answer names it)."""
    text = (text or "").strip()
    return int(text) if text.isascii() and text.isdigit() and len(text) < 3 else text or None


class AskClosed(DomainError):
    """The page's link was used already, or has expired (410: it will not work again)."""
    status, code = 410, "CSAT_CLOSED"


class AskUnknown(DomainError):
    status, code = 404, "NOT_FOUND"

    def __init__(self) -> None:
        super().__init__("This survey link is not valid.")


async def page(db: Store, token: str | None) -> Row:
    """The one-question page's ask: {question, expires_at}; AskUnknown, or AskClosed (used or expired)."""
    ask = await store.ask_by_token(db, keys.hash_token(token or ""))
    if ask is None:
        raise AskUnknown()
    if ask["answered_at"] is not None:
        raise AskClosed("You have answered this question already. Thank you!")
    if ask["expires_at"] <= now_iso():
        raise AskClosed("This question has expired: it could be answered for "
                        f"{ANSWER_DAYS} days after it was asked.")
    return ask


async def answer_page(db: Store, token: str, rating: object, comment: object) -> None:
    """The page's answer: spends the ask (of two at once, one wins). Invalid naming the field (nothing changes),
    AskUnknown or AskClosed."""
    stars, text = checked_answer(rating, comment)
    await page(db, token)
    if await store.answer_by_token(db, keys.hash_token(token), stars, text, now_iso()) is None:
        await page(db, token)  # answered or expired meanwhile: says which
        raise AskClosed("This question is closed.")


async def open_ask(db: Store, account_id: str, contact_id: str, channel: str = messaging.WEB_CHANNEL) -> Row | None:
    """The contact's open ask on the channel: {id, message_id, question}, or None."""
    return await store.open_ask(db, account_id, contact_id, channel, now_iso())


async def answer_open_ask(db: Store, account_id: str, contact_id: str | None, rating: object, comment: object) -> None:
    """The widget's answer to the contact's open ask; Invalid naming the field, or AskClosed when none is open."""
    stars, text = checked_answer(rating, comment)
    ask = await open_ask(db, account_id, contact_id) if contact_id else None
    if ask is None or await store.answer_ask(db, account_id, ask["id"], stars, text, now_iso()) is None:
        raise AskClosed("There is no question to answer: it was answered already, or has expired.")


# ---- reading ---------------------------------------------------------------------------------------------------

def public_answer(row: Mapping[str, Any]) -> JSONObject:
    """An ask and its answer as a person's data export shows it."""
    return {"channel": row["channel"], "question": row["question"], "askedAt": row["asked_at"],
            "agentUserId": row["agent_user_id"], "answeredAt": row["answered_at"], "rating": row["rating"],
            "comment": row["comment"]}


def score(satisfied: int, answers: int) -> float | None:
    """The CSAT score: the percentage of answers rating 4 or 5 (None without answers)."""
    return round(100 * satisfied / answers, 1) if answers else None


async def report(db: Store, account_ids: Sequence[str], first_day: date, last_day: date) -> JSONObject:
    """Answers per day and per agent over [first_day, last_day] (dates; days in UTC): {"days": {day: [answers,
    satisfied, sum of ratings]}, "agents": {user id or None: [name, answers, satisfied, sum of ratings]}}."""
    rows = await store.report_rows(db, account_ids, first_day.isoformat(), (last_day + timedelta(days=1)).isoformat())
    days: dict[str, list[int]] = {}
    agents: dict[str | None, list[Any]] = {}
    for day, user_id, label, name, rating in rows:
        good = int(rating >= SATISFIED)
        counted = days.setdefault(day, [0, 0, 0])
        counted[0], counted[1], counted[2] = counted[0] + 1, counted[1] + good, counted[2] + rating
        agent = agents.setdefault(user_id, [author_name(label, name=name) if label else NO_AGENT, 0, 0, 0])
        agent[1], agent[2], agent[3] = agent[1] + 1, agent[2] + good, agent[3] + rating
    return {"days": days, "agents": agents}
