"""``umt verify``: check a run's library files again, against the torrent's own piece hashes.

Any import can be checked this way, also a hardlink or a reflink, whose bytes the import never
read: the pieces come from qBittorrent, so the torrent must still be there (it is while it
seeds, during the retention). Once it is gone, a file imported with ``verify = "sha256"`` is
checked against its recorded SHA-256 instead; any other is reported as unverifiable.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from umt.engine import Database
from umt.media.importing import PieceMismatch, check_file_pieces
from umt.media.importing.copying import sha256_of
from umt.media.library import copy_operations
from umt.media.qbittorrent import QbtAdapterError, QbtClient
from umt.media.torrent_pieces import PiecesUnavailable, TorrentLayout, layout_of, pieces_of_file
from umt.records import ledger

CheckStatus = Literal["ok", "mismatch", "missing", "unverifiable"]


class NothingImported(Exception):
    """The run has no imported file to verify."""

    exit_code = 2


@dataclass(frozen=True)
class FileCheck:
    path: str
    status: CheckStatus
    #: What the file was checked against: "pieces", "sha256", or None (not checked).
    by: str | None = None
    pieces: int | None = None
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def imported_files(database: Database, run_id: str) -> list[dict[str, Any]]:
    """What the run's ledger says each published import is (its last ``done`` or
    ``verified`` entry per library path)."""
    published = (
        [entry.detail for entry in entries if entry.phase in (ledger.DONE, ledger.VERIFIED)]
        for entries in copy_operations(ledger.entries_of_run(database, run_id)).values()
    )
    return [details[-1] for details in published if details]


def verify_run(
    database: Database, qbt: QbtClient, run_id: str, info_hash: str,
    check: Callable[[], None] = lambda: None,
) -> list[FileCheck]:
    files = imported_files(database, run_id)
    if not files:
        raise NothingImported(f"run {run_id} has no imported file to verify")
    present = any(Path(str(detail.get("path"))).is_file() for detail in files)
    layout = _layout(qbt, info_hash) if present else "no file to check"
    return [_check_one(detail, layout, check) for detail in files]


def _layout(qbt: QbtClient, info_hash: str) -> TorrentLayout | str:
    """The torrent's pieces, or why they cannot be had (then recorded hashes are the fallback)."""
    try:
        torrent = qbt.find(info_hash)
        if torrent is None:
            return "the torrent is no longer in qBittorrent"
        return layout_of(qbt, torrent)
    except (PiecesUnavailable, QbtAdapterError) as exc:
        return str(exc)


def _check_one(
    detail: dict[str, Any], layout: TorrentLayout | str, check: Callable[[], None]
) -> FileCheck:
    path = Path(str(detail.get("path")))
    if not path.is_file():
        return FileCheck(str(path), "missing", reason="no such file in the library")
    try:
        if isinstance(layout, str):
            raise PiecesUnavailable(layout)
        pieces = pieces_of_file(layout, Path(str(detail.get("source"))))
    except PiecesUnavailable as exc:
        return _by_sha256(path, detail.get("sha256"), str(exc))
    try:
        checked = check_file_pieces(path, pieces, check=check)
    except PieceMismatch as exc:
        return FileCheck(str(path), "mismatch", "pieces", reason=str(exc))
    return FileCheck(str(path), "ok", "pieces", pieces=checked)


def _by_sha256(path: Path, recorded: object, no_pieces: str) -> FileCheck:
    if not isinstance(recorded, str):
        return FileCheck(str(path), "unverifiable", reason=no_pieces)
    if sha256_of(path) != recorded.lower():
        return FileCheck(str(path), "mismatch", "sha256",
                         reason="its SHA-256 differs from the one recorded at import")
    return FileCheck(str(path), "ok", "sha256")
