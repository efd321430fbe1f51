"""The `parley` command (issue 26): declared as a console script, `parley --help` lists every command with
one line each, each command's --help ends with an example, and `python server.py` is the same command."""
import configparser
import json
import re
import subprocess
import sys

import parley_cli
from tests.parley_process import ROOT, parley_command

EXPECTED = ["serve", "create-account", "reset-password", "rotate-key", "set-rate-limit", "backup", "import-contacts"]


def run(*args, command=None):
    out = subprocess.run([*(command or parley_command()), *args], capture_output=True, text=True, timeout=60,
                         cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_setup_cfg_declares_the_console_script_and_its_module():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    scripts = [line.strip() for line in cfg["options.entry_points"]["console_scripts"].splitlines() if line.strip()]
    assert "parley = parley_cli:main" in scripts
    # The editable install maps only the modules named here: `parley` run from another directory finds
    # no other top-level module (serving.py was missing).
    assert {p.stem for p in ROOT.glob("*.py")} == {m.strip() for m in cfg["options"]["py_modules"].split(",")}


def test_every_command_is_registered():
    names = [c.name for c in parley_cli.COMMANDS]
    assert set(EXPECTED) == set(names)
    assert len(names) == len(set(names))


def test_help_lists_every_command_on_one_line_each():
    text = run("--help")
    for command in parley_cli.COMMANDS:
        [line] = [line for line in text.splitlines() if re.match(rf"\s+{command.name}\s", line + " ")]
        assert line.split(None, 1)[1] == command.help, f"{command.name}: its help is not on its line"


def test_each_command_help_ends_with_an_example():
    for command in parley_cli.COMMANDS:
        text = run(command.name, "--help")
        example = text.rsplit("example:\n", 1)[1].strip()
        assert example == command.example and example.startswith(f"parley {command.name}")
        assert parley_cli.build_parser().parse_args(example.split()[1:]).command == command.name


def test_server_py_is_the_same_command():
    """The design's entry point stays: `python server.py …` lists and runs the same commands."""
    assert run("--help", command=[sys.executable, str(ROOT / "server.py")]).replace("server.py", "parley") == \
        run("--help")


def test_an_ops_command_runs_through_parley(tmp_path):
    """create-account then rotate-key through the `parley` command: one JSON object each, the new key."""
    data = ["--data-dir", str(tmp_path / "data")]
    created = json.loads(run("create-account", "--name", "Acme", "--email", "ops@acme.test", *data).splitlines()[-1])
    assert created["email"] == "ops@acme.test" and created["api_key"].startswith("pk_")
    rotated = json.loads(run("rotate-key", "--email", "ops@acme.test", *data).splitlines()[-1])
    assert rotated["account_id"] == created["account_id"] and rotated["api_key"] != created["api_key"]


def test_parley_version():
    """Issue 43 §2: `parley --version` (the same version /healthz and the pages' footer show)."""
    from common.version import VERSION
    assert run("--version").strip() == f"parley {VERSION}"
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    assert cfg["metadata"]["version"] == VERSION


def ops(data_dir, *args, cwd):
    """An ops command run from cwd (not the repository) with only --data-dir: (exit code, JSON, stderr)."""
    from tests import pg_databases
    out = subprocess.run([sys.executable, str(ROOT / "server.py"), *args, "--data-dir", str(data_dir)],
                         capture_output=True, text=True, timeout=60, cwd=cwd, env=pg_databases.env_for(data_dir))
    lines = out.stdout.strip().splitlines()
    return out.returncode, json.loads(lines[-1]) if lines else None, out.stderr


def test_ops_commands_follow_the_server_of_their_data_directory(tmp_path):
    """Issue 43 §2: reset-password printed a link to port 8443 while the server ran elsewhere, and backup did not
    say which database it copied. The server records its effective settings (no secret) in its data directory;
    an ops command run from another directory with that --data-dir links to the server's address and names the
    database on stderr."""
    import server_record
    from tests import pg_databases
    from tests.parley_process import ParleyProcess
    data_dir = tmp_path / "srv" / "data"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    data_dir.parent.mkdir()
    with ParleyProcess(data_dir) as server:
        record = json.loads((data_dir / "server.json").read_text())
        assert record["publicUrl"] == f"https://localhost:{server.port}" and record["port"] == server.port
        assert record["dataDir"] == str(data_dir.resolve()) and record["stoppedAt"] is None
        url = pg_databases.env_for(data_dir).get("PARLEY_DATABASE_URL")  # its password left out (never a secret)
        assert record["database"] == (f"PostgreSQL {server_record.redacted_url(url)}" if url
                                      else f"SQLite {(data_dir / 'parley.db').resolve()}")
        code, link, stderr = ops(data_dir, "reset-password", "--email", "admin@localhost", cwd=elsewhere)
        assert code == 0 and link["signInUrl"].startswith(f"https://localhost:{server.port}/"), link
        assert f"database: {record['database']}; the server of {data_dir.resolve()} runs at " \
               f"https://localhost:{server.port}" in stderr
        code, backup, stderr = ops(data_dir, "backup", str(elsewhere / "b.db"), cwd=elsewhere)
        assert code == 0 and f"database: {record['database']};" in stderr
        # --public-url or --port given to the command wins over the record.
        code, link, _ = ops(data_dir, "reset-password", "--email", "admin@localhost", "--public-url",
                            "https://parley.example.com", cwd=elsewhere)
        assert link["signInUrl"].startswith("https://parley.example.com/")
    stopped = json.loads((data_dir / "server.json").read_text())
    assert stopped["stoppedAt"] and stopped["pid"] == record["pid"]
    code, _, stderr = ops(data_dir, "reset-password", "--email", "admin@localhost", cwd=elsewhere)
    assert code == 0 and f"the server of {data_dir.resolve()} is not running" in stderr
    # The repository's old ./data (never served from): the command says no server recorded itself there.
    code, _, stderr = ops(tmp_path / "old-data", "rotate-key", "--email", "nobody@example.test", cwd=elsewhere)
    assert f"no server has recorded its settings in {(tmp_path / 'old-data').resolve()}" in stderr


def test_an_ops_command_refuses_the_sqlite_file_of_a_postgresql_server(tmp_path):
    """A server of this data directory on PostgreSQL: the command without --database-url would open (and create)
    the directory's empty SQLite file; it says which database to name instead, and creates nothing."""
    import server_record
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "server.json").write_text(json.dumps({
        "pid": 1, "dataDir": str(data_dir), "publicUrl": "https://parley.example.com",
        "database": "PostgreSQL postgresql://parley@db.example.com:5432/parley"}))
    out = subprocess.run([sys.executable, str(ROOT / "server.py"), "backup", str(tmp_path / "b.db"), "--data-dir",
                          str(data_dir)], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                         env={k: v for k, v in __import__("os").environ.items() if k != "PARLEY_DATABASE_URL"})
    assert out.returncode == 1
    assert "postgresql://parley@db.example.com:5432/parley" in json.loads(out.stdout)["error"]
    assert not (data_dir / "parley.db").exists() and not (tmp_path / "b.db").exists()
    assert server_record.redacted_url("postgresql://u:s3cret@h:5432/d") == "postgresql://u@h:5432/d"
