"""What a service function is given as ``services``: the app's bundle (server.py's Services, built by
open_services) as a Protocol of the attributes services use, so that services import neither server.py nor
the workers they only notify. Read-only properties: open_services sets each worker once, at start (the None
checks some services make on a worker are for tests that build a bundle without it)."""
from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from settings import Settings
    from services.accounts import KeyRegistry
    from services.assignment import Assigner
    from services.bot_runner import BotRunner
    from services.campaign_runner import CampaignRunner
    from services.conversation_status import SnoozeWaker
    from services.delivery import DeliveryWorker
    from services.event_stream import LongPolls
    from services.import_limits import ImportLimits
    from services.import_runner import ImportWorker
    from services.live import Hub
    from services.mail_in import MailImporter
    from services.ratelimit import RateLimiter
    from services.secretbox import SecretBox
    from services.sla import SlaWatcher
    from services.typing import Typing
    from storage.postgres_db import PostgresDatabase
    from storage.sqlite_db import Database

    Db = Database | PostgresDatabase  # storage/db.py open_database's


class Services(Protocol):
    @property
    def settings(self) -> Settings: ...
    @property
    def db(self) -> Db: ...
    @property
    def box(self) -> SecretBox: ...
    @property
    def keys(self) -> KeyRegistry: ...
    @property
    def limiter(self) -> RateLimiter: ...
    @property
    def delivery(self) -> DeliveryWorker: ...
    @property
    def imports(self) -> ImportWorker: ...
    @property
    def import_limits(self) -> ImportLimits: ...
    @property
    def campaigns(self) -> CampaignRunner: ...
    @property
    def snoozes(self) -> SnoozeWaker: ...
    @property
    def sla(self) -> SlaWatcher: ...
    @property
    def bot(self) -> BotRunner: ...
    @property
    def assigner(self) -> Assigner: ...
    @property
    def hub(self) -> Hub: ...
    @property
    def typing(self) -> Typing: ...
    @property
    def long_polls(self) -> LongPolls: ...
    @property
    def mail_in(self) -> MailImporter: ...
    @property
    def clock(self) -> Callable[[], datetime] | None: ...  # business hours' and the SLA's now; None: the real one


# A JSON object as the API takes or gives it (a request's body, an answer, a setting): its values are arbitrary JSON.
JSONObject = dict[str, Any]
