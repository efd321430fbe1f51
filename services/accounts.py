"""Accounts: creation, API-key authentication and rotation, settings, webhook signing secrets."""
from __future__ import annotations

import asyncio
import copy
import json
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, cast

from services import assignment, bot_match, bot_settings, csat, email_settings, idempotency, keys, one_time_links, sessions, sla, users, widget
from common import email_channel
from common import opt_out
from common.errors import Invalid, NotFound, Unauthorized
from common.ids import iso, new_id, now_iso, utcnow
from services.contact_fields import region_code
from services.netguard import check_webhook_url
from storage import accounts as store
from storage import credits as credit_store
from storage import users as users_store
from storage.db import StoredResultLost
from storage.interface import Row, Store
from services.context import JSONObject
from services.secretbox import SecretBox

By = Mapping[str, Any] | None  # who did it, for the audit list (services/audit.py), or None: not audited

log = logging.getLogger("parley.accounts")

ACCOUNT_TYPES = ("standard", "agency", "subaccount")
# After a rotation the previous signing secret keeps signing (alongside the new one) this long,
# so receivers can switch without dropping deliveries.
SECRET_OVERLAP = timedelta(hours=24)
MIN_PASSWORD, MAX_PASSWORD = 10, 1024
DEFAULT_KEY_NAME = "Default"  # an account's first key, and the one a rotation (rotate-key) leaves
MAX_KEYS, MAX_KEY_NAME = 20, 100
# A key's lastUsedAt is written at most this often per key and process: never a write per request.
KEY_USE_INTERVAL = 60.0


@dataclass(frozen=True)
class Principal:
    """Who an API key speaks for; what the handlers get after authentication."""
    account_id: str
    type: str
    parent_agency_id: str | None
    rate_limit_per_minute: int | None


class KeyRegistry:
    """API-key lookups with a cache that every key change empties, in this process and others.

    Ops commands run in their own process; after changing a key they touch ``keys.stamp`` in the
    data directory, and every lookup compares that file's mtime (one stat, no thread hop) before
    trusting the cache. So a key rotated anywhere fails on the server's very next request.

    Every emptying bumps a generation number: a lookup whose read started before a change (and may
    have seen the old key) answers its own request but is not cached.
    """

    def __init__(self, db: Store, data_dir: str | os.PathLike[str]) -> None:
        self.db = db
        self._last_marked: dict[str, float] = {}  # key hash -> monotonic time its use was last written
        self._marking: set[asyncio.Future[None]] = set()
        self.stamp = Path(data_dir) / "keys.stamp"
        self._stamp_path = str(self.stamp)
        self._cache: dict[str, Principal] = {}
        self._generation = 0
        self._stamp_seen = self._read_stamp()

    def _read_stamp(self) -> int:
        try:
            return os.stat(self._stamp_path).st_mtime_ns  # os.stat on a str: half the cost of Path.stat
        except FileNotFoundError:
            return 0

    def changed(self) -> None:
        """Call after any key or account change: empties this cache and tells other processes."""
        self._forget()
        self.stamp.parent.mkdir(parents=True, exist_ok=True)
        self.stamp.touch()
        # Some filesystems have coarse mtimes: force a visible change.
        stat = self.stamp.stat()
        os.utime(self.stamp, ns=(stat.st_atime_ns, max(stat.st_mtime_ns, self._stamp_seen + 1)))
        self._stamp_seen = self._read_stamp()

    def forget(self) -> None:
        """A key changed in another process (storage/pg_listen.py): the next lookups read the database."""
        self._forget()

    def cached(self, key_hash: str) -> Principal | None:
        stamp = self._read_stamp()
        if stamp != self._stamp_seen:
            self._forget()
            self._stamp_seen = stamp
        return self._cache.get(key_hash)

    def _forget(self) -> None:
        self._cache.clear()
        self._generation += 1

    def used(self, key_hash: str) -> None:
        """A request authenticated with this key: its lastUsedAt is written in the background when this process
        has not written it for KEY_USE_INTERVAL (a failed write is only logged: the next use tries again)."""
        now = time.monotonic()
        if now - self._last_marked.get(key_hash, -KEY_USE_INTERVAL) < KEY_USE_INTERVAL:
            return
        if len(self._last_marked) > 100_000:
            self._last_marked.clear()
        self._last_marked[key_hash] = now
        task = asyncio.ensure_future(store.mark_keys_used(self.db, {key_hash: now_iso()}))
        self._marking.add(task)
        task.add_done_callback(self._marked)

    def _marked(self, task: asyncio.Future[None]) -> None:
        self._marking.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("writing an API key's last use failed: %s", task.exception())

    async def principal_for(self, key_hash: str) -> Principal:
        """The account behind a key's hash (cached), or Unauthorized."""
        principal = self.cached(key_hash)
        if principal is None:
            generation = self._generation
            account = await store.get_account_by_key_hash(self.db, key_hash)
            if account is None:
                raise Unauthorized("invalid API key")
            principal = Principal(account["id"], account["type"], account["parent_agency_id"],
                                  account["rate_limit_per_minute"])
            if self.cached(key_hash) is None and generation == self._generation:
                if len(self._cache) > 100_000:  # bound memory against floods of distinct keys
                    self._cache.clear()
                self._cache[key_hash] = principal
        return principal


