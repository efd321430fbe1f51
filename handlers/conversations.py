"""Conversations API (issue 21): GET/PATCH /v1/conversations/{id} (status, assignee, snooze) and
POST /v1/conversations/bulk (one change on many conversations, all or none)."""
from handlers.base import ApiHandler, idempotent
from handlers.conversation_schemas import Conversation, ConversationBulk, ConversationBulkResult, ConversationPatch
from handlers.openapi import Operation
from services import conversation_status
from services.conversation_status import UNSET

NOT_FOUND = "No such conversation (CONVERSATION_NOT_FOUND): its id is a contact's that has messages."
INVALID = ("A field is wrong, named in the message: an unknown status, snoozed without a future snoozedUntil, "
           "an assigneeUserId that is no user of the account, or nothing to change. Nothing changed.")


def _changes(body):
    """The body's fields as conversation_status.change() takes them: absent is UNSET, null clears."""
    sent = body.model_fields_set
    return {"status": body.status if "status" in sent else UNSET,
            "snoozed_until": body.snoozedUntil if "snoozedUntil" in sent else UNSET,
            "assignee_user_id": body.assigneeUserId if "assigneeUserId" in sent else UNSET}


class ConversationHandler(ApiHandler):
    role = "agent"
    path_params = {"conversationId": "The conversation's id: its contact's id."}
    operations = {
        "get": Operation("A conversation's status and assignee", {200: Conversation}, errors={404: NOT_FOUND}),
        "patch": Operation(
            "Change a conversation's status or assignee", {200: (Conversation, "The conversation after the change.")},
            body=ConversationPatch, errors={400: INVALID, 404: NOT_FOUND},
            description="Any subset of status, snoozedUntil and assigneeUserId. Every open inbox page of the "
                        "account shows the change at once (a conversation.updated event)."),
    }

    async def get(self, conversation_id):
        self.respond(await conversation_status.get_conversation(self.services, self.principal.account_id,
                                                                conversation_id))

    @idempotent
    async def patch(self, conversation_id):
        body = self.json_body(ConversationPatch)
        account_id = self.principal.account_id
        await conversation_status.change(self.services, account_id, [conversation_id], **_changes(body), by=self.actor)
        self.respond(await conversation_status.get_conversation(self.services, account_id, conversation_id))


class ConversationsBulkHandler(ApiHandler):
    role = "agent"
    operations = {"post": Operation(
        "Change the status or assignee of many conversations", {200: ConversationBulkResult},
        body=ConversationBulk, errors={400: INVALID, 404: NOT_FOUND + " Nothing changed."},
        description="The same change on up to 100 conversations, in one transaction: all change or none.")}

    @idempotent
    async def post(self):
        body = self.json_body(ConversationBulk)
        account_id = self.principal.account_id
        await conversation_status.change(self.services, account_id, body.conversationIds, **_changes(body),
                                         by=self.actor)
        self.respond({"data": [await conversation_status.get_conversation(self.services, account_id, c)
                               for c in dict.fromkeys(body.conversationIds)]})
