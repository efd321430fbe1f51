"""Request bodies streamed as they arrive, with a limit per route and one memory budget for all.

Handlers built on StreamedBody run prepare() (method, API key or session, rate limit: everything that
can refuse) before a single byte of the body is read: a refused request costs no memory, and its body is
only drained from the socket (bounded by the body timeout). An accepted body goes, chunk by chunk, into
a sink the handler chooses (make_body_sink): in memory (MemoryBody, counted against the application's
BodyBudget, so the bytes held across all connections stay bounded), or a file (FileBody: large uploads,
written in an executor). The POST/PUT/PATCH/DELETE methods run once the body is complete, with
``self.body`` (and, for bytes, ``self.request.body``) set. Requests that announce no body are
handled unstreamed (StreamedBodyRouting), so that refusing one keeps its connection open.
"""
import asyncio
import functools
import inspect
import os
import tempfile

from common.errors import PayloadTooLarge, Unavailable

BODY_METHODS = ("POST", "PUT", "PATCH", "DELETE")
RETRY_AFTER_SECONDS = 1


class BodyBudget:
    """Bytes of request bodies held in memory at once, across every connection."""

    def __init__(self, limit):
        self.limit = limit
        self.used = 0

    def take(self, size):
        if self.used + size > self.limit:
            return False
        self.used += size
        return True

    def give(self, size):
        self.used -= size


def busy():
    return Unavailable("the server is receiving too many request bodies at once; "
                       f"retry in {RETRY_AFTER_SECONDS} s", headers={"Retry-After": str(RETRY_AFTER_SECONDS)})


def too_large(limit):
    return PayloadTooLarge(f"request body is larger than {limit} bytes")


class MemoryBody:
    """A body kept in memory, at most ``limit`` bytes, counted against ``budget`` (None: uncounted). With
    the length known in advance the whole of it is reserved at once, so a refusal comes before any byte."""

    def __init__(self, limit, budget, expected_length=None):
        self.limit, self.budget = limit, budget
        self.data = bytearray()
        self.reserved = 0
        if expected_length:
            self._reserve(expected_length)

    def _reserve(self, size):
        if self.budget is not None:
            if not self.budget.take(size):
                raise busy()
            self.reserved += size

    def write(self, chunk):
        size = len(self.data) + len(chunk)
        if size > self.limit:
            raise too_large(self.limit)
        if size > self.reserved and self.budget is not None:
            self._reserve(size - self.reserved)
        self.data += chunk

    def finish(self):
        return self.data

    def close(self):
        self.data = bytearray()
        if self.budget is not None:
            self.budget.give(self.reserved)
        self.reserved = 0


class FileBody:
    """A body written to a temporary file in ``directory`` as it arrives (each write in an executor; Tornado
    reads the next chunk only once it is done), at most ``limit`` bytes. finish() gives the file's path;
    close() removes the file unless the handler took it over (set ``path`` to None first)."""

    def __init__(self, limit, directory):
        self.limit = limit
        os.makedirs(directory, mode=0o700, exist_ok=True)
        fd, self.path = tempfile.mkstemp(prefix=".upload-", dir=directory)  # mode 0600
        self.file = os.fdopen(fd, "wb")
        self.size = 0

    def write(self, chunk):
        self.size += len(chunk)
        if self.size > self.limit:
            raise too_large(self.limit)
        return asyncio.get_running_loop().run_in_executor(None, self.file.write, chunk)

    async def finish(self):
        await asyncio.get_running_loop().run_in_executor(None, _close_synced, self.file)
        return self.path

    def keep(self):
        """(path, size) of the finished file, which the caller now owns: close() no longer deletes it."""
        path, self.path = self.path, None
        return path, self.size

    def close(self):
        self.file.close()
        if self.path is not None:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass


def _close_synced(file):
    """Flush and fsync before close: a job may refer to the file as soon as the answer is sent."""
    try:
        file.flush()
        os.fsync(file.fileno())
    finally:
        file.close()


def announces_body(request):
    """Whether the request's headers say a body follows."""
    length = request.headers.get("Content-Length")
    return "Transfer-Encoding" in request.headers or bool(length and length.strip("0 "))


@functools.cache
def _buffered_variant(handler_class):
    """The handler class without stream_request_body (the flag Tornado's decorator sets), for requests that
    announce no body. Tornado then reads the (empty) body before prepare(): an answer from prepare()
    keeps the connection alive, where a streaming handler answering before the body closes it."""
    return type(handler_class.__name__, (handler_class,),
                {"_stream_request_body": False, "__module__": handler_class.__module__,
                 "__doc__": handler_class.__doc__})


