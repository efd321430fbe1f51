"""The audit list: who did what on settings, keys, users, credit grants and erasures (issue 21). Entries are
written by the storage functions of those changes (storage.audit.record_by); here: who "by" is, and the pages."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from services.lists import keyset_page
from storage import audit as store
from storage.interface import Store

API_KEY = {"actor": "api-key", "actor_label": None}
OPERATOR = {"actor": "operator", "actor_label": None}


def by_user(user: Mapping[str, Any]) -> dict[str, Any]:
    """The actor of a UI user's change; an agency user viewing a sub-account is themselves there, labelled
    "<email> as <the sub-account>" (services.sessions.view_as_user)."""
    return {"actor": user["id"], "actor_label": user.get("label") or user["email"]}


def public_entry(row: Mapping[str, Any]) -> dict[str, Any]:
    return {"id": row["id"], "at": row["at"], "actor": row["actor"], "actorLabel": row["actor_label"],
            "action": row["action"], "subjectId": row["subject_id"], "detail": row["detail"] or {}}


async def list_audit(db: Store, account_id: str, *, limit: str | None = None, cursor: str | None = None) -> dict[str, Any]:
    """One page {data, nextCursor} of the account's entries, newest first."""
    return await keyset_page(lambda before, n: store.page_audit(db, account_id, before, n), limit, cursor,
                             public_entry)
