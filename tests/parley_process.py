"""The real server.py as a child process over HTTPS, and a webhook receiver in a thread, for end-to-end
tests (and the screenshots script)."""
import contextlib
import html
import itertools
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from tests import pg_databases

ROOT = Path(__file__).resolve().parent.parent


def _ephemeral_low():
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


# Ports for our servers come from below the kernel's ephemeral range: a port bind(0) hands out is free only
# until any outgoing connection (an httpx client, a PostgreSQL connection) takes it as its own source port, which
# a server started a moment later then finds in use (EADDRINUSE, seen in CI). Each xdist worker takes a slice of
# its own, so two workers never pick the same port either.
_PORTS_LOW, _PORTS_HIGH = 10000, min(_ephemeral_low(), 65536)
_SLICES = 16
_next_port = itertools.count()


def _port_slice():
    worker = re.fullmatch(r"gw(\d+)", os.environ.get("PYTEST_XDIST_WORKER", ""))
    index = int(worker[1]) if worker else os.getpid()  # outside pytest-xdist: a slice by process id
    size = (_PORTS_HIGH - _PORTS_LOW) // _SLICES
    return _PORTS_LOW + (index % _SLICES) * size, size


def free_port():
    """A loopback port nothing listens on now and no outgoing connection will take (see above)."""
    start, size = _port_slice()
    if size < 100:  # a kernel whose ephemeral range starts near 10000 leaves no room below it: as before
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    for _ in range(size):
        port = start + next(_next_port) % size
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue  # in use, or in TIME_WAIT from a server this worker stopped
            return port
    raise RuntimeError(f"no free port in {start}..{start + size - 1}")


def parley_command():
    """The installed `parley` console script when this venv has it, else the same code by its file."""
    script = Path(sys.executable).parent / "parley"
    return [str(script)] if script.exists() else [sys.executable, str(ROOT / "parley_cli.py")]


def run_cli(data_dir, *args, root=ROOT):
    """Run an ops command (create-account, rotate-key, backup) of the checkout at root; returns its JSON output."""
    out = subprocess.run([sys.executable, str(Path(root) / "server.py"), *args, "--data-dir", str(data_dir)],
                         capture_output=True, text=True, timeout=60, cwd=root, env=pg_databases.env_for(data_dir))
    assert out.returncode == 0, out.stderr + out.stdout
    return json.loads(out.stdout.strip().splitlines()[-1])


def create_agency_with_subaccount(data_dir, agency_email, sub_email):
    """An agency and one sub-account of it, through the ops CLI; returns their create-account outputs."""
    agency = run_cli(data_dir, "create-account", "--name", "Agency", "--email", agency_email, "--agency")
    sub = run_cli(data_dir, "create-account", "--name", "Client", "--email", sub_email,
                  "--agency-email", agency_email)
    assert agency["type"] == "agency" and sub["type"] == "subaccount"
    return agency, sub


def child_pids(pid):
    """The processes whose parent is pid (the server's writer process, storage/writer.py)."""
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue  # it ended meanwhile
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                children.append(int(entry.name))
    return children


def pid_alive(pid):
    """True while pid runs (a zombie, dead but not yet reaped by its parent, counts as gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class ParleyProcess:
    def __init__(self, data_dir, *extra_args, http=True, preexec_fn=None, setup=True, root=ROOT):
        self.data_dir = Path(data_dir)
        self.root = Path(root)  # the checkout whose server.py runs (bench --compare runs an older one)
        self.preexec_fn = preexec_fn  # run in the child before server.py starts (e.g. to set rlimits)
        self.setup = setup  # use the first run's setup link as the owner would (False: the test does)
        self.port = free_port()
        self.http_port = free_port() if http else 0
        self.extra_args = list(extra_args)
        self.proc = None
        self.first_run = None
        self.stdout_lines = []

    @property
    def base(self):
        return f"https://127.0.0.1:{self.port}"

    @property
    def cert(self):
        return str(self.data_dir / "tls" / "cert.pem")

    def start(self, timeout=30):
        self.log = open(self.data_dir.parent / f"server-{self.port}.log", "ab")
        self.proc = subprocess.Popen(
            [sys.executable, str(self.root / "server.py"), "serve", "--data-dir", str(self.data_dir),
             "--host", "127.0.0.1", "--port", str(self.port), "--http-port", str(self.http_port),
             *self.extra_args],
            stdout=subprocess.PIPE, stderr=self.log, text=True, cwd=self.root, preexec_fn=self.preexec_fn,
            env=pg_databases.env_for(self.data_dir))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"server exited with {self.proc.returncode}; see {self.log.name}")
                continue
            self.stdout_lines.append(line)
            if line.startswith("{"):
                event = json.loads(line)
                if event.get("event") == "first_run":
                    self.first_run = event
                if event.get("event") == "listening":
                    if self.setup and self.first_run and "api_key" not in self.first_run:
                        self.first_run = complete_setup(self, self.first_run)
                    return self
        raise RuntimeError("server did not start in time")

    def client(self, **kw):
        return httpx.Client(base_url=self.base, verify=ssl.create_default_context(cafile=self.cert), **{"timeout": 30, **kw})

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc and self.proc.stdout and not self.proc.stdout.closed:
            self.stdout_lines += self.proc.stdout.readlines()  # what it printed after "listening", for greps
            self.proc.stdout.close()
        return self.proc.returncode if self.proc else None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


OWNER_PASSWORD = "owner-chose-this-1"
_API_KEY_FIELD = re.compile(r'id="new-api-key"[^>]*value="([^"]+)"')


def open_link(client, url):
    """GET a one-time link's page (path only: the link names the public URL); returns the form's XSRF token."""
    response = client.get(urlsplit(url).path)
    assert response.status_code == 200, response.text
    return client.cookies["_xsrf"]


def use_link(client, url, password):
    """Choose the password through a one-time link (as a browser would); returns the response."""
    xsrf = open_link(client, url)
    return client.post(urlsplit(url).path, data={"password": password, "password_again": password, "_xsrf": xsrf})


def complete_setup(parley, first_run, password=OWNER_PASSWORD):
    """What the owner does with the first run's setup link: choose a password, copy the API key that the
    Settings page shows once. Returns first_run with the password and api_key (as tests used to get them)."""
    # A server started with its own --tls-cert has no data_dir/tls/cert.pem to verify against.
    client = parley.client() if Path(parley.cert).exists() else httpx.Client(base_url=parley.base, verify=False)
    with client:
        response = use_link(client, first_run["setup_url"], password)
        assert response.status_code == 200, response.text
        api_key = html.unescape(_API_KEY_FIELD.search(response.text).group(1))
    return {**first_run, "password": password, "api_key": api_key}


class ThreadedReceiver:
    """A webhook receiver on 127.0.0.1 in a thread (for tests that are not async): records each POSTed JSON
    body; answers with answer(body) -> (status, headers), by default ``status`` and ``headers``."""

    def __init__(self, answer=None):
        self.requests, self.status, self.headers = [], 200, {}
        self.answer = answer or (lambda body: (self.status, self.headers))
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                receiver.requests.append(body)
                status, headers = receiver.answer(body)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/replies"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@contextlib.contextmanager
def first_run_receiver(parley, answer=None):
    """A ThreadedReceiver set as the Custom Channel Webhook of the server's first-run account."""
    receiver = ThreadedReceiver(answer)
    try:
        with parley.client() as client:
            response = client.patch("/v1/account/settings", params={"apiKey": parley.first_run["api_key"]},
                                    json={"customChannelWebhookUrl": receiver.url})
            assert response.status_code == 200, response.text
        yield receiver
    finally:
        receiver.close()
