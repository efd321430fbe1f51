"""Reading one mail of the email channel (issue 39; services/mail_in.py imports it): who sent it, its subject, its
text (plain text preferred, HTML turned into text), the quoted history trimmed off for display (quotequail; the
whole text is kept beside it), its attachments, the Message-IDs it answers, whether it is automatic (RFC 3834
Auto-Submitted, Precedence bulk|junk|list, X-Autoreply: stored, never answered) and whether it is a delivery status
notification (a bounce, RFC 3464 multipart/report: it marks our message failed and makes no contact).

Pure functions of the raw bytes (no I/O): CPU work, which the importer runs in an executor. A big mail (an
attachment of megabytes) is parsed without its big base64 bodies (_skeleton): the stdlib's parser keeps a body as a
list of lines, then as one string, then decodes it, some ten times the attachment's size at once; the cut-out bodies
are decoded straight from the raw bytes instead."""
from __future__ import annotations

import binascii
import contextlib
import email
import email.policy
import functools
import os
import re
import secrets
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from email.headerregistry import BaseHeader, HeaderRegistry
from email.message import EmailMessage, Message, MIMEPart
from email.utils import getaddresses, parseaddr
from html.parser import HTMLParser
from pathlib import Path
from typing import cast

import quotequail

MAX_SUBJECT = 998  # RFC 5322's line limit: a longer "subject" is not one
_ID = re.compile(r"<([^<>\s]+)>")


@dataclass
class Attachment:
    filename: str
    content_type: str
    data: bytes | bytearray  # a bytearray: the IMAP literal's own memory (parse)
    path: str | None = None  # read in pieces (MailReader with a spool): the file, data b""; the importer stores it
    # by renaming it or removes it (ParsedMail.discard)


class _Spool:
    """A cut-out body decoded into a temporary file of directory (named as media.store_bytes names its own, so that
    the retention job removes one left by a crash)."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        fd, self.path = tempfile.mkstemp(dir=directory, prefix=".incoming-mail-")
        self.file = os.fdopen(fd, "wb")

    # Added to as a bytearray is (+=). mypy checks += on a union (bytearray | _Spool) as + for a member without
    # __add__ and reports [operator]: the ignores that point here.
    def __iadd__(self, data: bytes | bytearray | memoryview) -> _Spool:
        self.file.write(data)
        return self

    def discard(self) -> None:
        self.file.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


@dataclass
class Bounce:
    """A delivery status notification: the Message-ID of the mail that failed (None when the report does not say),
    the recipient that failed and why, in words."""
    original_id: str | None
    recipient: str | None
    reason: str


@dataclass
class ParsedMail:
    message_id: str | None
    from_address: str | None
    from_name: str | None
    subject: str
    text: str           # the whole text
    reply: str          # the text without its quoted history (what the inbox shows, the bot reads)
    quoted: str | None  # the history trimmed off, None when there is none
    references: list[str] = field(default_factory=list)  # In-Reply-To first, then References newest first
    automatic: bool = False
    bounce: Bounce | None = None
    attachments: list[Attachment] = field(default_factory=list)

    def discard(self) -> None:
        """Remove the attachments' temporary files that were not stored."""
        for attachment in self.attachments:
            if attachment.path:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(attachment.path)


def message_ids(value: object) -> list[str]:
    """The Message-IDs of an In-Reply-To or References header, without their angle brackets."""
    return _ID.findall(str(value or ""))


class _HeaderCache(HeaderRegistry):
    """The default header registry, with the parsed MIME headers kept: the email package parses a header anew on every
    read, and walking a mail's parts reads each part's Content-Type about ten times (get_body, iter_attachments,
    get_content_type), each a full RFC 2045 parse: most of a small mail's import (bench/HISTORY.md, 2026-11-29).
    A parsed header is read-only, so one object may serve every read of the same name and value."""

    def __call__(self, name: str, value: str) -> BaseHeader:
        if name.lower() in _CACHED_HEADERS:
            return _cached_header(name, value)
        return super().__call__(name, value)

    def parse(self, name: str, value: str) -> BaseHeader:
        return super().__call__(name, value)

    def __getitem__(self, name: str) -> type[BaseHeader]:
        # the registry makes a new class for every header it parses (type(...) of the name's class and its base):
        # one per name serves them all
        return _header_class(name.lower())


@functools.lru_cache(maxsize=256)
def _header_class(name: str) -> type[BaseHeader]:
    return HeaderRegistry.__getitem__(_HEADERS, name)


