"""The email scenarios' side of the mailbox (bench/scenarios/email_*.py): the IMAP server Parley imports from
(--mail-server: Dovecot by default, pymap to compare) and how mail reaches its folder (--mail-delivery: files put in
Dovecot's maildir as a delivery agent does, or IMAP APPEND over one kept connection). In a deployment the mail
server and what delivers to it are on another machine: here they share the 2 cores with Parley and wrk, so the less
CPU they take the more the figures are Parley's."""
import imaplib
import subprocess
import time


class MailSource:
    def __init__(self, args):
        from tests.mail_server import DovecotServer, ImapServer
        self.kind = args.mail_server
        self.delivery = "maildir" if self.kind == "dovecot" and args.mail_delivery == "maildir" else "append"
        self.server = (DovecotServer() if self.kind == "dovecot" else ImapServer()).start()
        self.label = f"{'Dovecot ' + self._version() if self.kind == 'dovecot' else 'pymap (in memory)'}, " + \
            ("mails written into its maildir's new/" if self.delivery == "maildir" else "mails by IMAP APPEND")
        self._client = None

    @staticmethod
    def _version():
        from tests.mail_server import DovecotServer
        out = subprocess.run([DovecotServer.binary(), "--version"], capture_output=True, text=True)
        return out.stdout.split()[0] if out.returncode == 0 and out.stdout else "?"

    def settings(self):
        return self.server.settings()

    def put(self, raw):
        """One mail into the folder; APPEND keeps its connection open between mails (close() ends it)."""
        if self.delivery == "maildir":
            self.server.deliver(raw)
            return
        if self._client is None:
            self._client = imaplib.IMAP4("127.0.0.1", self.server.port)
            self._client.login(self.server.USERNAME, self.server.PASSWORD)
        self._client.append("INBOX", None, None, raw)

    def close(self):
        if self._client is not None:
            self._client.logout()
            self._client = None

    def pids(self):
        """The mail server's processes now (Dovecot: its master and the services it started), for their CPU."""
        from bench.measure import process_tree
        return process_tree(self.server.proc.pid)

    def stop(self):
        try:
            self.close()
        finally:
            self.server.stop()


def wait_stored(ctx, data, sql, count, seconds):
    deadline = time.monotonic() + seconds
    while (found := ctx.count_rows(data / "parley.db", sql)) < count:
        assert time.monotonic() < deadline, f"{found} of {count} stored within {seconds} s"
        time.sleep(0.05)
