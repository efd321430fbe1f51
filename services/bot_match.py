"""Keyword matching for the bot (issue 18, item 1): which handoff keyword or rule a message matches, by one
Aho–Corasick automaton per configuration (pyahocorasick), built once per settings version and campaign, not
per message. One pass over the folded message finds every keyword occurrence; the work is bounded by the
limits of services/bot_settings.py (keywords per configuration, keyword length) and by MAX_MATCHED_CHARS.

A keyword matches as a whole word: no word character (Unicode \\w) right before or after it, except next to
a character of a script written without spaces between words (CJK, Thai, ...), which has no word boundary.
"""
from __future__ import annotations

import collections
import re
import threading
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

import ahocorasick

from common.bot_config import effective

# The part of a message matched: its first MAX_MATCHED_CHARS characters (then folded). Keywords are looked for
# where a question is asked; a longer message (a pasted document) is matched on its beginning.
MAX_MATCHED_CHARS = 2000
_SPACES = re.compile(r"\s+")
_UNSPACED_SCRIPTS = ("CJK", "HIRAGANA", "KATAKANA", "THAI", "LAO", "KHMER", "MYANMAR", "HALFWIDTH KATAKANA")
HANDOFF = -1  # the "rule index" of the handoff keywords: they come before every rule


def fold(text: str) -> str:
    """Case- and compatibility-folded text with runs of white space as one space, so that "PRICE", "Price"
    and "ｐｒｉｃｅ" match "price", and "opening\\n  hours" matches "opening hours"."""
    return _SPACES.sub(" ", unicodedata.normalize("NFKC", text).casefold())


def _needs_boundary(char: str) -> bool:
    """Scripts written without spaces between words have no word boundary to look for."""
    return not unicodedata.name(char, "").startswith(_UNSPACED_SCRIPTS)


def _is_word(char: str) -> bool:
    return char.isalnum() or char == "_"  # what re's \w is for str


class Matcher:
    """The handoff keywords and the rules' keywords of one configuration, compiled. first(text) gives the
    first match in the bot's order: a handoff keyword (in list order) before any rule, then the first rule
    with a keyword in the text, and of its keywords the first in list order."""

    def __init__(self, handoff_keywords: Sequence[str], rules: Sequence[Mapping[str, Any]]) -> None:
        self._automaton = automaton = ahocorasick.Automaton()
        best: dict[str, tuple[int, int, str]] = {}  # folded keyword -> (rule index, keyword index, keyword as written): the first it stands for
        lists = [(HANDOFF, handoff_keywords)] + [(i, rule["keywords"]) for i, rule in enumerate(rules)]
        for rule_index, keywords in lists:
            for keyword_index, keyword in enumerate(keywords):
                folded = fold(keyword).strip()
                if folded:
                    best.setdefault(folded, (rule_index, keyword_index, keyword))
        for folded, (rule_index, keyword_index, keyword) in best.items():
            automaton.add_word(folded, ((rule_index, keyword_index), len(folded), _needs_boundary(folded[0]),
                                        _needs_boundary(folded[-1]), keyword))
        self.empty = not best
        self.size = sum(map(len, best))
        # The most keywords one position of a text can end (a keyword and those that are its suffixes): with
        # the text's length it bounds a match's work (work_bound), whatever the keywords are.
        self.outputs_per_char = max((sum(k[i:] in best for i in range(len(k))) for k in best), default=0)
        if not self.empty:
            automaton.make_automaton()

    def work_bound(self, body: str) -> int:
        """An upper bound on the keyword occurrences first(body) looks at (each costs about what a character
        of the scan does)."""
        return min(len(body), MAX_MATCHED_CHARS) * (1 + self.outputs_per_char)

    def first(self, body: str) -> tuple[Any, str] | None:
        """(rule index or HANDOFF, keyword as written) of the first match in the message's matched part (its
        first MAX_MATCHED_CHARS characters, folded), or None."""
        if self.empty:
            return None
        text = fold(body[:MAX_MATCHED_CHARS])
        end_of_text = len(text) - 1
        found = None
        for end, (priority, length, before, after, keyword) in self._automaton.iter(text):
            if found is not None and priority >= found[0]:
                continue  # cannot beat what was found already: no boundary to check
            start = end - length + 1
            if before and start > 0 and _is_word(text[start - 1]):
                continue
            if after and end < end_of_text and _is_word(text[end + 1]):
                continue
            found = (priority, keyword)
            if priority == (HANDOFF, 0):
                break  # nothing comes before it
        return (found[0][0], found[1]) if found else None




def cached(config: Mapping[str, Any]) -> Matcher | None:
    """The Matcher already built for an effective configuration (common.bot_config.effective) in this process, by
    its settings version and campaign (config["matcherKey"]), or None."""
    key = config.get("matcherKey")
    if key is None:
        return None
    with _lock:  # matchers are built, and kept, by worker threads too
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
        return hit


def matcher(config: Mapping[str, Any]) -> Matcher:
    """The Matcher of an effective configuration: the cached one, else built now (and kept when the
    configuration is a saved one). Building costs milliseconds at the limits: call it off the event loop."""
    global _cached_chars
    hit = cached(config)
    if hit is not None:
        return hit
    built = Matcher(config["handoffKeywords"], config["rules"])
    key = config.get("matcherKey")
    if key is not None:
        with _lock:
            if key not in _cache:
                _cache[key] = built
                _cached_chars += built.size
            while _cached_chars > MAX_CACHED_CHARS and len(_cache) > 1:
                _cached_chars -= _cache.popitem(last=False)[1].size  # the least recently used
    return built


def prepare(bot: Mapping[str, Any] | None) -> None:
    """Build the matchers of a bot just saved (the account's, and each campaign's with keywords of its own),
    so that its first messages find them ready. Runs in a worker thread (accounts.update_settings)."""
    if not bot:
        return
    for campaign_id in (None, *(bot.get("campaigns") or {})):
        config = effective(bot, campaign_id)
        if campaign_id is None or config["matcherKey"][1] is not None:
            matcher(config)


# Compiled matchers kept, least recently used first, up to MAX_CACHED_CHARS keyword characters in all (about
# 50 bytes of memory each): a configuration at the limits has MAX_TOTAL_KEYWORDS x MAX_KEYWORD_LENGTH.
MAX_CACHED_CHARS = 2_000_000
_cache: collections.OrderedDict = collections.OrderedDict()
_lock = threading.Lock()
_cached_chars = 0
