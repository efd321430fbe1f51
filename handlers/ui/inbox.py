"""Inbox pages: conversations by last activity, a contact's thread, and the thread's actions (reply, retry,
mark read, resume bot). Pages carry the live event id they were rendered at (static/live.js resumes from it);
the fragments below are what their scripts fetch when an event arrives."""
from tornado.web import authenticated

from handlers.ui_base import UiHandler
from handlers.ui.conversation_status import state_context
from common.errors import Invalid
from services import campaigns, conversation_status, inbox, search


class InboxPage(UiHandler):
    role = "agent"

    async def conversations(self):
        return await inbox.list_conversations(
            self.services, self.account_id, filter=self.get_query_argument("filter", inbox.DEFAULT_FILTER),
            query=self.get_query_argument("q", ""), before=self.get_query_argument("before", None),
            campaign_id=self.get_query_argument("campaign", None), user_id=self.current_user["id"])


class InboxHandler(InboxPage):
    """GET /inbox?filter=&q=&before=: the inbox page."""

    @authenticated
    async def get(self):
        event_id = await inbox.current_event_id(self.services, self.account_id)  # first: events after it may already show
        page = await self.conversations()
        self.render("inbox.html", page=page, filters=inbox.FILTERS, event_id=event_id,
                    paged=bool(self.get_query_argument("before", None)),
                    campaigns=(await campaigns.recent_campaigns(self.services.db, self.account_id))["items"],
                    users=await conversation_status.assignable_users(self.services, self.account_id),
                    snooze_presets=conversation_status.SNOOZE_PRESETS, next_url=self.request.uri)


class ConversationListHandler(InboxPage):
    """GET /inbox/conversations?filter=&q=&before=: the list alone, for the inbox's live refresh."""
    live_fragment = True

    @authenticated
    async def get(self):
        self.render("_conversations.html", page=await self.conversations())


class SearchHandler(UiHandler):
    """GET /inbox/search?q=&cursor=: messages whose text matches, newest first, each linking to its thread."""
    role = "agent"

    @authenticated
    async def get(self):
        query, results, error = self.get_query_argument("q", ""), None, None
        try:
            if query.strip():  # an empty box is the page before a search, not an error
                results = await search.search_for_page(self.services.db, self.account_id, query,
                                                       cursor=self.get_query_argument("cursor", None))
        except Invalid as invalid:
            error = invalid
        self.render("search.html", query=query, results=results, error=error)


class ThreadHandler(UiHandler):
    """GET /inbox/{contactId}[?before=]: a contact's messages, newest at the bottom; opening it marks it read."""
    role = "agent"

    @authenticated
    async def get(self, contact_id):
        event_id = await inbox.current_event_id(self.services, self.account_id)
        thread = await inbox.get_thread(self.services, self.account_id, contact_id,
                                        before=self.get_query_argument("before", None))
        await inbox.mark_read(self.services, self.account_id, contact_id, thread["newest_id"])
        self.render("thread.html", thread=thread, event_id=event_id,
                    **await state_context(self.services, self.account_id, contact_id, thread["conversation"]))


class ThreadMessagesHandler(UiHandler):
    """GET /inbox/{contactId}/messages?after=: the messages a live thread lacks, as HTML to append."""
    live_fragment = True
    role = "agent"

    @authenticated
    async def get(self, contact_id):
        messages = await inbox.messages_after(self.services, self.account_id, contact_id,
                                              self.get_query_argument("after", ""))
        self.render("_messages.html", messages=messages, contact_id=contact_id)


class ThreadMessageHandler(UiHandler):
    """GET /inbox/{contactId}/messages/{messageId}: one message as HTML, to replace it after a change."""
    live_fragment = True
    role = "agent"

    @authenticated
    async def get(self, contact_id, message_id):
        message = await inbox.get_message(self.services, self.account_id, contact_id, message_id)
        self.render("_messages.html", messages=[message], contact_id=contact_id)


class BotStateHandler(UiHandler):
    """GET /inbox/{contactId}/bot: whether the bot is paused for the contact, as HTML (live refresh)."""
    live_fragment = True
    role = "agent"

    @authenticated
    async def get(self, contact_id):
        self.render("_bot_state.html", thread=await inbox.get_bot_state(self.services, self.account_id, contact_id))


class ReplyHandler(UiHandler):
    """POST /inbox/{contactId}/reply: body. Sent on the contact's channel (services.messaging.send_reply): through the
    outbox to the Custom Channel Webhook, or to the visitor's website chat widget."""
    role = "agent"

    @authenticated
    async def post(self, contact_id):
        await inbox.reply(self.services, self.account_id, self.current_user, contact_id,
                          self.get_body_argument("body", ""))
        self.action_done(f"/inbox/{contact_id}", "Reply queued for delivery.")


class ReadHandler(UiHandler):
    """POST /inbox/{contactId}/read: through=<the newest message id the page shows>."""
    role = "agent"

    @authenticated
    async def post(self, contact_id):
        await inbox.mark_read(self.services, self.account_id, contact_id, self.get_body_argument("through", ""))
        self.action_done(f"/inbox/{contact_id}")


class RetryHandler(UiHandler):
    """POST /inbox/{contactId}/messages/{messageId}/retry: send a Failed reply again now."""
    role = "agent"

    @authenticated
    async def post(self, contact_id, message_id):
        await inbox.get_message(self.services, self.account_id, contact_id, message_id)  # 404 unless in this thread
        await inbox.retry(self.services, self.account_id, message_id)
        self.action_done(f"/inbox/{contact_id}", "Retrying the delivery now.")


class ResumeBotHandler(UiHandler):
    """POST /inbox/{contactId}/resume-bot: end the bot's pause for this contact."""
    role = "agent"

    @authenticated
    async def post(self, contact_id):
        resumed = await inbox.resume_bot(self.services, self.account_id, contact_id)
        self.action_done(f"/inbox/{contact_id}", "The bot answers this contact again." if resumed
                         else "The bot was not paused for this contact.")
