"""The bot's per-contact pause (storage/bot_state.py, migration 0008), shared by the bot and the inbox."""
from services import bot, contacts
from storage import bot_state
from storage.db import writes


@writes
def _pause(cx, account_id, contact_id, until, reason, now):
    bot_state.pause_in_tx(cx, account_id, contact_id, until, reason, now)


async def test_a_pause_lasts_until_its_end_is_never_shortened_and_resume_ends_it(services, account, other_account):
    db, account_id = services.db, account["account_id"]
    contact, _ = await contacts.create_contact(db, account_id, phone="+14155552671")
    await _pause(db, account_id, contact["id"], "2030-01-01T10:00:00.000Z", "human_reply", "2030-01-01T09:30:00.000Z")
    assert await bot_state.get_pause(db, account_id, contact["id"], "2030-01-01T09:59:59.999Z") == {
        "paused_until": "2030-01-01T10:00:00.000Z", "reason": "human_reply"}
    assert await bot_state.get_pause(db, account_id, contact["id"], "2030-01-01T10:00:00.000Z") is None  # over

    await _pause(db, account_id, contact["id"], "2030-01-01T09:45:00.000Z", "handoff", "2030-01-01T09:31:00.000Z")
    assert (await bot_state.get_pause(db, account_id, contact["id"], "2030-01-01T09:50:00.000Z"))["paused_until"] \
        == "2030-01-01T10:00:00.000Z"  # the shorter, later pause did not cut the longer one
    await _pause(db, account_id, contact["id"], "2030-01-01T11:00:00.000Z", "handoff", "2030-01-01T09:32:00.000Z")
    assert await bot_state.get_pause(db, account_id, contact["id"], "2030-01-01T10:30:00.000Z") == {
        "paused_until": "2030-01-01T11:00:00.000Z", "reason": "handoff"}

    assert await bot.resume(services, other_account["account_id"], contact["id"]) is False  # not theirs
    assert await bot_state.get_pause(db, account_id, contact["id"], "2030-01-01T10:30:00.000Z") is not None
    assert await bot.resume(services, account_id, contact["id"]) is True
    assert await bot_state.get_pause(db, account_id, contact["id"], "2030-01-01T10:30:00.000Z") is None
