"""The email channel's import (issue 39; docs/design.md §8 "Email"): each account whose `email` setting names an
IMAP server has one connection to its folder, kept by one process (the importer's lease, services/leases.py), which
imports each new mail as an inbound message of channel `email` through the API's own inbound path
(services/messaging.receive_inbound: contact by From address, bot, business hours, SLA, assignment, events).

- New mail: IMAP IDLE, renewed every third of the lease (so a process that lost the lease lets go soon), or, on a
  server without IDLE, a look every --mail-poll-seconds. A lost connection is made again with backoff (1 s doubling
  to 5 min, with jitter); a setting changed in the meantime is read at the next round of the importer. Mail that
  arrives within GATHER_SECONDS of the news of one is fetched, parsed (in one trip to the executor) and stored with
  it: a burst costs one look, not one per mail (bench/README.md, email_load).
- Nothing twice, none missed: a checkpoint per account (storage/mail.py: the mailbox, its UIDVALIDITY, the highest
  UID imported) moves only after the mails up to it are stored, and each mail's messageSid is its Message-ID
  (`email:<id>`), which the inbound write stores once. A mailbox seen for the first time starts at its next UID (the
  mail already there is its past); a UIDVALIDITY that changed (the folder was made anew) imports what arrived since
  the day before the last checkpoint, the Message-IDs keeping out what was imported.
- Which conversation: the contact of the From address; a mail whose In-Reply-To or References names one of
  Parley's own Message-IDs (signed, services/mail_out.py) joins that contact even from another address. The
  subject never threads.
- Loops and bounces: an automatic mail (Auto-Submitted, Precedence bulk|junk|list, X-Autoreply) is stored but gets
  no bot answer and no outside-hours message; a bounce (a delivery status notification) marks our message Failed
  with its reason and is not stored as a message (no contact); mail from the account's own address is skipped."""
from __future__ import annotations

import asyncio
import logging
import random
import re
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

from common import email_channel
from common import errors
from common.validation import MESSAGE_BODY_MAX
from common.ids import iso, parse_iso, utcnow
from services import email_settings, mail_out, mail_parse, media, messaging
from services.context import JSONObject
from services.mail_connect import ImapClient, MailError, imap_session, logout_imap
from services.worker_loop import WorkerLoop
from storage import mail as store
from storage import messages as message_store
from storage.interface import Store

if TYPE_CHECKING:
    import aioimaplib  # its Response (the library ships no types)

    from services.context import Services

log = logging.getLogger("parley.email")

CHANNEL = email_channel.CHANNEL
FETCH_BATCH = 50         # mails fetched per UID FETCH; the checkpoint moves after each batch
FETCH_BYTES = 4 << 20    # ... unless they are bigger together than this: a big mail is fetched alone, in pieces
FETCH_PIECE = 1 << 20    # of this many bytes
BACKOFF_FIRST, BACKOFF_MAX = 1.0, 300.0
GATHER_SECONDS = 0.25    # after news of mail, what else arrives this soon is fetched with it (one look per burst)
STATUS_EVERY = timedelta(seconds=60)  # a working import writes its checked_at this often at most
_NUMBER = {name: re.compile(rf"\[{name} (\d+)\]".encode()) for name in ("UIDVALIDITY", "UIDNEXT")}
_FETCHED_UID = re.compile(rb"UID (\d+)")
_SIZE = re.compile(rb"RFC822\.SIZE (\d+)")
_EXISTS = re.compile(rb"^\d+ EXISTS$")


def mailbox_key(imap: Mapping[str, Any]) -> str:
    """What names the mailbox a checkpoint belongs to: another host, user or folder starts afresh."""
    return f"{imap['host']}:{imap.get('port') or ''}/{imap.get('username') or ''}/{imap.get('folder') or 'INBOX'}"


def _number(response: aioimaplib.Response, name: str) -> int | None:
    for line in response.lines:
        if isinstance(line, (bytes, bytearray)):
            found = _NUMBER[name].search(line)
            if found:
                return int(found[1])
    return None


