"""The import's CSV reader as a child process: it reads and normalizes rows (services/csv_import.py) and
streams them to the server in batches, so that the CPU-heavy part of an import (phonenumbers and
email-validator, ~0.1 ms a row) runs on another core, never holding the event loop's GIL.

    python -m services.import_reader

The parent writes one pickled request (read_batches' keyword arguments) on the child's stdin; the child
answers on stdout with frames (a 4-byte big-endian length, then a pickle): ("batch", batch) for each
batch, then ("end", None), or ("error", message) when the file cannot be read. A full pipe blocks the
child: it runs at most about one batch ahead of the database writes.
"""
from __future__ import annotations

import asyncio
import os
import pickle
import signal
import struct
import sys
from collections.abc import AsyncIterator
from typing import Any

from common.errors import Invalid
from services.csv_import import Batch, read_batches

FRAME_HEADER = struct.Struct("!I")


def _frame(obj: tuple[str, Batch | str | None]) -> bytes:
    data = pickle.dumps(obj, pickle.HIGHEST_PROTOCOL)
    return FRAME_HEADER.pack(len(data)) + data


class ReaderProcess:
    """The parent's handle on one reader child: batches() yields its batches; close() stops it early."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    @classmethod
    async def start(cls, **request: Any) -> ReaderProcess:
        """request: read_batches' keyword arguments (pickled to the child)."""
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "services.import_reader", stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, env=env, start_new_session=True,  # a terminal's Ctrl-C is the parent's
            limit=1 << 20)
        assert process.stdin is not None  # stdin=PIPE
        process.stdin.write(pickle.dumps(request, pickle.HIGHEST_PROTOCOL))
        process.stdin.close()
        return cls(process)

    async def batches(self) -> AsyncIterator[Batch]:
        """The child's batches in order; Invalid when it could not read the file."""
        stdout = self.process.stdout
        assert stdout is not None  # stdout=PIPE
        while True:
            try:
                header = await stdout.readexactly(FRAME_HEADER.size)
                kind, value = pickle.loads(await stdout.readexactly(FRAME_HEADER.unpack(header)[0]))
            except asyncio.IncompleteReadError:
                code = await self.process.wait()
                raise RuntimeError(f"the import's reader process stopped unexpectedly (exit code {code})") from None
            if kind == "end":
                return
            if kind == "error":
                raise Invalid(value)
            yield value

    async def close(self) -> None:
        if self.process.returncode is None:
            try:
                self.process.kill()
            except ProcessLookupError:
                pass
        await self.process.wait()


def main() -> int:
    request = pickle.load(sys.stdin.buffer)
    out = sys.stdout.buffer
    try:
        for batch in read_batches(**request):
            out.write(_frame(("batch", batch)))
            out.flush()
        out.write(_frame(("end", None)))
    except Invalid as exc:
        out.write(_frame(("error", exc.message)))
    except OSError as exc:
        out.write(_frame(("error", f"the file cannot be read: {exc.strerror or exc}")))
    out.flush()
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # the parent is gone: end quietly
    sys.exit(main())
