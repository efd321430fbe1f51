"""Settings > Account: the account, its API key (Generate), Custom Channel Webhook, notification URLs,
the webhook signing secret, your name, sign-in email and password. The same services as the API and the CLI do the work."""
import asyncio

from tornado.web import authenticated

from handlers.ui_base import UiHandler, session_key
from handlers.ui.account import render_account
from services import (accounts, agent_mail, assignment, business_hours, csat, email_settings, event_stream, mail_in, mail_out, regions,
                      sla, users, webhook_ping, widget)
from common import email_channel
from common.errors import Conflict, Invalid, NotFound, RateLimited

HOURS_FIELDS = ("timezone", *business_hours.DAYS, "holidays", "holidayCountry", "outsideHoursMessage", *sla.KINDS)
# Every event type of the stream can be subscribed (issue 37); an agency's own only on an agency's page.
AGENCY_NOTIFICATION_EVENTS = ("subaccount.auto_recharge",)
NOTIFICATION_EVENTS = tuple(t for t in event_stream.TYPES if t not in AGENCY_NOTIFICATION_EVENTS)
OVERLAP_HOURS = int(accounts.SECRET_OVERLAP.total_seconds() // 3600)
# Password changes per user: each checks the current password, so they are limited like sign-ins.
PASSWORD_CHANGES_PER_MINUTE = 10


def notification_events(account):
    return NOTIFICATION_EVENTS + (AGENCY_NOTIFICATION_EVENTS if account["type"] == "agency" else ())


class SettingsPage(UiHandler):
    """Renders the settings page; the form handlers re-render it with the error and what was typed."""
    role = "admin"

    async def render_settings(self, status=200, error=None, form=None, webhook_test=None, new_api_key=None, notice=None,
                              profile_form=None, identity_secret=None, email_test=None):
        db = self.services.db
        account = await accounts.get_account(db, self.account_id)
        settings = account["settings"]
        values = {"customChannelWebhookUrl": settings.get("customChannelWebhookUrl", ""), "name": account["name"],
                  "defaultCountry": settings.get("defaultCountry", "")}
        shown = assignment.public_setting(settings.get("assignment"))
        values.update(assignmentMode=shown["mode"], awayAfterMinutes="" if shown["awayAfterMinutes"] is None
                      else str(shown["awayAfterMinutes"]))
        shown = csat.configured(settings.get(csat.SETTING))
        values.update({"csat.enabled": shown["enabled"], "csat.question": shown["question"]})
        for event in notification_events(account):
            values[event] = settings.get("notificationUrls", {}).get(event, "")
        shown = widget.configured(settings)
        values.update({f"widget.{name}": value for name, value in shown.items()},
                      **{"widget.allowedOrigins": "\n".join(shown["allowedOrigins"])})
        hours = business_hours.public(settings.get(business_hours.KEY), sla.clock(self.services)())
        values.update({f"hours.{day}": business_hours.day_text(hours["weekly"].get(day, []))
                       for day in business_hours.DAYS})
        values.update({"hours.timezone": hours["timezone"] or "", "hours.holidays": "\n".join(hours["holidays"]),
                       "hours.holidayCountry": hours["holidayCountry"] or "",
                       "hours.outsideHoursMessage": hours["outsideHoursMessage"] or ""})
        values.update({f"hours.{field}": str((settings.get(sla.KEY) or {}).get(field) or "") for field in sla.KINDS})
        values.update(email_form_values(settings))
        values.update(form or {})
        self.render("settings.html", email_test=email_test, mails=await mail_out.recent(db, self.account_id),
                    mail_import=await mail_in.import_status(db, self.account_id)
                    if email_channel.server(settings, "imap") else None, widget_info=await widget.describe(db, self.application.settings_obj.base_url,
                                                                      self.account_id),
                    status=status, account=account, key=await accounts.get_key_prefix(db, self.account_id),
                    hours=hours, zones=business_hours.zones(), days=business_hours.DAYS,
                    csat_max_question=csat.MAX_QUESTION,
                    values=values, events=notification_events(account),
                    # Built once per process (~90 ms: phonenumbers' locale table), off the event loop.
                    regions=await asyncio.get_running_loop().run_in_executor(None, regions.region_choices),
                    password_min=accounts.MIN_PASSWORD, password_max=accounts.MAX_PASSWORD,
                    allow_private=self.application.settings_obj.allow_private_webhooks, webhook_test=webhook_test,
                    new_api_key=new_api_key, profile_form=profile_form or {}, identity_secret=identity_secret,
                    api_keys=(await accounts.list_keys(db, self.account_id))["data"]
                    if self.current_user["role"] == "owner" else [],
                    flashes=[{"kind": "error", "text": error}] if error else
                    [{"kind": "success", "text": notice}] if notice else [])

    async def save(self, changes, form, done, anchor=""):
        """Validate like PATCH /v1/account/settings, store, and redirect with a message (or re-render)."""
        try:
            changes, warnings = await accounts.validate_settings_changes(
                changes, allow_private=self.application.settings_obj.allow_private_webhooks)
        except Invalid as exc:
            await self.render_settings(status=400, error=exc.message, form=form)
            return
        try:
            await accounts.update_settings(self.services.db, self.account_id, changes, box=self.services.box,
                                           by=self.actor)
        except Invalid as exc:  # checked against what is stored (a merge patch: bot, email)
            await self.render_settings(status=400, error=exc.message, form=form)
            return
        if "email" in changes and self.services.mail_in is not None:
            self.services.mail_in.notify()  # the mailbox's import starts (or restarts with the new settings) now
        self.flash_saved(done, warnings)
        self.redirect("/settings" + anchor, status=303)


class SettingsHandler(SettingsPage):
    @authenticated
    async def get(self):
        await self.render_settings()


class ApiKeyHandler(SettingsPage):
    """Generate: a new key, shown once on the answer to this POST; the old key is dead at once."""
    role = "owner"

    @authenticated
    async def post(self):
        api_key = await accounts.rotate_key(self.services.db, self.services.keys, self.account_id,
                                            keep_session=self.session_id, by=self.actor)
        self.services.hub.disconnect(self.account_id, keep_session=session_key(self))  # the ended sessions' pages
        key = await accounts.get_key_prefix(self.services.db, self.account_id)
        self.render("api_key.html", api_key=api_key, key=key, created=None)


class ApiKeysHandler(SettingsPage):
    """Create a named key beside the others (POST /v1/account/api-keys's service): shown once on this answer."""
    role = "owner"

    @authenticated
    async def post(self):
        try:
            created = await accounts.add_key(self.services.db, self.services.box, self.account_id,
                                             self.get_body_argument("name", ""), by=self.actor)
        except (Invalid, Conflict) as exc:
            await self.render_settings(status=exc.status, error=exc.message)
            return
        self.render("api_key.html", api_key=created["key"], key=None, created=created)


class ApiKeyRevokeHandler(SettingsPage):
    """Revoke one key (DELETE /v1/account/api-keys/{id}'s service): it fails from now on."""
    role = "owner"

    @authenticated
    async def post(self, key_id):
        try:
            revoked = await accounts.revoke_key(self.services.db, self.services.keys, self.account_id, key_id,
                                                by=self.actor)
        except (NotFound, Conflict) as exc:
            await self.render_settings(status=exc.status, error=exc.message)
            return
        self.flash("success", f"API key {revoked['name']} ({revoked['prefix']}…) is revoked.")
        self.redirect("/settings#api-key", status=303)


class AccountNameHandler(SettingsPage):
    """Rename the account (PATCH /v1/account's service): the first one is "Owner" until renamed."""

    @authenticated
    async def post(self):
        name = self.get_body_argument("name", "")
        try:
            account = await accounts.rename(self.services.db, self.account_id, name, by=self.actor)
        except Invalid as exc:
            await self.render_settings(status=400, error=exc.message, form={"name": name})
            return
        self.flash("success", f"The account is now called {account['name']}.")
        self.redirect("/settings", status=303)


class CustomChannelWebhookHandler(SettingsPage):
    @authenticated
    async def post(self):
        url = self.get_body_argument("customChannelWebhookUrl", "").strip()
        await self.save({"customChannelWebhookUrl": url or None}, {"customChannelWebhookUrl": url},
                        "Custom Channel Webhook URL saved." if url else "Custom Channel Webhook URL removed.")


class WebhookTestHandler(SettingsPage):
    """Send test event: the page again, with what the receiver answered the ping (or why there was none)."""

    @authenticated
    async def post(self):
        retry_after = await self.over_a_limit((f"webhook-test:{self.account_id}", self.application.settings_obj.rate_limit))
        if retry_after is not None:
            await self.render_settings(status=429, error=f"Too many test events. Try again in {retry_after} seconds.")
            return
        try:
            result = await webhook_ping.send_test_event(self.services, self.account_id)
        except (Conflict, RateLimited) as exc:
            for name, value in exc.headers.items():
                self.set_header(name, value)
            await self.render_settings(status=exc.status, error=exc.message[:1].upper() + exc.message[1:] + ".")
            return
        await self.render_settings(webhook_test=result)


class DefaultCountryHandler(SettingsPage):
    """The account's default country (issue 43 §9): national numbers typed by people are read in it."""

    @authenticated
    async def post(self):
        code = self.get_body_argument("defaultCountry", "").strip()
        await self.save({"defaultCountry": code or None}, {"defaultCountry": code},
                        f"Default country saved: {code.upper()}." if code
                        else "Default country removed: phone numbers need their country code.")


class WidgetHandler(SettingsPage):
    """The website chat widget's settings (the `widget` setting, replaced whole as PATCH does)."""

    @authenticated
    async def post(self):
        arg = self.get_body_argument
        form = {f"widget.{name}": arg(name, "") for name in ("allowedOrigins", "title", "greeting", "color")}
        form.update({f"widget.{name}": arg(name, "") == "on" for name in ("enabled", "requireIdentity")})
        try:
            value = widget.from_form({name.split(".", 1)[1]: value for name, value in form.items()})
        except Invalid as exc:
            await self.render_settings(status=400, error=exc.message, form=form)
            return
        await self.save({widget.SETTING: value}, form, "Chat widget saved.")


EMAIL_FIELDS = ("address", *(f"{kind}.{name}" for kind in email_settings.KINDS
                              for name in ("host", "port", "security", "username")), "imap.folder")


def email_form_values(settings):
    """Settings > Email's fields from the stored setting: a port or folder left to its default stays empty (so that
    a new security brings its own default port), and never a password (the form says whether one is set)."""
    stored = settings.get(email_channel.SETTING) or {}
    values = {"email.address": stored.get("address") or ""}
    for kind in email_settings.KINDS:
        server = stored.get(kind) or {}
        for name in ("host", "port", "security", "username", "folder"):
            values[f"email.{kind}.{name}"] = "" if server.get(name) is None else str(server[name])
        values[f"email.{kind}.passwordSet"] = bool(server.get(email_settings.KEY))
    return values


class EmailHandler(SettingsPage):
    """The mailbox (the `email` setting, a merge patch as PATCH sends it): an empty password keeps the stored one."""

    @authenticated
    async def post(self):
        arg = self.get_body_argument
        form = {name: arg(name, "") for name in EMAIL_FIELDS}
        form.update({f"{kind}.{name}": arg(f"{kind}.{name}", "") for kind in email_settings.KINDS
                     for name in ("password", "removePassword")})
        shown = {f"email.{name}": value for name, value in form.items() if not name.endswith("assword")}
        try:
            value = email_settings.from_form(form)
        except Invalid as exc:
            await self.render_settings(status=400, error=exc.message, form=shown)
            return
        await self.save({email_channel.SETTING: value if value.get("address") or value.get("imap")
                         or value.get("smtp") else None}, shown, "Email settings saved.", anchor="#email")


class EmailTestHandler(SettingsPage):
    """Test: the page again, with what each mail server did (POST /v1/account/email/test's service)."""

    @authenticated
    async def post(self):
        retry_after = await self.over_a_limit((f"email-test:{self.account_id}", self.application.settings_obj.rate_limit))
        if retry_after is not None:
            await self.render_settings(status=429, error=f"Too many tests. Try again in {retry_after} seconds.")
            return
        account = await accounts.get_account(self.services.db, self.account_id)
        await self.render_settings(email_test=await email_settings.test(self.services, account["settings"]))


class WidgetIdentitySecretHandler(SettingsPage):
    """A new identity secret, shown once on this answer (POST /v1/account/widget/identity-secret's service)."""

    @authenticated
    async def post(self):
        made = await widget.new_identity_secret(self.services.db, self.services.box, self.account_id, by=self.actor)
        await self.render_settings(notice="A new identity secret was made: copy it now, it is not shown again.",
                                   identity_secret=made["identitySecret"])


class BusinessHoursHandler(SettingsPage):
    """Business hours and the SLA (issue 40): saved together, like PUT /v1/account/business-hours and PATCH
    /v1/account/settings {sla}; a bad field re-renders the page with it named, and nothing is saved."""

    @authenticated
    async def post(self):
        form = {name: self.get_body_argument(name, "") for name in HOURS_FIELDS}
        try:
            more = {"sla": sla.form_minutes(form)}
            await business_hours.put(self.services, self.account_id, business_hours.form_body(form),
                                     sla.clock(self.services)(), by=self.actor, more=more)
        except Invalid as exc:
            await self.render_settings(status=400, error=exc.message,
                                       form={f"hours.{name}": value for name, value in form.items()})
            return
        self.flash_saved("Business hours and SLA saved.")
        self.redirect("/settings#business-hours", status=303)


class AssignmentHandler(SettingsPage):
    """Automatic assignment (issue 40): the mode and after how long without a page an agent counts as away."""

    @authenticated
    async def post(self):
        form = {name: self.get_body_argument(name, "").strip() for name in ("assignmentMode", "awayAfterMinutes")}
        away = form["awayAfterMinutes"]
        value = {"mode": form["assignmentMode"],
                 "awayAfterMinutes": None if not away else int(away) if away.isascii() and away.isdigit() else away}
        await self.save({"assignment": value}, form, "Automatic assignment saved.")
        assignment.wake(self.services)


class CsatHandler(SettingsPage):
    """Customer satisfaction (issue 41): whether a resolved conversation asks its contact, and the question (the
    `csat` setting, replaced whole as PATCH does)."""

    @authenticated
    async def post(self):
        form = {"csat.enabled": self.get_body_argument("enabled", "") == "on",
                "csat.question": self.get_body_argument("question", "")}
        await self.save({csat.SETTING: {"enabled": form["csat.enabled"],
                                        "question": form["csat.question"].strip() or csat.DEFAULT_QUESTION}},
                        form, "Customer satisfaction saved.")


class NotificationUrlsHandler(SettingsPage):
    @authenticated
    async def post(self):
        account = await accounts.get_account(self.services.db, self.account_id)
        form = {event: self.get_body_argument(event, "").strip() for event in notification_events(account)}
        # A merge patch, as the API's: an emptied field removes that event's URL, the others are kept.
        await self.save({"notificationUrls": {event: url or None for event, url in form.items()}}, form,
                        "Notification URLs saved.")


class OwnUserForm(SettingsPage):
    """A form about the signed-in user themselves, which every role has: on Settings for owners and admins, on Your
    account (handlers/ui/account.py) for agents; an error shows that page again. Not while viewing as another
    account (the user is not that account's)."""
    role = "agent"
    while_viewing_as = False

    async def render_settings(self, status=200, error=None, profile_form=None, **kwargs):
        if users.allows(self.current_user["role"], "admin"):
            await super().render_settings(status=status, error=error, profile_form=profile_form, **kwargs)
        else:
            render_account(self, status=status, error=error, profile_form=profile_form)

    def back(self):
        self.redirect("/settings" if users.allows(self.current_user["role"], "admin") else "/account", status=303)

    async def password_guess_allowed(self, what, form=None):
        """The current password is checked: limited like sign-ins, per user; False (the page shown with 429)
        when over."""
        retry_after = await self.over_a_limit((f"password:{self.current_user['id']}", PASSWORD_CHANGES_PER_MINUTE))
        if retry_after is not None:
            await self.render_settings(status=429, error=f"Too many {what}. Try again in {retry_after} seconds.",
                                       profile_form=form)
        return retry_after is None


class ProfileHandler(OwnUserForm):
    """The user's own name and sign-in email (issue 43 §3: the first login was admin@localhost for good); a new
    email needs the current password."""

    @authenticated
    async def post(self):
        form = {"name": self.get_body_argument("name", ""), "email": self.get_body_argument("email", "")}
        if self.get_body_argument("current_password", "") and not await self.password_guess_allowed(
                "sign-in email changes", form):
            return
        try:
            changed = await accounts.update_own_user(self.services.db, self.current_user, form["name"], form["email"],
                                                     self.get_body_argument("current_password", ""), by=self.actor)
        except (Invalid, Conflict) as exc:
            await self.render_settings(status=exc.status, error=exc.message[:1].upper() + exc.message[1:] + ".",
                                       profile_form=form)
            return
        if "email" in changed:
            self.flash("success", f"Saved. You sign in as {changed['email'][1]} from now on.")
        else:
            self.flash("success", "Saved." if changed else "Nothing changed.")
        self.back()


class EmailMeHandler(OwnUserForm):
    """The user's own choice of Parley's mail to them (services/agent_mail.py): three checkboxes."""

    @authenticated
    async def post(self):
        await users.set_own_email_notifications(self.services.db, self.current_user,
                                                {kind: self.get_body_argument(kind, "") for kind in agent_mail.COLUMNS},
                                                by=self.actor)
        self.flash("success", "Saved: Parley emails you as you chose.")
        self.back()


class PasswordHandler(OwnUserForm):
    """Change password: the current one, the new one twice. The user's other sessions end; this one stays."""

    @authenticated
    async def post(self):
        if not await self.password_guess_allowed("password changes"):
            return
        new = self.get_body_argument("new_password", "")
        try:
            if new != self.get_body_argument("new_password_again", ""):
                raise Invalid("new password and its repetition differ")
            await accounts.change_password(self.services.db, self.current_user["id"],
                                           self.get_body_argument("current_password", ""), new,
                                           keep_session=self.session_id, by=self.actor)
        except Invalid as exc:
            await self.render_settings(status=400, error=exc.message[:1].upper() + exc.message[1:] + ".")
            return
        self.services.hub.disconnect(self.account_id, user=self.current_user["id"],  # the ended sessions' pages
                                     keep_session=session_key(self))
        self.flash("success", "Password changed. Every other session of yours is signed out.")
        self.back()


class WebhookSecretHandler(UiHandler):
    """Shown only on this page, on demand; rotating keeps the previous secret signing for a while."""
    role = "owner"

    @authenticated
    async def get(self):
        secret = await accounts.get_webhook_secret(self.services.db, self.services.box,
                                                   self.current_user["account_id"])
        self.render("webhook_secret.html", secret=secret, rotated=False, overlap_hours=OVERLAP_HOURS)


class WebhookSecretRotateHandler(UiHandler):
    role = "owner"

    @authenticated
    async def post(self):
        secret = await accounts.rotate_webhook_secret(self.services.db, self.services.box,
                                                      self.current_user["account_id"], by=self.actor)
        self.render("webhook_secret.html", secret=secret, rotated=True, overlap_hours=OVERLAP_HOURS)