class MailImporter(WorkerLoop):
    """Keeps one Mailbox task per account with an IMAP server, while this process holds the lease. Each round reads
    which accounts have one (a changed setting restarts that account's task); stop() ends them."""

    name = "email-import"
    poll_seconds = 30.0  # a new or changed setting is picked up this soon (or at once after notify())

    def __init__(self, services: Services) -> None:
        super().__init__()
        self.services = services
        self.boxes: dict[str, Mailbox] = {}  # account id -> Mailbox
        self.idle_seconds: float | None = None

    async def round(self) -> None:
        wanted: dict[str, JSONObject] = {}
        for account_id, settings in await store.mailbox_accounts(self.services.db):
            if email_channel.server(settings, "imap") is not None:
                wanted[account_id] = settings[email_channel.SETTING]  # another setting changed restarts nothing
        for account_id in list(self.boxes):
            box = self.boxes[account_id]
            if account_id not in wanted or box.settings != wanted[account_id]:
                await self.boxes.pop(account_id).stop()
        for account_id, settings in wanted.items():
            if account_id not in self.boxes:
                self.boxes[account_id] = Mailbox(self, account_id, settings).start()
        return None

    def may_run(self) -> bool:
        """Whether this process still holds the lease (always, without one: a single process in tests)."""
        return not self._stopping and (self.lease is None or self.lease.held)

    @property
    def wait_seconds(self) -> float:
        """How long one IDLE (or one wait between looks) lasts at most: a third of the lease, so that the lease is
        looked at again well before it could lapse. A new IDLE also sees what arrived just before it started, which
        some servers (pymap) report only to a command after it. idle_seconds: tests set it shorter."""
        if self.idle_seconds is not None:
            return self.idle_seconds
        return self.lease.seconds / 3 if self.lease is not None else 60.0

    async def stop(self) -> None:
        self._stopping = True  # the mailboxes first, then the lease is given up
        boxes, self.boxes = list(self.boxes.values()), {}
        await asyncio.gather(*(box.stop() for box in boxes), return_exceptions=True)
        await super().stop()


