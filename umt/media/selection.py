"""Which files of a finished download may be imported (``umt.media.packs`` chooses among them).

``content_path`` is what qBittorrent reports: the file of a single-file torrent, or the folder of
a multi-file one. These are never imported:

- hidden files and anything under a hidden folder (qBittorrent's ``.unwanted`` folder, say);
- partial files: ``.!qB`` (incomplete), ``.parts`` (pieces of unselected files), ``.part``;
- samples: a video with the word "sample" in its path relative to ``content_path`` (``Sample/``,
  ``movie-sample.mkv``), when a bigger video exists; a lone "The Sample.mkv" is kept;
- symlinks, files and folders alike: qBittorrent never creates them, and following one could
  import something from outside the download.

Every path returned resolves inside ``content_path``.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from umt.media.importing import ImportFailure, resolve_inside

__all__ = [
    "PARTIAL_SUFFIXES",
    "SUBTITLE_EXTENSIONS",
    "VIDEO_EXTENSIONS",
    "MediaFile",
    "NoMediaFile",
    "media_files",
    "without_samples",
]

VIDEO_EXTENSIONS = frozenset(
    {
        ".mkv", ".mp4", ".m4v", ".avi", ".mov", ".ts", ".m2ts", ".mts", ".wmv", ".webm",
        ".mpg", ".mpeg", ".vob", ".iso", ".ogv", ".flv",
    }
)  # fmt: skip
SUBTITLE_EXTENSIONS = frozenset({".srt", ".ass", ".ssa", ".sub", ".idx", ".vtt", ".sup"})
PARTIAL_SUFFIXES = (".!qb", ".parts", ".part")
_SAMPLE = re.compile(r"(?<![a-z0-9])sample(?![a-z0-9])", re.IGNORECASE)


class NoMediaFile(ImportFailure):
    """The download holds nothing to import."""


@dataclass(frozen=True)
class MediaFile:
    """A regular file of the download; ``relative`` is its path inside ``content_path`` (for a
    single-file torrent, its name)."""

    path: Path
    relative: str
    size: int

    @property
    def is_video(self) -> bool:
        return self.path.suffix.lower() in VIDEO_EXTENSIONS and self.size > 0

    @property
    def looks_like_sample(self) -> bool:
        return _SAMPLE.search(self.relative) is not None

    @property
    def is_subtitle(self) -> bool:
        return self.path.suffix.lower() in SUBTITLE_EXTENSIONS


def without_samples(files: list[MediaFile]) -> list[MediaFile]:
    """``files`` less the samples (a video named "sample" smaller than the biggest video)."""
    biggest_video = max((f.size for f in files if f.is_video), default=0)
    return [f for f in files if not (f.is_video and f.looks_like_sample and f.size < biggest_video)]


def media_files(content_path: Path) -> list[MediaFile]:
    """Every regular file of ``content_path`` that may be imported (see the module's rules)."""
    try:
        info = content_path.lstat()
    except FileNotFoundError:
        raise NoMediaFile(f"{content_path} does not exist") from None
    if stat.S_ISREG(info.st_mode):
        if content_path.name.lower().endswith(PARTIAL_SUFFIXES):
            raise NoMediaFile(f"{content_path} is an incomplete download")
        single = MediaFile(content_path, content_path.name, info.st_size)
        return [] if _skipped(content_path.name) else [single]
    if not stat.S_ISDIR(info.st_mode):
        raise NoMediaFile(f"{content_path} is neither a regular file nor a folder")
    return [c for c in _walk(content_path) if _resolves_inside(c.path, content_path)]


def _walk(root: Path) -> list[MediaFile]:
    found: list[MediaFile] = []
    for folder, subfolders, files in os.walk(root, onerror=_unreadable, followlinks=False):
        subfolders[:] = [name for name in subfolders if not name.startswith(".")]
        for name in files:
            path = Path(folder, name)
            try:
                info = path.lstat()
            except FileNotFoundError:
                continue
            if _skipped(name) or not stat.S_ISREG(info.st_mode):
                continue
            found.append(MediaFile(path, path.relative_to(root).as_posix(), info.st_size))
    return found


def _unreadable(error: OSError) -> None:
    raise NoMediaFile(f"cannot list {error.filename}: {error.strerror}") from error


def _skipped(name: str) -> bool:
    return name.startswith(".") or name.lower().endswith(PARTIAL_SUFFIXES)


def _resolves_inside(path: Path, root: Path) -> bool:
    try:
        resolve_inside(path, root)
    except ImportFailure:
        return False
    return True
