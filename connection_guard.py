"""The open connections of the process: a cap shared by every server, the longest-waiting one closed to
make room, accepting paused when none can be, and the deadlines of a connection waiting for a request
(idle keep-alive, headers that never complete, an early answer's lingering) or for the rest of a body."""
import collections
import errno
import logging

from tornado.ioloop import IOLoop, PeriodicCallback

log = logging.getLogger("parley.connections")

ACCEPT_BATCH = 128  # connections accepted per wake-up at most, as Tornado does
RESOURCE_ERRORS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
ACCEPT_PAUSE_SECONDS = 0.1  # after accept() ran out of file descriptors
RESUME_CHECK_SECONDS = 0.5  # while paused at the cap: how often to look for closed connections again
DEADLINE_CHECK_SECONDS = 0.25  # how often the deadlines are looked at (a connection may outlive its own by this)


class ConnectionGuard:
    """The open connections of every server of the process, at most ``cap``.

    At the cap, the connection that has waited longest for a request (a TLS handshake or request headers
    that never came, an idle keep-alive, or an early answer's lingering) is closed to make room; with none
    such (every connection busy with a request), accepting pauses until one closes. When accept() itself
    fails for lack of file descriptors, accepting pauses briefly and one waiting connection is closed.

    Deadlines: a TLS connection is closed once its handshake is not complete by its deadline (handshake()), one
    waiting for a request once it has waited ``seconds`` (wait()), one receiving a body once the body is not
    complete by its deadline (busy()). Tornado can keep the last two
    itself, with a timer per request (gen.with_timeout: ~9 % of the event loop's time per inbound
    request); one sweep of every open connection four times a second costs nothing per request.
    """

    def __init__(self, cap, socket_share=0.5):
        self.cap = cap
        # WebSockets (detached) hold at most this many connections: the rest of the cap is never theirs, so
        # that however many pages are open, the API and the pages themselves still get connections.
        self.socket_cap = max(1, int(cap * socket_share))
        self.open = set()
        self.waiting = collections.OrderedDict()  # streams waiting for a request, longest first: their deadline
        self.receiving = {}  # streams whose request body is being read: its deadline
        self.handshaking = {}  # TLS streams before their handshake completes: (deadline, the seconds allowed)
        self._sweeper = None
        self.detached = set()  # handed over to a WebSocket: counted until they close
        self.listeners = []
        self.paused = False
        self._resume_timer = None
        self.evicted = 0
        self.accept_failures = 0
        self.handshake_timeouts = 0

    # ---- connection states ---------------------------------------------------------------------

    def opened(self, stream, seconds=None):
        self.open.add(stream)
        self.wait(stream, seconds)
        if self._sweeper is None:
            self._sweeper = PeriodicCallback(self.close_expired, DEADLINE_CHECK_SECONDS * 1000)
            self._sweeper.start()

    def wait(self, stream, seconds=None):
        """The stream waits for a request (or, lingering, for the client to finish sending): closed if it
        still waits after ``seconds`` (None: no deadline)."""
        if stream in self.open:
            self.waiting[stream] = None if seconds is None else IOLoop.current().time() + seconds
            self.waiting.move_to_end(stream)

    def handshake(self, stream, seconds):
        """A TLS stream is closed if its handshake is not complete within ``seconds`` (handshake_done())."""
        self.handshaking[stream] = (IOLoop.current().time() + seconds, seconds)

    def handshake_done(self, stream):
        self.handshaking.pop(stream, None)

    def busy(self, stream, body_seconds=None):
        """A request's headers arrived: its body (if any) must be complete within ``body_seconds``."""
        self.waiting.pop(stream, None)
        if body_seconds is not None:
            self.receiving[stream] = IOLoop.current().time() + body_seconds

    def received(self, stream):
        """The request's body is complete (or the connection closed): the handler has it from here."""
        self.receiving.pop(stream, None)

    def close_expired(self):
        """Close every connection past its deadline (the sweep, every DEADLINE_CHECK_SECONDS)."""
        now = IOLoop.current().time()
        expired = [s for s, deadline in self.waiting.items() if deadline is not None and deadline <= now]
        late = [s for s, deadline in self.receiving.items() if deadline <= now]
        for stream, (deadline, seconds) in list(self.handshaking.items()):
            if deadline <= now:
                del self.handshaking[stream]
                if not stream.closed():
                    self.handshake_timeouts += 1
                    log.info("TLS handshake not completed within %g s: connection closed", seconds)
                    stream.abort()
        for stream in late:
            self.receiving.pop(stream, None)
            log.info("request body not complete by its deadline: connection closed")
        for stream in expired + late:
            self.waiting.pop(stream, None)
            if not stream.closed():
                stream.abort()

    def closed(self, stream):
        self.waiting.pop(stream, None)
        self.receiving.pop(stream, None)
        self.handshaking.pop(stream, None)
        if not stream.closed():  # the HTTP layer let go of it (a WebSocket took it over)
            self.detached.add(stream)
            return
        self.open.discard(stream)
        self.detached.discard(stream)
        if self.paused and len(self.open) < self.cap:
            self.resume()

    def _forget_closed_detached(self):
        for stream in [s for s in self.detached if s.closed()]:
            self.detached.discard(stream)
            self.open.discard(stream)

    def socket_room(self):
        """Whether one more connection may become a WebSocket (socket_cap)."""
        if len(self.detached) >= self.socket_cap:
            self._forget_closed_detached()
        return len(self.detached) < self.socket_cap

    def make_room(self):
        """True when one more connection may be accepted (closing the longest-waiting one if need be)."""
        if len(self.open) < self.cap:
            return True
        self._forget_closed_detached()
        if self.waiting:
            log.warning("connection limit (%d) reached: closing the connections that wait longest for a "
                        "request", self.cap)
        while len(self.open) >= self.cap and self.waiting:
            self._evict()
        return len(self.open) < self.cap

    def abort_all(self):
        """Close every connection now (shutdown, once the requests in flight were answered)."""
        for stream in list(self.open):
            if not stream.closed():
                stream.abort()
        self.open.clear()
        self.waiting.clear()
        self.receiving.clear()
        self.detached.clear()
        if self._sweeper is not None:
            self._sweeper.stop()
            self._sweeper = None

    def _evict(self):
        stream, _ = self.waiting.popitem(last=False)
        self.open.discard(stream)
        if not stream.closed():
            self.evicted += 1
            stream.abort()

    # ---- accepting -----------------------------------------------------------------------------

    def listen(self, sock, on_connection):
        listener = _Listener(self, sock, on_connection)
        self.listeners.append(listener)
        if not self.paused:
            listener.start()
        return listener

    def pause(self, seconds=RESUME_CHECK_SECONDS):
        if not self.paused:
            self.paused = True
            for listener in self.listeners:
                listener.stop()
        if self._resume_timer is None:
            self._resume_timer = IOLoop.current().call_later(seconds, self._try_resume)

    def _try_resume(self):
        self._resume_timer = None
        self._forget_closed_detached()
        if len(self.open) < self.cap or self.waiting:
            self.resume()
        else:
            self.pause()

    def resume(self):
        if self._resume_timer is not None:
            IOLoop.current().remove_timeout(self._resume_timer)
            self._resume_timer = None
        self.paused = False
        for listener in self.listeners:
            listener.start()

    def accept_failed(self, exc):
        self.accept_failures += 1
        log.error("accept() failed: %s; accepting pauses for %.1f s", exc, ACCEPT_PAUSE_SECONDS)
        if self.waiting:  # give a file descriptor back
            self._evict()
        self.pause(ACCEPT_PAUSE_SECONDS)


class _Listener:
    """One listening socket, accepted from on the IOLoop (instead of tornado.netutil.add_accept_handler,
    which lets accept() errors escape: at EMFILE the loop logged a traceback for every retry)."""

    def __init__(self, guard, sock, on_connection):
        self.guard, self.sock, self.on_connection = guard, sock, on_connection
        self.active = False

    def start(self):
        if not self.active and self.sock.fileno() >= 0:
            IOLoop.current().add_handler(self.sock, self._ready, IOLoop.READ)
            self.active = True

    def stop(self):
        if self.active:
            IOLoop.current().remove_handler(self.sock)
            self.active = False

    def close(self):
        self.stop()
        if self in self.guard.listeners:
            self.guard.listeners.remove(self)
        self.sock.close()

    def _ready(self, fd, events):
        for _ in range(ACCEPT_BATCH):
            if not self.guard.make_room():
                self.guard.pause()
                return
            try:
                connection, address = self.sock.accept()
            except BlockingIOError:
                return
            except ConnectionAbortedError:
                continue
            except OSError as exc:
                if exc.errno in RESOURCE_ERRORS:
                    self.guard.accept_failed(exc)
                else:
                    log.error("accept() failed: %s", exc)
                return
            self.on_connection(connection, address)
