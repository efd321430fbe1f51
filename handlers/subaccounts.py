"""Sub-accounts API (agencies only): POST /v1/subaccounts/credits (spec §4.6), GET /v1/subaccounts."""
from handlers.base import ApiHandler
from handlers.openapi import Operation
from handlers.schemas import CreditGrant, CreditGrantResult, PageQuery, SubAccountPage
from services import credits


class SubaccountCreditsHandler(ApiHandler):
    key_in_header_only = True  # spec §5.3: "pass the key in the header x-api-key"; apiKey is not used here
    operations = {"post": Operation(
        "Grant credits to a sub-account (agencies only)", {200: CreditGrantResult}, body=CreditGrant,
        tags=("subaccounts",),
        headers={"Idempotency-Key": "Optional: a retry with the same key within 24 h returns the first answer."},
        response_headers={200: {"Idempotent-Replayed": "\"true\" when this is the stored answer of an earlier "
                                                       "request with the same Idempotency-Key."}},
        errors={400: "Invalid email or amount, or the balance would exceed its ceiling.",
                403: "The key is not an agency's (FORBIDDEN).",
                404: "No sub-account with this email under the agency (SUBACCOUNT_NOT_FOUND).",
                422: "The Idempotency-Key was used with other parameters (IDEMPOTENCY_KEY_REUSED)."})}

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
    operations = {"get": Operation("The agency's sub-accounts with their balances", {200: SubAccountPage},
                                   query=PageQuery, tags=("subaccounts",),
                                   errors={400: "Invalid limit or cursor.",
                                           403: "The key is not an agency's (FORBIDDEN)."})}

    async def get(self):
        self.respond(await credits.list_subaccounts(self.services.db, self.principal.account_id,
                                                    self.principal.type,
                                                    limit=self.get_query_argument("limit", None),
                                                    cursor=self.get_query_argument("cursor", None)))
