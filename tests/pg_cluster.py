"""A throwaway PostgreSQL 15 cluster in a temporary directory (initdb + pg_ctl, Unix socket only, no fsync):
for `make test-postgres` / .ci/run (scripts/with_postgres.py) and for the fault tests that restart the database
under load (tests/test_postgres_faults.py)."""
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

PG_BIN = Path(os.environ.get("PARLEY_PG_BIN", "/usr/lib/postgresql/15/bin"))
# initdb and postgres refuse to run as root; as root (CI) the cluster runs as this user (created if missing).
PG_USER = "postgres"


def available():
    return (PG_BIN / "initdb").exists() and (PG_BIN / "pg_ctl").exists()


def _run_as():
    """subprocess keyword arguments that drop root to the cluster's user; nothing when not root."""
    if os.geteuid() != 0:
        return {}
    try:
        entry = pwd.getpwnam(PG_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", PG_USER],
                       check=True)
        entry = pwd.getpwnam(PG_USER)
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


class PgCluster:
    """start() -> url() for the `postgres` database as the `postgres` superuser over the socket; stop() removes
    everything. restart()/stop_server()/start_server() keep the data (the fault tests' outage)."""

    def __init__(self, port=5432, base_dir=None):
        self.port = port
        self.base = Path(base_dir) if base_dir else Path(tempfile.mkdtemp(prefix="parley-pg-"))
        self.owned_base = base_dir is None
        self.data = self.base / "data"
        self.log = self.base / "postgres.log"
        self.as_user = _run_as()

    def url(self, dbname="postgres"):
        return f"postgresql://postgres@/{dbname}?host={self.base}&port={self.port}"

    def _pg(self, *args, check=True):
        out = subprocess.run([str(PG_BIN / args[0]), *args[1:]], cwd=self.base, capture_output=True, text=True,
                             timeout=120, **self.as_user)
        if check and out.returncode != 0:
            raise RuntimeError(f"{args[0]} failed ({out.returncode}): {out.stderr or out.stdout}\n"
                               + (self.log.read_text()[-2000:] if self.log.exists() else ""))
        return out

    def start(self):
        self.base.mkdir(parents=True, exist_ok=True)
        if self.as_user:
            os.chown(self.base, self.as_user["user"], self.as_user["group"])
        if not (self.data / "PG_VERSION").exists():
            self._pg("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "--encoding=UTF8",
                     "--locale=C.UTF-8", "--no-sync")
        self.start_server()
        return self

    def _options(self):
        # Socket only (no TCP port to collide with); fsync off: a test database needs no durability.
        return " ".join([f"-p {self.port}", f"-k {self.base}", "-c listen_addresses=''", "-c fsync=off",
                         "-c synchronous_commit=off", "-c full_page_writes=off", "-c max_connections=300"])

    def start_server(self):
        self._pg("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", self._options(), "-w", "-t", "60",
                 "start")

    def stop_server(self, mode="fast"):
        self._pg("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def restart(self, mode="fast"):
        self._pg("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", self._options(), "-m", mode, "-w",
                 "-t", "60", "restart")

    def stop(self):
        """Stop the server (if running) and delete the cluster's directory."""
        if (self.data / "postmaster.pid").exists():
            self._pg("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop", check=False)
        if self.owned_base:
            shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