def _key_row(key_hash: str, prefix: str, name: str = DEFAULT_KEY_NAME) -> dict[str, Any]:
    return {"id": new_id("key"), "key_hash": key_hash, "name": name, "prefix": prefix, "created_at": now_iso()}


def public_key(row: Mapping[str, Any]) -> JSONObject:
    return {"id": row["id"], "name": row["name"], "prefix": row["prefix"], "createdAt": row["created_at"],
            "lastUsedAt": row["last_used_at"]}


async def list_keys(db: Store, account_id: str) -> JSONObject:
    """GET /v1/account/api-keys: {data: [key]} (never a secret), oldest first."""
    return {"data": [public_key(row) for row in await store.list_api_keys(db, account_id)]}


async def add_key(db: Store, box: SecretBox, account_id: str, name: str | None, by: By = None) -> JSONObject:
    """POST /v1/account/api-keys: a new key, live at once beside the others; the secret is in this answer only
    (key), stored as its hash like every key. Rotation without downtime: add one, move the clients to it,
    revoke the old one. The write returns the secret encrypted (shown), not stored with the key: an
    Idempotency-Key retry is answered with the key its first request made, as create_account does."""
    name = (name or "").strip()
    if not name or len(name) > MAX_KEY_NAME:
        raise Invalid(f"name is required: 1 to {MAX_KEY_NAME} characters", field="name")
    api_key, key_hash, prefix = keys.new_api_key()
    row = await store.add_api_key(db, account_id, _key_row(key_hash, prefix, name), MAX_KEYS,
                                  shown=box.encrypt(api_key), by=by)
    return {**public_key(row), "key": box.decrypt(row["shown"])}


async def revoke_key(db: Store, registry: KeyRegistry, account_id: str, key_id: str, by: By = None) -> JSONObject:
    """DELETE /v1/account/api-keys/{id}: the key fails from the commit on, in this process and the others."""
    row = await store.revoke_api_key(db, account_id, key_id, by=by)
    registry.changed()
    return public_key(row)


