"""The thread shows the bot state that is true (issue 25 §5): "Bot off for this account" when the account's
bot is off (a pause only as a note: one state, issue 43 item 10), "Bot paused for this contact until …" when
paused; and a person's reply pauses the bot for that
contact whether or not the bot was on, so switching it on later never barges into the conversation."""
from services import accounts, inbox, messaging
from storage.db import fetch_one
from tests.inbound_helpers import inbound


async def test_a_persons_reply_with_the_bot_off_still_pauses_it_for_that_contact(signed_in, services, ui_account,
                                                                                 receiver):
    account_id = ui_account["account_id"]
    await accounts.update_settings(services.db, account_id, {
        "customChannelWebhookUrl": receiver.url,
        "bot": {"active": False, "rules": [{"keywords": ["price"], "answer": "Ten euros."}]}}, services.box)
    first = await inbound(services, account_id, body="hello")
    contact_id = first["contact_id"]
    page = (await signed_in.get(f"/inbox/{contact_id}")).text
    assert "Bot off for this account." in page and "Bot active" not in page
    r = await signed_in.post(f"/inbox/{contact_id}/reply", {"body": "Hi, Anna here."})
    assert r.code == 303
    state = (await signed_in.get(f"/inbox/{contact_id}/bot")).text
    # One state (issue 43 item 10): off, with the pause as a note of what happens once it is on.
    assert "Bot off for this account." in state and "Bot paused" not in state and state.count("bot-state") == 1
    assert "Once it is on, it stays quiet for this contact until" in state
    assert 'data-format="time-if-today"' in state and "a person replied" in state
    await accounts.update_settings(services.db, account_id, {"bot": {"active": True}}, services.box)
    assert "Bot off" not in (await signed_in.get(f"/inbox/{contact_id}/bot")).text
    asked = await inbound(services, account_id, body="what is the price?")
    messaging.after_inbound(services, asked)  # what the inbound route does after its 200
    await services.bot.idle()
    outcome = await services.db.read(fetch_one, "SELECT bot_outcome FROM messages WHERE id = ?", (asked["id"],))
    assert '"paused"' in outcome["bot_outcome"]  # the bot did not barge in
    await inbox.resume_bot(services, account_id, contact_id)
    assert "Bot active for this contact." in (await signed_in.get(f"/inbox/{contact_id}/bot")).text
