"""Secrets kept out of Parley's logs: API keys (pk_…) and webhook signing secrets (whsec_…), whether a
client sent them where they belong (?apiKey=, the headers, which are never logged) or anywhere else in a
URL, plain or percent-encoded, and whatever a log line or a traceback quotes; one-time links' tokens; and
the personal data a contact lookup puts in its query (?phoneNumber=, ?email=)."""
import logging
import re
from urllib.parse import quote, unquote, unquote_plus

from common.one_time_link_kinds import TOKEN_PATH_PATTERN

# services/keys.py: "pk_" + token_urlsafe(32), "whsec_" + base64. Shorter runs (the 10-character key
# prefix an account shows) are not secrets.
_SECRET = re.compile(r"(pk|whsec)_[A-Za-z0-9_\-+/=]{16,}")
_MASK = "***"
# A one-time link's token is a secret too: every kind's (and a CSAT page's), in any case (a mistyped link is no
# less a link).
_ONE_TIME_LINK = re.compile("^(" + TOKEN_PATH_PATTERN + ")[^/?]+", re.IGNORECASE)
# Query parameters whose values never reach a log (compared as decoded and lowercased): the API key, and
# the phone number or email of a contact lookup.
_MASKED_PARAMETERS = frozenset({"apikey", "phonenumber", "email"})


# A run of URL characters that may hold a secret percent-encoded (e.g. a path Tornado quotes in an error).
_ENCODED_RUN = re.compile(r"(?:%[0-9A-Fa-f]{2}|[A-Za-z0-9_\-.~+/=])*%[0-9A-Fa-f]{2}(?:%[0-9A-Fa-f]{2}|[A-Za-z0-9_\-.~+/=])*")


def _plain(text: str) -> str:
    return _SECRET.sub(lambda m: f"{m.group(1)}_{_MASK}", text)


def _encoded(match: re.Match[str]) -> str:
    decoded = unquote_plus(match.group())
    cleaned = _plain(decoded)
    return match.group() if cleaned == decoded else quote(cleaned, safe="/*=&")


def redact(text: str) -> str:
    """Any API key or signing secret in text masked, whether plain or percent-encoded."""
    text = _plain(text)
    return _ENCODED_RUN.sub(_encoded, text) if "%" in text else text


def masked_uri(uri: str) -> str:
    """A request URI (or path) for the log: the value of every apiKey, phoneNumber and email parameter
    (its name in any case or encoding) masked, a one-time link's token, and any key or secret elsewhere."""
    path, sep, query = uri.partition("?")
    decoded = unquote(path)  # /%69nvite/<token> is still a link's token
    if _ONE_TIME_LINK.match(decoded):
        path = _ONE_TIME_LINK.sub(lambda m: m.group(1) + _MASK, decoded)
    pairs = []
    for pair in query.split("&") if sep else ():
        name, eq, value = pair.partition("=")
        masked = unquote_plus(name).strip().lower() in _MASKED_PARAMETERS
        pairs.append(name + eq + (_MASK if masked else value))
    return redact(path + sep + "&".join(pairs))


class RedactingFormatter(logging.Formatter):
    """The whole formatted record (message, arguments, traceback) with secrets masked."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))