class StreamedBodyRouting:
    """Mixin for tornado.web.Application: streamed handling only for requests that carry a body."""

    def get_handler_delegate(self, request, target_class, target_kwargs=None, path_args=None, path_kwargs=None):
        if getattr(target_class, "_stream_request_body", False) and not announces_body(request):
            target_class = _buffered_variant(target_class)
        return super().get_handler_delegate(request, target_class, target_kwargs, path_args, path_kwargs)


def _after_body(method):
    """Wraps a handler's POST/PUT/PATCH/DELETE: Tornado calls it once the body is complete, and it first
    hands the body over (or raises what went wrong while it arrived)."""
    @functools.wraps(method)
    async def run(self, *args, **kwargs):
        await self.body_received()
        result = method(self, *args, **kwargs)
        if inspect.isawaitable(result):
            result = await result
        return result
    run.after_body = True
    return run


class StreamedBody:
    """Mixin for a tornado.web.RequestHandler decorated with @tornado.web.stream_request_body."""

    _body_sink = None
    _body_error = None
    _body_done = False
    body = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name in (m.lower() for m in BODY_METHODS):
            method = cls.__dict__.get(name)
            if method is not None and not getattr(method, "after_body", False):
                setattr(cls, name, _after_body(method))

    def body_limit(self):
        """The most bytes this request's body may have; None for a method that takes no body (a body sent
        anyway is read and dropped)."""
        return None

    def body_budget(self):
        return getattr(self.application, "body_budget", None)

    def make_body_sink(self, limit):
        """Where the body goes; override for FileBody. Called before the first byte (or at reserve_body)."""
        return MemoryBody(limit, self.body_budget(), self.content_length())

    def content_length(self):
        value = self.request.headers.get("Content-Length")
        return int(value) if value and value.isdigit() else None

    def refuse_oversized_body(self):
        """413 from the Content-Length alone, before any byte is read."""
        limit, length = self.body_limit(), self.content_length()
        if limit is not None and length is not None and length > limit:
            raise too_large(limit)

    def reserve_body(self):
        """Make the sink now (call it at the end of prepare, once the request is allowed): a full budget is
        a 503 before the body is sent rather than after."""
        limit = self.body_limit()
        if limit is not None and self._body_sink is None and self._body_error is None:
            self._body_sink = self.make_body_sink(limit)

    def data_received(self, chunk):
        if self._body_error is not None:
            return None
        try:
            if self._body_sink is None:
                limit = self.body_limit()
                if limit is None:
                    return None  # a body this method does not take: dropped
                self._body_sink = self.make_body_sink(limit)
            return self._body_sink.write(chunk)
        except (PayloadTooLarge, Unavailable) as exc:
            # Raised here it would cut the connection with a traceback: answered by body_received().
            self._body_error = exc
            self._release_body()
            return None

    async def body_received(self):
        """Set self.body (and self.request.body for bytes) from the sink; raise what went wrong on the way."""
        self._body_done = True
        if self._body_error is not None:
            raise self._body_error
        if self._body_sink is not None:
            body = self._body_sink.finish()
            self.body = await body if inspect.isawaitable(body) else body
            if isinstance(self.body, (bytes, bytearray)):
                self.request.body = self.body

    def keep_body_file(self):
        """For a FileBody sink, once the body is complete: (path, size); the file is the caller's from now on."""
        return self._body_sink.keep()

    def _release_body(self):
        sink, self._body_sink = self._body_sink, None
        if sink is not None:
            sink.close()
        self.request.body = b""

    def _body_unread(self):
        """A body was announced and not read: the request is being answered before it."""
        if self._body_done:
            return False
        length = self.content_length()
        return bool(length) or (length is None and "chunked" in self.request.headers.get("Transfer-Encoding", ""))

    def finish(self, chunk=None):
        if not self._finished and self._body_unread():
            # Tornado closes the connection after this answer; the client may still be sending the body.
            # Say so, let a known length be drained rather than cut, and have the close wait for it.
            self.set_header("Connection", "close")
            connection = self.request.connection
            if self.content_length() and hasattr(connection, "set_max_body_size"):
                connection.set_max_body_size(self.content_length())
            stream = getattr(connection, "stream", None)
            if stream is not None:
                stream.linger_on_close = True  # serving.py: the close waits for the client (or the timeouts)
        return super().finish(chunk)

    def on_finish(self):
        self._release_body()
        super().on_finish()
