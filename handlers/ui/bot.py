"""Bot settings page (/bot): the account's bot and each campaign's override, the write-only provider key,
and "Try it" (the dry run). Forms become a merge patch of the `bot` settings object (docs/api.md "Bot"), saved
through the same services as PATCH /v1/account/settings."""
from tornado.web import authenticated

from common.errors import DomainError, Invalid
from handlers.ui_base import UiHandler
from common import placeholders
from services import accounts, bot, bot_provider, bot_settings, credits, handoff

BLANK_RULE_ROWS = 2  # empty rows under the rules, for new ones (no JavaScript needed)
OVERRIDABLE = ("greeting", "fallback", "rules", "handoffKeywords", "provider", "pauseMinutesAfterHumanReply")


def _text(value):
    value = (value or "").strip()
    return value or None


def _number(text):
    """A number typed in a form: None when empty; what cannot be read goes on as typed, so that validation
    names the field."""
    text = (text or "").strip()
    if not text:
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _keywords(text):
    return [k.strip() for k in (text or "").split(",") if k.strip()]


class BotPage(UiHandler):
    role = "admin"

    @property
    def account_id(self):
        return self.current_user["account_id"]

    def field(self, name):
        return self.get_body_argument(name, "")

    async def render_page(self, status=200, error=None, typed=None, result=None, trial=None):
        """typed: {"account": config} or {"campaign": (id, override)} as the failed form had it."""
        account = await accounts.get_account(self.services.db, self.account_id)
        stored = bot_settings.public(account["settings"].get("bot")) or {}
        typed = typed or {}
        config = typed.get("account") or {k: v for k, v in stored.items() if k != "campaigns"}
        campaigns = dict(stored.get("campaigns") or {})
        if "campaign" in typed:
            campaign_id, override = typed["campaign"]
            campaigns[campaign_id] = override
        self.render("bot.html", status=status, config=config, campaigns=campaigns,
                    account_type=account["type"], price=await credits.price_per_reply(self.services.db, self.account_id),
                    blank_rows=BLANK_RULE_ROWS, result=result, modes=bot_provider.MODES, handoff_default=handoff.DEFAULT_MESSAGE,
                    placeholders=list(placeholders.FIELDS), trial=trial or {}, flashes=[{"kind": "error", "text": error}] if error else [])

    def parse_config(self, overridable=False):
        """The form's configuration as a bot object: every key, or (a campaign) the overridden ones, the others
        null (a merge patch that replaces the override). apiKey only when typed or cleared."""
        config = {"greeting": _text(self.field("greeting")), "fallback": _text(self.field("fallback")),
                  "handoffKeywords": _keywords(self.field("handoffKeywords")),
                  "pauseMinutesAfterHumanReply": _number(self.field("pauseMinutesAfterHumanReply"))}
        handoff_message = self.get_body_argument("handoffMessage", None)  # the account's form only
        if handoff_message is not None:
            config["handoffMessage"] = handoff_message.strip()  # empty: send nothing on a handoff
        if overridable:
            for name in ("greeting", "fallback"):  # overridden with nothing: "" turns the account's off
                config[name] = config[name] or ""
        rules = []
        rows = self.field("rule_rows")
        for index in range(min(int(rows), bot_settings.MAX_RULES + BLANK_RULE_ROWS) if rows.isdigit() else 0):
            keywords = _keywords(self.field(f"rules-{index}-keywords"))
            answer = _text(self.field(f"rules-{index}-answer"))
            if keywords or answer:
                rules.append({"keywords": keywords, "answer": answer or ""})
        config["rules"] = rules
        provider = {name: _text(self.field(f"provider-{name}")) for name in ("baseUrl", "model", "systemPrompt")}
        provider["timeoutSeconds"] = _number(self.field("provider-timeoutSeconds"))
        provider["mode"] = _text(self.field("provider-mode"))  # empty: auto (a campaign: the account's)
        key = self.field("provider-apiKey").strip()
        if key:
            provider["apiKey"] = key
        elif self.field("provider-clearKey"):
            provider["apiKey"] = None
        config["provider"] = provider if (overridable or provider["baseUrl"] or provider["model"]) else None
        if overridable:
            active = self.field("active")
            config = {"active": {"on": True, "off": False}.get(active),
                      **{name: config[name] if self.field(f"override-{name}") else None for name in OVERRIDABLE}}
        else:
            config["active"] = bool(self.field("active"))
        return config

    async def save(self, patch, typed, done, anchor):
        """Validate like PATCH /v1/account/settings, store, and redirect with a message (or re-render)."""
        try:
            patch = bot_settings.validate_patch(patch)
            changes, warnings = await accounts.validate_settings_changes(
                {"bot": patch}, allow_private=self.application.settings_obj.allow_private_webhooks)
            await accounts.update_settings(self.services.db, self.account_id, changes, box=self.services.box,
                                           by=self.actor)
        except Invalid as exc:
            await self.render_page(status=400, error=exc.message, typed=typed)
            return
        self.flash_saved(done, warnings)
        self.redirect(f"/bot#{anchor}", status=303)


def _shown(config):
    """A parsed form as the page shows it again: the typed key never goes back into the page."""
    if isinstance(config.get("provider"), dict):
        config = {**config, "provider": {k: v for k, v in config["provider"].items() if k != "apiKey"}}
    return {k: v for k, v in config.items() if v is not None}


class BotHandler(BotPage):
    @authenticated
    async def get(self):
        await self.render_page()


class BotAccountHandler(BotPage):
    """Save the account's bot (the campaigns are left as they are)."""

    @authenticated
    async def post(self):
        # Keys left empty are removed (their defaults apply); the provider key is kept unless typed or cleared.
        config = self.parse_config()
        await self.save(config, {"account": _shown(config)}, "Bot settings saved.", "account-bot")


class BotCampaignHandler(BotPage):
    """Add a campaign override, save one, or remove one (campaignId in the form, any text)."""

    @authenticated
    async def post(self):
        campaign_id = self.field("campaignId").strip()
        action = self.field("action")
        if not campaign_id:
            await self.render_page(status=400, error="campaignId is required")
            return
        anchor = f"campaign-{campaign_id}"
        if action == "remove":
            await self.save({"campaigns": {campaign_id: None}}, {}, f"Campaign {campaign_id} removed.", "campaigns")
        elif action == "add":
            await self.save({"campaigns": {campaign_id: {}}}, {}, f"Campaign {campaign_id} added: set what differs "
                                                                  "from the account's bot.", anchor)
        else:
            override = self.parse_config(overridable=True)
            await self.save({"campaigns": {campaign_id: override}}, {"campaign": (campaign_id, _shown(override))},
                            f"Campaign {campaign_id} saved.", anchor)


class BotTryHandler(BotPage):
    """Try it: the dry run, rendered on the page (sends and spends nothing)."""

    @authenticated
    async def post(self):
        trial = {"body": self.field("body"), "campaignId": _text(self.field("campaignId")),
                 "contactId": _text(self.field("contactId")), "firstMessage": bool(self.field("firstMessage"))}
        try:
            result = await bot.dry_run(self.services, self.account_id, body=trial["body"],
                                       campaign_id=trial["campaignId"], contact_id=trial["contactId"],
                                       first_message=trial["firstMessage"] or None)
        except DomainError as exc:
            await self.render_page(status=exc.status, error=exc.message, trial=trial)
            return
        await self.render_page(result=result, trial=trial)
