"""Pydantic models of GET /v1/reports/{name} for the OpenAPI document (handlers/schemas.py is full)."""
import datetime
from typing import Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field

from services.reports import DEFAULT_DAYS, MAX_DAYS


class ReportQuery(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    from_: Optional[datetime.date] = Field(None, alias="from", description=(
        f"First day (YYYY-MM-DD, UTC), included; default: {DEFAULT_DAYS} days ending at to. At most {MAX_DAYS} "
        "days before to."))
    to: Optional[datetime.date] = Field(None, description="Last day (YYYY-MM-DD, UTC), included; default today.")
    scope: Optional[Literal["account", "subaccounts"]] = Field(None, description=(
        "account (default): the key's own account; subaccounts: an agency's roll-up over all its sub-accounts."))


class Report(BaseModel):
    report: str = Field(description="The report's name, as in the path.")
    title: str
    from_: str = Field(alias="from", description="First day, included.")
    to: str = Field(description="Last day, included.")
    columns: list[str] = Field(description="The rows' keys in order (the CSV export's header).")
    labels: list[str] = Field(description=(
        "The columns in words, in the same order, as the Reports page heads its tables (\"Messages in\", "
        "\"9 in 10 within\")."))
    rows: list[dict[str, Union[int, float, str, None]]] = Field(description=(
        "Per day for messages, bot-outcomes, deliveries, opt-outs and sla-days (every day of the range, zeros "
        "included; sla-days: the waits for a person's answer that started that day and were answered or "
        "breached, those answered within the SLA, and their percentage, null without any); per agent for "
        "sla-agents (who answered, or was assigned at a breach; userId null: the API or nobody); csat-days: the CSAT "
        "answers given that day, those rating 4 or 5, their percentage (the CSAT score, null without any) and the "
        "average rating; per agent for csat-agents (who had the conversation when it was resolved; userId null: "
        "nobody); "
        "per campaign for campaigns; for first-response: the bot's first responses (responder \"bot\"), then a "
        "person's first response, all people together (responder \"people\", name \"All people\": the time "
        "from the contact's first message to a person's first answer, the bot's messages in between passed over, "
        "so a handoff message does not hide the person's answer), then each person (responder: the user's id, "
        "name: the user's name, else email). Seconds are the upper edge of a histogram bucket, within 10% + 1 s "
        "above the exact figure."))
