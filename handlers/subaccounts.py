"""Sub-accounts API (agencies only): POST /v1/subaccounts/credits (spec §4.6), GET /v1/subaccounts."""
from handlers.base import ApiHandler
from handlers.schemas import CreditGrant
from services import credits


class SubaccountCreditsHandler(ApiHandler):
    key_in_header_only = True  # spec §5.3: "pass the key in the header x-api-key"; apiKey is not used here

    async def post(self):
        credits.require_agency(self.principal.type)  # 403 before any body error: the endpoint is not theirs
        body = self.json_body(CreditGrant)
        result, replayed = await credits.grant_credits(
            self.services.db, self.principal.account_id, self.principal.type, email=body.email,
            amount=body.amount, description=body.description,
            idempotency_key=self.request.headers.get("Idempotency-Key"))
        if replayed:
            self.set_header("Idempotent-Replayed", "true")
        self.respond(result)


class SubaccountsHandler(ApiHandler):
    async def get(self):
        self.respond(await credits.list_subaccounts(self.services.db, self.principal.account_id,
                                                    self.principal.type,
                                                    limit=self.get_query_argument("limit", None),
                                                    cursor=self.get_query_argument("cursor", None)))