async def create_account(db: Store, box: SecretBox, registry: KeyRegistry, *, name: str | None, email: str | None,
                         account_type: str = "standard", agency_email: str | None = None,
                         parent_agency_id: str | None = None, password: str | None = None, with_user: bool = True,
                         by: By = None) -> dict[str, Any]:
    """Create an account (and its owner user for the UI). Returns the account and, once, the API key
    and the password. agency_email (the CLI) or parent_agency_id (an agency's API call) makes a
    sub-account of that agency. Conflict when the email is taken."""
    email = (email or "").strip().lower()
    if not name or not name.strip():
        raise Invalid("name is required")
    if "@" not in email:
        raise Invalid("email must be an email address")
    parent_id = parent_agency_id
    if parent_id:
        account_type = "subaccount"
    elif agency_email:
        agency = await store.get_account_by_email(db, agency_email.strip().lower())
        if agency is None or agency["type"] != "agency":
            raise NotFound(f"no agency account with email {agency_email}", code="NOT_FOUND")
        parent_id, account_type = agency["id"], "subaccount"
    if account_type not in ACCOUNT_TYPES:
        raise Invalid(f"type must be one of {', '.join(ACCOUNT_TYPES)}")
    if await store.get_account_by_email(db, email) is not None and not idempotency.claim_pending():
        raise store.email_taken(email)  # before hashing; the writer checks again (insert_account). With an
        # Idempotency-Key the write answers: a retry finds the account its first request made.
    api_key, key_hash, prefix = keys.new_api_key()
    account = {"id": new_id("acc"), "name": name.strip(), "email": email, "type": account_type,
               "parent_agency_id": parent_id, "webhook_secret": box.encrypt(keys.new_webhook_secret()),
               "created_at": now_iso()}
    user = None
    if with_user:
        password = password or keys.new_password()
        # Password hashing is CPU-heavy: keep it off the event loop.
        password_hash = await asyncio.get_running_loop().run_in_executor(None, keys.hash_password, password)
        user = {"id": new_id("usr"), "email": email, "password_hash": password_hash}
    shown = box.encrypt(json.dumps({"api_key": api_key, "password": password if with_user else None}))
    try:
        created = await store.insert_account(db, account, user, _key_row(key_hash, prefix), shown, by)
    except StoredResultLost:  # committed, only the writer's answer was lost: what was made here is stored
        created = {**account, "shown": shown}
    registry.changed()
    secrets = json.loads(box.decrypt(created["shown"]))  # an Idempotency-Key retry: the first request's
    return {"account_id": created["id"], "name": created["name"], "email": created["email"],
            "api_key": secrets["api_key"], "type": created["type"], "password": secrets["password"],
            "created_at": created["created_at"]}


async def rotate_key(db: Store, registry: KeyRegistry, account_id: str, keep_session: str | None = None,
                     by: By = None) -> str:
    """Generate a new API key; the previous key is invalid from the commit on, and so is every UI session
    of the account but keep_session (the one that asked, from the UI). by: who, for the audit list."""
    api_key, key_hash, prefix = keys.new_api_key()
    try:
        await store.replace_api_key(db, account_id, _key_row(key_hash, prefix), sessions.session_hash(keep_session),
                                    by=by)
    except StoredResultLost:
        pass  # committed, only the writer's answer was lost: the old key is dead and this one is live
    registry.changed()
    return api_key


RATE_LIMIT_MAX = 1_000_000


async def set_rate_limit(db: Store, registry: KeyRegistry, account_id: str, per_minute: int | None,
                         by: By = None) -> None:
    """Override the server's --rate-limit for one account (per_minute None: back to the server's); the running
    server applies it at its next request (the key cache is emptied here and in every process)."""
    if per_minute is not None and not 1 <= per_minute <= RATE_LIMIT_MAX:
        raise Invalid(f"per-minute must be 1-{RATE_LIMIT_MAX:,} (or default)", field="per-minute")
    await store.set_rate_limit(db, account_id, per_minute, by=by)
    registry.changed()


_dummy_hash: str | None = None


async def verify_password(password: str, stored_hash: str | None, db: Store | None = None,
                          user_id: str | None = None) -> bool:
    """Password hashing is CPU-heavy: verify in an executor. A missing user (stored_hash None) is checked
    against a dummy hash so that the answer takes as long as for a known one (no probing which emails exist).
    With db and user_id, a matching hash of an older scheme (scrypt) or older argon2id parameters is replaced
    by one of today's (the user's next sign-in upgrades it; a password change in between wins)."""
    global _dummy_hash
    loop = asyncio.get_running_loop()
    if stored_hash is None:
        if _dummy_hash is None:
            _dummy_hash = await loop.run_in_executor(None, keys.hash_password, "no such user")
        await loop.run_in_executor(None, keys.verify_password, password, _dummy_hash)
        return False
    if not await loop.run_in_executor(None, keys.verify_password, password, stored_hash):
        return False
    if db is not None and user_id is not None and keys.password_needs_rehash(stored_hash):
        new_hash = await loop.run_in_executor(None, keys.hash_password, password)
        await store.upgrade_password_hash(db, user_id, stored_hash, new_hash)
    return True


