"""Why an import cannot complete, and the one place that turns an ``OSError`` into it."""

from __future__ import annotations

import errno
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: A hard link cannot be made here (another filesystem, none supported, too many links).
LINK_UNAVAILABLE = frozenset({errno.EXDEV, errno.EPERM, errno.EMLINK, errno.EOPNOTSUPP})


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


@contextmanager
def translated_os_errors(folder: Path, src: Path | None = None) -> Iterator[None]:
    """Turn an ``OSError`` into the matching :class:`ImportFailure` (the one place that does)."""
    try:
        yield
    except OSError as exc:
        raise _as_import_failure(exc, folder, src) from exc


def _as_import_failure(exc: OSError, folder: Path, src: Path | None) -> ImportFailure:
    reason = exc.strerror or str(exc)
    where = f": {exc.filename}" if exc.filename else ""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        needed = f" for {src.name}: {human(_size_or_zero(src))} needed" if src else ""
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


def human(size: int) -> str:
    value = float(size)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"