class Mailbox:
    """One account's mailbox: connect, import what is new, wait (IDLE or poll), again; reconnect with backoff."""

    def __init__(self, importer: MailImporter, account_id: str, settings: JSONObject,
                 rng: random.Random | None = None) -> None:
        """settings: the account's `email` setting."""
        self.importer, self.services = importer, importer.services
        self.account_id, self.settings = account_id, settings
        # An IMAP server: the importer makes a Mailbox only for settings that have one.
        self.imap = cast(JSONObject, email_channel.server({email_channel.SETTING: settings}, "imap"))
        self.address = (settings.get("address") or "").lower()
        self.key = mailbox_key(self.imap)
        self.rng = rng or random.Random()
        self.task: asyncio.Task[None] | None = None
        self.imported = 0        # mails stored since start (tests and the bench read it)
        self.last_error: str | None = None  # the last connection failure, in words
        self._recorded: str | None = ""  # the error last written (None: it works; "": nothing written yet)
        self._idle_recorded: bool | None = None  # whether IDLE is used, as last written
        self._checked: datetime | None = None  # when checked_at was last written
        self.rounds = 0          # looks at the folder finished (tests wait on it)

    def start(self) -> Mailbox:
        self.task = asyncio.ensure_future(self._run())
        return self

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
            self.task = None

    async def _run(self) -> None:
        backoff = BACKOFF_FIRST
        while self.importer.may_run():
            try:
                await self._session()
                backoff = BACKOFF_FIRST
            except asyncio.CancelledError:
                raise
            except MailError as exc:
                log.warning("email import for account %s: %s; trying again in %.0f s", self.account_id, exc, backoff)
                await self._failed(str(exc))
            except Exception as exc:
                log.exception("email import for account %s failed; trying again in %.0f s", self.account_id, backoff)
                await self._failed(f"the import failed unexpectedly ({exc.__class__.__name__}); the server's log "
                                   "has the details")
            if not self.importer.may_run():
                break
            await asyncio.sleep(backoff * (1 + self.rng.uniform(0, 0.2)))
            backoff = min(backoff * 2, BACKOFF_MAX)
        if self.importer.boxes.get(self.account_id) is self:  # the lease is lost: the next round starts it again
            del self.importer.boxes[self.account_id]

    async def _session(self) -> None:
        settings = self.services.settings
        timeout = settings.mail_timeout_seconds
        client = await imap_session(self.imap, email_settings.password(self.services.box, self.imap), timeout=timeout,
                                    allow_private=settings.allow_private_webhooks)
        try:
            last_uid, uidvalidity = await self._start_point(client, timeout)
            idle = client.has_capability("IDLE")
            while self.importer.may_run():
                changed, before = True, self.imported
                while changed:  # until a search finds nothing new and the server reported no arrival meanwhile
                    last_uid, changed = await self._import_after(client, uidvalidity, last_uid, timeout)
                    if changed:
                        await asyncio.sleep(GATHER_SECONDS)
                await self._looked(self.imported - before, idle)
                self.rounds += 1
                if idle:
                    await self._idle(client, self.importer.wait_seconds)
                else:
                    await asyncio.sleep(min(settings.mail_poll_seconds, self.importer.wait_seconds))
                    await _ok(client.noop(), timeout, "NOOP")
        finally:
            for task in list(client.tasks):  # an IDLE cut short by a stop: its command ends with the connection
                task.cancel()
            await logout_imap(client, timeout)

    async def _looked(self, imported: int, idle: bool) -> None:
        """A look at the folder worked (imported: how many mails it stored): the state GET /v1/account and Settings >
        Email show (storage.mail.record_import_status). Written when something changed (it worked again, mail was
        imported, IDLE or polling), else at most every STATUS_EVERY: checked_at is that fresh."""
        now = utcnow()
        fields: dict[str, str | int | None] = {}
        if self._recorded is not None or self._idle_recorded != idle:
            fields.update(error=None, since=iso(now), idle=int(idle))
        if imported:
            fields.update(imported_at=iso(now), imported_count=imported)
        if fields or self._checked is None or now - self._checked >= STATUS_EVERY:
            fields["checked_at"] = iso(now)
        if await self._record(fields):
            self._recorded, self._idle_recorded, self._checked = None, idle, now

    async def _failed(self, error: str) -> None:
        """The connection or a look failed (error in words): recorded with its time, every time."""
        self.last_error = error
        now = iso(utcnow())
        fields: dict[str, str | int | None] = {"last_error": error, "error_at": now}
        if error != self._recorded:
            fields.update(error=error, since=now)
        if await self._record(fields):
            self._recorded = error

    async def _record(self, fields: Mapping[str, str | int | None]) -> bool:
        try:
            await store.record_import_status(self.services.db, self.account_id, fields)
            return True
        except Exception:
            log.warning("email import for account %s: its state could not be recorded", self.account_id)
            return False

    async def _start_point(self, client: ImapClient, timeout: float) -> tuple[int, int]:
        """(the UID after which mail is new, the UIDVALIDITY), from the checkpoint; the first look at a mailbox
        records one at its next UID; a changed UIDVALIDITY imports what arrived since the last checkpoint."""
        uidvalidity = _number(client.selected, "UIDVALIDITY")
        if uidvalidity is None:
            raise MailError(f"IMAP server {self.imap['host']} gave the folder no UIDVALIDITY", retryable=False)
        mark = await store.checkpoint(self.services.db, self.account_id)
        if mark is not None and mark["mailbox"] == self.key and mark["uidvalidity"] == uidvalidity:
            return mark["last_uid"], uidvalidity
        if mark is not None and mark["mailbox"] == self.key:  # the folder was made anew: its UIDs start over
            since = (parse_iso(mark["updated_at"]) - timedelta(days=1)).strftime("%d-%b-%Y")
            log.warning("email import for account %s: UIDVALIDITY changed (%s -> %s); importing mail since %s",
                        self.account_id, mark["uidvalidity"], uidvalidity, since)
            found = await _ok(client.uid_search("SINCE", since, charset=None), timeout, "UID SEARCH")
            uids = sorted(int(n) for line in found.lines[:-1] for n in bytes(line).split() if n.isdigit())
            await self._import_uids(client, uidvalidity, uids, timeout, 0)
            last = max(uids, default=0)
        else:
            uidnext = _number(client.selected, "UIDNEXT")
            if uidnext is None:
                found = await _ok(client.uid_search("ALL", charset=None), timeout, "UID SEARCH")
                uidnext = max((int(n) for line in found.lines[:-1] for n in bytes(line).split() if n.isdigit()),
                              default=0) + 1
            last = uidnext - 1
        await store.set_checkpoint(self.services.db, self.account_id, self.key, uidvalidity, last, iso(utcnow()))
        return last, uidvalidity

    async def _import_after(self, client: ImapClient, uidvalidity: int, last_uid: int,
                            timeout: float) -> tuple[int, bool]:
        """Import every mail with a UID above last_uid; returns (the new checkpoint, whether to look again: mail
        was imported, or the server reported an arrival (an untagged EXISTS) while it answered the search)."""
        found = await _ok(client.uid_search("UID", f"{last_uid + 1}:*", charset=None), timeout, "UID SEARCH")
        arrived = any(_EXISTS.match(bytes(line)) for line in found.lines[:-1])
        # "n:*" always names the newest mail, even when its UID is below n (RFC 3501 6.4.8)
        uids = sorted(u for u in (int(n) for line in found.lines[:-1] if not _EXISTS.match(bytes(line))
                                  for n in bytes(line).split() if n.isdigit()) if u > last_uid)
        return await self._import_uids(client, uidvalidity, uids, timeout, last_uid), bool(uids) or arrived

    async def _import_uids(self, client: ImapClient, uidvalidity: int, uids: Sequence[int], timeout: float,
                           last_uid: int) -> int:
        for start in range(0, len(uids), FETCH_BATCH):
            batch = uids[start:start + FETCH_BATCH]
            for part, size in await self._by_size(client, batch, timeout):
                if size > FETCH_BYTES:  # alone, in pieces: never whole in memory
                    await self._import_big(client, uidvalidity, part[0], timeout)
                    continue
                fetched = await _ok(client.uid("fetch", ",".join(map(str, part)), "(UID BODY.PEEK[])"),
                                    timeout * 4, "UID FETCH")
                # parsed together, in one trip to the executor (a part is at most FETCH_BYTES): a trip per mail
                # cost more than many a mail's parse
                parsed = await asyncio.get_running_loop().run_in_executor(None, _parse_all, _fetched_mails(fetched))
                del fetched
                while parsed:  # each mail let go once it is imported
                    uid, mail = parsed.pop(0)
                    await import_parsed(self.services, self.account_id, self.address, mail, f"{uidvalidity}:{uid}",
                                        self)
                    del mail
            last_uid = max(last_uid, batch[-1])
            await store.set_checkpoint(self.services.db, self.account_id, self.key, uidvalidity, last_uid,
                                       iso(utcnow()))
        return last_uid

    async def _by_size(self, client: ImapClient, batch: Sequence[int], timeout: float) -> list[tuple[list[int], int]]:
        """The batch in parts fetched at once, [(uids, their size)]: mails up to FETCH_BYTES together, a bigger one
        alone (the whole answer to a FETCH is held in memory)."""
        sizes = await _ok(client.uid("fetch", ",".join(map(str, batch)), "(UID RFC822.SIZE)"), timeout, "UID FETCH")
        size_of: dict[int, int] = {}
        for line in sizes.lines:
            if isinstance(line, bytes) and b"FETCH" in line:
                uid_found, size_found = _FETCHED_UID.search(line), _SIZE.search(line)
                if uid_found and size_found:
                    size_of[int(uid_found[1])] = int(size_found[1])
        parts: list[tuple[list[int], int]] = []
        part: list[int] = []
        total = 0
        for uid in batch:
            size = size_of.get(uid, 0)
            if part and total + size > FETCH_BYTES:
                parts.append((part, total))
                part, total = [], 0
            part.append(uid)
            total += size
        return parts + [(part, total)] if part else parts

    async def _import_big(self, client: ImapClient, uidvalidity: int, uid: int, timeout: float) -> None:
        """A big mail fetched FETCH_PIECE bytes at a time (BODY.PEEK[]<offset.length>), each piece read as it comes
        (mail_parse.MailReader: its attachments decoded, the literal let go); a mail the reader cannot take apart is
        fetched and parsed whole, as any other."""
        loop, offset = asyncio.get_running_loop(), 0
        reader = mail_parse.MailReader(spool=media.media_dir(self.services.settings))  # attachments decoded to files
        try:
            while True:
                answer = await _ok(client.uid("fetch", str(uid), f"(BODY.PEEK[]<{offset}.{FETCH_PIECE}>)"), timeout,
                                   "UID FETCH")
                piece = next((line for line in answer.lines if isinstance(line, bytearray)), None)
                del answer
                if piece:
                    await loop.run_in_executor(None, reader.feed, piece)
                    offset += len(piece)
                if not piece or len(piece) < FETCH_PIECE:
                    break
                del piece
            parsed = await loop.run_in_executor(None, reader.parsed)
        except BaseException as exc:
            await loop.run_in_executor(None, reader.discard)
            if not isinstance(exc, mail_parse.NotCut):
                raise
            del reader
            fetched = await _ok(client.uid("fetch", str(uid), "(UID BODY.PEEK[])"), timeout * 4, "UID FETCH")
            for found_uid, raw in _fetched_mails(fetched):
                await self.import_mail(raw, f"{uidvalidity}:{found_uid}")
            return
        del reader
        await import_parsed(self.services, self.account_id, self.address, parsed, f"{uidvalidity}:{uid}", self)

    async def _idle(self, client: ImapClient, seconds: float) -> None:
        """Wait in IDLE until the server says something (new mail) or ``seconds`` pass."""
        idle = await client.idle_start(timeout=seconds)
        try:
            await client.wait_server_push(timeout=seconds + 1)
            await asyncio.sleep(GATHER_SECONDS)
        except TimeoutError:
            pass
        finally:
            if client.has_pending_idle():
                client.idle_done()
            await asyncio.wait_for(idle, self.services.settings.mail_timeout_seconds)

    async def import_mail(self, raw: bytes | bytearray, place: str) -> str:
        """One mail's bytes into Parley; place ("uidvalidity:uid") names it when it has no Message-ID. Returns
        what became of it: 'stored', 'repeat', 'bounce', 'own' or 'skipped'."""
        return await import_mail(self.services, self.account_id, self.address, raw, place, self)