async def change_password(db: Store, user_id: str, current: str | None, new: str | None,
                          keep_session: str | None = None, by: By = None) -> None:
    """Set a UI user's password after checking the current one; the account's other sessions end.
    Invalid naming the field for a wrong current password or a new one that is too short or long."""
    if not await verify_password(current or "", await store.get_password_hash(db, user_id)):
        raise Invalid("current password is not right")
    new_password = new or ""
    if not MIN_PASSWORD <= len(new_password) <= MAX_PASSWORD:
        raise Invalid(f"new password must have {MIN_PASSWORD} to {MAX_PASSWORD} characters")
    password_hash = await asyncio.get_running_loop().run_in_executor(None, keys.hash_password, new_password)
    await store.set_password(db, user_id, password_hash, sessions.session_hash(keep_session), by)


async def update_own_user(db: Store, user: Mapping[str, Any], name: object, email: object,
                          current_password: str | None, by: By = None) -> dict[str, Any]:
    """A user's own name and sign-in email (users.own_changes). A new email needs the current password (a session
    left open must not be enough to move the login elsewhere); Conflict when another user or account has it.
    Returns {field: [from, to]} of what changed."""
    changes = users.own_changes(user, name, email)
    if "email" in changes and not await verify_password(current_password or "",
                                                        await store.get_password_hash(db, user["id"])):
        raise Invalid("current password is not right: it is needed to change the sign-in email",
                      field="current_password")
    if not changes:
        return {}
    _, changed, _ = await users_store.update_user(db, user["account_id"], user["id"], changes, by, True)
    return changed


async def get_account(db: Store, account_id: str) -> Row:
    account = await store.get_account(db, account_id)
    if account is None:
        raise NotFound("account not found")
    account["credit_hundredths"] = await credit_store.get_balance(db, account_id) or 0
    return account


async def get_key_prefix(db: Store, account_id: str) -> Row | None:
    """{prefix, created_at} of the account's live API key, or None."""
    return await store.get_key_prefix(db, account_id)


async def get_user(db: Store, user_id: str) -> Row | None:
    """The UI user {id, account_id, email, account_type}, or None."""
    return await store.get_user(db, user_id)


async def sign_in(db: Store, email: str, password: str) -> list[dict[str, Any]]:
    """The memberships (services/users.py: one person may be a user of several accounts) that this email and
    password sign in to: each active user with the (case-folded) email whose password is this one, {id,
    account_id, account_name, email}, oldest first; [] for a wrong password or an unknown email. Passwords are
    per membership (an invitation's link sets the invited membership's only, so no account's admin can set
    the password another account checks): an account whose password differs is not offered, nor named.
    Invited users without a password and unknown emails cost one dummy hash, as a known one does."""
    users = [u for u in await store.get_users_by_email(db, email) if keys.is_password_hash(u["password_hash"])]
    if not users:
        await verify_password(password, None)
        return []
    matches = await asyncio.gather(*(verify_password(password, u["password_hash"], db, u["id"]) for u in users))
    return [{k: u[k] for k in ("id", "account_id", "account_name", "email")}
            for u, matched in zip(users, matches) if matched]


async def get_account_by_email(db: Store, email: str) -> Row | None:
    """The account with this email (case-folded here), or None."""
    return await store.get_account_by_email(db, email.strip().lower())


