"""The inbox's status and assignee actions (issue 21): on one thread (POST /inbox/{contactId}/state, and its
fragment GET for the live refresh) and on the conversations ticked in the list (POST /inbox/bulk)."""
from tornado.web import authenticated

from common.errors import Invalid
from handlers.ui_base import UiHandler
from handlers.ui.session import safe_next
from services import conversation_status, inbox


def _utc_offset(handler):
    """The page's UTC offset in minutes (its script fills the field; without one the presets count in UTC)."""
    text = handler.get_body_argument("utc_offset", "0").strip()
    try:
        return int(text)
    except ValueError:
        raise Invalid("utc_offset must be a whole number of minutes", field="utc_offset") from None


async def state_context(services, account_id, contact_id, conversation):
    """What templates/_conversation_state.html needs."""
    return {"state": inbox.state_view(conversation) if conversation else None, "contact_id": contact_id,
            "users": await conversation_status.assignable_users(services, account_id),
            "snooze_presets": conversation_status.SNOOZE_PRESETS}


class ConversationStateHandler(UiHandler):
    """GET /inbox/{contactId}/state: the thread's status and assignee as HTML (live refresh). POST: action
    (assign with assignee, resolve, reopen, pending, snooze with snooze and utc_offset)."""
    live_fragment = True
    role = "agent"

    @authenticated
    async def get(self, contact_id):
        thread = await inbox.get_bot_state(self.services, self.account_id, contact_id)  # 404 unless the account's
        conversation = await inbox.get_conversation(self.services, self.account_id, thread["contact"]["id"])
        self.render("_conversation_state.html",
                    **await state_context(self.services, self.account_id, contact_id, conversation))

    @authenticated
    async def post(self, contact_id):
        changes = conversation_status.ui_action(
            self.get_body_argument("action", ""), assignee=self.get_body_argument("assignee", ""),
            snooze=self.get_body_argument("snooze", ""), utc_offset_minutes=_utc_offset(self))
        await conversation_status.change(self.services, self.account_id, [contact_id], **changes, by=self.actor)
        self.action_done(f"/inbox/{contact_id}", "Conversation updated.")


class BulkHandler(UiHandler):
    """POST /inbox/bulk: contact (one per ticked conversation), action (as ConversationStateHandler's, or
    assign:<userId> / snooze:<preset> in one field), utc_offset, next (the list to go back to)."""
    role = "agent"

    @authenticated
    async def post(self):
        next_url = safe_next(self.get_body_argument("next", "/inbox"))
        contact_ids = self.get_body_arguments("contact")
        try:
            changes = conversation_status.ui_action(self.get_body_argument("action", ""),
                                                    utc_offset_minutes=_utc_offset(self))
            await conversation_status.change(self.services, self.account_id, contact_ids, **changes, by=self.actor)
        except Invalid as error:
            if self.wants_json():
                raise
            self.flash("error", error.message)
            self.redirect(next_url, status=303)
            return
        self.action_done(next_url, f"{len(set(contact_ids))} conversation(s) updated.")
