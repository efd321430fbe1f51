"""The bot's settings object (docs/design.md#api-decisions "Bot"): its pydantic model, how a PATCH merges into the stored
object and the public view (the provider key is write-only); the effective configuration for a message is
common/bot_config.py's.

PATCH semantics (docs/api.md "Bot"): the `bot` object of PATCH /v1/account/settings is a JSON Merge Patch
(RFC 7386) of the stored one: objects merge key by key, null removes a key, arrays (rules,
handoffKeywords) and scalars replace. So a PATCH that changes only the rules keeps the provider and its
key, and `"bot": null` removes the whole bot. The stored object keeps the provider key encrypted under
`apiKeyEncrypted`; reads show `apiKeySet` instead.
"""
from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Annotated, Any, Literal, Optional, cast

import pydantic
from pydantic import (AfterValidator, BeforeValidator, Field, StrictBool, StringConstraints, ValidationInfo,
                      field_validator)
from pydantic.json_schema import SkipJsonSchema

from common.bot_config import KEY, VERSION, effective, same_origin
from common.errors import Invalid
from common.validation import NOT_BLANK, Identifier, IdentifierNotBlank, Strict, validation_message, validated_patch
from common import placeholders
from services import bot_provider
from services.context import JSONObject
from services.secretbox import SecretBox

# Keyword limits (issue 18, item 1): they bound the bot's matching (services/bot_match.py) and its compiled
# size. Checked when the settings are saved, each 400 naming the field.
MAX_RULES = 200
MAX_KEYWORDS = 50          # per rule, and handoff keywords
MAX_KEYWORD_LENGTH = 100   # characters
MAX_TOTAL_KEYWORDS = 1000  # of one configuration (the account's, or a campaign's): its rules' plus handoff
MAX_TEXT = 4000            # a greeting, a fallback, a rule's answer
MAX_SYSTEM_PROMPT = 20000
MAX_CAMPAIGNS = 200
DEFAULT_TIMEOUT_SECONDS = 20.0
PRICE = "creditsPerReply"  # once a bot setting, now the agency's (accounts.credits_per_reply)
PRICE_REFUSED = ("creditsPerReply is set by the agency, not by the account itself (the agency's "
                 "PATCH /v1/subaccounts/{id} with {\"creditsPerReply\": n}, or its Agency pages)")


def _not_blank(value: str | None) -> str | None:
    if value is not None and not value.strip():
        raise ValueError("must not be empty or whitespace-only")
    return value.strip() if value is not None else value


def _a_number(value: object) -> object:
    """JSON numbers only: pydantic's lax mode would read true as 1 and "30" as 30."""
    if isinstance(value, (bool, str)):
        raise ValueError("must be a number")
    return value


Number = BeforeValidator(_a_number)


def _known_placeholders(text: str | None, info: ValidationInfo) -> str | None:
    """An answer's placeholders are a campaign's ({{firstName}} ...): an unknown one is refused at save,
    named by its field (bot.rules[0].answer), not found by a customer."""
    if text is not None:
        try:
            placeholders.placeholder_parts(text, field=cast(str, info.field_name))  # a field's validator: named
        except Invalid as exc:
            raise ValueError(exc.message) from None
    return text


# Greeting, fallback, rule answers and the handoff message: sent to a contact with its placeholders filled.
AnswerText = Annotated[str, Field(max_length=MAX_TEXT), AfterValidator(_known_placeholders)]
Keyword = Annotated[IdentifierNotBlank, StringConstraints(max_length=MAX_KEYWORD_LENGTH), AfterValidator(_not_blank)]
CampaignId = Annotated[Identifier, StringConstraints(min_length=1, max_length=200)]


class Rule(Strict):
    """Answers when one of its keywords occurs in the message as a word (case-insensitive)."""
    keywords: list[Keyword] = Field(min_length=1, max_length=MAX_KEYWORDS,
                                    description="Words or phrases, matched as whole words, case-insensitively.")
    answer: AnswerText = Field(json_schema_extra=NOT_BLANK)  # type: ignore[arg-type]  # a plain dict is a JsonDict
    handoff: Optional[StrictBool] = Field(None, description=(
        "True: the answer is sent and the conversation goes to a person, like a handoff keyword."))

    @field_validator("answer")
    @classmethod
    def _answer(cls, answer: str) -> str | None:
        return _not_blank(answer)