_CACHED_HEADERS = frozenset(("content-type", "content-disposition", "content-transfer-encoding"))
_HEADERS = _HeaderCache()


@functools.lru_cache(maxsize=512)
def _cached_header(name: str, value: str) -> BaseHeader:
    return _HEADERS.parse(name, value)


POLICY = email.policy.default.clone(header_factory=_HEADERS)

def is_automatic(message: Message) -> bool:
    """RFC 3834 and the conventions before it: the mail was sent by a machine, and answering it may start a loop."""
    auto = str(message.get("Auto-Submitted") or "").strip().lower()
    precedence = str(message.get("Precedence") or "").strip().lower()
    return (auto.startswith("auto-") or precedence in ("bulk", "junk", "list") or message.get("X-Autoreply") is not None
            or message.get("X-Autorespond") is not None)


def parse(raw: bytes | bytearray) -> ParsedMail:
    """The ParsedMail of a mail's bytes: bytes, or a bytearray that is handed over (not copied, and its memory may
    become an attachment's: the caller reads it no more)."""
    if len(raw) >= SKELETON_FROM:
        skeleton, bodies = _skeleton(raw)
        if skeleton is not None:  # (and bodies: a skeleton has cut at least one)
            try:
                return _parsed(email.message_from_bytes(skeleton, policy=POLICY), bodies)
            except NotCut:
                pass  # a cut body is not an attachment's whole base64 body: parsed whole, as any mail
    return _parsed(email.message_from_bytes(bytes(raw), policy=POLICY), None)


_PLAIN_HEADERS = ("from", "subject", "message-id", "in-reply-to", "references")


def _plain_headers(message: EmailMessage) -> dict[str, str]:
    """From, Subject and the Message-ID headers as text: each read from its raw value when that is plain ASCII
    without encoded words (RFC 2047), which reads as the header registry's parse would (folding aside, which the readers
    below ignore; an old-style `addr (Name)` keeps its name, which the registry's str() dropped), else through that
    parse. The registry's parse of every mail's own From (a full RFC 5322
    address parse, for the str() that parseaddr then reads) was over a quarter of a small mail's parse
    (bench/HISTORY.md)."""
    raw: dict[str, str] = {}
    for name, value in message.raw_items():
        key = name.lower()
        if key in _PLAIN_HEADERS and key not in raw:  # the first one, as Message.get reads
            raw[key] = value
    return {key: value if value.isascii() and "=?" not in value else str(message.get(key) or "")
            for key, value in raw.items()}


def _parsed(message: EmailMessage, bodies: Mapping[str, _Body] | None) -> ParsedMail:
    headers = _plain_headers(message)
    name, address = parseaddr(headers.get("from", ""))
    subject = " ".join(headers.get("subject", "").split())[:MAX_SUBJECT]
    ids = message_ids(headers.get("message-id"))
    references = message_ids(headers.get("in-reply-to")) + list(reversed(message_ids(headers.get("references"))))
    bounce = _bounce(message)
    text = _text_of(message) if bounce is None else ""
    reply, quoted = trim_quoted(text)
    return ParsedMail(message_id=ids[0] if ids else None, from_address=address.strip().lower() or None,
                      from_name=name.strip() or None, subject=subject, text=text, reply=reply, quoted=quoted,
                      references=list(dict.fromkeys(references)), automatic=is_automatic(message) or bounce is not None,
                      bounce=bounce, attachments=_attachments(message, bodies, bounce is not None))


def _text_of(message: EmailMessage) -> str:
    """Plain text preferred; else the HTML part as text; "" when the mail has neither."""
    part = message.get_body(preferencelist=("plain",))
    if part is not None:
        return _normalized(_content(part))
    part = message.get_body(preferencelist=("html",))
    if part is not None:
        return _normalized(html_to_text(_content(part)))
    return ""


def _content(part: MIMEPart) -> str:
    try:
        return part.get_content()
    except (LookupError, UnicodeError, AssertionError):  # an unknown charset or a broken encoding
        payload = _decoded(part) or b""
        return payload.decode("utf-8", errors="replace")


def _decoded(part: MIMEPart) -> bytes | None:
    """A leaf part's body decoded from its transfer encoding (get_payload(decode=True)), None when it has none."""
    # Typed as any payload (a multipart's list, a message's Message): a part that is neither decodes to bytes or None.
    return cast("bytes | None", part.get_payload(decode=True))


