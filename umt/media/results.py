"""The recorded results of the acquire workflow's steps."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class _Result(BaseModel):
    model_config = ConfigDict(frozen=True)


class Submitted(_Result):
    info_hash: str
    name: str | None
    #: False when the torrent was already in qBittorrent before this run added it.
    added_by_run: bool


class Confirmation(_Result):
    complete: bool
    state: str | None
    progress: float | None


class Progress(_Result):
    completed: int
    progress: float
    state: str
    complete: bool = False


class ImportedFile(_Result):
    source: str
    path: str
    size: int
    sha256: str | None
    method: str
    #: The published file's identity (see ``umt.media.importing.ImportResult``).
    device: int | None = None
    inode: int | None = None
    mtime_ns: int | None = None
    #: How many of the torrent's pieces were checked against the copy (None: not checked).
    pieces: int | None = None


class Imported(_Result):
    files: list[ImportedFile]

    @property
    def total_size(self) -> int:
        return sum(item.size for item in self.files)


class Cleaned(_Result):
    removed: bool
    reason: str
