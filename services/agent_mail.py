"""Parley's mail to its agents (issue 39): each user may choose to be emailed on a new conversation (a contact's
first message), on a handoff (the bot hands a conversation to a person) and on a conversation assigned to them
(by a person or by automatic assignment), when the account has SMTP set (Settings > Email). Off by default; set on
the user's own page (Your account, Settings) or by PATCH /v1/users/{id} `emailNotifications`.

Once per event: the mail is queued in the transaction that makes the event (storage/mail.py
queue_agent_mail_in_tx) (the message, the bot's outcome, the
assignment), as the webhook notifications are (storage/outbox.py enqueue_notification_in_tx), so that neither
exists without the other: a restart cannot lose or repeat it, and the delivery worker's claim sends it once when
several processes share the outbox. It is an outbox row of kind 'mail' (services/mail_out.py: queued, sent,
failed, retried, listed in Settings > Email) whose payload names the event, the conversation and the user, never
its text: the text is read when the mail is sent (agent_mail_facts), from the account's own rows, so an erased
contact is never mailed and no other account's data can be in it. Nobody is mailed about their own action (an
agent who assigns a conversation to themselves).

Who: a new conversation, every user who chose it; a handoff, the conversation's assignee when it has one (if they
chose it), else every user who chose it; an assignment, the assignee (if they chose it)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from common.errors import Invalid
from services import contacts
from storage import mail as store
from storage.mail import ASSIGNED, COLUMNS, HANDOFF, NEW_CONVERSATION

if TYPE_CHECKING:
    from services.context import Services

FIELD = "emailNotifications"
LABELS = {NEW_CONVERSATION: "a new conversation", HANDOFF: "a conversation the bot hands to a person",
          ASSIGNED: "a conversation assigned to me"}
EXCERPT = 500  # characters of the contact's message a mail quotes


def public(user: Mapping[str, Any]) -> dict[str, bool]:
    """A user row's choices as the API shows them: {newConversation, handoff, assigned}."""
    return {kind: bool(user.get(column)) for kind, column in COLUMNS.items()}


def changes_of(value: object) -> dict[str, int]:
    """The users columns a PATCH's emailNotifications object sets ({kind: bool}, any subset); Invalid naming the
    field otherwise."""
    if not isinstance(value, dict):
        raise Invalid(f"{FIELD} must be an object {{{', '.join(COLUMNS)}}} of true or false", field=FIELD)
    changes: dict[str, int] = {}
    for kind, chosen in value.items():
        if kind not in COLUMNS:
            raise Invalid(f"{FIELD} has no field {kind}: give {', '.join(COLUMNS)}", field=f"{FIELD}.{kind}")
        if not isinstance(chosen, bool):
            raise Invalid(f"{FIELD}.{kind} must be true or false", field=f"{FIELD}.{kind}")
        changes[COLUMNS[kind]] = int(chosen)
    return changes


def from_form(form: Mapping[str, Any]) -> dict[str, int]:
    """The own-page form's checkboxes (kind -> "1" when ticked) as users columns."""
    return {column: int(form.get(kind) == "1") for kind, column in COLUMNS.items()}


def _channel_words(channel: str | None) -> str:
    if not channel:
        return ""
    return {"web": " on the website chat", "email": " by email"}.get(channel, f" on {channel}")


# ---- sent ---------------------------------------------------------------------------------------

async def text(services: Services, account: Mapping[str, Any], agent: Mapping[str, Any]) -> str | None:
    """The mail's text, read now from the account's own rows (agent: the payload's {kind, contactId, userId}), or
    None when there is nothing to tell any more: the contact was erased, or the user can no longer sign in."""
    facts = await store.agent_mail_facts(services.db, account["id"], agent["contactId"], agent["userId"])
    if facts is None or not facts["user_ok"]:
        return None
    who = contacts.display_name(facts)
    base = services.settings.base_url.rstrip("/")
    lead = {NEW_CONVERSATION: f"{who} started a conversation with {account['name']}",
            HANDOFF: f"The bot handed {who}'s conversation with {account['name']} to a person",
            ASSIGNED: f"{who}'s conversation with {account['name']} was assigned to you"}[agent["kind"]]
    lines = [f"{lead}{_channel_words(facts['last_channel'])}."]
    if facts["last_body"]:
        body = facts["last_body"]
        quoted = body if len(body) <= EXCERPT else body[:EXCERPT].rstrip() + " […]"
        lines += ["", "Their latest message:", "", *(f"> {line}" for line in quoted.splitlines())]
    lines += ["", f"Open the conversation: {base}/inbox/{agent['contactId']}", "", "-- ",
              f"You get this mail because you chose to be emailed on {LABELS[agent['kind']]}. Change it under "
              f"Email me on your page: {base}/account"]
    return "\n".join(lines) + "\n"