# Request and response models are kept apart (issue 36 item 15): a write takes the provider key and refuses
# apiKeySet, which only reads show; a read shows apiKeySet (readOnly) and never the key.

class _ProviderFields(Strict):
    """An OpenAI-compatible chat-completions server: POST {baseUrl}/chat/completions."""
    baseUrl: Optional[str] = Field(None, max_length=2000, description=(
        "e.g. https://api.openai.com/v1, or a local server's /v1 (Ollama, llama.cpp); https and public unless "
        "the server runs with --allow-private-webhooks."))
    model: Optional[IdentifierNotBlank] = Field(None, max_length=200)
    systemPrompt: Optional[str] = Field(None, max_length=MAX_SYSTEM_PROMPT)
    # The bounds inside Annotated, before Number: on the Optional they reached the document as ge and le, which
    # JSON Schema does not know (so the fuzzer never tried a value out of range).
    timeoutSeconds: Optional[Annotated[float, Field(ge=1, le=120), Number]] = Field(
        None, description=f"Default {DEFAULT_TIMEOUT_SECONDS:g}.")
    # Literal of the tuple is Literal of its values (pydantic reads it so); mypy wants them spelled out.
    mode: Optional[Literal[bot_provider.MODES]] = Field(None, description=(  # type: ignore[valid-type]
        "How the answer is asked for (default auto): json_schema, json_object (JSON mode; llama.cpp reads its "
        "schema), or auto: json_schema, then json_object when the server refuses it. A structured answer that "
        "is not usable (example text copied, empty) is followed by one plain-text request. plain: text only, "
        "no handoff by the provider."))

    @field_validator("model")
    @classmethod
    def _model(cls, model: str | None) -> str | None:
        return _not_blank(model)


class Provider(_ProviderFields):
    """The provider as a write sends it."""
    apiKey: Optional[Identifier] = Field(None, min_length=1, max_length=4000, json_schema_extra={"writeOnly": True},
                                         description=(
        "Write-only: sent as a bearer token, stored encrypted, never shown (reads say apiKeySet). Omitted, "
        "the stored key is kept; null removes it."))
    # Declared only to refuse it with a message that says why (a GET answer sent back as it is); not in the
    # document, where it is no property of a request (additionalProperties false).
    apiKeySet: SkipJsonSchema[Optional[object]] = Field(None, exclude=True)

    @field_validator("apiKeySet", mode="before")
    @classmethod
    def _read_only(cls, value: object) -> object:
        raise ValueError("apiKeySet is read-only: reads show whether a key is stored; send apiKey to set one, or "
                         "null to remove it")


class ProviderShown(_ProviderFields):
    """The provider as reads show it: never the key, only whether one is stored."""
    apiKeySet: bool = Field(description="Whether a key is stored.", json_schema_extra={"readOnly": True})


