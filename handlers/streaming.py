"""A request body streamed to a file as it arrives (Tornado's stream_request_body), never held in memory:
a mixin for upload handlers."""
import asyncio
import os
import tempfile

from common.errors import PayloadTooLarge


def _open_temp(directory):
    os.makedirs(directory, mode=0o700, exist_ok=True)
    fd, path = tempfile.mkstemp(dir=directory, prefix=".upload-")  # mode 0600
    return os.fdopen(fd, "wb"), path


def _close_synced(file):
    try:
        file.flush()
        os.fsync(file.fileno())
    finally:
        file.close()


def _discard(file, path):
    file.close()
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


class StreamedUploadMixin:
    """For a ``@tornado.web.stream_request_body`` handler. Its prepare() authenticates first (Tornado checks
    XSRF before prepare, and reads no body until prepare returns), then calls
    ``await self.begin_upload(directory, limit)``; its post() calls ``await self.finish_upload()`` and owns
    the file from then on. A Content-Length over the limit is 413 before any byte is read; a chunked body
    longer than the limit makes Tornado close the connection. The temporary file (``.upload-*``, 0600) is
    deleted when the request fails, the client goes away, or the handler never claims it."""

    _upload = None       # (file, path) while the body arrives
    _upload_limit = 0
    _upload_bytes = 0

    async def begin_upload(self, directory, limit):
        length = self.request.headers.get("Content-Length")
        if length is not None and (not length.strip().isdigit() or int(length) > limit):
            raise PayloadTooLarge(f"the file is larger than {limit} bytes")
        self.request.connection.set_max_body_size(limit)
        self._upload_limit, self._upload_bytes = limit, 0
        self._upload = await asyncio.get_running_loop().run_in_executor(None, _open_temp, directory)

    async def data_received(self, chunk):
        if self._upload is None:
            return  # over the limit already (discarded), or refused in prepare
        self._upload_bytes += len(chunk)
        if self._upload_bytes > self._upload_limit:
            self.discard_upload()  # finish_upload answers 413
            return
        # Awaited before the next chunk is read: a slow disk slows the sender down instead of filling memory.
        await asyncio.get_running_loop().run_in_executor(None, self._upload[0].write, chunk)

    async def finish_upload(self):
        """(path, size) of the whole body, flushed to disk; the caller owns (and must delete) the file."""
        if self._upload is None or self._upload_bytes > self._upload_limit:
            raise PayloadTooLarge(f"the file is larger than {self._upload_limit} bytes")
        (file, path), self._upload = self._upload, None
        try:
            await asyncio.get_running_loop().run_in_executor(None, _close_synced, file)
        except BaseException:
            await asyncio.get_running_loop().run_in_executor(None, _discard, file, path)
            raise
        return path, self._upload_bytes

    def discard_upload(self):
        if self._upload is not None:
            upload, self._upload = self._upload, None
            asyncio.get_running_loop().run_in_executor(None, _discard, *upload)

    def on_connection_close(self):
        self.discard_upload()
        super().on_connection_close()

    def on_finish(self):
        self.discard_upload()
        super().on_finish()
