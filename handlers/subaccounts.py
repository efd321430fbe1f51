"""Sub-accounts API (agencies only): POST /v1/subaccounts/credits (docs/api.md#sub-account-credits-agency-accounts), create, list, read and set
auto-recharge on sub-accounts, and their credit history (docs/design.md#api-decisions "Sub-accounts")."""
from handlers.base import ApiHandler, idempotent
from handlers.openapi import Operation
from handlers.schemas import PageQuery
from handlers.subaccount_schemas import (CreditGrant, CreditGrantResult, CreditTransactionPage, SubAccount,
                                         SubAccountCreate, SubAccountCreated, SubAccountPage, SubAccountPatch)
from services import credits, subaccounts

FORBIDDEN = "The key is not an agency's (FORBIDDEN)."
NOT_FOUND = "No such sub-account under this agency (SUBACCOUNT_NOT_FOUND)."
BY_ID = {"subAccountId": "$response.body#/id"}


class SubaccountCreditsHandler(ApiHandler):
    key_in_header_only = True  # docs/api.md#basics: "pass the key in the header x-api-key"; apiKey is not used here
    operations = {"post": Operation(
        "Grant credits to a sub-account (agencies only)", {200: CreditGrantResult}, body=CreditGrant,
        tags=("subaccounts",),
        description="Without an Idempotency-Key every call grants (the service does not itself "
                    "deduplicate grants); send the auto-recharge notification's idempotency_key as one.",
        errors={400: "Invalid email or amount, or the balance would exceed its ceiling.",
                403: "The key is not an agency's (FORBIDDEN).",
                404: "No sub-account with this email under the agency (SUBACCOUNT_NOT_FOUND)."})}

    @idempotent
    async def post(self):
        credits.require_agency(self.principal.type)  # 403 before any body error: the endpoint is not theirs
        body = self.json_body(CreditGrant)
        granted, _ = await credits.grant_credits(
            self.services.db, self.principal.account_id, self.principal.type, email=body.email,
            amount=body.amount, description=body.description, by=self.actor,
            idempotency_key=self.request.headers.get("Idempotency-Key"))
        self.respond(granted)

    async def request_fingerprint(self):
        body = self.parsed_body  # the same grant spelled differently (email case, 10 or 10.0) is the same
        return credits.grant_fingerprint(body.email, body.amount, body.description)


class SubaccountsHandler(ApiHandler):
    operations = {
        "get": Operation("The agency's sub-accounts with their balances", {200: SubAccountPage}, query=PageQuery,
                         tags=("subaccounts",), errors={400: "Invalid limit or cursor.", 403: FORBIDDEN}),
        "post": Operation(
            "Create a sub-account", {201: (SubAccountCreated, "Created; apiKey and password are shown only here.")},
            body=SubAccountCreate, tags=("subaccounts",),
            description="The sub-account gets an API key and a UI user (login: its email) whose password is "
                        "generated; both are in this answer only.",
            errors={400: "Invalid name or email (VALIDATION_ERROR, INVALID_EMAIL).", 403: FORBIDDEN,
                    409: "An account with this email exists (CONFLICT)."},
            links={"GetSubAccount": ("/v1/subaccounts/{subAccountId}", "get", BY_ID),
                   "SetAutoRecharge": ("/v1/subaccounts/{subAccountId}", "patch", BY_ID),
                   "GetTransactions": ("/v1/subaccounts/{subAccountId}/transactions", "get", BY_ID)}),
    }

    async def get(self):
        self.respond(await subaccounts.list_subaccounts(self.services.db, self.principal.account_id,
                                                        self.principal.type,
                                                        limit=self.get_query_argument("limit", None),
                                                        cursor=self.get_query_argument("cursor", None)))

    @idempotent
    async def post(self):
        credits.require_agency(self.principal.type)  # 403 before any body error
        body = self.json_body(SubAccountCreate)
        self.respond(await subaccounts.create_subaccount(
            self.services.db, self.services.box, self.services.keys, self.principal.account_id,
            self.principal.type, name=body.name, email=body.email, by=self.actor), 201)


class SubaccountHandler(ApiHandler):
    path_params = {"subAccountId": "The sub-account's id."}
    operations = {
        "get": Operation("A sub-account by id", {200: SubAccount}, tags=("subaccounts",),
                         errors={403: FORBIDDEN, 404: NOT_FOUND}),
        "patch": Operation(
            "Set a sub-account's auto-recharge and price per bot reply", {200: SubAccount}, body=SubAccountPatch,
            tags=("subaccounts",), errors={400: "Invalid autoRecharge or creditsPerReply, or neither sent.",
                                           403: FORBIDDEN, 404: NOT_FOUND},
            description="creditsPerReply is what each bot reply costs the sub-account; only its agency sets it "
                        "(the sub-account's own settings cannot). When a spend leaves the balance below threshold, one subaccount.auto_recharge "
                        "notification (data: idempotency_key, sub_account_id, email, balance, threshold, amount) "
                        "goes to the agency's notificationUrls; none again until a grant brings the balance "
                        "back to at least the threshold."),
    }

    async def get(self, sub_id):
        self.respond(await subaccounts.get_subaccount(self.services.db, self.principal.account_id,
                                                      self.principal.type, sub_id))

    async def patch(self, sub_id):
        credits.require_agency(self.principal.type)
        body = self.json_body(SubAccountPatch)
        self.respond(await subaccounts.update_subaccount(self.services.db, self.principal.account_id,
                                                         self.principal.type, sub_id, body.changes(), by=self.actor))


class SubaccountTransactionsHandler(ApiHandler):
    path_params = {"subAccountId": "The sub-account's id."}
    operations = {"get": Operation(
        "A sub-account's credit history (grants and spends), newest first", {200: CreditTransactionPage},
        query=PageQuery, tags=("subaccounts",),
        errors={400: "Invalid limit or cursor.", 403: FORBIDDEN, 404: NOT_FOUND})}

    async def get(self, sub_id):
        self.respond(await subaccounts.list_transactions(self.services.db, self.principal.account_id,
                                                         self.principal.type, sub_id,
                                                         limit=self.get_query_argument("limit", None),
                                                         cursor=self.get_query_argument("cursor", None)))
