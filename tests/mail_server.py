"""Real mail servers for the email tests. SMTP: aiosmtpd on a free loopback port (its own thread and event loop, as
aiosmtpd's Controller runs it), with AUTH LOGIN/PLAIN over plain text (security none, which Parley allows only
with --allow-private-webhooks) for one username and password. Delivered mail is parsed into
email.message.EmailMessage objects in ``messages``; ``wait_for`` waits on a state, never a sleep. IMAP: pymap's
in-memory backend with its demo mailbox (user demouser, password demopass), a process on a free loopback port.
importing(): Parley's import of an account's mailbox running in the test's process."""
import contextlib
import email
import email.policy
import imaplib
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from services.tls import write_self_signed
from tests import waiting

USERNAME, PASSWORD = "parley@example.com", "mail-secret-123"


class _Handler:
    def __init__(self, server):
        self.server = server

    async def handle_DATA(self, smtp_server, session, envelope):
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)
        with self.server.arrived:
            self.server.messages.append(message)
            self.server.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
            self.server.arrived.notify_all()
        return "250 OK"


class MailServer:
    def __init__(self):
        self.messages, self.envelopes = [], []
        self.arrived = threading.Condition()
        self.controller = Controller(_Handler(self), hostname="127.0.0.1", port=free_port(),
                                     authenticator=self._authenticate, auth_require_tls=False)

    @staticmethod
    def _authenticate(server, session, envelope, mechanism, auth_data):
        ok = (isinstance(auth_data, LoginPassword) and auth_data.login == USERNAME.encode()
              and auth_data.password == PASSWORD.encode())
        return AuthResult(success=ok, handled=False)  # aiosmtpd answers 535 itself

    @property
    def port(self):
        return self.controller.port

    def settings(self, **changes):
        """The `smtp` object of the email setting that reaches this server."""
        return {"host": "127.0.0.1", "port": self.port, "security": "none", "username": USERNAME,
                "password": PASSWORD, **changes}

    def wait_for(self, count, timeout=10):
        """The first ``count`` messages, once they arrived (AssertionError after ``timeout`` s without them)."""
        with self.arrived:
            assert self.arrived.wait_for(lambda: len(self.messages) >= count, timeout), \
                f"{len(self.messages)} mail(s) arrived, {count} expected"
            return list(self.messages[:count])

    def start(self):
        self.controller.start()
        return self

    def stop(self):
        if self.controller.server is not None:  # a test may have stopped it (a server that is down)
            self.controller.stop()


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def closed_port():
    """A loopback port nothing listens on (bound, then closed)."""
    return free_port()


class ImapServer:
    """pymap (`pymap dict --demo-data`) on a free loopback port, in plain text or (tls_dir) with STARTTLS and a
    self-signed certificate; starts in under a second. Its log goes nowhere (a full pipe would stop it)."""
    USERNAME, PASSWORD = "demouser", "demopass"

    def __init__(self, tls_dir=None):
        self.port = free_port()
        self.proc = None
        self.cert = None
        if tls_dir is not None:  # STARTTLS with a self-signed certificate for 127.0.0.1
            self.cert, self.key = tls_dir / "imap-cert.pem", tls_dir / "imap-key.pem"
            write_self_signed(self.cert, self.key, hosts=("127.0.0.1",))

    def settings(self, **changes):
        """The `imap` object of the email setting that reaches this server."""
        return {"host": "127.0.0.1", "port": self.port, "security": "none", "username": self.USERNAME,
                "password": self.PASSWORD, **changes}

    def start(self, timeout=15):
        pymap = Path(sys.executable).with_name("pymap")
        tls = ["--cert", str(self.cert), "--key", str(self.key)] if self.cert else ["--no-tls"]
        self.proc = subprocess.Popen([str(pymap), "--host", "127.0.0.1", "--port", str(self.port), *tls,
                                      "--no-service", "admin", "dict", "--demo-data"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while True:  # listening: a connection is accepted
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("pymap did not start") from None
                time.sleep(0.05)

    def append(self, *mails):
        """Put mails in the folder as another client would (imaplib: blocking; async tests run it in a thread)."""
        client = imaplib.IMAP4("127.0.0.1", self.port)
        client.login(self.USERNAME, self.PASSWORD)
        for mail in mails:
            client.append("INBOX", None, None, bytes(mail))
        client.logout()

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


@contextlib.asynccontextmanager
async def importing(services, account_id, idle_seconds=1, first_look=True):
    """The import of the account's mailbox (services/mail_in.py) running here: yields its Mailbox once its first look
    at the folder ended (first_look: the mail already there is its past), and stops it after. idle_seconds: pymap
    reports no mail that arrived just before an IDLE began, so a short IDLE lets the next one see it."""
    from services.mail_in import MailImporter
    importer = MailImporter(services)
    importer.idle_seconds = idle_seconds
    try:
        await importer.round()
        box = importer.boxes[account_id]
        if first_look:
            assert await waiting.until(lambda: box.rounds >= 1, 15), "the import's first look did not end"
        yield box
    finally:
        await importer.stop()