async def import_status(db: Store, account_id: str) -> JSONObject | None:
    """How the account's mailbox import goes (GET /v1/account's settings.email.importStatus, Settings > Email), or
    None before its first look: {mailbox, ok, error, since, lastError {message, at}, checkedAt, lastImport {at,
    count}, lastUid, uidValidity, idle}."""
    row = await store.import_status(db, account_id)
    if row is None:
        return None
    return {"mailbox": row["mailbox"], "ok": row["error"] is None, "error": row["error"], "since": row["since"],
            "lastError": {"message": row["last_error"], "at": row["error_at"]} if row["last_error"] else None,
            "checkedAt": row["checked_at"],
            "lastImport": {"at": row["imported_at"], "count": row["imported_count"]} if row["imported_at"] else None,
            "lastUid": row["last_uid"], "uidValidity": row["uidvalidity"],
            "idle": None if row["idle"] is None else bool(row["idle"])}


async def with_import_status(db: Store, account_id: str, shown: JSONObject) -> JSONObject:
    """An account as the API shows it (services.accounts.public_account) with its mailbox import's state in
    settings.email.importStatus when it has an IMAP server (null before the first look)."""
    email = (shown.get("settings") or {}).get(email_channel.SETTING)
    if not email or not email.get("imap"):
        return shown
    return {**shown, "settings": {**shown["settings"], email_channel.SETTING: {
        **email, "importStatus": await import_status(db, account_id)}}}