def _normalized(text: str) -> str:
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def trim_quoted(text: str) -> tuple[str, str | None]:
    """(the reply, the quoted history or None): quotequail finds where the history starts ("On … wrote:", lines of
    "> ", and "-----Original Message-----", which it reads as a forward: Outlook's replies look so); the history
    keeps its header line and is shown on request. A mail that is all quote (a bare forward) keeps its whole text."""
    if not text:
        return text, None
    try:
        found = quotequail.unwrap(text)
    except Exception:  # a library fault must not stop the import: the whole text is the reply
        return text, None
    if not found or not (found.get("text_top") or "").strip():
        return text, None
    top = found["text_top"].strip()
    at = text.find(top)
    quoted = text[at + len(top):].strip() if at >= 0 else found.get("text", "").strip()
    if not quoted:
        return text, None
    return top, quoted


def _attachments(message: EmailMessage, bodies: Mapping[str, _Body] | None, bounce: bool) -> list[Attachment]:
    """The attachments; with bodies (a skeleton's), each cut-out body must be one attachment's whole base64 body, or
    NotCut."""
    found: list[Attachment] = []
    used: set[str] = set()
    for part in [] if bounce else message.iter_attachments():
        if part.is_multipart() or part.get_content_maintype() == "message":
            continue
        data = _payload(part, bodies, used) if bodies else _decoded(part)
        if isinstance(data, _Spool):
            data.file.close()
            if os.path.getsize(data.path):
                found.append(Attachment(filename=part.get_filename() or "attachment",
                                        content_type=part.get_content_type(), data=b"", path=data.path))
            else:
                data.discard()
            continue
        if not data:
            continue
        found.append(Attachment(filename=part.get_filename() or "attachment", content_type=part.get_content_type(),
                                data=data))
    if bodies and used != set(bodies):
        raise NotCut
    return found


# ---- big mails --------------------------------------------------------------------------------

SKELETON_FROM = 1 << 20  # mails from this size on are parsed without their big base64 bodies
_CUT_LINES = 1000        # a run of at least this many full base64 lines (57 kB decoded) is cut out
# A base64 line whose length is a multiple of 4 (runs of them decode piecewise) and not the last (no padding)
_B64_LINE = re.compile(rb"^(?:[A-Za-z0-9+/]{4}){15,19}\r?\n", re.M)
_DECODE_STEP = 1 << 20   # characters decoded per call


# A cut-out body: (the raw mail, start, end) of its base64 lines (_skeleton), or decoded already as it arrived
# (MailReader: in memory, or into a spool file).
_Body = tuple[bytes | bytearray, int, int] | bytearray | _Spool


class NotCut(Exception):
    """A cut-out body is not what the skeleton took it for: the mail is parsed whole."""


class MailReader:
    """A big mail read in pieces as they arrive (an IMAP literal fetched a part at a time, services/mail_in.py): its
    runs of _CUT_LINES+ base64 lines are decoded as they come, the rest kept as the skeleton, so that the mail is
    never whole in memory; feed(piece) each piece in order, then parsed() (NotCut: the mail must be parsed whole).
    CPU work: run both in an executor."""

    def __init__(self, spool: Path | None = None) -> None:
        """spool: a directory (the media directory) to decode the bodies into, each a temporary file; else in
        memory."""
        self.spool = spool
        self.skeleton = bytearray()
        self.bodies: dict[str, bytearray | _Spool] = {}
        self.carry = b""       # the last piece's incomplete last line
        self.run: list[bytes] = []
        self.run_lines = 0  # the base64 lines of a run too short yet to be cut out
        self.body: bytearray | _Spool | None = None  # the decoded bytes of the run being cut out
        self.tag = secrets.token_hex(8)

    def feed(self, piece: bytes | bytearray | memoryview) -> None:
        data = self.carry + bytes(piece)
        cut = data.rfind(b"\n") + 1
        self.carry = data[cut:]
        span_start = span_end = 0
        lines = 0
        with memoryview(data) as view:  # spans decoded without a copy
            for line in _B64_LINE.finditer(data, 0, cut):
                if line.start() != span_end:
                    self._span(view[span_start:span_end], lines)
                    self._gap(data[span_end:line.start()])
                    span_start, lines = line.start(), 0
                span_end, lines = line.end(), lines + 1
            self._span(view[span_start:span_end], lines)
        self._gap(data[span_end:cut])

    def parsed(self) -> ParsedMail:
        """The ParsedMail (its attachments' temporary files are the caller's: ParsedMail.discard); NotCut when the
        mail must be parsed whole."""
        self._gap(self.carry)
        self._close()
        message = email.message_from_bytes(bytes(self.skeleton), policy=POLICY)
        try:
            return _parsed(message, self.bodies or None)
        except BaseException:
            self.discard()
            raise

    def discard(self) -> None:
        """Remove the temporary files (a mail not imported, or parsed whole after all)."""
        for body in self.bodies.values():
            if isinstance(body, _Spool):
                body.discard()

    def _span(self, span: memoryview, lines: int) -> None:
        if not lines:
            return
        if self.body is not None:
            self.body += binascii.a2b_base64(span)  # type: ignore[operator]  # see _Spool.__iadd__
            return
        self.run.append(bytes(span))
        self.run_lines += lines
        if self.run_lines >= _CUT_LINES:
            marker = f"ParleyCut{self.tag}N{len(self.bodies)}"
            self.skeleton += marker.encode() + (b"\r\n" if self.run[0].endswith(b"\r\n") else b"\n")
            self.body = self.bodies[marker] = bytearray() if self.spool is None else _Spool(self.spool)
            for kept in self.run:
                self.body += binascii.a2b_base64(kept)  # type: ignore[operator]  # see _Spool.__iadd__
            self.run, self.run_lines = [], 0

    def _gap(self, text: bytes) -> None:
        if text:
            self._close()
            self.skeleton += text

    def _close(self) -> None:
        self.body = None
        self.skeleton += b"".join(self.run)
        self.run, self.run_lines = [], 0


