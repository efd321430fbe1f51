""""Forgot password?" on the sign-in page (issue 39): a one-time reset link (services/one_time_links.py: single
use, 24 hours, only its hash stored) emailed to each membership of the address whose account has SMTP set
(services/mail_out.py). Passwords are per membership, so each of those accounts' users gets its own link, sent by
that account's server.

The page answers the same whatever the address (no enumeration): the lookup, the links and the mails are made by
a task after the answer (which also keeps the request as fast for a known address as for an unknown one), and
the mails go through the outbox like every delivery. The sign-in page limits the requests per address and per
client (handlers/ui/session.py)."""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, cast

from services import mail_out, one_time_links
from storage import accounts as account_store
from storage import mail as mail_store
from storage.interface import Row

if TYPE_CHECKING:
    from services.context import Services

log = logging.getLogger("parley.forgot_password")

_tasks: set[asyncio.Task[int]] = set()  # the requests being handled: a task needs a reference until it ends


def start(services: Services, base_url: str, email: str | None) -> asyncio.Task[int]:
    """Handle a request after the answer; returns the task (tests wait on it)."""
    task = asyncio.ensure_future(send_links(services, base_url, email))
    _tasks.add(task)
    task.add_done_callback(_finished)
    return task


def _finished(task: asyncio.Task[int]) -> None:
    _tasks.discard(task)
    if not task.cancelled() and task.exception() is not None:
        log.error("forgot password: the reset links could not be made or queued: %r", task.exception())


async def send_links(services: Services, base_url: str, email: str | None) -> int:
    """Queue a reset link by mail for each active membership of the email whose account can send mail; returns how
    many. An unknown or malformed address queues nothing, and says nothing."""
    # Folded as sign-in folds it (handlers/ui/session.py), not validated as a contact's email: the first run's owner
    # signs in as admin@localhost, which a contact's email could not be.
    email = (email or "").strip().lower()
    if not email:
        return 0
    db = services.db
    pairs: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for user in await account_store.get_users_by_email(db, email):
        # The membership's account: users.account_id references it.
        account = cast(Row, await account_store.get_account(db, user["account_id"]))
        row, link = one_time_links.new_link(base_url, user["id"], user["account_id"], "reset")
        mail = mail_out.password_reset(services.box, account, to=user["email"], url=link["url"],
                                       expires_at=link["expiresAt"])
        if mail is not None:
            pairs.append((row, mail))
    if pairs:
        await mail_store.insert_links_with_mail(db, pairs)
        if services.delivery is not None:
            services.delivery.notify()
    log.info("forgot password: %d reset link(s) queued by mail", len(pairs))
    return len(pairs)
