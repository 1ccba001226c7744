"""Checking a file against its torrent's v1 piece hashes (SHA-1), on every core, as it is read.

A torrent is one byte stream cut into pieces of ``piece_length`` bytes; its files follow each
other in that stream, so a file's first and last pieces may also hold bytes of its neighbours.
:class:`FilePieces` carries what the torrent says about one file: the hashes of the pieces it
touches and the neighbours' bytes in its first and last piece (``head`` and ``tail``, read from
the download by the caller). Pieces are independent, so they are hashed in parallel on a thread
pool while the file is read once (hashlib releases the GIL for buffers this large). What is
hashed is read back from the file being checked: for an import, the copy just written.
"""

from __future__ import annotations

import hashlib
import os
import queue
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from umt.media.importing.failures import ImportFailure
from umt.media.importing.readback import Window, read_back
from umt.media.importing.words import CheckFn

#: Bytes copied and read back per chunk: a chunk read back is hashed from the CPU cache, and a
#: cancel is noticed between chunks (1 MiB takes 0.25 s on a disk writing 4 MB/s).
_CHUNK_BYTES = 1024 * 1024
#: Chunks written and not hashed yet stay below this many bytes, whatever the piece size.
_MAX_AHEAD = 256 * 1024 * 1024
_SHA1_SIZE = 20


class PieceMismatch(ImportFailure):
    """The file's bytes differ from what the torrent's piece hashes say."""