def _skeleton(raw: bytes | bytearray) -> tuple[bytes | None, dict[str, tuple[bytes | bytearray, int, int]]]:
    """(the mail with each run of _CUT_LINES+ base64 lines replaced by a marker line, {marker: (raw, start, end)})."""
    runs: list[tuple[int, int]] = []
    start: int | None = None
    end, lines = -1, 0  # -1: no line ends there
    for line in _B64_LINE.finditer(raw):
        if line.start() != end:
            if start is not None and lines >= _CUT_LINES:
                runs.append((start, end))
            start, lines = line.start(), 0
        end, lines = line.end(), lines + 1
    if start is not None and lines >= _CUT_LINES:
        runs.append((start, end))
    if not runs:
        return None, {}
    tag = secrets.token_hex(8)
    pieces: list[bytes] = []
    bodies: dict[str, tuple[bytes | bytearray, int, int]] = {}
    at = 0
    for number, (start, end) in enumerate(runs):
        marker = f"ParleyCut{tag}N{number}"
        pieces += [bytes(raw[at:start]), marker.encode(), b"\r\n" if raw[end - 2:end] == b"\r\n" else b"\n"]
        bodies[marker] = (raw, start, end)
        at = end
    pieces.append(bytes(raw[at:]))
    return b"".join(pieces), bodies


def _payload(part: MIMEPart, bodies: Mapping[str, _Body], used: set[str]) -> bytes | bytearray | _Spool | None:
    """An attachment's bytes: a cut-out body decoded from the raw bytes, then the lines after it (the last one,
    padded) as the stdlib decodes them."""
    text = cast(str, part.get_payload())  # a leaf part's (_attachments skips multiparts and messages): its text
    if not any(marker in text for marker in bodies):
        return _decoded(part)
    marker, _, rest = text.partition("\n")
    marker = marker.strip()
    if marker not in bodies or marker in used or str(part.get("Content-Transfer-Encoding", "")).strip().lower() \
            != "base64" or any(other in rest for other in bodies):
        raise NotCut
    used.add(marker)
    body = bodies[marker]
    if isinstance(body, (bytearray, _Spool)):  # decoded as it arrived (MailReader)
        part.set_payload(rest)
        body += _decoded(part) or b""  # type: ignore[operator]  # see _Spool.__iadd__
        return body
    raw, start, end = body
    # The last cut body of a bytearray (the IMAP literal, handed over) is decoded in place, and the bytearray becomes
    # the attachment: each step's bytes are shorter than the characters they come from, and the literal's memory is
    # not held beside a copy of the file. Nothing of the mail is read after it (each other body is decoded already).
    in_place = isinstance(raw, bytearray) and used == set(bodies)
    data = cast(bytearray, raw) if in_place else bytearray()  # in place: raw is a bytearray
    step, written = start, start
    while step < end:  # whole lines per call: each is a multiple of 4 characters
        stop = min(end, step + _DECODE_STEP)
        if stop < end and raw[stop - 1] != 0x0A:
            stop = raw.index(b"\n", stop) + 1
        with memoryview(raw) as view:
            decoded = binascii.a2b_base64(view[step:stop])
        if in_place:  # data is raw
            data[written:written + len(decoded)] = decoded
            written += len(decoded)
        else:
            data += decoded
        step = stop
    if in_place:
        del data[written:]
        del data[:start]
    part.set_payload(rest)
    data += _decoded(part) or b""
    return data


