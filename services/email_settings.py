"""The account's `email` setting (docs/design.md §8 "Email", docs/api.md "Email"): the address Parley's mail comes
from and the mailbox's IMAP and SMTP servers, their pydantic models, how a PATCH merges into the stored object, the
public view (passwords are write-only) and POST /v1/account/email/test.

The `email` object of PATCH /v1/account/settings is a JSON Merge Patch (RFC 7386) of the stored one, as `bot` is:
`{"email": {"smtp": {"password": "…"}}}` changes the SMTP password alone, null removes a key, `"email": null`
removes the whole setting. Passwords are stored encrypted (services/secretbox.py) under `passwordEncrypted`; reads
show `passwordSet`. A stored password is never sent to another host: moving `host` needs the password again.
Hosts follow the webhooks' SSRF rules (services/netguard.py); `security: none` and private hosts need
--allow-private-webhooks. The email channel's import (IMAP) and replies (SMTP) read the same object."""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal, NoReturn, Optional, TypedDict

import pydantic
from pydantic import AfterValidator, BeforeValidator, Field
from pydantic.json_schema import SkipJsonSchema

from common.email_channel import server
from common.errors import Invalid
from common.validation import Identifier, Strict, validated_patch
from services.bot_settings import merge_patch
from services.contact_fields import normalize_email
from services.mail_connect import MailError, imap_session, logout_imap, port_of, smtp_session
from services.context import JSONObject
from services.netguard import LOCAL_TESTING_HINT, check_host

if TYPE_CHECKING:
    from services.context import Services
    from services.secretbox import SecretBox

log = logging.getLogger("parley.email")

KINDS = ("imap", "smtp")
KEY = "passwordEncrypted"  # where the stored object keeps a server's password (Fernet)
SECURITY = ("tls", "starttls", "none")
DEFAULT_FOLDER = "INBOX"
MAX_HOST, MAX_USERNAME, MAX_PASSWORD, MAX_FOLDER = 253, 320, 1000, 200


