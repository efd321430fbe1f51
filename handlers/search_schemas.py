"""Pydantic models of GET /v1/search (issue 41), beside handlers/schemas.py."""
from typing import Optional

from pydantic import BaseModel, Field

from services.search import MAX_QUERY_LENGTH


class SearchQuery(BaseModel):
    q: str = Field(min_length=1, max_length=MAX_QUERY_LENGTH, description=(
        "What to find in the messages' text: each word (2+ characters, any case) anywhere in a message, so a "
        "prefix finds the whole word and text without spaces (Chinese, Japanese...) is found by any part of it; "
        "a phone number in any spelling (\"4155550199\", \"415-555-0199\") finds it however it was written."),
        examples=["refund"])
    limit: Optional[int] = Field(None, ge=1, le=200, description="Page size, 1-200 (default 50).")
    cursor: Optional[str] = Field(None, description="nextCursor of the previous page, unchanged.")


class SearchHit(BaseModel):
    messageId: str
    contactId: str
    snippet: str = Field(description="The message's text around the first match, on one line; \"…\" where cut.")
    createdAt: str


class SearchPage(BaseModel):
    data: list[SearchHit] = Field(description="Matching messages of the account, newest first.")
    nextCursor: Optional[str] = Field(description="Pass as ?cursor= for the next page; null on the last.")
