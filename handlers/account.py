"""Account API: the calling account, its settings and its webhook signing secret."""
from handlers.base import ApiHandler, idempotent
from handlers.openapi import Operation
from handlers.schemas import (Account, AccountPatch, AccountSettings, ApiKey, ApiKeyCreate, ApiKeyCreated, ApiKeyList,
                              EmailTestResult,
                              SettingsPatch, WebhookSecret, WebhookTestResult, WidgetIdentitySecret,
                              WidgetInfo)
from services import accounts, assignment, email_settings, mail_in, webhook_ping, widget


class AccountHandler(ApiHandler):
    operations = {"get": Operation("The calling account", {200: Account}, tags=("account",)),
                  "patch": Operation("Rename the account", {200: Account}, body=AccountPatch, tags=("account",),
                                     errors={400: "An empty name."})}

    async def get(self):
        account = await accounts.get_account(self.services.db, self.principal.account_id)
        await self._respond(account)

    async def patch(self):
        body = self.json_body(AccountPatch)
        await self._respond(await accounts.rename(self.services.db, self.principal.account_id, body.name,
                                                  by=self.actor))

    async def _respond(self, account):
        key = await accounts.get_key_prefix(self.services.db, self.principal.account_id)
        self.respond(await mail_in.with_import_status(self.services.db, self.principal.account_id,
                                                      accounts.public_account(account, key and key["prefix"])))


class AccountSettingsHandler(ApiHandler):
    operations = {"patch": Operation(
        "Change account settings", {200: (AccountSettings, "The whole settings object after the change.")},
        body=SettingsPatch, tags=("account",),
        description="Only the keys present change; null removes a setting. Webhook URLs must be https and "
                    "public (unless the server runs with --allow-private-webhooks); a URL whose host does not "
                    "resolve now is saved with a `warnings` entry. `bot` is a JSON Merge Patch "
                    "(RFC 7386) of the stored bot object: objects merge, null removes a key, arrays replace; "
                    "the provider's apiKey is write-only and kept unless sent again or set to null.")}

    async def patch(self):
        patch = self.json_body(SettingsPatch)
        changes, warnings = await accounts.validate_settings_changes(
            patch.model_dump(exclude_unset=True), allow_private=self.application.settings_obj.allow_private_webhooks)
        settings = await accounts.update_settings(self.services.db, self.principal.account_id, changes,
                                                  box=self.services.box, by=self.actor)
        if "assignment" in changes:
            assignment.wake(self.services)  # turned on, or off (the queue empties)
        if "email" in changes and self.services.mail_in is not None:
            self.services.mail_in.notify()  # the mailbox's import starts (or restarts with the new settings) now
        self.respond({**settings, "warnings": warnings} if warnings else settings)


class ApiKeysHandler(ApiHandler):
    operations = {"get": Operation("The account's API keys", {200: ApiKeyList}, tags=("account",)),
                  "post": Operation(
                      "Create an API key", {201: (ApiKeyCreated, "The key, live at once; its secret is shown only "
                                                                 "here.")},
                      body=ApiKeyCreate, tags=("account",),
                      errors={400: "A missing or too long name.", 409: "The account has 20 keys (CONFLICT)."},
                      description="The other keys stay live: to rotate without downtime, create a key, move the "
                                  "clients to it, then revoke the old one.")}

    async def get(self):
        self.respond(await accounts.list_keys(self.services.db, self.principal.account_id))

    @idempotent
    async def post(self):
        body = self.json_body(ApiKeyCreate)
        self.respond(await accounts.add_key(self.services.db, self.services.box, self.principal.account_id, body.name,
                                            by=self.actor), status=201)


class ApiKeyHandler(ApiHandler):
    path_params = {"keyId": "The key's id (key_…)."}
    operations = {"delete": Operation(
        "Revoke an API key", {200: (ApiKey, "The revoked key: it fails from now on.")}, tags=("account",),
        errors={404: "No such key in this account (NOT_FOUND).",
                409: "It is the account's last key (CONFLICT): create another one first."})}

    @idempotent
    async def delete(self, key_id):
        self.respond(await accounts.revoke_key(self.services.db, self.services.keys, self.principal.account_id,
                                               key_id, by=self.actor))


class WebhookSecretHandler(ApiHandler):
    operations = {"get": Operation("The webhook signing secret", {200: WebhookSecret}, tags=("account",))}

    async def get(self):
        self.respond(await accounts.get_webhook_secret(self.services.db, self.services.box,
                                                       self.principal.account_id))


class WebhookSecretRotateHandler(ApiHandler):
    operations = {"post": Operation(
        "Rotate the webhook signing secret", {200: WebhookSecret}, tags=("account",),
        description="The previous secret keeps signing too until previousSecretExpiresAt.")}

    @idempotent
    async def post(self):
        self.respond(await accounts.rotate_webhook_secret(self.services.db, self.services.box,
                                                          self.principal.account_id, by=self.actor))


class WebhookTestHandler(ApiHandler):
    operations = {"post": Operation(
        "Send test event", {200: WebhookTestResult}, tags=("account",),
        errors={409: "No Custom Channel Webhook URL is set (CONFLICT)."},
        description="POSTs a signed {\"event\": \"ping\", …} to the Custom Channel Webhook URL now, outside the "
                    "outbox, with the same SSRF guard, signature and timeout as deliveries, and answers what the "
                    "receiver did. Stores nothing, so it takes no Idempotency-Key: a repeat sends another ping.")}

    async def post(self):
        self.respond(await webhook_ping.send_test_event(self.services, self.principal.account_id))


class WidgetHandler(ApiHandler):
    operations = {"get": Operation(
        "The website chat widget's id and embed snippet", {200: WidgetInfo}, tags=("account",),
        description="The widget is configured by the `widget` account setting (PATCH /v1/account/settings); this "
                    "gives the line to paste into the site's pages. docs/guide.md \"Website chat widget\".")}

    async def get(self):
        self.respond(await widget.describe(self.services.db, self.application.settings_obj.base_url,
                                           self.principal.account_id))


class WidgetIdentitySecretHandler(ApiHandler):
    operations = {"post": Operation(
        "Make a new widget identity secret", {200: WidgetIdentitySecret}, tags=("account",),
        description="Shown in this answer only; it replaces the previous one at once (identify hashes made with "
                    "that one stop verifying). Your server signs a visitor's id with it: hash = hex "
                    "HMAC-SHA256(identitySecret, id).")}

    @idempotent
    async def post(self):
        self.respond(await widget.new_identity_secret(self.services.db, self.services.box,
                                                      self.principal.account_id, by=self.actor))


class EmailTestHandler(ApiHandler):
    operations = {"post": Operation(
        "Test the mail servers", {200: EmailTestResult}, tags=("account",),
        description="Connects to the `email` setting's IMAP and SMTP servers now, both at once, and logs in to each "
                    "(IMAP also opens the folder), with the same SSRF rules as webhooks and --mail-timeout-seconds "
                    "per step; says in words what failed. Sends no mail and stores nothing, so it takes no "
                    "Idempotency-Key.")}

    async def post(self):
        account = await accounts.get_account(self.services.db, self.principal.account_id)
        self.respond(await email_settings.test(self.services, account["settings"]))
