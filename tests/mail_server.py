"""Real mail servers for the email tests. SMTP: aiosmtpd on a free loopback port (its own thread and event loop, as
aiosmtpd's Controller runs it), with AUTH LOGIN/PLAIN over plain text (security none, which Parley allows only
with --allow-private-webhooks) for one username and password. Delivered mail is parsed into
email.message.EmailMessage objects in ``messages``; ``wait_for`` waits on a state, never a sleep. IMAP: pymap's
in-memory backend with its demo mailbox (user demouser, password demopass), a process on a free loopback port.
DovecotServer: Debian's Dovecot (dovecot-imapd) with the same user, password and interface, a C server as a
deployment would have, which also takes mail the way a delivery agent does (files in its maildir).
importing(): Parley's import of an account's mailbox running in the test's process."""
import contextlib
import email
import email.policy
import grp
import imaplib
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from services.tls import write_self_signed
from tests import waiting
from tests.parley_process import free_port

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
        try:
            _wait_listening(self.proc, self.port, timeout, "pymap")
        except RuntimeError:
            self.stop()
            raise
        return self

    def append(self, *mails):
        """Put mails in the folder as another client would (imaplib: blocking; async tests run it in a thread)."""
        _append(self.port, self.USERNAME, self.PASSWORD, mails)

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


def _wait_listening(proc, port, timeout, what):
    deadline = time.monotonic() + timeout
    while True:  # listening: a connection is accepted
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not start") from None
            time.sleep(0.05)


def _append(port, username, password, mails):
    client = imaplib.IMAP4("127.0.0.1", port)
    client.login(username, password)
    for mail in mails:
        client.append("INBOX", None, None, bytes(mail))
    client.logout()


_DOVECOT_CONF = """\
# A throwaway Dovecot for tests and benches (tests/mail_server.py): one user, maildir, plain text on loopback.
protocols = imap
listen = 127.0.0.1
base_dir = {root}/run
state_dir = {root}/state
log_path = {root}/dovecot.log
info_log_path = {root}/dovecot.log
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
default_internal_user = {user}
default_internal_group = {group}
default_login_user = {user}
first_valid_uid = {uid}
mail_location = maildir:~/Maildir
passdb {{
  driver = passwd-file
  args = {root}/users
}}
userdb {{
  driver = passwd-file
  args = {root}/users
}}
service imap-login {{
  chroot =
  inet_listener imap {{
    port = {port}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
service anvil {{
  chroot =
}}
"""


class DovecotServer:
    """Dovecot on a free loopback port, every file in a temporary directory (config, maildir, sockets, log), no TLS,
    one user (demouser / demopass, as ImapServer). Dovecot runs as one unprivileged user throughout (its non-root
    mode, so no chroot): the invoking user, or the package's `dovecot` user when started by root. A system Dovecot
    the package may have started is not touched (its own base_dir and ports). IDLE sees new files in the maildir at
    once (inotify).

    deliver(): mails put in the maildir's new/ as a delivery agent does (the file written in tmp/, then renamed),
    with no IMAP at all; append(): by IMAP APPEND, as ImapServer."""
    USERNAME, PASSWORD = ImapServer.USERNAME, ImapServer.PASSWORD

    def __init__(self):
        self.port = free_port()
        self.proc = None
        self.root = None
        self.delivered = 0

    settings = ImapServer.settings

    @staticmethod
    def binary():
        # /usr/sbin is not on an ordinary user's PATH on Debian
        found = shutil.which("dovecot") or shutil.which("dovecot", path="/usr/sbin")
        if found is None:
            raise RuntimeError("dovecot is not installed: apt-get install dovecot-imapd (`make bench` installs it)")
        return found

    def start(self, timeout=15):
        binary = self.binary()
        me = pwd.getpwuid(os.geteuid())
        # Dovecot refuses to give mail to uid 0 and to run its login process as root: as root, drop to its own user.
        user = pwd.getpwnam("dovecot") if me.pw_uid == 0 else me
        self.uid, self.gid = user.pw_uid, user.pw_gid
        self.root = Path(tempfile.mkdtemp(prefix="parley-dovecot-"))
        home = self.root / "home" / self.USERNAME
        self.maildir = home / "Maildir"
        for sub in ("cur", "new", "tmp"):
            (self.maildir / sub).mkdir(parents=True)
        (self.root / "users").write_text(
            f"{self.USERNAME}:{{PLAIN}}{self.PASSWORD}:{self.uid}:{self.gid}::{home}\n")
        (self.root / "dovecot.conf").write_text(_DOVECOT_CONF.format(
            root=self.root, user=user.pw_name, group=grp.getgrgid(self.gid).gr_name, uid=self.uid, port=self.port))
        if me.pw_uid == 0:
            for path in (self.root, *self.root.rglob("*")):
                os.chown(path, self.uid, self.gid)
        # -F: in the foreground, so this object owns the master process and stopping it stops them all.
        self.proc = subprocess.Popen([binary, "-F", "-c", str(self.root / "dovecot.conf")],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     **({"user": self.uid, "group": self.gid, "extra_groups": []}
                                        if me.pw_uid == 0 else {}))
        try:
            _wait_listening(self.proc, self.port, timeout, "dovecot")
        except RuntimeError:
            log = (self.root / "dovecot.log").read_text(errors="replace") if (self.root / "dovecot.log").exists() \
                else ""
            self.stop()
            raise RuntimeError(f"dovecot did not start; its log:\n{log[-2000:]}") from None
        return self

    def append(self, *mails):
        """Put mails in the folder by IMAP APPEND (imaplib: blocking; async tests run it in a thread)."""
        _append(self.port, self.USERNAME, self.PASSWORD, mails)

    def deliver(self, *mails):
        """Put mails in the folder as a delivery agent does: each written to tmp/ and renamed into new/ (maildir's
        protocol: a reader never sees half a file). No IMAP and nearly no CPU: Dovecot indexes them when a client
        looks, and tells a client in IDLE."""
        for mail in mails:
            self.delivered += 1
            name = f"{time.time_ns() // 1000}.P{os.getpid()}Q{self.delivered}.parley-bench"
            tmp = self.maildir / "tmp" / name
            with open(tmp, "wb") as out:
                out.write(mail if isinstance(mail, bytes) else bytes(mail))
            if os.geteuid() == 0:
                os.chown(tmp, self.uid, self.gid)
            os.rename(tmp, self.maildir / "new" / name)

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # the master stops its services
            self.proc.wait(10)
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None


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
