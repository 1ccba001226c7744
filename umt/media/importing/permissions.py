"""The mode and group of what an import creates (``library.file_mode``, ``.dir_mode``, ``.group``).

Applied to every folder an import creates, right after it is made, and to every file it writes
(copy, reflink) while the file still has its temporary name, so a media server never sees a
library file it cannot read. A hardlink is the download itself under a second name: its mode and
group are the download's, which umt leaves alone (qBittorrent's files are not umt's to change);
``umt doctor`` warns when the configured group could not read them.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

__all__ = ["NO_PERMISSIONS", "Permissions", "readable_by_group", "unreadable_by_group"]

_GROUP_READ = stat.S_IRGRP
_OTHERS_READ = stat.S_IROTH


@dataclass(frozen=True)
class Permissions:
    file_mode: int | None = None
    dir_mode: int | None = None
    gid: int | None = None

    def apply_to_file(self, path: Path) -> None:
        self._apply(path, self.file_mode)

    def apply_to_dir(self, path: Path) -> None:
        self._apply(path, self.dir_mode)

    def _apply(self, path: Path, mode: int | None) -> None:
        # The group first: chown may clear the set-group-ID bit a mode asks for.
        if self.gid is not None:
            os.chown(path, -1, self.gid, follow_symlinks=False)
        if mode is not None:
            os.chmod(path, mode)


NO_PERMISSIONS = Permissions()


def readable_by_group(info: os.stat_result, gid: int) -> bool:
    """Whether members of ``gid`` may read a file with this status."""
    if info.st_gid == gid:
        return bool(info.st_mode & _GROUP_READ)
    return bool(info.st_mode & _OTHERS_READ)


def unreadable_by_group(folder: Path, gid: int, *, limit: int = 500) -> tuple[int, list[Path]]:
    """Of the first ``limit`` files under ``folder``, how many were looked at and which the
    group ``gid`` cannot read (hidden files and folders are not looked at)."""
    looked = 0
    unreadable: list[Path] = []
    for current, folders, files in os.walk(folder):
        folders[:] = sorted(name for name in folders if not name.startswith("."))
        for name in sorted(files):
            if name.startswith(".") or looked >= limit:
                continue
            path = Path(current, name)
            try:
                info = path.lstat()
            except OSError:
                continue
            if not stat.S_ISREG(info.st_mode):
                continue
            looked += 1
            if not readable_by_group(info, gid):
                unreadable.append(path)
        if looked >= limit:
            break
    return looked, unreadable
