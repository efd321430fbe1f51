"""The rows that cross from storage into services (and on to handlers), typed: what a read of a contact, a message, a
conversation (the inbox's row), a user or a campaign gives. Each is the SELECT's columns as the database returns
them (flags are INTEGER 0/1 on both databases; times ISO 8601 text; JSON columns decoded where the reader says so).
At run time they are plain dicts: a TypedDict costs nothing, and the writer process pickles them as dicts."""
from __future__ import annotations

from typing import Any, TypedDict


class ContactRow(TypedDict):
    """storage/contacts.py COLUMNS. tags: the normalised tags as compact JSON text (storage/contacts.py tags_of)."""
    id: str
    account_id: str
    first_name: str | None
    last_name: str | None
    phone: str | None
    email: str | None
    opted_out: int
    opt_out_at: str | None
    opt_out_via: str | None  # reply | user | api
    opt_out_by: str | None
    created_at: str
    tags: str


class MessageRow(TypedDict):
    """storage/messages.py _COLUMNS; error, bot_outcome and mail decoded from their JSON text."""
    id: str
    account_id: str
    contact_id: str
    direction: str  # inbound | outbound
    status: str
    body: str
    channel: str | None
    campaign_id: str | None
    message_type: str
    external_id: str | None
    from_id: str | None
    to_id: str | None
    media_url: str | None
    media_content_type: str | None
    error: dict[str, Any] | None
    author: str | None
    author_user_id: str | None
    created_at: str
    bot_outcome: dict[str, Any] | None
    mail: dict[str, Any] | None  # an email's subject, Message-IDs and quoted text (services/mail_in.py)


class ConversationRow(TypedDict):
    """The inbox's row (storage/conversations.py _SELECT): the conversation, its contact's name and flags, its
    assignee as shown, and the bot's pause if one holds."""
    contact_id: str
    last_message_id: str
    last_message_at: str
    last_direction: str
    last_author: str | None
    last_preview: str
    channel: str | None
    unread_count: int
    failed_count: int
    handoff_waiting_since: str | None
    last_inbound_id: str | None
    status: str  # open | pending | resolved | snoozed
    snoozed_until: str | None
    assignee_user_id: str | None
    sla_due_at: str | None
    sla_breached: int
    assignee_email: str | None
    assignee_name: str | None
    first_name: str | None
    last_name: str | None
    phone: str | None
    email: str | None
    opted_out: int
    paused_until: str | None
    pause_reason: str | None


class UserRow(TypedDict):
    """storage/users.py _COLUMNS (never the password hash). email is None once the user is removed."""
    id: str
    account_id: str
    email: str | None
    name: str | None
    role: str  # owner | admin | agent
    active: int
    created_at: str
    available: int
    capacity: int | None
    last_seen_at: str | None
    email_new_conversation: int  # the user's choice of Parley's mail to them (services/agent_mail.py)
    email_handoff: int
    email_assigned: int
    invitation_pending: int


class CampaignRow(TypedDict):
    """storage/campaigns.py _COLUMNS: the campaign and its counts."""
    id: str
    account_id: str
    name: str
    list_id: str | None
    tag: str | None
    campaign_key: str
    body: str
    channel: str | None
    rate_per_minute: int
    status: str
    paused_reason: str | None
    start_at: str
    started_at: str | None
    finished_at: str | None
    created_at: str
    cursor: str
    total: int
    pending: int
    queued: int
    sent: int
    failed: int
    skipped: int
    cancelled: int
    probe_attempts: int
    probe_failures: int
    failure_streak: int
    retrying: int
    pending_action: str | None  # cancel | retry
    action_cursor: str
    action_at: str | None
    action_done: int
