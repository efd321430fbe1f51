"""Issue 44 §8: the per-account override of --rate-limit that docs/api.md mentioned could not be set by anyone:
`parley set-rate-limit` sets it (docs/operations.md), the running server applies it at its next request, and it
is audited."""
import subprocess
import sys

import pytest

from tests.parley_process import ROOT, ParleyProcess, run_cli
from tests import pg_databases


@pytest.fixture(scope="module")
def parley(tmp_path_factory):
    with ParleyProcess(tmp_path_factory.mktemp("rate-limit") / "data", "--rate-limit", "3") as process:
        yield process


def test_set_rate_limit_reaches_the_running_server_and_is_audited(parley):
    email = parley.first_run["login"]
    with parley.client(headers={"x-api-key": parley.first_run["api_key"]}) as api:
        codes = [api.get("/v1/account").status_code for _ in range(4)]
        assert codes[-1] == 429, codes
        out = run_cli(parley.data_dir, "set-rate-limit", "--email", email, "--per-minute", "1000")
        assert out == {"account_id": parley.first_run["account_id"], "rateLimitPerMinute": 1000}
        answer = api.get("/v1/account")
        assert answer.status_code == 200, answer.text
        assert answer.headers["X-RateLimit-Limit"] == "1000"
        assert answer.json()["rateLimitPerMinute"] == 1000
        entries = api.get("/v1/audit").json()["data"]
        assert {"action": "account.rate_limit_changed", "actor": "operator", "detail": {"perMinute": 1000}}.items() \
            <= entries[0].items()
        back = run_cli(parley.data_dir, "set-rate-limit", "--email", email, "--per-minute", "default")
        assert back["rateLimitPerMinute"] is None
        assert api.get("/v1/account").headers["X-RateLimit-Limit"] == "3"


@pytest.mark.parametrize("value, said", [("0", "per-minute must be 1-1,000,000"),
                                         ("many", "--per-minute must be a whole number or default")])
def test_a_bad_limit_is_refused_naming_it_and_changes_nothing(parley, value, said):
    out = subprocess.run([sys.executable, str(ROOT / "server.py"), "set-rate-limit", "--email",
                          parley.first_run["login"], "--per-minute", value, "--data-dir", str(parley.data_dir)],
                         capture_output=True, text=True, timeout=60, cwd=ROOT, env=pg_databases.env_for(parley.data_dir))
    assert out.returncode != 0 and said in out.stdout + out.stderr, out
