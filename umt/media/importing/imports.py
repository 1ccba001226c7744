"""``import_file``: one finished download into the library by hardlink, reflink or copy."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from umt.media.importing.copying import (
    check_complete,
    copy_data,
    ensure_space,
    opened,
    partial_file,
    sha256_of,
)
from umt.media.importing.failures import DestinationExists, ImportFailure, translated_os_errors
from umt.media.importing.links import (
    already_linked,
    import_by_hardlink,
    reflink,
    same_device,
    try_hardlink,
)
from umt.media.importing.paths import remove_stray_partial
from umt.media.importing.permissions import NO_PERMISSIONS, Permissions
from umt.media.importing.pieces import FilePieces, PieceHasher
from umt.media.importing.publish import Publisher, exists_message, nothing_to_do
from umt.media.importing.words import (
    DEFAULT_CHUNK_SIZE,
    BeforeRename,
    CheckFn,
    ImportMethod,
    ImportMode,
    ImportResult,
    ProgressFn,
    VerifyMode,
)


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
    permissions: Permissions = NO_PERMISSIONS,
    pieces: FilePieces | None = None,
) -> ImportResult:
    """Import ``src`` as ``dest``, whose folder must exist (see :func:`ensure_dir_inside`).

    ``before_rename(result)`` runs once the temporary file is complete and synced, right before
    it is renamed into place: a fenced ledger write there means a worker that lost its run never
    publishes the file. If it raises, the temporary file is removed and nothing is published.

    A written file (copy, reflink) gets ``permissions`` before it is published; a hardlink keeps
    the download's mode and group.

    A file already at ``dest`` is refused with :class:`DestinationExists` (unless it is ``src``
    itself, hardlinked by an earlier attempt: then that import is returned), also when it appears
    while the copy runs. Call :func:`holds_import` first to skip an import that already finished.

    ``check()`` is called before every chunk copied (at most ``chunk_size`` bytes, 1 MiB or
    less), and every 0.1 s while the copy waits for the hashing threads, so a cancel stops the
    copy within one chunk; ``progress`` at most every 0.5 s and once at the end.

    ``verify="pieces"`` needs ``pieces``: a copy is then checked piece by piece against the
    torrent's hashes before it is published, and a mismatch raises :class:`PieceMismatch` with
    nothing published and no temporary file left. Hardlinks and reflinks share the download's
    blocks and are not read (``umt verify`` checks them later).
    """
    _validate_arguments(mode, verify, chunk_size)
    if verify == "pieces" and pieces is None:
        raise ValueError("verify='pieces' needs the torrent's pieces of the file")
    publish = Publisher(dest, owner, before_rename or nothing_to_do, progress, permissions)
    with translated_os_errors(dest.parent, src):
        check()
        size = _source_size(src)
        linked = already_linked(src, dest, mode)
        if linked is not None:
            progress(linked.size, linked.size)
            return linked
        if os.path.lexists(dest):
            raise DestinationExists(exists_message(dest))
        remove_stray_partial(dest, owner)
        if mode == "hardlink":
            return import_by_hardlink(src, publish)
        if mode == "auto" and same_device(src, dest.parent):
            result = try_hardlink(src, publish)
            if result is not None:
                return result
        return _import_by_writing(
            src,
            publish,
            needed=size,
            allow_reflink=mode == "auto",
            hashing=verify == "sha256",
            pieces=pieces if verify == "pieces" else None,
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
    return isinstance(sha256, str) and sha256_of(dest) == sha256.lower()


def _import_by_writing(
    src: Path,
    publish: Publisher,
    *,
    needed: int,
    allow_reflink: bool,
    hashing: bool,
    pieces: FilePieces | None,
    chunk_size: int,
    check: CheckFn,
) -> ImportResult:
    with opened(src, os.O_RDONLY) as src_fd, partial_file(publish.partial) as dst_fd:
        before = os.fstat(src_fd)
        checked = None
        if allow_reflink and reflink(src_fd, dst_fd):
            method: ImportMethod = "reflink"
            digest = None
        else:
            method = "copy"
            ensure_space(publish.dest.parent, needed, src)
            hasher = (None if pieces is None
                      else PieceHasher(pieces, before.st_size, src.name, dst_fd))
            digest = copy_data(
                src_fd,
                dst_fd,
                total=before.st_size,
                chunk_size=chunk_size,
                hashing=hashing,
                check=check,
                progress=publish.progress,
                pieces=hasher,
            )
            checked = None if pieces is None else len(pieces.hashes)
        check_complete(src, src_fd, before, dst_fd)
        os.fsync(dst_fd)
    return publish(before.st_size, digest, method, checked)


def _validate_arguments(mode: str, verify: str, chunk_size: int) -> None:
    if mode not in ("auto", "hardlink", "copy"):
        raise ValueError(f"unknown import mode {mode!r}: use 'auto', 'hardlink' or 'copy'")
    if verify not in ("pieces", "sha256", "size"):
        raise ValueError(f"unknown verify mode {verify!r}: use 'pieces', 'sha256' or 'size'")
    if chunk_size <= 0:
        raise ValueError(f"chunk_size must be positive, not {chunk_size}")


def _source_size(src: Path) -> int:
    info = src.stat()
    if not stat.S_ISREG(info.st_mode):
        raise ImportFailure(f"{src} is not a regular file")
    return info.st_size
