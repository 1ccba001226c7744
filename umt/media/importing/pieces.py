"""Checking a file against its torrent's v1 piece hashes (SHA-1), on every core, as it is read.

A torrent is one byte stream cut into pieces of ``piece_length`` bytes; its files follow each
other in that stream, so a file's first and last pieces may also hold bytes of its neighbours.
:class:`FilePieces` carries what the torrent says about one file: the hashes of the pieces it
touches and the neighbours' bytes in its first and last piece (``head`` and ``tail``, read from
the download by the caller). Pieces are independent, so they are hashed in parallel on a thread
pool while the file is read once (hashlib releases the GIL for buffers this large).
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

from umt.media.importing.failures import ImportFailure
from umt.media.importing.words import CheckFn

#: A buffer holds whole pieces, at least this many bytes of them (small pieces are grouped:
#: one task per 16 KiB piece would cost more in scheduling than in hashing).
_SPAN_BYTES = 4 * 1024 * 1024
#: Buffers in flight stay below this many bytes, whatever the piece size.
_MAX_BUFFERED = 256 * 1024 * 1024
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

    def spans(self, size: int) -> Iterator[tuple[int, int, int]]:
        """``(first, count, nbytes)``: runs of whole pieces, and how many of the file's bytes
        each holds, in file order (every buffer then ends on a piece boundary)."""
        per_span = max(1, _SPAN_BYTES // self.piece_length)
        done = 0
        for first in range(0, len(self.hashes), per_span):
            count = min(per_span, len(self.hashes) - first)
            end = min(size, (first + count) * self.piece_length - len(self.head))
            yield first, count, end - done
            done = end


class PieceHasher:
    """Hands out buffers aligned on piece boundaries and checks each filled one on a pool.

    ``take()`` gives the next buffer to fill with exactly the view's length of the file's bytes
    (the last may be shorter), ``hash()`` hands it back filled, ``finish()`` waits for every
    piece and raises :class:`PieceMismatch` for the first piece that does not match. A mismatch
    found while the copy still runs stops it at the next ``take()``.
    """

    def __init__(self, pieces: FilePieces, size: int, name: str,
                 workers: int | None = None) -> None:
        try:
            pieces.check_shape(size)
        except ValueError as exc:
            raise PieceMismatch(f"{name} is not the file its torrent describes: {exc}") from None
        self._pieces = pieces
        self._size = size
        self._name = name
        self._spans = pieces.spans(size)
        self._current: tuple[int, int, int] | None = None
        workers = workers or os.cpu_count() or 1
        span_capacity = max(1, _SPAN_BYTES // pieces.piece_length) * pieces.piece_length
        depth = max(2, min(workers + 2, _MAX_BUFFERED // span_capacity))
        self._free: queue.SimpleQueue[bytearray] = queue.SimpleQueue()
        for _ in range(depth):
            self._free.put(bytearray(span_capacity))
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="umt-pieces")
        self._futures: list[Future[None]] = []
        self._lock = threading.Lock()
        self._mismatch: str | None = None
        self._checked = 0

    def __enter__(self) -> PieceHasher:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def take(self) -> tuple[bytearray, memoryview] | None:
        """The next buffer and the view of it to fill; None once every piece is handed out.

        (A buffer comes back to the free list only once its pieces are hashed, so bytes not
        hashed yet are never overwritten.)"""
        self._raise_mismatch()
        self._current = next(self._spans, None)
        if self._current is None:
            return None
        buffer = self._free.get()
        return buffer, memoryview(buffer)[: self._current[2]]

    def give_back(self, buffer: bytearray) -> None:
        self._free.put(buffer)

    def hash(self, buffer: bytearray, count: int) -> None:
        """``buffer`` holds ``count`` bytes of the file, those the last ``take()`` asked for."""
        assert self._current is not None
        first, pieces, wanted = self._current
        if count != wanted:
            self._free.put(buffer)
            raise ImportFailure(
                f"{self._name} ended after fewer bytes than its torrent describes"
            )
        self._futures.append(self._pool.submit(self._check_span, buffer, first, pieces))

    def hexdigest(self) -> None:
        """Wait for every piece (there is no digest of the whole file to give)."""
        self.finish()

    def finish(self) -> int:
        """Wait for every piece; the number checked. Raises on the first mismatch."""
        for future in self._futures:
            future.result()
        self._raise_mismatch()
        if self._checked != len(self._pieces.hashes):
            raise ImportFailure(
                f"{self._name}: {self._checked} of {len(self._pieces.hashes)} pieces were read"
            )
        return self._checked

    def _raise_mismatch(self) -> None:
        if self._mismatch is not None:
            raise PieceMismatch(self._mismatch)

    def _check_span(self, buffer: bytearray, first: int, count: int) -> None:
        try:
            pieces = self._pieces
            view = memoryview(buffer)
            head = len(pieces.head)
            start = max(0, first * pieces.piece_length - head)
            for index in range(first, first + count):
                end = min(self._size, (index + 1) * pieces.piece_length - head)
                digest = hashlib.sha1(usedforsecurity=False)
                if index == 0:
                    digest.update(pieces.head)
                offset = start - max(0, first * pieces.piece_length - head)
                digest.update(view[offset : offset + end - start])
                if index == len(pieces.hashes) - 1:
                    digest.update(pieces.tail)
                if digest.digest() != pieces.hashes[index]:
                    self._found_mismatch(index, start, end)
                    return
                start = end
            with self._lock:
                self._checked += count
        finally:
            self._free.put(buffer)

    def _found_mismatch(self, index: int, start: int, end: int) -> None:
        piece = self._pieces.first_piece + index
        message = (
            f"{self._name} does not match its torrent: piece {piece} (bytes {start}-{end} "
            "of the file) has another SHA-1 than the torrent publishes"
        )
        with self._lock:
            if self._mismatch is None:
                self._mismatch = message


def check_file_pieces(path: Path, pieces: FilePieces, *, check: CheckFn) -> int:
    """Read ``path`` once and check every piece it touches; the number of pieces checked.

    Raises :class:`PieceMismatch` (or :class:`ImportFailure` when the size is not the
    torrent's). ``check()`` is called between buffers, so a cancel stops the read.
    """
    with open(path, "rb", buffering=0) as file:
        size = os.fstat(file.fileno()).st_size
        os.posix_fadvise(file.fileno(), 0, 0, os.POSIX_FADV_SEQUENTIAL)
        with PieceHasher(pieces, size, path.name) as hasher:
            while (taken := hasher.take()) is not None:
                check()
                buffer, view = taken
                filled = 0
                while filled < len(view) and (count := file.readinto(view[filled:])):
                    filled += count
                hasher.hash(buffer, filled)
            return hasher.finish()
