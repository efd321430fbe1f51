"""Run a command against a throwaway PostgreSQL 15 cluster: start one (tests/pg_cluster.py), run the command with
PARLEY_TEST_DATABASE_URL pointing at it, stop and delete the cluster whatever happens; exit with the command's status.

    python scripts/with_postgres.py .venv/bin/python -m pytest -q      (what `make test-postgres` runs)
"""
import os
import signal
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.pg_cluster import PgCluster, available


def _terminate(signum, frame):
    raise SystemExit(128 + signum)  # so the finally below deletes the cluster


def main(argv):
    if not argv:
        sys.exit(__doc__)
    if not available():
        sys.exit("PostgreSQL 15 is not installed (apt-get install postgresql-15; or set PARLEY_PG_BIN)")
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _terminate)
    cluster = PgCluster()
    try:
        cluster.start()
        print(f"PostgreSQL cluster in {cluster.base}: PARLEY_TEST_DATABASE_URL={cluster.url()}", flush=True)
        env = dict(os.environ, PARLEY_TEST_DATABASE_URL=cluster.url())
        return subprocess.call(argv, env=env)
    finally:
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
