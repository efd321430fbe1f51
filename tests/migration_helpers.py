"""Migrations in tests: an SQLite database as it was before a given migration, to test that migration on old data."""
import shutil

from storage import db as db_module
from storage.db import connect_sync, migrate


def database_before(tmp_path, monkeypatch, version):
    """A database with the migrations numbered below ``version`` applied, foreign keys off (a test writes only
    the rows the later migrations read); migrate(cx) then applies the rest."""
    older = tmp_path / "migrations"
    older.mkdir()
    for path in db_module.MIGRATIONS.glob("[0-9][0-9][0-9][0-9]_*.*"):
        if int(path.name[:4]) < version:
            shutil.copy(path, older / path.name)
    real = db_module.MIGRATIONS
    cx = connect_sync(tmp_path / "parley.db")
    monkeypatch.setattr(db_module, "MIGRATIONS", older)
    migrate(cx)
    cx.execute("PRAGMA foreign_keys=OFF")
    monkeypatch.setattr(db_module, "MIGRATIONS", real)
    return cx