def _address(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        return normalize_email(value, field="address")
    except Invalid as exc:
        raise ValueError(exc.message) from None


def _a_number(value: object) -> object:
    """JSON numbers only: pydantic's lax mode would read "993" as 993."""
    if isinstance(value, (bool, str)):
        raise ValueError("must be a number")
    return value


Port = Annotated[int, Field(ge=1, le=65535), BeforeValidator(_a_number)]


def _refused(field: str, message: str) -> classmethod[Any, [object], NoReturn]:
    """A validator that refuses a read-only field, saying why, whatever its value (it runs only when it is sent)."""
    def refuse(cls: type, value: object) -> NoReturn:
        raise ValueError(message)
    return pydantic.field_validator(field, mode="before")(classmethod(refuse))


class _ServerFields(Strict):
    host: Optional[Identifier] = Field(None, max_length=MAX_HOST, description=(
        "The server's host name; public unless the server runs with --allow-private-webhooks."))
    port: Optional[Port] = Field(None, description="Default by security: IMAP 993 (tls) or 143, SMTP 465 (tls), "
                                                   "587 (starttls) or 25 (none).")
    # Literal of the tuple is Literal of its values (pydantic reads it so); mypy wants them spelled out.
    security: Optional[Literal[SECURITY]] = Field(None, description=(  # type: ignore[valid-type]
        "tls (the default: TLS from the start), starttls, or none (no encryption: only with "
        "--allow-private-webhooks, for local testing)."))
    username: Optional[Identifier] = Field(None, max_length=MAX_USERNAME, description="Default: the address.")


class _Password(Strict):
    password: Optional[Identifier] = Field(None, min_length=1, max_length=MAX_PASSWORD,
                                           json_schema_extra={"writeOnly": True}, description=(
        "Write-only: stored encrypted, never shown (reads say passwordSet). Omitted, the stored one is kept; null "
        "removes it."))
    # Declared only to refuse it with a message that says why (a GET answer sent back as it is).
    passwordSet: SkipJsonSchema[Optional[object]] = Field(None, exclude=True)
    _read_only = _refused("passwordSet", "passwordSet is read-only: send password to set one, or null to remove it")


class _Folder(Strict):
    folder: Optional[Identifier] = Field(None, max_length=MAX_FOLDER, description=f"Default {DEFAULT_FOLDER}.")


class _Shown(Strict):
    passwordSet: bool = Field(description="Whether a password is stored.", json_schema_extra={"readOnly": True})


class SmtpServer(_ServerFields, _Password):
    """The SMTP server as a write sends it."""


class ImapServer(_ServerFields, _Folder, _Password):
    """The IMAP server as a write sends it."""


class SmtpServerShown(_ServerFields, _Shown):
    pass


class ImapServerShown(_ServerFields, _Folder, _Shown):
    pass


Address = Annotated[Identifier, Field(max_length=320), AfterValidator(_address)]


class EmailSettings(Strict):
    """The `email` settings object as a write (PATCH /v1/account/settings) sends it: a merge patch."""
    address: Optional[Address] = Field(None, description="The mailbox's address: Parley's mail comes from it.")
    imap: Optional[ImapServer] = Field(None, description="Where mail arrives (the email channel's import).")
    smtp: Optional[SmtpServer] = Field(None, description="Where Parley sends mail: invitations, \"Forgot "
                                                         "password?\" links, agents' notifications, replies to web "
                                                         "visitors who left an email (and the email channel's replies).")
    # Declared only to refuse it with a message that says why (a GET /v1/account answer sent back as it is).
    importStatus: SkipJsonSchema[Optional[object]] = Field(None, exclude=True)
    _read_only = _refused("importStatus", "importStatus is read-only: GET /v1/account shows how the import goes")


class ImportFailure(Strict):
    message: str = Field(description="What went wrong, in words (e.g. \"could not connect to imap.example.com:993: "
                                     "…\", \"IMAP login refused: …\").")
    at: str = Field(description="When it last happened.")


class ImportCount(Strict):
    at: str = Field(description="When the last look that stored mail ended.")
    count: int = Field(description="How many mails that look stored.")


class ImportStatus(Strict):
    """How the import of the account's mailbox goes (services/mail_in.py); read-only."""
    mailbox: Optional[str] = Field(description="The mailbox read: host:port/username/folder (another one starts "
                                               "afresh).")
    ok: bool = Field(description="The last connection and look at the folder worked.")
    error: Optional[str] = Field(description="Why it does not work now, in words; null when ok.")
    since: str = Field(description="Since when it works (ok) or fails (error).")
    lastError: Optional[ImportFailure] = Field(description="The latest failure, kept once it works again; null when "
                                                          "none was recorded.")
    checkedAt: Optional[str] = Field(description="The last successful look at the folder (kept about a minute "
                                                 "fresh while it works).")
    lastImport: Optional[ImportCount] = Field(description="The last look that imported mail; null before any.")
    lastUid: Optional[int] = Field(description="The highest UID imported or skipped (the checkpoint): mail above "
                                               "it is new.")
    uidValidity: Optional[int] = Field(description="The folder's UIDVALIDITY the checkpoint belongs to.")
    idle: Optional[bool] = Field(description="true: the server's IDLE tells Parley of new mail as it arrives; "
                                             "false: the folder is looked at every --mail-poll-seconds.")


class EmailSettingsShown(Strict):
    """The `email` settings object as reads show it (ports and folder with their defaults)."""
    address: Optional[str] = None
    imap: Optional[ImapServerShown] = None
    smtp: Optional[SmtpServerShown] = None
    importStatus: Optional[ImportStatus] = Field(None, description="GET /v1/account only, with imap set: how the "
                                                 "import goes; null before its first look. Read-only.")


# ---- writing ---------------------------------------------------------------------------------

def validate_patch(patch: object) -> JSONObject:
    """An `email` merge patch given as plain data (the UI's form) checked against the model, as PATCH
    /v1/account/settings checks its body; returns it as model_dump(exclude_unset=True)."""
    return validated_patch(EmailSettings, patch, "email")


async def check_patch(patch: JSONObject | None, allow_private: bool) -> tuple[JSONObject | None, list[str]]:
    """The SSRF rules on a validated patch: each host named (stored in its ASCII form) must be public and security
    none is refused, unless allow_private. Returns (the patch, warnings); Invalid naming the field."""
    warnings: list[str] = []
    for kind in KINDS:
        server = (patch or {}).get(kind)
        if not server:
            continue
        if server.get("security") == "none" and not allow_private:
            raise Invalid(f"email.{kind}.security none (no encryption) is for local testing only. {LOCAL_TESTING_HINT}")
        if server.get("host") is not None:
            server["host"], warning = await check_host(server["host"], allow_private=allow_private,
                                                       field=f"email.{kind}.host", port=server.get("port"))
            if warning:
                warnings.append(warning)
    return patch, warnings


def prepare_patch(patch: JSONObject | None, box: SecretBox) -> JSONObject | None:
    """A checked patch ready to merge: each password encrypted (null stays null: it removes the password)."""
    for kind in KINDS:
        server = (patch or {}).get(kind)
        if isinstance(server, dict) and "password" in server:
            password = server.pop("password")
            server[KEY] = box.encrypt(password) if password is not None else None
    return patch


def merged(current: JSONObject | None, patch: JSONObject | None) -> JSONObject | None:
    """The stored object after a prepared patch, validated as a whole; None when the patch removes it. Invalid
    naming the field: a server without a host, no address, or a new host without its password sent again."""
    if patch is None:
        return None
    current = current or {}
    for kind in KINDS:
        stored, server = current.get(kind) or {}, patch.get(kind)
        if (isinstance(server, dict) and stored.get(KEY) and server.get("host")
                and server["host"] != stored.get("host") and KEY not in server):
            raise Invalid(f"email.{kind}.password must be sent again (or null to remove it) when host changes: the "
                          "stored password is only ever sent to the host it was saved for")
    result = merge_patch(current, patch)
    for kind in KINDS:
        if result.get(kind) == {}:
            del result[kind]
    if not result:
        return None
    if not result.get("address"):
        raise Invalid("email.address is required")
    for kind in KINDS:
        if kind in result and not result[kind].get("host"):
            raise Invalid(f"email.{kind}.host is required")
    return result


# ---- reading ---------------------------------------------------------------------------------

def public(email: JSONObject | None) -> JSONObject | None:
    """The stored object as reads show it: passwords as passwordSet, ports and folder with their defaults."""
    if not email:
        return email
    shown = {k: v for k, v in email.items() if k not in KINDS}
    for kind in KINDS:
        if email.get(kind) is not None:
            server = {k: v for k, v in email[kind].items() if k != KEY}
            server["security"] = server.get("security") or "tls"
            server["port"] = port_of(kind, server)
            if kind == "imap":
                server["folder"] = server.get("folder") or DEFAULT_FOLDER
            shown[kind] = {**server, "passwordSet": bool(email[kind].get(KEY))}
    return shown


def password(box: SecretBox, server: Mapping[str, Any]) -> str | None:
    return box.decrypt(server[KEY]) if server.get(KEY) else None


def from_form(form: Mapping[str, str]) -> JSONObject:
    """Settings > Email's form as a merge patch: an empty password field keeps the stored password (a "remove"
    checkbox removes it), an empty host removes that server; Invalid naming the field."""
    patch: JSONObject = {"address": form["address"].strip() or None}
    for kind in KINDS:
        host = form[f"{kind}.host"].strip()
        if not host:
            patch[kind] = None
            continue
        port = form[f"{kind}.port"].strip()
        server: JSONObject = {"host": host, "security": form[f"{kind}.security"] or "tls",
                  "port": int(port) if port.isascii() and port.isdigit() else (port or None),
                  "username": form[f"{kind}.username"].strip() or None}
        if kind == "imap":
            server["folder"] = form["imap.folder"].strip() or None
        if form.get(f"{kind}.password"):
            server["password"] = form[f"{kind}.password"]
        elif form.get(f"{kind}.removePassword"):
            server["password"] = None
        patch[kind] = server
    return validate_patch(patch)


# ---- the Test button ---------------------------------------------------------------------------

class _Options(TypedDict):
    """smtp_session's and imap_session's keyword options."""
    timeout: float
    allow_private: bool


async def test(services: Services, settings: Mapping[str, Any] | None) -> JSONObject:
    """POST /v1/account/email/test: connect and log in to each configured server now (IMAP also opens the folder),
    at the same time; {imap: {ok, error}, smtp: {ok, error}}, each error in words (never a traceback)."""
    options: _Options = {"timeout": services.settings.mail_timeout_seconds,
                         "allow_private": services.settings.allow_private_webhooks}

    async def check(kind: str) -> JSONObject:
        found = server(settings, kind)
        if found is None:
            return {"ok": False, "error": f"{kind.upper()} is not configured (Settings > Email, or the `email` "
                                         "account setting)"}
        try:
            secret = password(services.box, found)
            if kind == "smtp":
                client = await smtp_session(found, secret, **options)
                try:
                    await client.quit()
                except Exception:
                    client.close()
            else:
                await logout_imap(await imap_session(found, secret, **options), options["timeout"])
        except MailError as exc:
            return {"ok": False, "error": str(exc)}
        except ValueError as exc:  # the stored password cannot be decrypted with this server's key
            return {"ok": False, "error": f"{kind.upper()} password: {exc}"}
        except Exception as exc:  # a fault of ours or of a library: the log has the traceback, the answer words
            log.exception("email test: %s check failed unexpectedly", kind)
            return {"ok": False, "error": f"{kind.upper()} check failed unexpectedly ({exc.__class__.__name__}); "
                                          "the server's log has the details"}
        return {"ok": True, "error": None}

    imap, smtp = await asyncio.gather(check("imap"), check("smtp"))
    return {"imap": imap, "smtp": smtp}

