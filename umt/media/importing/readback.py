"""Hashing what was written: helper threads read the bytes back from the page cache, a bounded
window of chunks behind the copy.

Reading back the destination (not the buffer the source was read into, there is none: see
:mod:`umt.media.importing.transfer`) checks the very bytes that will be published.
"""

from __future__ import annotations

import os
import threading

from umt.media.importing.words import CheckFn

#: How often a copy waiting for the hashing threads checks for a cancel or a lost lease.
_CHECK_INTERVAL_SECONDS = 0.1

_buffers = threading.local()


class Window:
    """At most ``chunks`` chunks written and not hashed yet."""

    def __init__(self, chunks: int) -> None:
        self._room = threading.Semaphore(chunks)

    def enter(self, check: CheckFn) -> None:
        """Wait for room for one more chunk, calling ``check()`` while waiting: hashing slowed
        by other work must not hold back a cancel or a lost lease."""
        while not self._room.acquire(timeout=_CHECK_INTERVAL_SECONDS):
            check()

    def leave(self) -> None:
        self._room.release()


def read_back(fd: int, offset: int, count: int) -> memoryview:
    """``count`` bytes of ``fd`` from ``offset`` (fewer if the file ends first), in a buffer of
    the calling thread that its next call reuses."""
    buffer: bytearray | None = getattr(_buffers, "buffer", None)
    if buffer is None or len(buffer) < count:
        buffer = _buffers.buffer = bytearray(count)
    view = memoryview(buffer)[:count]
    filled = 0
    while filled < count:
        got = os.preadv(fd, [view[filled:]], offset + filled)
        if got == 0:
            break
        filled += got
    return view[:filled]
