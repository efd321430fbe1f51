"""Models of /v1/account/business-hours (docs/api.md "Business hours and SLA"). The types are checked here;
times, zones, overlaps and dates by services/business_hours.py validate(), whose messages name the field."""
from typing import Optional

from pydantic import Field

from common.validation import Strict

_WEEKLY = ("Day (mon, tue, wed, thu, fri, sat, sun) to its open intervals [[\"HH:MM\", \"HH:MM\"], ...] in local "
           "time (24:00 ends a day); a day not named is closed.")


class BusinessHoursPut(Strict):
    """PUT /v1/account/business-hours: the whole object."""
    timezone: str = Field(description="An IANA time zone.", examples=["Europe/Berlin"])
    weekly: dict[str, list[list[str]]] = Field(default_factory=dict, description=_WEEKLY,
                                               examples=[{"mon": [["09:00", "12:00"], ["13:00", "17:00"]]}])
    holidays: list[str] = Field(default_factory=list, description="Closed dates, YYYY-MM-DD (local).")
    holidayCountry: Optional[str] = Field(None, description="Also closed on this country's public holidays "
                                                            "(ISO 3166 alpha-2, e.g. DE), or null.")
    outsideHoursMessage: Optional[str] = Field(
        None, max_length=1000, description="Sent once per conversation per closed period to a contact who writes "
        "while closed; {{firstName}}, {{lastName}}, {{email}}, {{phone}} and {{nextOpenAt}} are filled. Null: none.")


class BusinessHours(BusinessHoursPut):
    timezone: Optional[str] = Field(description="Null: no business hours (always open).")
    openNow: bool
    closesAt: Optional[str] = Field(description="While open: when this open period ends.")
    nextOpenAt: Optional[str] = Field(description="While closed: when it opens next (null: never within 400 "
                                                  "days).")
