"""Opt-out keywords (docs/design.md#api-decisions "Campaigns"): the account settings, their validation, and matching an
inbound message's whole body. An opted-out contact is skipped by campaigns and not answered by the bot."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from common.errors import Invalid

SETTINGS = {"optOutKeywords": ["STOP", "UNSUBSCRIBE"], "optInKeywords": ["START"]}
MAX_KEYWORDS = 20
MAX_KEYWORD_LENGTH = 32  # so that only bodies this short pay for the check on the inbound path


def validate(changes: Mapping[str, Any], current: Mapping[str, Any]) -> dict[str, Any]:
    """Check optOutKeywords / optInKeywords changes (None restores the default) against each other and the
    current settings; returns the normalized changes (trimmed, duplicates dropped). Invalid names the field."""
    validated: dict[str, list[str] | None] = {}
    for name in SETTINGS:
        if name not in changes:
            continue
        keywords = changes[name]
        if keywords is None:
            validated[name] = None
            continue
        if not isinstance(keywords, list) or not 1 <= len(keywords) <= MAX_KEYWORDS:
            raise Invalid(f"{name} must be a list of 1 to {MAX_KEYWORDS} keywords")
        seen, kept = set(), []
        for i, keyword in enumerate(keywords):
            text = keyword.strip() if isinstance(keyword, str) else ""
            if not text or len(text) > MAX_KEYWORD_LENGTH:
                raise Invalid(f"{name}[{i}] must be 1 to {MAX_KEYWORD_LENGTH} characters, not blank")
            if text.casefold() not in seen:
                seen.add(text.casefold())
                kept.append(text)
        validated[name] = kept
    effective = {name: validated[name] if name in validated else current.get(name) for name in SETTINGS}
    out_words, in_words = (set(k.casefold() for k in (effective[n] or SETTINGS[n])) for n in SETTINGS)
    both = sorted(out_words & in_words)
    if both:
        raise Invalid(f"optInKeywords and optOutKeywords share {', '.join(both)}: a keyword can only do one")
    return validated


def with_defaults(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The settings object as the API shows it: the keyword lists with their defaults filled in."""
    return {**{name: list(value) for name, value in SETTINGS.items()}, **{k: v for k, v in settings.items()
                                                                           if v is not None}}


def might_be_keyword(body: str) -> bool:
    """Cheap pre-check on the inbound path: only a short body can be a keyword."""
    return len(body) <= 4 * MAX_KEYWORD_LENGTH and len(body.strip()) <= MAX_KEYWORD_LENGTH


def match(body: str, opt_out_keywords: Sequence[str] | None, opt_in_keywords: Sequence[str] | None) -> bool | None:
    """True (opt out), False (opt back in) or None: whether the whole trimmed body, case-insensitively, is
    one of the account's keywords (None for a list means its default)."""
    text = body.strip().casefold()
    if text in (k.casefold() for k in opt_out_keywords or SETTINGS["optOutKeywords"]):
        return True
    if text in (k.casefold() for k in opt_in_keywords or SETTINGS["optInKeywords"]):
        return False
    return None
