"""The bot's dry run (POST /v1/bot/test): what it would answer, sending and spending nothing."""
from handlers.base import ApiHandler
from handlers.openapi import Operation
from handlers.message_schemas import BotTest, BotTestResult
from services import bot


class BotTestHandler(ApiHandler):
    operations = {"post": Operation(
        "Try the bot", {200: BotTestResult}, body=BotTest, tags=("bot",),
        errors={404: "No such contact (CONTACT_NOT_FOUND)."},
        description="Runs the same decision as a real inbound message (handoff keywords, greeting, rules, the AI "
                    "provider, fallback, pauses, opt-out, credits) and reports it; stores, sends and spends "
                    "nothing. It does call the AI provider when the decision reaches it.")}

    async def post(self):
        request = self.json_body(BotTest)
        self.respond(await bot.dry_run(self.services, self.principal.account_id, body=request.body,
                                       campaign_id=request.campaignId, contact_id=request.contactId,
                                       first_message=request.firstMessage))