# ---- bounces -----------------------------------------------------------------------------------

def _bounce(message: EmailMessage) -> Bounce | None:
    """A Bounce for an RFC 3464 delivery status notification (multipart/report; report-type=delivery-status) that
    reports a failure; None for any other mail (a delay notice reports no failure: it is an automatic mail)."""
    if message.get_content_type() != "multipart/report" or \
            str(message.get_param("report-type") or "").lower() != "delivery-status":
        return None
    recipient = reason = original = None
    failed = False
    for part in message.walk():
        kind = part.get_content_type()
        if kind == "message/delivery-status":
            # A delivery-status part's payload is its blocks of fields (Messages): one per message, then one per
            # recipient.
            for fields in cast("list[Message]", part.get_payload()):
                action = str(fields.get("Action") or "").strip().lower()
                if action and action != "failed":
                    continue
                if fields.get("Final-Recipient") or fields.get("Original-Recipient"):
                    failed = failed or action == "failed"
                    recipient = recipient or str(fields.get("Final-Recipient") or
                                                 fields.get("Original-Recipient")).partition(";")[2].strip()
                    reason = reason or " ".join(str(fields.get("Diagnostic-Code") or "").split()).partition(";")[2] \
                        .strip() or str(fields.get("Status") or "").strip() or None
        elif kind in ("message/rfc822", "text/rfc822-headers") and original is None:
            original = _original_id(part)
    if not failed:
        return None
    return Bounce(original_id=original, recipient=recipient or None,
                  reason=f"bounced: {reason}" if reason else "bounced (the receiving server gave no reason)")


def _original_id(part: MIMEPart) -> str | None:
    if part.get_content_type() == "message/rfc822":
        payload = part.get_payload()
        # A message/rfc822 part's payload is [the Message it carries].
        inner = cast(Message, payload[0]) if isinstance(payload, list) and payload else None
        headers = inner.get("Message-ID") if inner is not None else None
    else:
        headers = email.message_from_string(_content(part), policy=POLICY).get("Message-ID")
    ids = message_ids(headers)
    return ids[0] if ids else None


def recipients(message_bytes: bytes | bytearray) -> list[str]:
    """The To and Cc addresses of a mail (tests and the loop check)."""
    message = email.message_from_bytes(bytes(message_bytes), policy=POLICY)
    return [address.lower() for _, address in getaddresses([str(v) for v in message.get_all("To", []) +
                                                            message.get_all("Cc", [])])]


# ---- HTML to text ----------------------------------------------------------------------------

_BLOCKS = {"p", "div", "br", "tr", "li", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre", "table", "ul", "ol",
           "hr", "section", "article", "header", "footer"}
_SKIPPED = {"script", "style", "head", "title", "template"}


class _TextOf(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.pieces: list[str] = []
        self.skipping, self.link_start = 0, 0
        self.link: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIPPED:
            self.skipping += 1
        elif tag in _BLOCKS:
            self.pieces.append("\n")
            if tag == "li":
                self.pieces.append("- ")
        elif tag == "a":
            self.link, self.link_start = dict(attrs).get("href"), len(self.pieces)

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIPPED:
            self.skipping = max(0, self.skipping - 1)
        elif tag in _BLOCKS:
            self.pieces.append("\n")
        elif tag == "a" and self.link:
            if self.link.startswith(("http://", "https://")) and \
                    self.link not in "".join(self.pieces[self.link_start:]):
                self.pieces.append(f" ({self.link})")
            self.link = None

    def handle_data(self, data: str) -> None:
        if not self.skipping:
            self.pieces.append(re.sub(r"\s+", " ", data))


def html_to_text(html: str) -> str:
    """An HTML mail body as plain text: blocks on their own lines, links with their address, no scripts or styles
    (the text is shown escaped, as every message body is)."""
    parser = _TextOf()
    parser.feed(html)
    parser.close()
    lines = (line.strip() for line in "".join(parser.pieces).split("\n"))
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