async def import_mail(services: Services, account_id: str, address: str, raw: bytes | bytearray, place: str,
                      counter: Mailbox | None = None) -> str:
    """See Mailbox.import_mail (a function: the bench and tests feed mail through it without a server)."""
    parsed = await asyncio.get_running_loop().run_in_executor(None, mail_parse.parse, raw)
    del raw  # a bytearray's memory may be the attachment's now (mail_parse)
    return await import_parsed(services, account_id, address, parsed, place, counter)


async def import_parsed(services: Services, account_id: str, address: str, parsed: mail_parse.ParsedMail, place: str,
                        counter: Mailbox | None = None) -> str:
    """A mail read already (mail_parse.ParsedMail) into Parley; see Mailbox.import_mail. Its attachments' temporary
    files are stored or removed."""
    try:
        return await _import_parsed(services, account_id, address, parsed, place, counter)
    finally:
        if any(attachment.path for attachment in parsed.attachments):
            await asyncio.get_running_loop().run_in_executor(None, parsed.discard)


async def _import_parsed(services: Services, account_id: str, address: str, parsed: mail_parse.ParsedMail,
                         place: str, counter: Mailbox | None) -> str:
    key = mail_out.message_id_key(services.box)
    if parsed.bounce is not None:
        return await _bounced(services, account_id, key, parsed.bounce)
    if not parsed.from_address or parsed.from_address == address or \
            (parsed.message_id and mail_out.verified_message_id(key, account_id, parsed.message_id)):
        return "own" if parsed.from_address else "skipped"  # Parley never answers its own mail
    thread_contact_id = await _thread_contact(services, account_id, key, parsed.references)
    body, stored_media, extra = await _with_attachments(services, parsed)
    if len(body) > MESSAGE_BODY_MAX:  # the limit of every message body; the whole mail stays in the mailbox
        body = body[:MESSAGE_BODY_MAX - 60].rstrip() + "\n\n[the rest of this mail is too long to show here]"
    sid = f"email:{parsed.message_id or place}"
    mail = {"subject": parsed.subject or None, "messageId": parsed.message_id, "references": parsed.references,
            "quoted": parsed.quoted and parsed.quoted[:MESSAGE_BODY_MAX], "automatic": parsed.automatic or None}
    try:
        message, created = await messaging.receive_inbound(
            services, account_id, message_sid=sid, from_id=parsed.from_address, to_id=address or None, body=body,
            channel=CHANNEL, first_name=parsed.from_name, auto_submitted=parsed.automatic, mail=mail,
            stored_media=stored_media, thread_contact_id=thread_contact_id)
    except (errors.Conflict, errors.Invalid) as exc:  # a Message-ID stored already as another mail (a forged or
        # reused one), or what no inbound message may be: skipped, or the mailbox would stop at it for ever
        log.warning("email import for account %s: mail %s not stored: %s", account_id, sid, exc.message)
        return "skipped"
    if not created:
        return "repeat"
    messaging.after_inbound(services, message)
    for number, (name, attachment_media) in enumerate(extra, start=2):  # each further attachment, after it
        await messaging.receive_inbound(
            services, account_id, message_sid=f"{sid}#{number}", from_id=parsed.from_address, to_id=address or None,
            body=name, channel=CHANNEL, message_type="attachment", stored_media=attachment_media,
            mail={**mail, "quoted": None})
    if counter is not None:
        counter.imported += 1
    return "stored"


