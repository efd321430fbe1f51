"""OpenAPI models of the team routes (issue 21): users and roles, and the audit list."""
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

from common.validation import Identifier, IdentifierNotBlank
from handlers.schemas import Strict

Role = Literal["owner", "admin", "agent"]
ROLE_HELP = ("owner: everything (settings, API keys, users, credits); admin: everything but owners and API keys; "
             "agent: inbox, contacts, lists.")


class UserCreate(Strict):
    """POST /v1/users: invite a user."""
    model_config = ConfigDict(json_schema_extra={"examples": [
        {"email": "sam@acme.example", "name": "Sam", "role": "agent"}]})
    email: Identifier = Field(max_length=320, description="The user's login; unique within the account (the same "
                                                          "person may be a user of other accounts too).")
    name: Optional[Identifier] = Field(None, max_length=200)
    role: Role = Field(description=ROLE_HELP)


class EmailNotifications(Strict):
    """Which of Parley's mails the user gets (when the account has SMTP set: the `email` setting); all false by
    default. A PATCH changes the keys present."""
    newConversation: StrictBool = Field(None, description="A contact's first message opens a conversation.",
                                        json_schema_extra=lambda schema: schema.pop("default", None))
    handoff: StrictBool = Field(None, description="The bot hands a conversation to a person (only its assignee is "
                                                  "emailed when it has one).",
                                json_schema_extra=lambda schema: schema.pop("default", None))
    assigned: StrictBool = Field(None, description="A conversation is assigned to the user, by someone else or by "
                                                   "automatic assignment (never for their own action).",
                                 json_schema_extra=lambda schema: schema.pop("default", None))


class EmailNotificationsShown(BaseModel):
    newConversation: bool
    handoff: bool
    assigned: bool


class UserPatch(Strict):
    """PATCH /v1/users/{id}: only the keys present change; at least one is required."""
    model_config = ConfigDict(json_schema_extra={"minProperties": 1, "examples": [{"role": "admin"},
                                                                                  {"active": False}]})
    role: Role = Field(None, description=ROLE_HELP, json_schema_extra=lambda schema: schema.pop("default", None))
    name: Optional[Identifier] = Field(None, max_length=200)
    email: Optional[IdentifierNotBlank] = Field(None, max_length=320, description="A new login; unique within the account "
                                                               "(409 names the conflict). The user's sessions and "
                                                               "links stay valid.")
    active: StrictBool = Field(None, description="false deactivates: the user's sessions end at once and it "
                                                 "cannot sign in; true lets it sign in again.",
                               json_schema_extra=lambda schema: schema.pop("default", None))
    available: StrictBool = Field(None, description="Automatic assignment (settings assignment.mode): false is away, "
                                                    "the user gets no conversations automatically (what they have "
                                                    "stays theirs); the user's own switch in the UI sets it too.",
                                  json_schema_extra=lambda schema: schema.pop("default", None))
    capacity: Optional[StrictInt] = Field(None, ge=0, le=10000, description="Automatic assignment gives the user "
                                          "conversations while they have fewer open (or pending) ones than this; "
                                          "null: no limit. A raised capacity takes waiting conversations at once.")
    emailNotifications: EmailNotifications = Field(None, description="Email the user on a new conversation, a "
                                                   "handoff or an assignment to them (each true or false; the keys "
                                                   "present change). The user sets it on their own page too.",
                                                   json_schema_extra=lambda schema: schema.pop("default", None))


class User(BaseModel):
    id: str
    email: str
    name: Optional[str]
    role: Role
    active: bool
    invitationPending: bool = Field(description="Invited and the sign-in link not used yet: the user has no "
                                                "password and cannot sign in until they choose one through it.")
    available: bool = Field(description="false: away (their own switch, or set by an admin): no automatic "
                                        "assignments.")
    capacity: Optional[int] = Field(description="Open conversations automatic assignment gives them at most; null: "
                                                "no limit.")
    lastSeenAt: Optional[str] = Field(description="The last time the user had a page of the UI open (written about "
                                                  "every 30 s while one is): without one for the account's "
                                                  "assignment.awayAfterMinutes they count as away.")
    emailNotifications: EmailNotificationsShown = Field(description="Which of Parley's mails the user chose: on a new "
                                                        "conversation, a handoff, an assignment to them.")
    createdAt: str


class UserCreated(User):
    signInUrl: str = Field(description="One-time link where the invitee chooses a password; shown only here.")
    signInExpiresAt: str
    invitationEmailed: bool = Field(description="The link was also queued to be emailed to the user by the "
                                                "account's SMTP server (the `email` setting); false without one.")


class UserRemoved(BaseModel):
    id: str = Field(description="The removed user's id: notes, messages and the audit keep it (shown as "
                                "\"Removed user\").")
    removed: bool = Field(description="Always true.")
    unassignedConversations: int = Field(description="How many of their open, pending or snoozed conversations "
                                                     "became unassigned.")


class UserList(BaseModel):
    data: list[User] = Field(description="Every user of the account, owners first.")


# --- Audit (issue 21) ---

class AuditEntry(BaseModel):
    id: str = Field(description="aud_…; time-ordered.")
    at: str
    actor: str = Field(description="The user's id (usr_…), api-key, operator (the parley command), or assignment "
                                   "(automatic assignment).")
    actorLabel: Optional[str] = Field(description="The user's email at the time; null for a key or the operator.")
    action: str = Field(description="user.invited, user.updated, settings.updated, api_key.rotated, "
                                    "api_key.created, api_key.revoked, webhook_secret.rotated, "
                                    "widget.identity_secret.rotated, credits.granted, "
                                    "contact.erased, view_as.started, password.changed, campaign.sent, "
                                    "conversation.assigned (automatic assignment: actor assignment, "
                                    "detail.reason), ...")
    subjectId: Optional[str] = Field(description="What the action was on: a user, a sub-account, a contact.")
    detail: dict = Field(description="What changed: setting names, a role from and to, an amount; never a secret.")


class AuditPage(BaseModel):
    data: list[AuditEntry]
    nextCursor: Optional[str] = Field(description="Pass as ?cursor= for the next (older) page; null on the last.")