class _BotConfigFields(Strict):
    """One configuration: the account's, or a campaign's override of some of its keys."""
    active: Optional[StrictBool] = Field(None, description="Off (false) by default: an inactive bot is silent.")
    greeting: Optional[AnswerText] = Field(None, description="Sent on a contact's first message.")
    fallback: Optional[AnswerText] = Field(None,
                                    description="Sent when no rule matches and the provider is absent or failed.")
    rules: Optional[list[Rule]] = Field(None, max_length=MAX_RULES, description="The first matching rule answers.")
    handoffKeywords: Optional[list[Keyword]] = Field(None, max_length=MAX_KEYWORDS,
                                                     description="Pause the bot for the contact that writes one.")
    handoffMessage: Optional[AnswerText] = Field(None, description=(
        'Sent to the contact once per handoff (keyword, provider or rule without its own answer). Unset: '
        '"Thanks! A person will answer here soon."; "" sends nothing.'))
    pauseMinutesAfterHumanReply: Optional[Annotated[int, Field(ge=0, le=525600), Number]] = Field(
        None, description="Default 30.")
    # Not a bot setting any more (issue 18 item 4): what a sub-account pays per reply is its agency's to set
    # (PATCH /v1/subaccounts/{id}), so an account's own key cannot make its replies free. Declared only to
    # refuse it with a message that says where it went (400, like any field the schema does not have);
    # null passes, so a client may still remove a value stored before.
    creditsPerReply: SkipJsonSchema[Optional[object]] = Field(None, exclude=True)

    @field_validator("rules")
    @classmethod
    def _rule_keywords(cls, rules: list[Rule] | None) -> list[Rule] | None:
        total = sum(len(rule.keywords) for rule in rules or ())
        if total > MAX_TOTAL_KEYWORDS:
            raise ValueError(f"rules have {total} keywords in all; at most {MAX_TOTAL_KEYWORDS} are allowed "
                             "(with handoffKeywords)")
        return rules

    @field_validator("handoffKeywords")
    @classmethod
    def _all_keywords(cls, keywords: list[str] | None, info: ValidationInfo) -> list[str] | None:
        total = len(keywords or ()) + sum(len(rule.keywords) for rule in info.data.get("rules") or ())
        if total > MAX_TOTAL_KEYWORDS:
            raise ValueError(f"handoffKeywords and the rules have {total} keywords in all; at most "
                             f"{MAX_TOTAL_KEYWORDS} are allowed")
        return keywords

    @field_validator("creditsPerReply", mode="before")
    @classmethod
    def _price_is_the_agencys(cls, value: object) -> object:
        if value is not None:
            raise ValueError(PRICE_REFUSED)
        return value


class BotConfig(_BotConfigFields):
    provider: Optional[Provider] = None


class BotConfigShown(_BotConfigFields):
    provider: Optional[ProviderShown] = None


def _campaigns() -> Any:  # pydantic's Field() is typed Any: it stands in for the field's value
    return Field(None, max_length=MAX_CAMPAIGNS,
                 description="campaignId -> the keys that differ for messages carrying it.")


class BotSettings(BotConfig):
    """The `bot` settings object as a write (PATCH /v1/account/settings) sends it."""
    campaigns: Optional[dict[CampaignId, Optional[BotConfig]]] = _campaigns()


class BotSettingsShown(BotConfigShown):
    """The `bot` settings object as reads show it."""
    campaigns: Optional[dict[CampaignId, Optional[BotConfigShown]]] = _campaigns()


# ---- writing ---------------------------------------------------------------------------------