async def _thread_contact(services: Services, account_id: str, key: bytes, references: Iterable[str]) -> str | None:
    """The contact of the first of Parley's own Message-IDs among the references, or None."""
    for reference in references:
        message_id = mail_out.verified_message_id(key, account_id, reference)
        if message_id is not None:
            found = await message_store.get_message(services.db, account_id, message_id)
            if found is not None:
                return found["contact_id"]
    return None


async def _with_attachments(services: Services, parsed: mail_parse.ParsedMail
                            ) -> tuple[str, tuple[str, str] | None, list[tuple[str, tuple[str, str]]]]:
    """(the body, the first attachment stored or None, [(name, stored)] of the others): an attachment refused (too
    large, or not what its type says) is named in the body instead."""
    body = parsed.reply
    kept: list[tuple[str, tuple[str, str]]] = []
    refused: list[str] = []
    for attachment in parsed.attachments:
        try:
            field = f"attachment {attachment.filename}"
            stored = await (media.accept_file(services.settings, attachment.path, attachment.content_type, field)
                            if attachment.path else
                            media.accept_bytes(services.settings, attachment.data, attachment.content_type, field))
        except (errors.Invalid, errors.PayloadTooLarge) as exc:
            refused.append(f"[{exc.message}: not kept]")
            continue
        kept.append((attachment.filename, stored))
    if refused:
        body = "\n\n".join(filter(None, [body, *refused]))
    if not body and kept:
        body = kept[0][0]
    return body, kept[0][1] if kept else None, kept[1:]


