"""Import one finished download into the library: hardlink, reflink or verified copy.

Pure filesystem code: it knows nothing about databases, qBittorrent or workflows. The caller
passes two callables: ``check()``, which raises (a ``BaseException`` from the engine) when the
run is canceled or its lease is lost, and ``progress(done_bytes, total_bytes)``.

Modes (``library.import_mode``):

- ``hardlink``: link or fail. A cross-filesystem link raises :class:`CrossDevice`; it never
  falls back silently.
- ``auto``: hardlink when source and destination share a filesystem, else a reflink (FICLONE,
  btrfs/XFS/bcachefs), else a byte copy.
- ``copy``: always a byte copy (never a reflink), hashed while copying.

A copy is written to a deterministic temporary name beside the destination (see
:func:`partial_path`), fsynced, checked, and published under the final name **without ever
replacing a file there** (``renameat2(RENAME_NOREPLACE)``, or on filesystems that cannot do that,
a hard link, which fails on an existing name just as atomically, then the temporary name goes);
then the folder is fsynced. The final name therefore only ever holds a complete file, and never
one that replaced another; a crash leaves at most the temporary file, which the next attempt
removes before starting again.

Each result names the published file's identity (device, inode, modification time): a later
attempt, or a compensation, recognises its own import by that identity, never by an equal size.

What "verify" means here: the SHA-256 is computed from the very bytes read from the source and
handed to ``write()``, so no second read of either file is needed. Every write is checked for
completeness, and after ``fsync`` the destination's size must equal the number of bytes read and
the source's size at the start; the source's size and mtime must not have changed during the
copy. This catches short and failed writes, a full disk and a source modified while it was being
copied. It does not catch corruption below the page cache (disk, controller, network
filesystem): only re-reading the destination does, which :func:`verify_existing` with
``full_check=True`` offers against the recorded hash. ``verify="size"`` skips the hash.
Hardlinks and reflinks share the source's data blocks, so no bytes pass through umt and their
``sha256`` is ``None``.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import hashlib
import os
import queue
import re
import stat
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Literal

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "BeforeRename",
    "CheckFn",
    "CrossDevice",
    "DestinationExists",
    "ImportFailure",
    "ImportMethod",
    "ImportMode",
    "ImportPermissionError",
    "ImportResult",
    "LibraryRootMissing",
    "NoSpace",
    "ProgressFn",
    "SourceChanged",
    "UnsafePath",
    "VerifyMode",
    "ensure_dir_inside",
    "holds_import",
    "import_file",
    "partial_path",
    "remove_empty_dirs",
    "remove_stray_partial",
    "resolve_inside",
    "verify_existing",
]

ImportMode = Literal["auto", "hardlink", "copy"]
VerifyMode = Literal["sha256", "size"]
ImportMethod = Literal["hardlink", "reflink", "copy"]
CheckFn = Callable[[], None]
ProgressFn = Callable[[int, int], None]
BeforeRename = Callable[["ImportResult"], None]

DEFAULT_CHUNK_SIZE = 8 * 1024 * 1024
PROGRESS_INTERVAL_SECONDS = 0.5
PARTIAL_SUFFIX = ".umt-partial"

_FICLONE = 0x40049409
_CREATE_PARTIAL = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
_IO_SLICE = 128 * 1024
_HASH_GROUP = 1024 * 1024
_NAME_MAX = 255
#: Who writes a temporary file (the workflow passes ``e<lease epoch>``).
_OWNER = re.compile(r"[a-z][0-9]+")
#: Bytes kept free in a temporary name for the owner and the suffix.
_PARTIAL_ROOM = 40
# A hardlink cannot be made here, but a reflink or a copy still can (auto mode only).
_LINK_UNAVAILABLE = frozenset({errno.EXDEV, errno.EPERM, errno.EMLINK, errno.EOPNOTSUPP})
_REFLINK_UNAVAILABLE = frozenset(
    {errno.EXDEV, errno.EOPNOTSUPP, errno.EINVAL, errno.ENOTTY, errno.ENOSYS, errno.EPERM}
)
_DIR_FSYNC_UNSUPPORTED = frozenset({errno.EINVAL, errno.EOPNOTSUPP})


class ImportFailure(Exception):
    """An import that cannot complete; the message is one line meant for the user."""


class CrossDevice(ImportFailure):
    """``hardlink`` mode, but the source and the destination are on different filesystems."""


class NoSpace(ImportFailure):
    """The destination filesystem is full (or the quota is exhausted)."""


class ImportPermissionError(ImportFailure):
    """Permission denied, or a read-only filesystem."""


class SourceChanged(ImportFailure):
    """The source file changed while it was being copied."""


class DestinationExists(ImportFailure):
    """A different file already sits at the destination; umt does not overwrite it."""


class UnsafePath(ImportFailure):
    """A path resolves outside the folder it must stay in."""


class LibraryRootMissing(ImportFailure):
    """The library folder does not exist (an unmounted disk, typically)."""


@dataclass(frozen=True)
class ImportResult:
    dest: Path
    size: int
    sha256: str | None
    method: ImportMethod
    #: The published file's identity (``st_dev``, ``st_ino``, ``st_mtime_ns``): an inode
    #: number alone is reused as soon as a file is deleted.
    device: int
    inode: int
    mtime_ns: int


# --------------------------------------------------------------------------- public API


def import_file(
    src: Path,
    dest: Path,
    *,
    mode: ImportMode,
    check: CheckFn,
    progress: ProgressFn,
    verify: VerifyMode = "sha256",
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    before_rename: BeforeRename | None = None,
    owner: str = "",
) -> ImportResult:
    """Import ``src`` as ``dest``, whose folder must exist (see :func:`ensure_dir_inside`).

    ``before_rename(result)`` runs once the temporary file is complete and synced, right before
    it is renamed into place: a fenced ledger write there means a worker that lost its run never
    publishes the file. If it raises, the temporary file is removed and nothing is published.

    A file already at ``dest`` is refused with :class:`DestinationExists` (unless it is ``src``
    itself, hardlinked by an earlier attempt: then that import is returned), also when it appears
    while the copy runs. Call :func:`holds_import` first to skip an import that already finished.

    ``check()`` is called before every ``chunk_size`` bytes copied, so a cancel stops the copy
    within one chunk; ``progress`` at most every 0.5 s and once at the end.
    """
    _validate_arguments(mode, verify, chunk_size)
    publish = _Publisher(dest, owner, before_rename or _nothing_to_do, progress)
    with _translated_os_errors(dest.parent, src):
        check()
        size = _source_size(src)
        linked = _already_linked(src, dest, mode)
        if linked is not None:
            progress(linked.size, linked.size)
            return linked
        if os.path.lexists(dest):
            raise DestinationExists(_exists_message(dest))
        remove_stray_partial(dest, owner)
        if mode == "hardlink":
            return _import_by_hardlink(src, publish)
        if mode == "auto" and _same_device(src, dest.parent):
            result = _try_hardlink(src, publish)
            if result is not None:
                return result
        return _import_by_writing(
            src,
            publish,
            needed=size,
            allow_reflink=mode == "auto",
            hashing=verify == "sha256",
            chunk_size=chunk_size,
            check=check,
        )


def holds_import(dest: Path, detail: dict[str, object]) -> bool:
    """True when ``dest`` is the very file an import recorded as ``detail`` published.

    The identity (device, inode and modification time) must match; an import recorded without
    one is recognised only by reading the file again against its SHA-256. An equal size alone
    proves nothing.
    """
    size, sha256 = detail.get("size"), detail.get("sha256")
    identity = tuple(detail.get(key) for key in ("device", "inode", "mtime_ns"))
    if not isinstance(size, int):
        return False
    try:
        info = dest.lstat()
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(info.st_mode) or info.st_size != size:
        return False
    if all(isinstance(part, int) for part in identity):
        return (info.st_dev, info.st_ino, info.st_mtime_ns) == identity
    return isinstance(sha256, str) and _sha256_of(dest) == sha256.lower()


def verify_existing(dest: Path, *, size: int, sha256: str | None, full_check: bool = False) -> bool:
    """True when ``dest`` is a regular file (not a symlink) of ``size`` bytes.

    With ``full_check`` the file is read again and compared with ``sha256``; without a recorded
    hash (hardlink or reflink imports) there is nothing to compare, so only the size counts.
    """
    try:
        info = dest.lstat()
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(info.st_mode) or info.st_size != size:
        return False
    if full_check and sha256 is not None:
        return _sha256_of(dest) == sha256.lower()
    return True


def partial_path(dest: Path, owner: str = "") -> Path:
    """The temporary name of ``dest`` while ``owner`` writes it: ``.<name>.<owner>.umt-partial``.

    Each writer (the workflow passes its lease epoch) has a name of its own, so a worker that
    lost the run and wakes up cleans up only its own file, never the new owner's. Too long a
    name is shortened with a digest of the full name, so it stays deterministic.
    """
    if owner and not _OWNER.fullmatch(owner):
        raise ValueError(f"owner {owner!r} must be a letter and digits, like 'e12'")
    infix = f".{owner}" if owner else ""
    return dest.with_name(f"{_partial_stem(dest)}{infix}{PARTIAL_SUFFIX}")


def _partial_stem(dest: Path) -> str:
    stem = f".{dest.name}"
    if len(os.fsencode(stem)) <= _NAME_MAX - _PARTIAL_ROOM:
        return stem
    digest = hashlib.sha256(os.fsencode(dest.name)).hexdigest()[:16]
    room = _NAME_MAX - _PARTIAL_ROOM - len(f".-{digest}")
    head = os.fsencode(dest.name)[:room].decode("utf-8", "ignore")
    return f".{head}-{digest}"


def remove_stray_partial(dest: Path, owner: str | None = None) -> bool:
    """Remove temporary files interrupted imports of ``dest`` left behind; True if any.

    With ``owner``, only that writer's file; without, every writer's (call it only while
    holding the run, e.g. right after a fenced ledger write).
    """
    if owner is not None:
        return _remove_if_present(partial_path(dest, owner))
    pattern = re.compile(
        re.escape(_partial_stem(dest)) + rf"(\.{_OWNER.pattern})?" + re.escape(PARTIAL_SUFFIX)
    )
    removed = False
    try:
        names = os.listdir(dest.parent)
    except FileNotFoundError:
        return False
    for name in names:
        if pattern.fullmatch(name):
            removed = _remove_if_present(dest.parent / name) or removed
    return removed


def resolve_inside(path: Path, root: Path) -> Path:
    """Return the real path of ``path``, refusing one that resolves outside ``root``.

    Symlinks in the existing part of ``path`` are resolved; the part that does not exist yet is
    taken literally.
    """
    real_root = Path(os.path.realpath(root))
    real = Path(os.path.realpath(path))
    if real != real_root and real_root not in real.parents:
        raise UnsafePath(f"{path} resolves to {real}, outside {real_root}")
    return real


def ensure_dir_inside(path: Path, library_root: Path) -> list[Path]:
    """Create the folder ``path`` inside ``library_root``; return the folders created, top first.

    The library root itself must already exist: a missing root usually means an unmounted disk,
    and creating it would fill the filesystem underneath the mount point.
    """
    root = Path(os.path.abspath(library_root))
    if not root.is_dir():
        raise LibraryRootMissing(f"library folder {root} does not exist (is its disk mounted?)")
    real_root = Path(os.path.realpath(root))
    relative = resolve_inside(Path(os.path.abspath(path)), root).relative_to(real_root)
    created: list[Path] = []
    with _translated_os_errors(path):
        current = root
        for part in relative.parts:
            current = current / part
            if _make_dir(current):
                created.append(current)
                resolve_inside(current, root)
                _fsync_dir(current.parent)
            elif not current.is_dir():
                raise ImportFailure(f"{current} exists and is not a folder")
    return created


def remove_empty_dirs(folders: list[Path]) -> list[Path]:
    """Remove those of ``folders`` that are empty, deepest first; return the ones removed.

    Meant for the folders :func:`ensure_dir_inside` created, when an import is abandoned.
    """
    removed: list[Path] = []
    for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
        try:
            folder.rmdir()
        except FileNotFoundError:
            continue
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                continue
            raise
        removed.append(folder)
    return removed


# --------------------------------------------------------------------------- hardlink


def _already_linked(src: Path, dest: Path, mode: ImportMode) -> ImportResult | None:
    """The import an earlier attempt finished by hardlinking ``src`` as ``dest``, if any."""
    if mode == "copy":
        return None
    try:
        existing = dest.lstat()
    except FileNotFoundError:
        return None
    source = src.stat()
    if not stat.S_ISREG(existing.st_mode):
        return None
    if (existing.st_dev, existing.st_ino) != (source.st_dev, source.st_ino):
        return None
    return ImportResult(dest, existing.st_size, None, "hardlink", existing.st_dev,
                        existing.st_ino, existing.st_mtime_ns)


def _import_by_hardlink(src: Path, publish: _Publisher) -> ImportResult:
    try:
        os.link(src, publish.partial)
    except OSError as exc:
        if exc.errno == errno.EXDEV:
            raise CrossDevice(
                f"cannot hardlink {src.name}: {src.parent} and {publish.dest.parent} are on "
                "different filesystems (or mounts, or btrfs subvolumes); "
                'set import_mode = "copy" or "auto"'
            ) from exc
        raise
    return publish(publish.partial.stat().st_size, None, "hardlink")


def _try_hardlink(src: Path, publish: _Publisher) -> ImportResult | None:
    try:
        os.link(src, publish.partial)
    except OSError as exc:
        if exc.errno in _LINK_UNAVAILABLE:
            return None
        raise
    return publish(publish.partial.stat().st_size, None, "hardlink")


# --------------------------------------------------------------------------- reflink / copy


def _import_by_writing(
    src: Path,
    publish: _Publisher,
    *,
    needed: int,
    allow_reflink: bool,
    hashing: bool,
    chunk_size: int,
    check: CheckFn,
) -> ImportResult:
    with _opened(src, os.O_RDONLY) as src_fd, _partial_file(publish.partial) as dst_fd:
        before = os.fstat(src_fd)
        if allow_reflink and _reflink(src_fd, dst_fd):
            method: ImportMethod = "reflink"
            digest = None
        else:
            method = "copy"
            _ensure_space(publish.dest.parent, needed, src)
            digest = _copy_data(
                src_fd,
                dst_fd,
                total=before.st_size,
                chunk_size=chunk_size,
                hashing=hashing,
                check=check,
                progress=publish.progress,
            )
        _check_complete(src, src_fd, before, dst_fd)
        os.fsync(dst_fd)
    return publish(before.st_size, digest, method)


@contextmanager
def _opened(path: Path, flags: int) -> Iterator[int]:
    fd = os.open(path, flags | os.O_CLOEXEC, 0o666)
    try:
        yield fd
    finally:
        os.close(fd)


@contextmanager
def _partial_file(partial: Path) -> Iterator[int]:
    """The temporary file, created afresh; removed again if anything goes wrong."""
    try:
        with _opened(partial, _CREATE_PARTIAL) as fd:
            yield fd
    except BaseException:
        _remove_if_present(partial)
        raise


def _reflink(src_fd: int, dst_fd: int) -> bool:
    try:
        fcntl.ioctl(dst_fd, _FICLONE, src_fd)
    except OSError as exc:
        if exc.errno in _REFLINK_UNAVAILABLE:
            return False
        raise
    return True


def _copy_data(
    src_fd: int,
    dst_fd: int,
    *,
    total: int,
    chunk_size: int,
    hashing: bool,
    check: CheckFn,
    progress: ProgressFn,
) -> str | None:
    os.posix_fadvise(src_fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
    report = _ThrottledProgress(progress, total)
    group = min(chunk_size, _HASH_GROUP)
    buffers: _HashingBuffers | _PlainBuffer
    buffers = _HashingBuffers(group) if hashing else _PlainBuffer(group)
    with buffers:
        copied = 0
        next_check = 0
        while True:
            if copied >= next_check:
                check()
                next_check = copied + chunk_size
            buffer = buffers.take()
            filled = _copy_into(src_fd, dst_fd, memoryview(buffer))
            if filled == 0:
                buffers.give_back(buffer)
                break
            buffers.hash(buffer, filled)
            copied += filled
            report(copied)
        return buffers.hexdigest()


def _copy_into(src_fd: int, dst_fd: int, buffer: memoryview) -> int:
    """Copy up to ``len(buffer)`` bytes through ``buffer``; return how many (0 at end of file).

    Each slice is written while it is still in the CPU cache: with 8 MiB reads and writes the
    same copy measured 2-3x slower in the kernel than with 128 KiB ones (what ``cp`` uses).
    """
    filled = 0
    while filled < len(buffer):
        piece = buffer[filled : filled + _IO_SLICE]
        count = os.readv(src_fd, [piece])
        if count == 0:
            break
        _write_all(dst_fd, piece[:count])
        filled += count
    return filled


def _write_all(fd: int, data: memoryview) -> None:
    while data:
        written = os.write(fd, data)
        if written == 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        data = data[written:]


def _check_complete(src: Path, src_fd: int, before: os.stat_result, dst_fd: int) -> None:
    after = os.fstat(src_fd)
    if (after.st_size, after.st_mtime_ns) != (before.st_size, before.st_mtime_ns):
        raise SourceChanged(f"{src} changed while it was being imported; try again")
    written = os.fstat(dst_fd).st_size
    if written != before.st_size:
        raise ImportFailure(f"import of {src} wrote {written} of {before.st_size} bytes")


class _PlainBuffer:
    """One reusable buffer and no hashing (``verify="size"``)."""

    def __init__(self, buffer_size: int) -> None:
        self._buffer = bytearray(buffer_size)

    def __enter__(self) -> _PlainBuffer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None

    def take(self) -> bytearray:
        return self._buffer

    def give_back(self, buffer: bytearray) -> None:
        return None

    def hash(self, buffer: bytearray, count: int) -> None:
        return None

    def hexdigest(self) -> str | None:
        return None


class _HashingBuffers:
    """A few buffers hashed in order on a helper thread while the caller writes them.

    SHA-256 runs at about 1.7 GB/s per core, close to the speed of the copy itself, so hashing on
    the copying thread nearly halves throughput. hashlib releases the GIL for large buffers, so
    the helper thread really runs in parallel. A buffer returns to the free list only once it is
    hashed, so the caller never overwrites bytes that are not hashed yet.
    """

    _DEPTH = 4

    def __init__(self, buffer_size: int) -> None:
        self._digest = hashlib.sha256()
        self._free: queue.SimpleQueue[bytearray] = queue.SimpleQueue()
        self._pending: queue.SimpleQueue[tuple[bytearray, int] | None] = queue.SimpleQueue()
        self._failure: BaseException | None = None
        for _ in range(self._DEPTH):
            self._free.put(bytearray(buffer_size))
        self._thread = threading.Thread(
            target=self._hash_pending, name="umt-import-sha256", daemon=True
        )

    def __enter__(self) -> _HashingBuffers:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop()

    def take(self) -> bytearray:
        return self._free.get()

    def give_back(self, buffer: bytearray) -> None:
        self._free.put(buffer)

    def hash(self, buffer: bytearray, count: int) -> None:
        self._pending.put((buffer, count))

    def hexdigest(self) -> str:
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
            buffer, count = item
            try:
                if self._failure is None:
                    self._digest.update(memoryview(buffer)[:count])
            except BaseException as exc:  # surfaced by hexdigest(); the buffer must come back
                self._failure = exc
            self._free.put(buffer)


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


# --------------------------------------------------------------------------- helpers


def _validate_arguments(mode: str, verify: str, chunk_size: int) -> None:
    if mode not in ("auto", "hardlink", "copy"):
        raise ValueError(f"unknown import mode {mode!r}: use 'auto', 'hardlink' or 'copy'")
    if verify not in ("sha256", "size"):
        raise ValueError(f"unknown verify mode {verify!r}: use 'sha256' or 'size'")
    if chunk_size <= 0:
        raise ValueError(f"chunk_size must be positive, not {chunk_size}")


def _source_size(src: Path) -> int:
    info = src.stat()
    if not stat.S_ISREG(info.st_mode):
        raise ImportFailure(f"{src} is not a regular file")
    return info.st_size


def _same_device(src: Path, folder: Path) -> bool:
    return src.stat().st_dev == folder.stat().st_dev


def _ensure_space(folder: Path, needed: int, src: Path) -> None:
    # Fail before writing 80 GB rather than after; ENOSPC during the copy is still handled.
    info = os.statvfs(folder)
    available = info.f_bavail * info.f_frsize
    if available < needed:
        raise NoSpace(
            f"not enough space in {folder} for {src.name}: "
            f"{_human(needed)} needed, {_human(available)} free"
        )


class _Publisher:
    """Renames the complete temporary file into place, after the caller's ``before_rename``."""

    def __init__(
        self, dest: Path, owner: str, before_rename: BeforeRename, progress: ProgressFn
    ) -> None:
        self.dest = dest
        self.partial = partial_path(dest, owner)
        self.progress = progress
        self._before_rename = before_rename

    def __call__(self, size: int, sha256: str | None, method: ImportMethod) -> ImportResult:
        try:
            written = self.partial.stat()
            result = ImportResult(self.dest, size, sha256, method, written.st_dev,
                                  written.st_ino, written.st_mtime_ns)
            self._before_rename(result)
            publish_no_replace(self.partial, self.dest)
        except BaseException:
            _remove_if_present(self.partial)
            raise
        _fsync_dir(self.dest.parent)
        self.progress(size, size)
        return result


