"""GET/PUT /v1/account/business-hours (issue 40): the account's time zone, weekly hours, holidays and
outside-hours message; the SLA's clock counts in them (settings sla)."""
from handlers.base import ApiHandler
from handlers.business_hours_schemas import BusinessHours, BusinessHoursPut
from handlers.openapi import Operation
from services import business_hours, sla


class BusinessHoursHandler(ApiHandler):
    operations = {
        "get": Operation("The account's business hours", {200: BusinessHours}, tags=("account",),
                         description="With openNow, closesAt and nextOpenAt now. Without business hours set the "
                                     "account is always open (timezone null)."),
        "put": Operation("Set the account's business hours", {200: BusinessHours}, body=BusinessHoursPut,
                         tags=("account",),
                         errors={400: "An unknown time zone, day or holiday country, a time that is not HH:MM "
                                      "(00:00-24:00), an interval ending before it starts or overlapping another, "
                                      "an impossible date: the message names the field; nothing is changed."},
                         description="Replaces the whole object. Intervals are local wall-clock times in the "
                                     "time zone, so a daylight-saving change moves them in UTC.")}

    async def get(self):
        self.respond(await business_hours.get(self.services, self.principal.account_id, sla.clock(self.services)()))

    async def put(self):
        body = self.json_body(BusinessHoursPut)
        self.respond(await business_hours.put(self.services, self.principal.account_id,
                                              body.model_dump(exclude_unset=True), sla.clock(self.services)(),
                                              by=self.actor))
