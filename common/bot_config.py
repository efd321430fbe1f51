"""The bot's effective configuration for a message (services/bot_settings.py validates and stores the settings
object): the defaults, then the account's keys, then those of the message's campaign. Pure, no I/O: the writer's
transactions ask it (whether the bot answers an inbound message, how long a person's reply pauses it), as do the
services."""
from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

DEFAULTS: dict[str, object] = {"active": False, "greeting": None, "fallback": None, "rules": [], "handoffKeywords": [],
            "handoffMessage": None, "provider": None, "pauseMinutesAfterHumanReply": 30}
KEY = "apiKeyEncrypted"  # where the stored object keeps the provider key (Fernet, services/secretbox.py)
# New on every save of the bot (never shown): the compiled keyword matchers are kept per version.
VERSION = "version"


def same_origin(a: str | None, b: str | None) -> bool:
    """Whether two URLs share scheme, host and port; a URL that does not parse shares nothing."""
    try:
        pa, pb = urlsplit(a or ""), urlsplit(b or "")
        return (pa.scheme, pa.hostname, pa.port) == (pb.scheme, pb.hostname, pb.port)
    except ValueError:
        return False


def effective(bot: Mapping[str, Any] | None, campaign_id: str | None = None) -> dict[str, Any]:
    """The configuration that answers a message: DEFAULTS, then the account's keys, then those of the
    message's campaign. A campaign's provider overrides the account's field by field, and inherits the
    account's key only while it talks to the same host."""
    config = {**DEFAULTS, **{k: v for k, v in (bot or {}).items() if k not in ("campaigns", VERSION)}}
    override = ((bot or {}).get("campaigns") or {}).get(campaign_id) if campaign_id else None
    version = (bot or {}).get(VERSION)
    # Which compiled keyword matcher answers (services/bot_match.py): one per settings version, and per
    # campaign only for a campaign with keywords of its own.
    own_keywords = bool(override and ("rules" in override or "handoffKeywords" in override))
    config["matcherKey"] = (version, campaign_id if own_keywords else None) if version else None
    for key, value in (override or {}).items():
        if key == "provider" and config.get("provider"):
            inherited = dict(config["provider"])
            if "baseUrl" in value and not same_origin(value["baseUrl"], inherited.get("baseUrl")):
                inherited.pop(KEY, None)
            value = {**inherited, **value}
        config[key] = value
    return config


@functools.lru_cache(maxsize=64)
def active_for(bot_json: str | None, campaign_id: str | None) -> bool:
    """Whether the account's bot is active for a message of this campaign (None: no campaign). bot_json: the
    account's stored bot as JSON text, as the inbound write read it (None when it has none: no parsing). Kept
    per (text, campaign): every inbound write asks, and the text changes only when the bot is saved."""
    if not bot_json:
        return False
    return bool(effective(json.loads(bot_json), campaign_id)["active"])