def public_account(account: Mapping[str, Any], key_prefix: str | None = None) -> JSONObject:
    """The account as the API shows it (no secrets)."""
    return {"id": account["id"], "name": account["name"], "email": account["email"], "type": account["type"],
            "parentAgencyId": account["parent_agency_id"],
            "rateLimitPerMinute": account["rate_limit_per_minute"],
            "apiKeyPrefix": key_prefix, "settings": public_settings(account["settings"]),
            "createdAt": account["created_at"],
            "credits": credit_store.as_number(account.get("credit_hundredths", 0))}


def public_settings(settings: Mapping[str, Any]) -> JSONObject:
    """The settings object as the API and the UI show it: the opt-out keywords with their defaults, the
    bot's provider keys only as apiKeySet."""
    settings = opt_out.with_defaults(settings)
    if settings.get(email_channel.SETTING) is not None:  # passwords as passwordSet
        settings = {**settings, email_channel.SETTING: email_settings.public(settings[email_channel.SETTING])}
    if settings.get("bot") is None:
        return settings
    return {**settings, "bot": bot_settings.public(settings["bot"])}


async def validate_settings_changes(changes: Mapping[str, Any],
                                    allow_private: bool) -> tuple[dict[str, Any], list[str]]:
    """Check setting changes (top-level name -> value, None removes) the same way for the API and the UI:
    webhook URLs (and the bot's provider URLs) must be https and public unless allow_private. Returns the
    changes to store and a list of warnings (a host that does not resolve now); raises Invalid naming the
    field. `bot` is a merge patch (services/bot_settings.py), whose result is validated as a whole when it
    is stored."""
    validated: dict[str, Any] = {}
    warnings: list[str] = []

    async def check(url: str, field: str) -> str:
        url, warning = await check_webhook_url(url, allow_private=allow_private, field=field)
        if warning:
            warnings.append(warning)
        return url

    for name, value in changes.items():
        if name == "customChannelWebhookUrl" and value is not None:
            value = await check(value, name)
        elif name == "notificationUrls" and value is not None:
            for event, url in value.items():
                if url is not None:  # null removes the event's URL (a merge patch)
                    await check(url, f"{name}.{event}")
        elif name == "bot":
            for field, url in bot_settings.provider_urls(value):
                await check(url, field)
        elif name == "defaultCountry" and value is not None:
            value = region_code(value)  # national numbers typed by people are read in it (issue 43 §9)
        elif name == widget.SETTING and value is not None:
            value = widget.configured({name: value})  # stored whole, with its defaults (a PATCH replaces it)
        elif name == "sla":
            value = sla.validate(value)
        elif name == "assignment":
            value = assignment.validate_setting(value)
        elif name == csat.SETTING:
            value = csat.validate_setting(value)
        elif name == email_channel.SETTING and value is not None:
            value, more = await email_settings.check_patch(value, allow_private)
            warnings += more
        validated[name] = value
    return validated, warnings


async def rename(db: Store, account_id: str, name: object, by: By = None) -> Row | None:
    """The account's new name (Invalid naming the field when empty); returns the account."""
    if not isinstance(name, str) or not name.strip():
        raise Invalid("name is required", field="name")
    return await store.rename_account(db, account_id, name.strip(), by)


