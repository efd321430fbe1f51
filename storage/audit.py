"""SQL for the audit list (migration 0220): one row per change of settings, keys, users, credits or
contacts, written inside the change's own transaction."""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from common.ids import new_id, now_iso
from storage.db import fetch_all, reads
from storage.interface import Connection, Row


def record_audit(cx: Connection, *, account_id: str, actor: str, actor_label: str | None, action: str, subject_id: str | None = None, detail: Mapping[str, Any] | None = None) -> None:
    """Append an entry in the caller's write transaction (a plain function: call it from any @writes
    function, so that the entry commits or rolls back with the change). actor: a user id, 'api-key' or
    'operator'; detail: a JSON-able dict of what changed (never a secret)."""
    cx.execute("INSERT INTO audit_log (id, account_id, at, actor, actor_label, action, subject_id, detail)"
               " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
               (new_id("aud"), account_id, now_iso(), actor, actor_label, action, subject_id,
                json.dumps(detail, separators=(",", ":"), sort_keys=True) if detail is not None else None))


def record_by(cx: Connection, by: Mapping[str, Any] | None, *, account_id: str, action: str, subject_id: str | None = None, detail: Mapping[str, Any] | None = None) -> None:
    """record_audit for ``by`` = {actor, actor_label} as services pass it (None: the change is not audited,
    e.g. a test's direct storage call)."""
    if by is not None:
        record_audit(cx, account_id=account_id, actor=by["actor"], actor_label=by.get("actor_label"),
                     action=action, subject_id=subject_id, detail=detail)


@reads
def page_audit(cx: Connection, account_id: str, before_id: str | None, limit: int) -> list[Row]:
    """Up to ``limit`` of the account's entries with id < before_id (None: from the newest), newest first."""
    sql = ("SELECT id, at, actor, actor_label, action, subject_id, detail FROM audit_log WHERE account_id = ?"
           + (" AND id < ?" if before_id is not None else "") + " ORDER BY id DESC LIMIT ?")
    params = (account_id, before_id, limit) if before_id is not None else (account_id, limit)
    return fetch_all(cx, sql, params, json_columns=("detail",))
