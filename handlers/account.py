"""Account API: the calling account, its settings and its webhook signing secret."""
from handlers.base import ApiHandler
from handlers.schemas import SettingsPatch
from services import accounts
from services.netguard import check_webhook_url
from storage import accounts as account_store


class AccountHandler(ApiHandler):
    async def get(self):
        account = await accounts.get_account(self.services.db, self.principal.account_id)
        key = await account_store.get_key_prefix(self.services.db, self.principal.account_id)
        self.respond(accounts.public_account(account, key and key["prefix"]))


class AccountSettingsHandler(ApiHandler):
    async def patch(self):
        patch = self.json_body(SettingsPatch)
        allow_private = self.application.settings_obj.allow_private_webhooks
        changes = {}
        for name in patch.model_fields_set:
            value = getattr(patch, name)
            if name == "customChannelWebhookUrl" and value is not None:
                value = await check_webhook_url(value, allow_private=allow_private, field=name)
            elif name == "notificationUrls" and value is not None:
                for event, url in value.items():
                    await check_webhook_url(url, allow_private=allow_private, field=f"{name}.{event}")
            changes[name] = value
        settings = await accounts.update_settings(self.services.db, self.principal.account_id, changes)
        self.respond(settings)


class WebhookSecretHandler(ApiHandler):
    async def get(self):
        self.respond(await accounts.get_webhook_secret(self.services.db, self.services.box,
                                                       self.principal.account_id))


class WebhookSecretRotateHandler(ApiHandler):
    async def post(self):
        self.respond(await accounts.rotate_webhook_secret(self.services.db, self.services.box,
                                                          self.principal.account_id))
