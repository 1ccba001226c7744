"""Byte copies: moved in the kernel chunk by chunk, the bytes written hashed on helper threads."""

from __future__ import annotations

import hashlib
import os
import queue
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType

from umt.media.importing.failures import ImportFailure, NoSpace, SourceChanged, human
from umt.media.importing.paths import remove_if_present
from umt.media.importing.pieces import PieceHasher
from umt.media.importing.readback import Window, read_back
from umt.media.importing.transfer import KernelCopy
from umt.media.importing.words import DEFAULT_CHUNK_SIZE, CheckFn, ProgressFn

PROGRESS_INTERVAL_SECONDS = 0.5
#: Readable: what was written is read back to be hashed.
_CREATE_PARTIAL = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
#: The largest chunk copied between two checks for a cancel or a lost lease.
_CHUNK_BYTES = 1024 * 1024


@contextmanager
def opened(path: Path, flags: int) -> Iterator[int]:
    fd = os.open(path, flags | os.O_CLOEXEC, 0o666)
    try:
        yield fd
    finally:
        os.close(fd)


@contextmanager
def partial_file(partial: Path) -> Iterator[int]:
    """The temporary file, created afresh; removed again if anything goes wrong."""
    try:
        with opened(partial, _CREATE_PARTIAL) as fd:
            yield fd
    except BaseException:
        remove_if_present(partial)
        raise


def copy_data(
    src_fd: int,
    dst_fd: int,
    *,
    total: int,
    chunk_size: int,
    hashing: bool,
    check: CheckFn,
    progress: ProgressFn,
    pieces: PieceHasher | None = None,
) -> str | None:
    """Copy the source (``total`` bytes at the start) to the empty ``dst_fd``, which must be
    readable; the SHA-256 of the bytes written when ``hashing``. With ``pieces`` (reading
    ``dst_fd``), every piece of the torrent the file touches is checked as it is written, and
    no SHA-256 is computed."""
    os.posix_fadvise(src_fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
    report = _ThrottledProgress(progress, total)
    chunk = min(chunk_size, _CHUNK_BYTES)
    verifier: _Unverified | _Sha256OfWritten | PieceHasher
    if pieces is not None:
        verifier = pieces
    else:
        verifier = _Sha256OfWritten(dst_fd, chunk) if hashing else _Unverified(chunk)
    with verifier, KernelCopy(src_fd, dst_fd) as kernel:
        copied = 0
        while True:
            # Before every chunk (at most chunk_size bytes, 1 MiB or less): check() is an
            # in-memory flag, and a slow disk must not delay a cancel or a lost lease by more
            # than a chunk (a worker fences itself a sixth of a lease before another takes over).
            check()
            wanted = verifier.next_chunk(check)
            if wanted is None:
                break
            count = kernel.copy(copied, wanted)
            verifier.ready(copied, count)
            if count == 0:
                break
            copied += count
            report(copied)
        return verifier.result()


def check_complete(src: Path, src_fd: int, before: os.stat_result, dst_fd: int) -> None:
    after = os.fstat(src_fd)
    if (after.st_size, after.st_mtime_ns) != (before.st_size, before.st_mtime_ns):
        raise SourceChanged(f"{src} changed while it was being imported; try again")
    written = os.fstat(dst_fd).st_size
    if written != before.st_size:
        raise ImportFailure(f"import of {src} wrote {written} of {before.st_size} bytes")


class _Unverified:
    """Fixed-size chunks until the source ends, and no hashing (``verify="size"``)."""

    def __init__(self, chunk: int) -> None:
        self._chunk = chunk

    def __enter__(self) -> _Unverified:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None

    def next_chunk(self, check: CheckFn) -> int:
        return self._chunk

    def ready(self, offset: int, count: int) -> None:
        return None

    def result(self) -> None:
        return None


class _Sha256OfWritten:
    """The SHA-256 of the bytes written, read back in order on a helper thread while the copy
    goes on (SHA-256 runs at about the speed of the copy itself: on the copying thread it would
    nearly halve throughput; hashlib releases the GIL, so the helper really runs in parallel).
    Fixed-size chunks until the source ends."""

    _WINDOW_CHUNKS = 16

    def __init__(self, fd: int, chunk: int) -> None:
        self._fd = fd
        self._chunk = chunk
        self._digest = hashlib.sha256()
        self._window = Window(self._WINDOW_CHUNKS)
        self._pending: queue.SimpleQueue[tuple[int, int] | None] = queue.SimpleQueue()
        self._failure: BaseException | None = None
        self._thread = threading.Thread(
            target=self._hash_pending, name="umt-import-sha256", daemon=True
        )

    def __enter__(self) -> _Sha256OfWritten:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop()

    def next_chunk(self, check: CheckFn) -> int:
        self._window.enter(check)
        return self._chunk

    def ready(self, offset: int, count: int) -> None:
        if count == 0:
            self._window.leave()
        else:
            self._pending.put((offset, count))

    def result(self) -> str:
        self._stop()
        if self._failure is not None:
            raise ImportFailure(f"hashing failed: {self._failure!r}") from self._failure
        return self._digest.hexdigest()

    def _stop(self) -> None:
        if self._thread.is_alive():
            self._pending.put(None)
            self._thread.join()

    def _hash_pending(self) -> None:
        while (item := self._pending.get()) is not None:
            offset, count = item
            try:
                if self._failure is None:
                    view = read_back(self._fd, offset, count)
                    if len(view) != count:
                        raise ImportFailure(f"read back {len(view)} of {count} bytes written")
                    self._digest.update(view)
            except BaseException as exc:  # surfaced by result(); the window must not stay full
                self._failure = exc
            finally:
                self._window.leave()


class _ThrottledProgress:
    def __init__(self, progress: ProgressFn, total: int) -> None:
        self._progress = progress
        self._total = total
        self._last = time.monotonic()

    def __call__(self, done: int) -> None:
        now = time.monotonic()
        if now - self._last >= PROGRESS_INTERVAL_SECONDS:
            self._last = now
            self._progress(done, self._total)


def ensure_space(folder: Path, needed: int, src: Path) -> None:
    # Fail before writing 80 GB rather than after; ENOSPC during the copy is still handled.
    info = os.statvfs(folder)
    available = info.f_bavail * info.f_frsize
    if available < needed:
        raise NoSpace(
            f"not enough space in {folder} for {src.name}: "
            f"{human(needed)} needed, {human(available)} free"
        )


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    buffer = bytearray(DEFAULT_CHUNK_SIZE)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as file:
        os.posix_fadvise(file.fileno(), 0, 0, os.POSIX_FADV_SEQUENTIAL)
        while count := file.readinto(buffer):
            digest.update(view[:count])
    return digest.hexdigest()
