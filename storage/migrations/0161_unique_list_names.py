"""List names become unique per account, compared without case and surrounding spaces (issue 25 §1).
name_key holds the compared form (storage/lists.py name_key: stripped, case-folded), a unique index keeps
it so. Existing duplicates are renamed first, the oldest list keeping its name ("Leads", "Leads (2)", ...),
and every rename is logged. Deleting a list keeps its row (campaigns refer to it) with deleted_at set and
name_key NULL, so the name is free again."""
from __future__ import annotations

from storage.interface import OwnConnection


def name_key(name: str) -> str:
    return name.strip().casefold()


def migrate(cx: OwnConnection) -> list[str]:
    cx.execute("ALTER TABLE lists ADD COLUMN name_key TEXT")
    cx.execute("ALTER TABLE lists ADD COLUMN deleted_at TEXT")
    taken: dict[str, dict[str, str]]
    renames: list[str]
    taken, renames = {}, []
    for list_id, account_id, name in cx.execute("SELECT id, account_id, name FROM lists ORDER BY account_id, id").fetchall():
        keys = taken.setdefault(account_id, {})
        new_name = name.strip()
        n = 1
        while name_key(new_name) in keys:
            n += 1
            new_name = f"{name.strip()} ({n})"
        if n > 1:
            first = keys[name_key(name)]
            renames.append(f"account {account_id}: list {list_id} renamed from {name!r} to {new_name!r} "
                           f"(list {first} has the same name)")
        keys[name_key(new_name)] = list_id
        cx.execute("UPDATE lists SET name = ?, name_key = ? WHERE id = ?", (new_name, name_key(new_name), list_id))
    cx.execute("CREATE UNIQUE INDEX lists_account_name ON lists(account_id, name_key) WHERE name_key IS NOT NULL")
    return renames or ["no lists had the same name"]
