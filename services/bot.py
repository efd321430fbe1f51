"""The bot: answers inbound custom-channel messages (DESIGN §3 "Bot").

Only the hook exists so far. services.messaging.after_inbound calls on_inbound_message once per new
inbound text message, after the message committed and after the 200 was sent (IOLoop spawn_callback),
never for a repeated messageSid and never for a reaction. Until the bot issue is built it makes no
reply; a reply, when there is one, goes through services.messaging.send_reply.
"""
from storage import bot_state


async def on_inbound_message(services, message):
    """Called with the committed inbound message row (a dict: id, account_id, contact_id, body, channel,
    campaign_id, message_type, from_id, to_id, ...). Exceptions are logged by the caller. No bot yet:
    deliberately does nothing."""
    return None


async def resume(services, account_id, contact_id):
    """End a pause of the bot for this contact (the inbox's "resume bot"); True when one was removed."""
    return await bot_state.clear_pause(services.db, account_id, contact_id)