async def update_settings(db: Store, account_id: str, changes: Mapping[str, Any], box: SecretBox | None = None,
                          by: By = None) -> JSONObject:
    """changes: validated top-level settings (the opt-out keywords are checked here, against the account's
    other list; `bot` and `email` merge patches need the box to encrypt provider keys and passwords); returns the whole settings
    object as public_settings shows it. by: who, for the audit list (the names of the settings changed)."""
    if any(name in changes for name in opt_out.SETTINGS):
        current = await store.get_account(db, account_id)
        changes = {**changes, **opt_out.validate(changes, current["settings"] if current else {})}
    if changes.get("bot") is not None:
        # (whoever patches the bot or the email settings gives the box: their secrets are stored encrypted)
        changes = {**changes,
                   "bot": bot_settings.prepare_patch(copy.deepcopy(changes["bot"]), cast(SecretBox, box))}
    if changes.get(email_channel.SETTING) is not None:
        changes = {**changes, email_channel.SETTING: email_settings.prepare_patch(
            copy.deepcopy(changes[email_channel.SETTING]), cast(SecretBox, box))}  # given with it: see above
    # bot, email and notificationUrls are merge patches of the stored value: merged and validated here, against the
    # stored value the write then finds unchanged (else merged again: another write changed it meanwhile)
    patches = [name for name in ("bot", email_channel.SETTING, "notificationUrls") if changes.get(name) is not None]
    while True:
        values, merged_from = dict(changes), {}
        if patches:
            stored = cast(Row, await store.get_account(db, account_id))["settings"]  # the caller's account: it exists
            for name in patches:
                merged_from[name] = stored.get(name)
                values[name] = _merged(name, stored.get(name), changes[name])
        saved = await store.save_settings(db, account_id, values, merged_from, by)
        if saved is not None:
            break
    if changes.get("bot") is not None:
        # The keyword matchers of the new version, built now (off the event loop), not by its first messages.
        await asyncio.to_thread(bot_match.prepare, saved.get("bot"))
    return public_settings(saved)


def _merged(name: str, stored: Any, patch: Any) -> Any:
    """The new value of a merge-patched setting (bot, email, notificationUrls) from its stored one; Invalid naming
    the field when the result is not valid as a whole (the bot's and the email settings')."""
    if name == "bot":
        return bot_settings.merged(stored, patch)
    if name == email_channel.SETTING:
        return email_settings.merged(stored, patch)
    # A merge patch of the stored URLs: null removes one event's; none left removes the setting.
    return bot_settings.merge_patch(stored or {}, patch) or None


def signing_secrets(box: SecretBox, account: Mapping[str, Any], now: datetime | None = None) -> list[str]:
    """The secrets that sign a delivery now: the current one, plus the previous one during the overlap."""
    secrets = [box.decrypt(account["webhook_secret"])]
    expires = account["previous_secret_expires_at"]
    if account["previous_webhook_secret"] and expires and expires > iso(now or utcnow()):
        secrets.append(box.decrypt(account["previous_webhook_secret"]))
    return secrets


async def get_webhook_secret(db: Store, box: SecretBox, account_id: str) -> JSONObject:
    account = await get_account(db, account_id)
    expires = account["previous_secret_expires_at"]
    if expires and expires <= now_iso():
        expires = None
    return {"secret": box.decrypt(account["webhook_secret"]), "previousSecretExpiresAt": expires}


async def rotate_webhook_secret(db: Store, box: SecretBox, account_id: str, by: By = None) -> JSONObject:
    """A new signing secret; the previous one keeps signing beside it until previousSecretExpiresAt."""
    secret, expires = box.encrypt(keys.new_webhook_secret()), iso(utcnow() + SECRET_OVERLAP)
    try:
        # The result (the secret encrypted, as stored) is what an Idempotency-Key retry is answered from.
        rotated = await store.rotate_webhook_secret(db, account_id, secret, expires, by=by)
    except StoredResultLost:  # committed, only the writer's answer was lost: the secret made here is live
        rotated = {"secret": secret, "previous_expires_at": expires}
    return {"secret": box.decrypt(rotated["secret"]), "previousSecretExpiresAt": rotated["previous_expires_at"]}


async def ensure_owner(db: Store, box: SecretBox, registry: KeyRegistry, public_url: str) -> dict[str, Any] | None:
    """On an empty database create the owner account and its user; return what to print once, or None: a
    one-time setup link, never a password or an API key (the owner chooses the password through the link,
    and then the Settings page shows a new key once)."""
    if await store.count_accounts(db) > 0:
        return None
    created = await create_account(db, box, registry, name="Owner", email="admin@localhost")
    link = await one_time_links.issue_for_account_owner(db, public_url, created["account_id"], "setup")
    return {"ui_url": public_url.rstrip("/") + "/", "login": created["email"], "setup_url": link["url"],
            "expires_at": link["expiresAt"], "account_id": created["account_id"]}
