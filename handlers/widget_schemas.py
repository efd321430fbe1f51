"""Pydantic models of the website chat widget's visitor API (handlers/widget.py), beside handlers/schemas.py."""
from typing import Optional

from pydantic import BaseModel, Field, StrictInt

from common.validation import Identifier, Strict
from services import csat, widget


class VisitorMedia(BaseModel):
    url: str = Field(description="A signed link, valid --media-url-ttl-seconds.")
    contentType: str


class VisitorMessage(BaseModel):
    id: str
    mine: bool = Field(description="Written by the visitor (else by the business: a person or the bot).")
    author: str = Field(description="contact, user, bot, api or campaign.")
    body: str
    media: Optional[VisitorMedia]
    createdAt: str
    csat: bool = Field(False, description="A CSAT question (the chat shows rating buttons under the open one).")


class VisitorCsatAsk(BaseModel):
    messageId: str = Field(description="The message that asks it.")
    question: str


class VisitorCsat(Strict):
    """POST /widget/{widgetId}/csat: the visitor's answer to the open CSAT question."""
    rating: StrictInt = Field(ge=1, le=5, description="1 (bad) to 5 (very good).")
    comment: Optional[str] = Field(None, max_length=csat.MAX_COMMENT, description="Optional, at most 1,000 characters.")


class VisitorCsatAnswered(BaseModel):
    answered: bool


class VisitorHistory(BaseModel):
    messages: list[VisitorMessage]
    cursor: str = Field(description="Where live updates resume (the account's event stream cursor).")
    verified: bool
    csat: Optional[VisitorCsatAsk] = Field(None, description="The CSAT question waiting for the visitor's answer "
                                                              "(asked when their conversation was resolved), or null.")
    openNow: bool = Field(description="Whether the business is open now (its business hours; none set: always).")
    nextOpenAt: Optional[str] = Field(description="When closed: the next opening (ISO 8601 UTC), or null when none "
                                                  "is known.")
    replyFrom: Optional[str] = Field(description="When closed: the next opening as the chat says it, in the "
                                                 "account's time zone: \"9:00 (Europe/Berlin)\" today, \"Mon 9:00 "
                                                 "(Europe/Berlin)\" another day.")


class VisitorSend(Strict):
    body: str = Field(max_length=widget.MAX_BODY * 2, description="At most 2,000 characters.")
    mediaUrl: Optional[str] = Field(None, description="An attachment: the file as a data: URL (image/png, jpeg, "
                                    "gif, webp or application/pdf; --max-media-bytes), its bytes sniffed.")
    mediaContentType: Optional[str] = Field(None, max_length=255)
    website: Optional[str] = Field(None, max_length=500, description="Leave it empty: a field people never see, "
                                                                     "which bots fill (then nothing is stored).")


class VisitorSent(BaseModel):
    message: Optional[VisitorMessage]
    token: Optional[str] = Field(description="The visitor's token: keep it and send it as X-Parley-Visitor.")


class VisitorIdentify(Strict):
    id: Identifier = Field(max_length=widget.MAX_IDENTITY)
    hash: Identifier = Field(max_length=200, description="Hex HMAC-SHA256(identity secret, id), made by your server.")
    email: Optional[Identifier] = Field(None, max_length=widget.MAX_IDENTITY)
    name: Optional[Identifier] = Field(None, max_length=widget.MAX_IDENTITY)


class VisitorEmail(Strict):
    email: str = Field(max_length=widget.MAX_IDENTITY, description="Where the business may answer.")


class VisitorEmailSaved(BaseModel):
    email: str = Field(description="The address as kept (normalized).")
    token: str = Field(description="The visitor's token, now carrying the email: keep it (the first message makes "
                                   "the contact with it).")


class VisitorIdentity(BaseModel):
    verified: bool
    token: Optional[str]


class VisitorUpdates(BaseModel):
    messages: list[VisitorMessage]
    cursor: str


class VisitorUpdatesQuery(BaseModel):
    after: str = Field(description="The cursor of the history, or of the previous answer.")
    wait: Optional[float] = Field(None, ge=0, le=30, description="Seconds to wait for a message (default 25).")
