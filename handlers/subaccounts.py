"""Sub-accounts API (agencies only): POST /v1/subaccounts/credits (spec §4.6), GET /v1/subaccounts."""
from handlers.base import ApiHandler, idempotent
from handlers.openapi import Operation
from handlers.schemas import CreditGrant, CreditGrantResult, PageQuery, SubAccountPage
from services import credits


class SubaccountCreditsHandler(ApiHandler):
    key_in_header_only = True  # spec §5.3: "pass the key in the header x-api-key"; apiKey is not used here
    operations = {"post": Operation(
        "Grant credits to a sub-account (agencies only)", {200: CreditGrantResult}, body=CreditGrant,
        tags=("subaccounts",),
        description="Without an Idempotency-Key every call grants (spec §4.6: the service does not itself "
                    "deduplicate grants); send the auto-recharge notification's idempotency_key as one.",
        errors={400: "Invalid email or amount, or the balance would exceed its ceiling.",
                403: "The key is not an agency's (FORBIDDEN).",
                404: "No sub-account with this email under the agency (SUBACCOUNT_NOT_FOUND)."})}

    @idempotent
    async def post(self):
        credits.require_agency(self.principal.type)  # 403 before any body error: the endpoint is not theirs
        body = self.json_body(CreditGrant)
        self.respond(await credits.grant_credits(
            self.services.db, self.principal.account_id, self.principal.type, email=body.email,
            amount=body.amount, description=body.description,
            idempotency_key=self.request.headers.get("Idempotency-Key")))

    async def request_fingerprint(self):
        body = self.parsed_body  # the same grant spelled differently (email case, 10 or 10.0) is the same
        return credits.grant_fingerprint(body.email, body.amount, body.description)


class SubaccountsHandler(ApiHandler):
    operations = {"get": Operation("The agency's sub-accounts with their balances", {200: SubAccountPage},
                                   query=PageQuery, tags=("subaccounts",),
                                   errors={400: "Invalid limit or cursor.",
                                           403: "The key is not an agency's (FORBIDDEN)."})}

    async def get(self):
        self.respond(await credits.list_subaccounts(self.services.db, self.principal.account_id,
                                                    self.principal.type,
                                                    limit=self.get_query_argument("limit", None),
                                                    cursor=self.get_query_argument("cursor", None)))
