"""Files at rest and /static (issue 9): the database is 0600 in a 0700 data directory like secret.key, a
backup is private too, and /static/* carries the same headers and error answers as every other path."""
import os
import stat

import pytest

import server
from tests.parley_process import run_cli


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.sqlite_only("the modes of parley.db and its -wal/-shm files")
async def test_database_files_are_0600_in_a_0700_data_directory(services, settings, api, account):
    await api.post("/v1/contacts", {"phone": "+14155552671"}, key=account["api_key"])  # the WAL has data
    assert mode(settings.data_dir) == 0o700
    for name in ("parley.db", "parley.db-wal", "parley.db-shm", "secret.key"):
        assert mode(settings.data_dir / name) == 0o600, name


async def test_an_existing_data_directory_is_corrected_at_start(tmp_path):
    from settings import Settings

    data = tmp_path / "old"
    data.mkdir(mode=0o755)
    (data / "parley.db").touch(mode=0o644)
    os.chmod(data / "parley.db", 0o644)
    os.chmod(data, 0o755)
    services = await server.open_services(Settings(data_dir=data, http_port=0))
    await services.close()
    assert (mode(data), mode(data / "parley.db")) == (0o700, 0o600)


@pytest.mark.sqlite_only("backup writes an SQLite file (on PostgreSQL it points to pg_dump)")
def test_a_backup_is_private(tmp_path):
    data = tmp_path / "data"
    run_cli(data, "create-account", "--name", "A", "--email", "a@example.com")
    out = tmp_path / "backup.db"
    assert run_cli(data, "backup", str(out))["bytes"] > 0
    assert mode(out) == 0o600


@pytest.mark.parametrize("path", ["/static/parley.css", "/static/nope.css", "/static/../server.py"])
async def test_static_files_carry_our_headers(http_server_client, path):
    r = await http_server_client.fetch(path, raise_error=False)
    assert r.headers["Strict-Transport-Security"] == "max-age=31536000"
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert len(r.headers["X-Request-Id"]) == 16


async def test_static_errors_are_our_error_answers_not_tornados_html(api):
    r = await api.get("/static/nope.css")
    assert r.code == 404
    assert r.headers["Content-Type"].startswith("application/json")
    assert r.json["error"]["code"] == "NOT_FOUND"
    r = await api.post("/static/parley.css", {"a": 1})
    assert r.code == 405 and r.json["error"]["code"] == "METHOD_NOT_ALLOWED"


async def test_static_files_still_have_etags_and_long_caching(http_server_client):
    """A versioned URL (?v=hash, as static_url makes) is cached for long; the ETag allows 304s."""
    r = await http_server_client.fetch("/static/parley.css?v=1")
    assert r.code == 200 and r.headers["Content-Type"].startswith("text/css")
    assert "max-age=" in r.headers["Cache-Control"]
    again = await http_server_client.fetch("/static/parley.css?v=1", raise_error=False,
                                           headers={"If-None-Match": r.headers["Etag"]})
    assert again.code == 304