async def _bounced(services: Services, account_id: str, key: bytes, bounce: mail_parse.Bounce) -> str:
    message_id = mail_out.verified_message_id(key, account_id, bounce.original_id)
    if message_id is None:
        log.info("email import for account %s: a bounce for a mail that is not one of ours (%s): ignored",
                 account_id, bounce.original_id)
        return "bounce"
    error = {"at": iso(utcnow()), "httpStatus": None, "error": bounce.reason, "response": bounce.recipient,
             "nextAttemptAt": None}
    if await store.mark_bounced(services.db, account_id, message_id, error, iso(utcnow())):
        log.info("email import for account %s: message %s bounced: %s", account_id, message_id, bounce.reason)
    return "bounce"


def _parse_all(mails: list[tuple[int, bytearray]]) -> list[tuple[int, mail_parse.ParsedMail]]:
    """[(uid, parsed)] of [(uid, bytes)], each mail's bytes handed over to its parse (mail_parse.parse)."""
    parsed = []
    while mails:
        uid, raw = mails.pop(0)
        parsed.append((uid, mail_parse.parse(raw)))
        del raw
    return parsed


def _fetched_mails(response: aioimaplib.Response) -> list[tuple[int, bytearray]]:
    """[(uid, bytearray)] of a UID FETCH (UID BODY.PEEK[]) answer: each mail is a literal after its "n FETCH (UID u …"
    (not copied: a mail may be tens of megabytes)."""
    found: list[tuple[int, bytearray]] = []
    uid: int | None = None
    for line in response.lines:
        if isinstance(line, bytearray):
            if uid is not None:
                found.append((uid, line))
            uid = None
        else:
            match = _FETCHED_UID.search(line) if b"FETCH" in line else None
            if match:
                uid = int(match[1])
    return found


async def _ok(command: Awaitable[aioimaplib.Response], timeout: float, what: str) -> aioimaplib.Response:
    try:
        response = await asyncio.wait_for(command, timeout)
    except TimeoutError:
        raise MailError(f"IMAP {what} got no answer within {timeout:g} s") from None
    if response.result != "OK":
        text = response.lines[-1] if response.lines else b""
        raise MailError(f"IMAP {what} refused: {bytes(text).decode(errors='replace')}")
    return response
