"""Account API: the calling account, its settings and its webhook signing secret."""
from handlers.base import ApiHandler, idempotent
from handlers.openapi import Operation
from handlers.schemas import Account, AccountSettings, SettingsPatch, WebhookSecret
from services import accounts


class AccountHandler(ApiHandler):
    operations = {"get": Operation("The calling account", {200: Account}, tags=("account",))}

    async def get(self):
        account = await accounts.get_account(self.services.db, self.principal.account_id)
        key = await accounts.get_key_prefix(self.services.db, self.principal.account_id)
        self.respond(accounts.public_account(account, key and key["prefix"]))


class AccountSettingsHandler(ApiHandler):
    operations = {"patch": Operation(
        "Change account settings", {200: (AccountSettings, "The whole settings object after the change.")},
        body=SettingsPatch, tags=("account",),
        description="Only the keys present change; null removes a setting. Webhook URLs must be https and "
                    "public (unless the server runs with --allow-private-webhooks).")}

    async def patch(self):
        patch = self.json_body(SettingsPatch)
        changes = await accounts.validate_settings_changes(
            {name: getattr(patch, name) for name in patch.model_fields_set},
            allow_private=self.application.settings_obj.allow_private_webhooks)
        settings = await accounts.update_settings(self.services.db, self.principal.account_id, changes)
        self.respond(settings)


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
                                                          self.principal.account_id))
