"""Publishing a complete temporary file under its library name, never replacing one."""

from __future__ import annotations

import errno
import functools
import os
from collections.abc import Callable
from pathlib import Path

from umt.media.importing.failures import LINK_UNAVAILABLE, DestinationExists, ImportFailure
from umt.media.importing.paths import fsync_dir, partial_path, remove_if_present
from umt.media.importing.permissions import NO_PERMISSIONS, Permissions
from umt.media.importing.words import BeforeRename, ImportMethod, ImportResult, ProgressFn


class Publisher:
    """Renames the complete temporary file into place, after the caller's ``before_rename``."""

    def __init__(
        self, dest: Path, owner: str, before_rename: BeforeRename, progress: ProgressFn,
        permissions: Permissions = NO_PERMISSIONS,
    ) -> None:
        self.dest = dest
        self.partial = partial_path(dest, owner)
        self.progress = progress
        self._before_rename = before_rename
        self._permissions = permissions

    def __call__(self, size: int, sha256: str | None, method: ImportMethod) -> ImportResult:
        try:
            if method != "hardlink":  # a hardlink's inode is the download's: left alone
                self._permissions.apply_to_file(self.partial)
            written = self.partial.stat()
            result = ImportResult(self.dest, size, sha256, method, written.st_dev,
                                  written.st_ino, written.st_mtime_ns)
            self._before_rename(result)
            publish_no_replace(self.partial, self.dest)
        except BaseException:
            remove_if_present(self.partial)
            raise
        fsync_dir(self.dest.parent)
        self.progress(size, size)
        return result


def nothing_to_do(result: ImportResult) -> None:
    return None


_AT_FDCWD = -100
_RENAME_NOREPLACE = 1
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
                if exc.errno in LINK_UNAVAILABLE:
                    raise ImportFailure(
                        f"cannot publish {dest.name} safely: the filesystem of {dest.parent} "
                        "can neither rename without replacing nor hard-link"
                    ) from exc
                raise
            os.unlink(partial)
    except FileExistsError:
        raise DestinationExists(exists_message(dest)) from None


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


def exists_message(dest: Path) -> str:
    return f"{dest} already exists in the library; umt never replaces a library file"