@dataclass(frozen=True)
class FilePieces:
    """The pieces of a torrent that one of its files (``size`` bytes) touches."""

    piece_length: int
    #: The file's size, as the torrent says.
    size: int
    #: SHA-1 of each piece the file touches, in order (raw 20-byte digests).
    hashes: tuple[bytes, ...]
    #: The bytes of the first piece that come before the file (from the files before it).
    head: bytes = b""
    #: The bytes of the last piece that come after the file (from the files after it).
    tail: bytes = b""
    #: The torrent's index of ``hashes[0]``, for messages.
    first_piece: int = 0

    def check_shape(self, size: int) -> None:
        """Raise ``ValueError`` unless these pieces can describe a file of ``size`` bytes."""
        if size != self.size:
            raise ValueError(f"it has {size} bytes, the torrent says {self.size}")
        length = self.piece_length
        if length <= 0:
            raise ValueError(f"a piece length of {length} bytes")
        touched = -(-(len(self.head) + size) // length) if size else 0
        edges = (len(self.head), len(self.tail)) if size else (0, 0)
        if (len(self.hashes) != touched or len(self.head) >= length
                or len(self.tail) >= length or (len(self.head), len(self.tail)) != edges):
            raise ValueError(
                f"{len(self.hashes)} pieces of {length} bytes cannot hold {len(self.head)} + "
                f"{size} + {len(self.tail)} bytes"
            )
        if any(len(digest) != _SHA1_SIZE for digest in self.hashes):
            raise ValueError("a piece hash is not a SHA-1 digest")

    def file_range(self, index: int) -> tuple[int, int]:
        """The bytes of the file that piece ``hashes[index]`` holds (start, end)."""
        head, length = len(self.head), self.piece_length
        return max(0, index * length - head), min(self.size, (index + 1) * length - head)


@dataclass(frozen=True)
class _Lane:
    """Pieces hashed by one task, in order: several small whole pieces in one chunk, or one
    large piece arriving in several chunks."""

    first: int
    count: int
    chunks: tuple[int, ...]  # bytes of the file in each chunk, in order


def _lanes(pieces: FilePieces) -> Iterator[_Lane]:
    length = pieces.piece_length
    if length <= _CHUNK_BYTES:
        per_lane = _CHUNK_BYTES // length
        for first in range(0, len(pieces.hashes), per_lane):
            count = min(per_lane, len(pieces.hashes) - first)
            start, end = pieces.file_range(first)[0], pieces.file_range(first + count - 1)[1]
            yield _Lane(first, count, (end - start,))
        return
    for index in range(len(pieces.hashes)):
        start, end = pieces.file_range(index)
        cuts = range(start, end, _CHUNK_BYTES)
        yield _Lane(index, 1, tuple(min(_CHUNK_BYTES, end - cut) for cut in cuts))


class PieceHasher:
    """Plans the chunks of a file along piece boundaries and checks the pieces on a thread pool,
    reading each chunk back from ``fd`` once the caller says it is there.

    ``next_chunk(check)`` gives the size of the next chunk (None once every piece is handed
    out), ``ready(offset, count)`` says it can be read, ``finish()`` waits for every piece and
    raises :class:`PieceMismatch` for the first piece that does not match; a mismatch found
    while the copy still runs stops it at the next ``next_chunk()``.

    Each piece is hashed by one task as its chunks arrive, while they are still in the page
    cache and the chunk read back is in the CPU cache: hashing whole 8 MiB pieces after they
    were copied measured twice as slow. Consecutive pieces go to different threads.
    """

    def __init__(self, pieces: FilePieces, size: int, name: str, fd: int,
                 workers: int | None = None) -> None:
        try:
            pieces.check_shape(size)
        except ValueError as exc:
            raise PieceMismatch(f"{name} is not the file its torrent describes: {exc}") from None
        self._pieces = pieces
        self._name = name
        self._fd = fd
        self._plan = _chunks_in_order(_lanes(pieces))
        self._lane: queue.SimpleQueue[tuple[int, int] | None] | None = None
        self._open: list[queue.SimpleQueue[tuple[int, int] | None]] = []
        self._wanted = 0
        workers = workers or os.cpu_count() or 1
        chunk = min(_CHUNK_BYTES, max(pieces.piece_length, _CHUNK_BYTES // pieces.piece_length
                                      * pieces.piece_length))
        per_piece = -(-pieces.piece_length // _CHUNK_BYTES)
        self._window = Window(max(4, min(_MAX_AHEAD // chunk, max(workers, 2) * per_piece + 4)))
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="umt-pieces")
        self._futures: list[Future[None]] = []
        self._lock = threading.Lock()
        self._mismatch: str | None = None
        self._failure: BaseException | None = None
        self._checked = 0
        self._closing = False

    def __enter__(self) -> PieceHasher:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._closing = True  # chunks still queued are not worth hashing any more
        for lane in self._open:  # a lane still waiting for chunks that will not come
            lane.put(None)
        self._pool.shutdown(wait=True, cancel_futures=True)

    def next_chunk(self, check: CheckFn) -> int | None:
        """The size of the next chunk to make ready, once the window has room for it (calling
        ``check()`` while it waits); None once every piece is handed out."""
        self._raise_failure()
        step = next(self._plan, None)
        if step is None:
            return None
        lane, wanted, opens = step
        self._window.enter(check)
        self._wanted = wanted
        if opens:
            self._lane = queue.SimpleQueue()
            self._open.append(self._lane)
            self._futures.append(self._pool.submit(self._hash_lane, lane, self._lane))
        return wanted

    def ready(self, offset: int, count: int) -> None:
        """``count`` bytes at ``offset``, the chunk the last ``next_chunk()`` asked for, can be
        read from ``fd``; fewer than asked means the file ended early."""
        assert self._lane is not None
        if count != self._wanted:
            self._window.leave()
            raise ImportFailure(self._ended_early(offset + count))
        self._lane.put((offset, count))

    def result(self) -> None:
        """Wait for every piece (there is no digest of the whole file to give)."""
        self.finish()

    def finish(self) -> int:
        """Wait for every piece; the number checked. Raises on the first mismatch."""
        for future in self._futures:
            future.result()
        self._raise_failure()
        if self._checked != len(self._pieces.hashes):
            raise ImportFailure(
                f"{self._name}: {self._checked} of {len(self._pieces.hashes)} pieces were read"
            )
        return self._checked

    def _ended_early(self, end: int) -> str:
        return (f"{self._name} ended after {end} bytes, before the {self._pieces.size} its "
                "torrent describes")

    def _raise_failure(self) -> None:
        if self._mismatch is not None:
            raise PieceMismatch(self._mismatch)
        failure = self._failure
        if isinstance(failure, ImportFailure):
            raise ImportFailure(str(failure)) from failure
        if failure is not None:
            raise ImportFailure(f"hashing failed: {failure!r}") from failure

    def _hash_lane(self, lane: _Lane, chunks: queue.SimpleQueue[tuple[int, int] | None]
                   ) -> None:
        """Hash the lane's pieces from its chunks, in order; every chunk leaves the window,
        also after a mismatch or a failure (the copy waits for room in it)."""
        pieces = self._pieces
        index = lane.first
        digest = self._new_digest(index)
        left = pieces.file_range(index)[1] - pieces.file_range(index)[0]
        good = True
        for _ in lane.chunks:
            item = chunks.get()
            if item is None or self._closing:
                return
            offset, count = item
            try:
                view = read_back(self._fd, offset, count) if good else memoryview(b"")
                if good and len(view) != count:
                    raise ImportFailure(self._ended_early(offset + len(view)))
                while good and view:
                    taken = min(left, len(view))
                    digest.update(view[:taken])
                    view, left = view[taken:], left - taken
                    if left == 0:
                        good = self._piece_done(index, digest)
                        index += 1
                        if index < lane.first + lane.count:
                            digest = self._new_digest(index)
                            start, end = pieces.file_range(index)
                            left = end - start
            except BaseException as exc:  # surfaced by next_chunk() or finish()
                with self._lock:
                    self._failure = self._failure or exc
                good = False
            finally:
                self._window.leave()

    def _new_digest(self, index: int) -> Any:
        digest = hashlib.sha1(usedforsecurity=False)
        if index == 0:
            digest.update(self._pieces.head)
        return digest

    def _piece_done(self, index: int, digest: Any) -> bool:
        pieces = self._pieces
        if index == len(pieces.hashes) - 1:
            digest.update(pieces.tail)
        if digest.digest() == pieces.hashes[index]:
            with self._lock:
                self._checked += 1
            return True
        start, end = pieces.file_range(index)
        message = (
            f"{self._name} does not match its torrent: piece {pieces.first_piece + index} "
            f"(bytes {start}-{end} of the file) has another SHA-1 than the torrent publishes"
        )
        with self._lock:
            self._mismatch = self._mismatch or message
        return False


def _chunks_in_order(lanes: Iterator[_Lane]) -> Iterator[tuple[_Lane, int, bool]]:
    """``(lane, bytes, opens_the_lane)`` for every chunk, in file order."""
    for lane in lanes:
        for position, nbytes in enumerate(lane.chunks):
            yield lane, nbytes, position == 0


def check_file_pieces(path: Path, pieces: FilePieces, *, check: CheckFn) -> int:
    """Read ``path`` once and check every piece it touches; the number of pieces checked.

    Raises :class:`PieceMismatch` (or :class:`ImportFailure` when the size is not the
    torrent's). ``check()`` is called between chunks, so a cancel stops the read.
    """
    with open(path, "rb", buffering=0) as file:
        fd = file.fileno()
        size = os.fstat(fd).st_size
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
        with PieceHasher(pieces, size, path.name, fd) as hasher:
            offset = 0
            while (wanted := hasher.next_chunk(check)) is not None:
                check()
                # The threads read the pieces side by side; read ahead in file order for them.
                os.posix_fadvise(fd, offset, wanted, os.POSIX_FADV_WILLNEED)
                hasher.ready(offset, wanted)
                offset += wanted
            return hasher.finish()