def _providers(bot: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(path, provider dict) of the account's provider and of each campaign's, for a bot dict."""
    found: list[tuple[str, dict[str, Any]]] = []
    if isinstance(bot.get("provider"), dict):
        found.append(("bot.provider", bot["provider"]))
    for campaign_id, override in (bot.get("campaigns") or {}).items():
        if isinstance(override, dict) and isinstance(override.get("provider"), dict):
            found.append((f"bot.campaigns.{campaign_id}.provider", override["provider"]))
    return found


def validate_patch(patch: object) -> JSONObject | None:
    """A `bot` merge patch given as plain data (the UI's forms) checked against the model, as PATCH
    /v1/account/settings checks its body; returns it as model_dump(exclude_unset=True)."""
    return validated_patch(BotSettings, patch, "bot")


def prepare_patch(patch: JSONObject | None, box: SecretBox) -> JSONObject | None:
    """A validated `bot` merge patch (model_dump(exclude_unset=True) of BotSettings) ready to merge: each
    apiKey encrypted (null stays null: it removes the key)."""
    if patch is None:
        return None
    for _, provider in _providers(patch):
        if "apiKey" in provider:
            key = provider.pop("apiKey")
            provider[KEY] = box.encrypt(key) if key is not None else None
    return patch


def provider_urls(patch: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """(field, url) of every provider baseUrl a patch sets: each is checked like a webhook URL."""
    return [(f"{path}.baseUrl", p["baseUrl"]) for path, p in _providers(patch or {}) if p.get("baseUrl")]


def merge_patch(target: object, patch: object) -> Any:  # JSON: a patch's value, or the merged object
    """RFC 7386 JSON Merge Patch: objects merge, null removes, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def merged(current: Mapping[str, Any] | None, patch: Mapping[str, Any] | None) -> JSONObject | None:
    """The stored bot object after a prepared patch, validated as a whole; None when the patch removes it.
    Raises Invalid naming the field. A stored key is never carried to another host: moving a provider's
    baseUrl elsewhere needs its apiKey sent again (or null)."""
    if patch is None:
        return None
    current = current or {}
    old = dict(_providers(current))
    for path, provider in _providers(patch):
        stored = old.get(path) or {}
        if (stored.get(KEY) and provider.get("baseUrl") and KEY not in provider
                and not same_origin(provider["baseUrl"], stored.get("baseUrl"))):
            raise Invalid(f"{path}.apiKey must be sent again (or null to remove it) when baseUrl moves to another "
                          "host: the stored key is only ever sent to the host it was saved for")
    result = without_price(merge_patch(current, patch))
    result[VERSION] = secrets.token_hex(8)
    if result.get("campaigns") == {}:
        del result["campaigns"]  # the last campaign removed: no empty object left behind
    # Validated without the encrypted keys, which are not part of the public model.
    public_form = public(result)
    try:
        BotSettingsShown.model_validate(public_form)
    except pydantic.ValidationError as exc:
        raise Invalid(validation_message(exc, prefix="bot")) from None
    if public_form.get("provider"):
        _check_complete(public_form["provider"], "bot.provider")
    for campaign_id, override in (result.get("campaigns") or {}).items():
        if override.get("provider"):
            provider = effective(result, campaign_id)["provider"]
            _check_complete(provider, f"bot.campaigns.{campaign_id}.provider")
    return result


def _check_complete(provider: Mapping[str, Any], path: str) -> None:
    for name in ("baseUrl", "model"):
        if not provider.get(name):
            raise Invalid(f"{path}.{name} is required")


# ---- reading ---------------------------------------------------------------------------------

def without_price(bot: Mapping[str, Any] | None) -> Any:  # JSON: the bot object, or what was stored for none
    """The bot object without a creditsPerReply stored before it became the agency's (ignored since)."""
    if not bot:
        return bot
    bot = {k: v for k, v in bot.items() if k != PRICE}
    if bot.get("campaigns"):
        bot["campaigns"] = {cid: {k: v for k, v in (o or {}).items() if k != PRICE} for cid, o in bot["campaigns"].items()}
    return bot


def public(bot: Mapping[str, Any] | None) -> Any:  # JSON: the bot object, or what was stored for none
    """The bot object as reads show it: each provider's key replaced by apiKeySet."""
    if not bot:
        return bot
    bot = without_price(bot)
    out = {k: v for k, v in bot.items() if k not in ("provider", "campaigns", VERSION)}
    if bot.get("provider") is not None:
        out["provider"] = _public_provider(bot["provider"])
    if bot.get("campaigns") is not None:
        out["campaigns"] = {}
        for campaign_id, override in bot["campaigns"].items():
            override = dict(override)
            if override.get("provider") is not None:
                override["provider"] = _public_provider(override["provider"])
            out["campaigns"][campaign_id] = override
    return out


def _public_provider(provider: Mapping[str, Any]) -> JSONObject:
    shown = {k: v for k, v in provider.items() if k not in (KEY, "apiKeySet")}
    shown["apiKeySet"] = bool(provider.get(KEY))
    return shown


def active_anywhere(bot: Mapping[str, Any] | None) -> bool:
    """Whether the bot answers anything: active for the account or for one of its campaigns."""
    if not bot:
        return False
    return bool(bot.get("active")) or any(
        (override or {}).get("active") for override in (bot.get("campaigns") or {}).values())


def is_set(text: str | None) -> bool:
    """A greeting or fallback counts only when it has something to say ("" in a campaign turns it off)."""
    return bool(text and text.strip())
