"""What a run of the acquire workflow is asked to do: its input, fixed when it starts.

The import settings are copied into the input so that a run finishes the way it was asked to,
whatever the configuration says later; secrets (qBittorrent password, database URL) are never
part of it.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict

from umt.media.importing import ImportMode, Permissions, VerifyMode
from umt.media.sources import TorrentSource
from umt.media.torrentnames import done_signal_name


class AcquireRequest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    source: dict[str, Any]
    info_hash: str
    title: str
    retention_seconds: float
    download_timeout_seconds: float
    category: str
    #: Where qBittorrent saves the download, as qBittorrent sees it (mapped when the run starts).
    save_path: str | None
    library_dir: str
    import_mode: ImportMode
    naming_template: str
    all_files: bool
    verify: VerifyMode
    #: A wait with no progress for this long fails the run (None: no limit but the timeout).
    stall_timeout_seconds: float | None = None
    #: Whether ``title`` was chosen by the user (``--name``) rather than taken from the torrent.
    title_given: bool = False
    #: ``library.file_mode``, ``.dir_mode`` and ``.group`` (as a gid); None: left as created.
    file_mode: int | None = None
    dir_mode: int | None = None
    group_id: int | None = None

    def identity(self) -> dict[str, Any]:
        """What makes two requests one acquisition: the torrent (its info-hash, however its
        source was spelled) and every option that changes what the run does."""
        leave_out = {"source", "title_given"} | (set() if self.title_given else {"title"})
        return self.model_dump(mode="json", exclude=leave_out)

    @property
    def torrent(self) -> TorrentSource:
        return TorrentSource.from_json(self.source)

    @property
    def retention(self) -> timedelta:
        return timedelta(seconds=self.retention_seconds)

    @property
    def download_timeout(self) -> timedelta:
        return timedelta(seconds=self.download_timeout_seconds)

    @property
    def stall_timeout(self) -> timedelta | None:
        if self.stall_timeout_seconds is None:
            return None
        return timedelta(seconds=self.stall_timeout_seconds)

    @property
    def permissions(self) -> Permissions:
        return Permissions(self.file_mode, self.dir_mode, self.group_id)

    @property
    def done_signal(self) -> str:
        return done_signal_name(self.info_hash)


def run_tag(run_id: str) -> str:
    return f"umt-{run_id}"


#: What ``run_tag`` gives: a torrent carrying such a tag was added by a umt run.
RUN_TAG = re.compile(r"umt-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