def _nothing_to_do(result: ImportResult) -> None:
    return None


_AT_FDCWD = -100
_RENAME_NOREPLACE = 1
#: renameat2 answers these when the kernel or the filesystem cannot rename without replacing.
_NOREPLACE_UNSUPPORTED = frozenset({errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP})


def publish_no_replace(partial: Path, dest: Path) -> None:
    """Give ``partial`` the name ``dest``, atomically, failing if ``dest`` exists.

    Raises :class:`DestinationExists` when a file is already there: a concurrent writer that got
    there first, or a file a person put in the library; it is never replaced.
    """
    try:
        if not _rename_noreplace(partial, dest):
            # A hard link fails on an existing name just as atomically; a crash between the
            # two calls leaves both names on one complete file, which the next attempt
            # recognises by its identity.
            try:
                os.link(partial, dest)
            except OSError as exc:
                if exc.errno in _LINK_UNAVAILABLE:
                    raise ImportFailure(
                        f"cannot publish {dest.name} safely: the filesystem of {dest.parent} "
                        "can neither rename without replacing nor hard-link"
                    ) from exc
                raise
            os.unlink(partial)
    except FileExistsError:
        raise DestinationExists(_exists_message(dest)) from None


def _rename_noreplace(partial: Path, dest: Path) -> bool:
    """renameat2(RENAME_NOREPLACE); False when this kernel or filesystem cannot do it."""
    renameat2 = _renameat2()
    if renameat2 is None:
        return False
    if renameat2(_AT_FDCWD, os.fsencode(partial), _AT_FDCWD, os.fsencode(dest),
                 _RENAME_NOREPLACE) == 0:
        return True
    import ctypes

    code = ctypes.get_errno()
    if code in _NOREPLACE_UNSUPPORTED:
        return False
    raise OSError(code, os.strerror(code), str(dest))


