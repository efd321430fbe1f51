"""Pydantic models of the canned replies and private notes API (issue 21), beside handlers/schemas.py."""
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from common.validation import NOT_BLANK, IdentifierNotBlank
from handlers.schemas import Strict
from services.canned_replies import MAX_BODY_LENGTH as CANNED_BODY_LENGTH
from services.notes import MAX_BODY_LENGTH as NOTE_BODY_LENGTH

CODE_PATTERN = {"pattern": "^[A-Za-z0-9_-]{1,40}$"}
PLACEHOLDERS = ("{{firstName}}, {{lastName}}, {{email}} and {{phone}} are filled in for the conversation's contact "
                "(empty when missing), as in a campaign's body; any other {{name}} is refused (400).")


class CannedReplyCreate(Strict):
    """POST /v1/canned-replies."""
    model_config = ConfigDict(json_schema_extra={"examples": [
        {"code": "thanks", "body": "Thanks {{firstName}}, we are on it."}]})
    code: IdentifierNotBlank = Field(max_length=40, json_schema_extra=CODE_PATTERN, description=(
        "Typed as /code in the thread's reply box: letters, digits, - and _; unique per account, compared "
        "without case."))
    body: str = Field(max_length=CANNED_BODY_LENGTH, json_schema_extra=NOT_BLANK, description=PLACEHOLDERS)


class CannedReplyPatch(Strict):
    """PATCH /v1/canned-replies/{id}: only the keys present change."""
    model_config = ConfigDict(json_schema_extra={"examples": [{"body": "Thank you {{firstName}}!"}]})
    code: Optional[IdentifierNotBlank] = Field(None, max_length=40, json_schema_extra=CODE_PATTERN)
    body: Optional[str] = Field(None, max_length=CANNED_BODY_LENGTH, json_schema_extra=NOT_BLANK,
                                description=PLACEHOLDERS)


class CannedReply(BaseModel):
    id: str
    code: str
    body: str = Field(description="As saved, placeholders unfilled.")
    createdAt: str
    updatedAt: str


class CannedReplyList(BaseModel):
    data: list[CannedReply] = Field(description="Every canned reply of the account, by code.")


class Deleted(BaseModel):
    deleted: bool
    id: str


class NoteCreate(Strict):
    """POST /v1/conversations/{contactId}/notes."""
    model_config = ConfigDict(json_schema_extra={"examples": [{"body": "Called her back; waiting for the invoice."}]})
    body: str = Field(max_length=NOTE_BODY_LENGTH, json_schema_extra=NOT_BLANK)


class Note(BaseModel):
    id: str
    contactId: str
    body: str
    author: Literal["user", "api"] = Field(description="user: written in the inbox; api: by an API key.")
    authorEmail: Optional[str] = Field(description="The user who wrote it; null for the API.")
    createdAt: str


class NotePage(BaseModel):
    data: list[Note] = Field(description="Newest first.")
    nextCursor: Optional[str]
