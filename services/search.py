"""Search over message text (GET /v1/search, the inbox's "Search messages"): what a query means, and a snippet of
each message found around its match.

A query's words (split at white space) must each occur in the message, without regard to case, anywhere in it: a
prefix finds the longer word, and text written without spaces (Chinese, Japanese, Thai...) is found by any 2+
characters of it. Words of one character are left out (they would match nearly everything). A query that is a
phone number in any spelling (digits and the separators ' ()+-./' only, 3+ digits) is compared with the message's
text with those separators taken out: "4155550199" finds "+1 (415) 555-0199" and "415.555.0199". One written with
its country code ("+1 415 555 0199") is searched by its national number, so it finds the number written without
the code too ("415-555-0199")."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import phonenumbers

from common.errors import Invalid
from services.lists import decode_cursor, encode_cursor, parse_limit
from storage import search as store
from storage.interface import Store

MAX_QUERY_LENGTH = 200
MAX_TERMS = 10
SNIPPET_BEFORE, SNIPPET_AFTER = 60, 100  # characters of the body shown around the match


def parse_query(q: str | None) -> tuple[list[str], str | None]:
    """(terms, digits) for the storage search: terms (2+ characters each, at most MAX_TERMS) or, for a phone
    number, digits. Invalid, naming q, for a missing, blank, too long or too short query."""
    q = (q or "").strip()
    if not q:
        raise Invalid("q is required: the text to search for", field="q")
    if "\x00" in q:  # no message holds one (PostgreSQL's text cannot), and its driver refuses it
        raise Invalid("q cannot contain a NUL character", field="q")
    if len(q) > MAX_QUERY_LENGTH:
        raise Invalid(f"q is longer than {MAX_QUERY_LENGTH} characters", field="q")
    digits = q.translate(_NO_SEPARATORS)
    if len(digits) >= 3 and digits.isascii() and digits.isdigit():
        return [], _national(q) or digits
    terms = list(dict.fromkeys(word for word in q.split() if len(word) >= 2))
    if not terms:
        raise Invalid("q needs a word of at least 2 characters", field="q")
    if len(terms) > MAX_TERMS:
        raise Invalid(f"q has more than {MAX_TERMS} words", field="q")
    return terms, None


_NO_SEPARATORS = str.maketrans("", "", store.SEPARATORS)


def _national(q: str) -> str | None:
    """The national number of a query written with a country code (+…), or None."""
    if not q.startswith("+"):
        return None
    try:
        number = phonenumbers.parse(q, None)
    except phonenumbers.NumberParseException:
        return None
    return phonenumbers.national_significant_number(number) if phonenumbers.is_possible_number(number) else None


def match_span(body: str, terms: Sequence[str], digits: str | None) -> tuple[int, int] | None:
    """(start, end) of the first match of the query in body, or None (a term split over a line break, say)."""
    if digits:
        kept = [i for i, c in enumerate(body) if c not in store.SEPARATORS]
        at = "".join(body[i] for i in kept).find(digits)
        return (kept[at], kept[at + len(digits) - 1] + 1) if at >= 0 else None
    folded = body.casefold()
    found = [(at, at + len(t)) for t in terms if (at := folded.find(t.casefold())) >= 0]
    return min(found) if found else None


def snippet(body: str, terms: Sequence[str], digits: str | None) -> str:
    """The part of body around its first match (whole, when short), on one line, with "…" where it was cut."""
    span = match_span(body, terms, digits) or (0, 0)
    start = max(0, span[0] - SNIPPET_BEFORE)
    end = min(len(body), max(span[1], start) + SNIPPET_AFTER)
    text = " ".join(body[start:end].split())
    return ("…" if start > 0 else "") + text + ("…" if end < len(body) else "")


def highlighted(text: str, terms: Sequence[str], digits: str | None) -> list[tuple[str, bool]]:
    """text as [(part, matched)] with every match of the query marked, for a page to show escaped."""
    spans, at = [], 0
    while (span := match_span(text[at:], terms, digits)) is not None and span[1] > span[0]:
        spans.append((at + span[0], at + span[1]))
        at += span[1]
    parts, at = [], 0
    for start, end in spans:
        parts += [(text[at:start], False), (text[start:end], True)]
        at = end
    return [p for p in parts + [(text[at:], False)] if p[0]]


async def search_messages(db: Store, account_id: str, q: str | None, *, limit: str | None = None, cursor: str | None = None) -> dict[str, Any]:
    """{data: [{messageId, contactId, snippet, createdAt}], nextCursor}: the account's messages matching q, newest
    first. Invalid naming q, limit or cursor."""
    terms, digits = parse_query(q)
    count = parse_limit(limit)
    before = decode_cursor(cursor)
    try:
        rows = await store.search_messages(db, account_id, terms, digits, before, count + 1)
    except ValueError:  # a position this database never gives
        raise Invalid("cursor is not valid: pass the nextCursor of a previous page unchanged", field="cursor") from None
    more = len(rows) > count
    rows = rows[:count]
    return {"data": [{"messageId": r["id"], "contactId": r["contact_id"], "snippet": snippet(r["body"], terms, digits),
                      "createdAt": r["created_at"]} for r in rows],
            "nextCursor": encode_cursor(rows[-1]["position"]) if more else None}


async def search_for_page(db: Store, account_id: str, q: str | None, *, cursor: str | None = None) -> dict[str, Any]:
    """search_messages for the inbox's results page: each hit also has parts, its snippet as [(text, matched)]."""
    terms, digits = parse_query(q)
    results = await search_messages(db, account_id, q, cursor=cursor)
    for hit in results["data"]:
        hit["parts"] = highlighted(hit["snippet"], terms, digits)
    return results
