"""Placeholders ({{firstName}} ...) in texts sent to a contact: campaign bodies, canned replies, the bot's
answers. One parser refuses the same unknown placeholders everywhere, one renderer fills them for a contact."""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from common.errors import Invalid

# {{firstName}}, {{ lastName }} ...: a missing value is empty. Any other {{name}} is refused (400) at
# creation, so that a typo such as {{firstname}} is caught before thousands of messages carry it;
# single braces are plain text.
PLACEHOLDER = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
FIELDS = {"firstName": "first_name", "lastName": "last_name", "email": "email", "phone": "phone"}


def placeholder_parts(text: str, field: str = "body") -> list[str]:
    """The text as [text, field, text, field, ..., text] (fields are contact columns); Invalid naming `field`
    for an unknown placeholder. Campaigns, canned replies and the bot's answers all read placeholders so."""
    parts = PLACEHOLDER.split(text)
    for i in range(1, len(parts), 2):
        if parts[i] not in FIELDS:
            raise Invalid(f"{field} has an unknown placeholder {{{{{parts[i]}}}}}; the placeholders are "
                          + ", ".join(f"{{{{{name}}}}}" for name in FIELDS), field=field)
        parts[i] = FIELDS[parts[i]]
    return parts


def compile_body(body: str) -> list[str]:
    """The body as placeholder_parts; Invalid naming the field for an unknown placeholder or a body that is
    only placeholders and blanks."""
    parts = placeholder_parts(body)
    if not "".join(parts[0::2]).strip():
        raise Invalid("body needs some text besides its placeholders", field="body")
    return parts


def render(parts: Sequence[str], contact: Mapping[str, Any]) -> str:
    """The body personalised for one contact (a row with first_name, last_name, email, phone)."""
    return "".join(part if i % 2 == 0 else (contact[part] or "") for i, part in enumerate(parts))


def fill(text: str, contact: Mapping[str, Any]) -> str:
    """A text with its placeholders filled for one contact; as written when it has one that is unknown
    (a text saved before placeholders were checked is sent as it was, never refused at sending time)."""
    try:
        return render(placeholder_parts(text), contact)
    except Invalid:
        return text
