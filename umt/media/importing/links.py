"""Imports that share the download's data blocks: hardlinks and reflinks (FICLONE)."""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import tempfile
from pathlib import Path

from umt.media.importing.failures import LINK_UNAVAILABLE, CrossDevice
from umt.media.importing.publish import Publisher
from umt.media.importing.words import ImportMode, ImportResult

_FICLONE = 0x40049409
_REFLINK_UNAVAILABLE = frozenset(
    {errno.EXDEV, errno.EOPNOTSUPP, errno.EINVAL, errno.ENOTTY, errno.ENOSYS, errno.EPERM}
)


def already_linked(src: Path, dest: Path, mode: ImportMode) -> ImportResult | None:
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


def import_by_hardlink(src: Path, publish: Publisher) -> ImportResult:
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


def try_hardlink(src: Path, publish: Publisher) -> ImportResult | None:
    try:
        os.link(src, publish.partial)
    except OSError as exc:
        if exc.errno in LINK_UNAVAILABLE:
            return None
        raise
    return publish(publish.partial.stat().st_size, None, "hardlink")


def reflink(src_fd: int, dst_fd: int) -> bool:
    try:
        fcntl.ioctl(dst_fd, _FICLONE, src_fd)
    except OSError as exc:
        if exc.errno in _REFLINK_UNAVAILABLE:
            return False
        raise
    return True


def same_device(src: Path, folder: Path) -> bool:
    return src.stat().st_dev == folder.stat().st_dev


def probe_hardlink(source_dir: Path, target_dir: Path) -> str | None:
    """None when a file in ``source_dir`` can be hardlinked into ``target_dir``, else why not
    (``umt doctor`` asks this before any import does)."""
    try:
        with tempfile.NamedTemporaryFile(dir=source_dir, prefix=".umt-probe-") as source:
            link = target_dir / (Path(source.name).name + ".link")
            try:
                os.link(source.name, link)
            finally:
                if os.path.lexists(link):
                    link.unlink()
    except OSError as exc:
        return f"cannot hardlink from {source_dir} to {target_dir}: {exc.strerror or exc}"
    return None
