"""The copy-file step: imports the finished download into the library, exactly once.

Per file, the ledger records ``intent`` (before touching the library), ``verified`` (after the
temporary file is complete and synced, right before the atomic rename — a fenced write, so a
worker that lost the run stops here), and ``done``. A re-execution skips a ``done`` import whose
file is intact, finishes a ``verified`` one whose rename happened (checking the content hash),
removes a stray temporary file and starts over otherwise, and never overwrites a library file
it did not put there.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
from pathlib import Path
from typing import Any

from umt.engine import PermanentError, StepContext
from umt.media.importer import (
    CrossDevice,
    ImportResult,
    ensure_dir_inside,
    import_file,
    remove_stray_partial,
    verify_existing,
)
from umt.media.naming import UnsafePath, fields_for, render_destination, year_in
from umt.media.qbittorrent import QbtClient
from umt.media.request import AcquireRequest
from umt.media.results import Imported, ImportedFile
from umt.media.selection import NoMediaFile, select_media_files
from umt.records import ledger

log = logging.getLogger(__name__)

COPY_PREFIX = "copy:"


def copy_operation(destination: Path) -> str:
    return f"{COPY_PREFIX}{destination}"


def import_download(step: StepContext, request: AcquireRequest, qbt: QbtClient) -> Imported:
    info = qbt.find(request.info_hash)
    if info is None:
        raise PermanentError(f"torrent {request.info_hash} is no longer in qBittorrent")
    if not info.is_complete:
        raise RuntimeError(f"torrent {request.info_hash} is not complete ({info.state})")
    content = _content_inside_save_path(info.content_path, info.save_path)
    library_root = Path(request.library_dir)
    try:
        sources = select_media_files(content, all_files=request.all_files)
        planned = [
            (source, render_destination(
                request.naming_template, naming_fields(request, info.name, source),
                library_root=library_root,
            ))
            for source in sources
        ]
    except (NoMediaFile, UnsafePath) as exc:
        raise PermanentError(str(exc)) from exc
    return Imported(files=[
        _import_one(step, request, source, destination, library_root)
        for source, destination in planned
    ])


def naming_fields(
    request: AcquireRequest, torrent_name: str | None, source: Path
) -> dict[str, str]:
    return fields_for(
        title=request.title, name=torrent_name or request.title, source=source,
        info_hash=request.info_hash, year=year_in(request.title) or year_in(torrent_name or ""),
        category=request.category,
    )


def _content_inside_save_path(content_path: str | None, save_path: str | None) -> Path:
    if not content_path or not save_path:
        raise RuntimeError("qBittorrent does not report where the download is yet")
    content = Path(content_path).resolve()
    root = Path(save_path).resolve()
    if not content.is_relative_to(root):
        raise PermanentError(f"download {content} is outside qBittorrent's save path {root}")
    if not content.exists():
        raise RuntimeError(f"qBittorrent reports {content}, which does not exist")
    return content


def _import_one(
    step: StepContext, request: AcquireRequest, source: Path, destination: Path,
    library_root: Path,
) -> ImportedFile:
    operation = copy_operation(destination)
    entries = ledger.entries_of_operation(step, operation)
    finished = _finished_import(step, operation, entries, destination)
    if finished is not None:
        return finished
    if os.path.lexists(destination):
        raise PermanentError(
            f"{destination} already exists in the library and was not imported by this run; "
            "umt never overwrites a library file"
        )
    created = ensure_dir_inside(destination.parent, library_root)
    size = source.stat().st_size
    ledger.record(step, operation, ledger.INTENT, {
        "source": str(source), "size": size, "mode": request.import_mode,
        "created_dirs": [str(path) for path in created],
    })
    # Only now, holding the run (the intent write was fenced), may earlier writers' temporary
    # files go; a writer that lost the run only ever removes its own.
    remove_stray_partial(destination)

    def before_rename(result: ImportResult) -> None:
        ledger.record(step, operation, ledger.VERIFIED, _detail(source, result))

    try:
        result = import_file(
            source, destination, mode=request.import_mode, check=step.check,
            progress=lambda done, total: step.progress(done, total, file=destination.name),
            verify=request.verify, before_rename=before_rename,
            owner=f"e{step.lease_epoch}",
        )
    except CrossDevice as exc:
        raise PermanentError(str(exc)) from exc
    detail = _detail(source, result)
    ledger.record(step, operation, ledger.DONE, detail)
    return ImportedFile(**detail)


def _finished_import(
    step: StepContext, operation: str, entries: list[ledger.LedgerEntry], destination: Path
) -> ImportedFile | None:
    done = ledger.last_entry(entries, ledger.DONE)
    if done is not None and verify_existing(destination, size=done.detail["size"], sha256=None):
        log.info("run %s: %s already imported", step.run_id, destination)
        return ImportedFile(**done.detail)
    verified = ledger.last_entry(entries, ledger.VERIFIED)
    if verified is None or done is not None:
        return None
    expected = verified.detail
    if verify_existing(destination, size=expected["size"], sha256=expected["sha256"],
                       full_check=expected["sha256"] is not None):
        # Renamed into place before the previous attempt could record it: keep it.
        ledger.record(step, operation, ledger.DONE, {**expected, "recovered": True})
        return ImportedFile(**expected)
    return None


def _detail(source: Path, result: ImportResult) -> dict[str, Any]:
    return {
        "source": str(source), "path": str(result.dest), "size": result.size,
        "sha256": result.sha256, "method": result.method,
    }


def discard_partial_imports(step: StepContext) -> list[str]:
    """Compensation: removes temporary files of unfinished imports, and the folders they
    created if empty. A finished (renamed) library file is never removed."""
    removed: list[str] = []
    by_operation: dict[str, list[ledger.LedgerEntry]] = {}
    for entry in ledger.entries_of_this_run(step):
        if entry.operation.startswith(COPY_PREFIX):
            by_operation.setdefault(entry.operation, []).append(entry)
    for operation, entries in by_operation.items():
        if ledger.last_entry(entries, ledger.DONE) is not None:
            continue
        destination = Path(operation[len(COPY_PREFIX):])
        if remove_stray_partial(destination):
            removed.append(str(destination))
        for intent in entries:
            if intent.phase == ledger.INTENT:
                _remove_empty_folders(intent.detail.get("created_dirs", []))
    ledger.record(step, "discard-partial-imports", ledger.DONE, {"removed": removed})
    return removed


def _remove_empty_folders(folders: list[str]) -> None:
    for folder in sorted(folders, key=len, reverse=True):
        with contextlib.suppress(OSError):  # not empty, or already gone: leave it
            os.rmdir(folder)


def manifest_hash(files: list[ImportedFile]) -> str | None:
    """One content hash for an import: the file's own, or a hash over every file's hash."""
    if any(item.sha256 is None for item in files):
        return None
    if len(files) == 1:
        return files[0].sha256
    digest = hashlib.sha256()
    for item in sorted(files, key=lambda f: f.path):
        digest.update(f"{item.path}\0{item.sha256}\n".encode())
    return digest.hexdigest()