@functools.cache
def _renameat2() -> Callable[..., int] | None:
    import ctypes

    function = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if function is None:
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                         ctypes.c_uint]
    function.restype = ctypes.c_int
    return function  # type: ignore[no-any-return]


def _exists_message(dest: Path) -> str:
    return f"{dest} already exists in the library; umt never replaces a library file"


def _make_dir(path: Path) -> bool:
    try:
        os.mkdir(path)
    except FileExistsError:
        return False
    return True


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in _DIR_FSYNC_UNSUPPORTED:
            raise
    finally:
        os.close(fd)


def _remove_if_present(path: Path) -> bool:
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    buffer = bytearray(DEFAULT_CHUNK_SIZE)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as file:
        os.posix_fadvise(file.fileno(), 0, 0, os.POSIX_FADV_SEQUENTIAL)
        while count := file.readinto(buffer):
            digest.update(view[:count])
    return digest.hexdigest()


@contextmanager
def _translated_os_errors(folder: Path, src: Path | None = None) -> Iterator[None]:
    """Turn an ``OSError`` into the matching :class:`ImportFailure` (the one place that does)."""
    try:
        yield
    except OSError as exc:
        raise _as_import_failure(exc, folder, src) from exc


def _as_import_failure(exc: OSError, folder: Path, src: Path | None) -> ImportFailure:
    reason = exc.strerror or str(exc)
    where = f": {exc.filename}" if exc.filename else ""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        needed = f" for {src.name}: {_human(_size_or_zero(src))} needed" if src else ""
        return NoSpace(f"not enough space in {folder}{needed}")
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return ImportPermissionError(f"cannot import into {folder}: {reason}{where}")
    action = f"import {src} into" if src else "create"
    return ImportFailure(f"cannot {action} {folder}: {reason}{where}")


def _size_or_zero(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _human(size: int) -> str:
    value = float(size)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"
