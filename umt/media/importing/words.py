"""The vocabulary of imports, which naming, selection, requests and settings speak too."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = [
    "DEFAULT_CHUNK_SIZE", "BeforeRename", "CheckFn", "ImportMethod", "ImportMode", "ImportResult",
    "ProgressFn", "VerifyMode",
]

ImportMode = Literal["auto", "hardlink", "copy"]
VerifyMode = Literal["pieces", "sha256", "size"]
ImportMethod = Literal["hardlink", "reflink", "copy"]
CheckFn = Callable[[], None]
ProgressFn = Callable[[int, int], None]
BeforeRename = Callable[["ImportResult"], None]

DEFAULT_CHUNK_SIZE = 8 * 1024 * 1024


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
    #: How many of the torrent's pieces were checked against the copied bytes (None: the
    #: import was not checked against piece hashes).
    pieces: int | None = None
