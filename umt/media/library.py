"""The copy-file step: imports the finished download into the library, exactly once.

Before a byte is written the run claims every destination path (``umt.records.claims``): of two
runs whose files map to one path, one holds it and the other fails permanently with
``library path … is held by run …`` (its download is kept). Two files of one run that map to one
path are refused before anything is copied.

Per file, the ledger records ``intent`` (before touching the library), ``verified`` (after the
temporary file is complete and synced, right before the publish — a fenced write, so a worker
that lost the run stops here; it names the file's identity), and ``done``. A re-execution skips
a ``done`` import whose file is still the one it published, finishes a ``verified`` one whose
publish happened, removes a stray temporary file and starts over otherwise. The publish never
replaces a file (see ``umt.media.importing``), and an equal size never stands for equal content.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from umt.engine import PermanentError, StepContext
from umt.media.downloads import REMOVED_OUTSIDE_UMT
from umt.media.importing import (
    CrossDevice,
    DestinationExists,
    FilePieces,
    ImportResult,
    PieceMismatch,
    VerifyMode,
    ensure_dir_inside,
    holds_import,
    import_file,
    readable_by_group,
    remove_stray_partial,
)
from umt.media.naming import (
    TemplateError,
    UnsafePath,
    companion_destination,
    fields_for,
    render_destination,
    year_in,
)
from umt.media.packs import Choice, choose_files
from umt.media.qbittorrent import QbtClient, QbtError, TorrentInfo
from umt.media.release_names import parse_release, release_path
from umt.media.request import AcquireRequest
from umt.media.results import Imported, ImportedFile
from umt.media.selection import NoMediaFile
from umt.media.torrent_pieces import PiecesUnavailable, TorrentLayout, layout_of, pieces_of_file
from umt.records import claims, ledger

log = logging.getLogger(__name__)

COPY_PREFIX = "copy:"


def copy_operation(destination: Path) -> str:
    return f"{COPY_PREFIX}{destination}"


def import_download(step: StepContext, request: AcquireRequest, qbt: QbtClient) -> Imported:
    info = qbt.find(request.info_hash)
    if info is None:
        raise PermanentError(REMOVED_OUTSIDE_UMT)
    if not info.is_complete:
        raise RuntimeError(f"torrent {request.info_hash} is not complete ({info.state})")
    content = _content_inside_save_path(info.content_path, info.save_path)
    library_root = Path(request.library_dir)
    try:
        chosen = choose_files(content, info.name, template=request.naming_template,
                              all_files=request.all_files)
        planned = plan_destinations(request, info.name, chosen, library_root)
    except (NoMediaFile, UnsafePath, TemplateError) as exc:
        raise PermanentError(str(exc)) from exc
    _claim(step, [destination for _, destination in planned])
    layout = _layout(qbt, info) if request.verify == "pieces" else None
    return Imported(files=[
        _import_one(step, request, source, destination, library_root, layout)
        for source, destination in planned
    ])


def _layout(qbt: QbtClient, info: TorrentInfo) -> TorrentLayout | str:
    """The torrent's pieces, or why they cannot be used (the import then falls back)."""
    try:
        return layout_of(qbt, info)
    except PiecesUnavailable as exc:
        return str(exc)
    except QbtError as exc:  # an older qBittorrent, or one that cannot say (unreachable: retry)
        return f"qBittorrent gave no piece hashes: {exc}"


def _verification(
    request: AcquireRequest, layout: TorrentLayout | str | None, source: Path
) -> tuple[VerifyMode, FilePieces | None, str | None]:
    """How this file is verified: by the torrent's pieces when they can be had, else by
    SHA-256 (with the reason why not), or as the request says."""
    if layout is None:
        return request.verify, None, None
    reason = layout if isinstance(layout, str) else None
    if not isinstance(layout, str):
        try:
            return "pieces", pieces_of_file(layout, source), None
        except PiecesUnavailable as exc:
            reason = str(exc)
    log.info("%s: no piece verification (%s); verifying by SHA-256", source.name, reason)
    return "sha256", None, reason


def plan_destinations(
    request: AcquireRequest, torrent_name: str | None, chosen: list[Choice], library_root: Path,
) -> list[tuple[Path, Path]]:
    """Each chosen file with its library path (a subtitle beside its video's); refuses two
    files that map to one path."""
    planned: list[tuple[Path, Path]] = []
    taken: dict[Path, Path] = {}
    for choice in chosen:
        source = choice.file.path
        if choice.subtitle_of is not None:
            destination = companion_destination(
                _destination_of(planned, choice.subtitle_of), choice.language, source.suffix
            )
        else:
            fields = naming_fields(request, torrent_name, source, Path(choice.file.relative),
                                   release=choice.release)
            destination = render_destination(request.naming_template, fields,
                                             library_root=library_root)
        if destination in taken:
            raise PermanentError(
                f"{taken[destination].name} and {source.name} of this torrent would both be "
                f"imported as {destination}; put {{path}} in library.naming_template"
            )
        taken[destination] = source
        planned.append((source, destination))
    return planned


def _destination_of(planned: list[tuple[Path, Path]], source: Path) -> Path:
    return next(destination for planned_source, destination in planned
                if planned_source == source)


def naming_fields(
    request: AcquireRequest, torrent_name: str | None, source: Path, inside: Path | None = None,
    *, release: dict[str, Any] | None = None,
) -> dict[str, object]:
    """The template fields of one file: the release's title unless ``--name`` gave one."""
    inside = inside or Path(source.name)
    if release is None:
        release = parse_release(release_path(torrent_name, inside.as_posix()))
    title = request.title if request.title_given else str(release.get("title") or request.title)
    return fields_for(
        title=title, name=torrent_name or request.title, source=source,
        info_hash=request.info_hash, year=year_in(request.title) if request.title_given else None,
        category=request.category, inside=inside, release=release,
    )


def _claim(step: StepContext, destinations: list[Path]) -> None:
    try:
        claims.claim(step, [str(destination) for destination in destinations])
    except claims.PathHeld as held:
        ledger.record(step, copy_operation(Path(held.path)), ledger.FAILED, {
            "reason": str(held), "holder": held.holder,
        })
        raise PermanentError(str(held)) from None


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
    library_root: Path, layout: TorrentLayout | str | None,
) -> ImportedFile:
    operation = copy_operation(destination)
    entries = ledger.entries_of_operation(step, operation)
    finished = _finished_import(step, operation, entries, source, destination)
    if finished is not None:
        return finished
    if os.path.lexists(destination):
        raise PermanentError(
            f"{destination} already exists in the library and was not imported by this run; "
            "umt never replaces a library file"
        )
    created = ensure_dir_inside(destination.parent, library_root, request.permissions)
    size = source.stat().st_size
    verify, pieces, no_pieces = _verification(request, layout, source)
    ledger.record(step, operation, ledger.INTENT, {
        "source": str(source), "size": size, "mode": request.import_mode,
        "created_dirs": [str(path) for path in created], "verify": verify,
        **({"pieces_unavailable": no_pieces} if no_pieces else {}),
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
            verify=verify, pieces=pieces, before_rename=before_rename,
            owner=f"e{step.lease_epoch}", permissions=request.permissions,
        )
    except PieceMismatch as exc:
        # The download is not what the torrent publishes: nothing was published, and
        # copying it again would give the same bytes.
        ledger.record(step, operation, ledger.FAILED, {"source": str(source), "reason": str(exc)})
        raise PermanentError(
            f"{exc}; the download is kept: a recheck in qBittorrent finds the damaged piece "
            "and downloads it again"
        ) from exc
    except (CrossDevice, DestinationExists) as exc:
        raise PermanentError(str(exc)) from exc
    _warn_if_group_cannot_read(request, result)
    detail = _detail(source, result)
    ledger.record(step, operation, ledger.DONE, detail)
    return ImportedFile(**detail)


def _warn_if_group_cannot_read(request: AcquireRequest, result: ImportResult) -> None:
    """A hardlink keeps the download's mode and group (umt leaves qBittorrent's file alone)."""
    gid = request.group_id
    if (result.method == "hardlink" and gid is not None
            and not readable_by_group(result.dest.stat(), gid)):
        log.warning("%s is a hardlink of a download that library.group (gid %d) cannot read; "
                    "see 'umt doctor'", result.dest, gid)


def _finished_import(
    step: StepContext, operation: str, entries: list[ledger.LedgerEntry], source: Path,
    destination: Path,
) -> ImportedFile | None:
    """The import of ``source`` this run already published at ``destination``, if any."""
    mine = [entry for entry in entries if entry.detail.get("source") == str(source)]
    done = ledger.last_entry(mine, ledger.DONE)
    if done is not None and holds_import(destination, done.detail):
        log.info("run %s: %s already imported", step.run_id, destination)
        return ImportedFile(**_file_detail(done.detail))
    verified = ledger.last_entry(mine, ledger.VERIFIED)
    if verified is not None and holds_import(destination, verified.detail):
        # Published before the previous attempt could record it: keep it.
        ledger.record(step, operation, ledger.DONE, {**verified.detail, "recovered": True})
        return ImportedFile(**_file_detail(verified.detail))
    return None


def _detail(source: Path, result: ImportResult) -> dict[str, Any]:
    return {
        "source": str(source), "path": str(result.dest), "size": result.size,
        "sha256": result.sha256, "method": result.method, "device": result.device,
        "inode": result.inode, "mtime_ns": result.mtime_ns, "pieces": result.pieces,
    }


def _file_detail(detail: dict[str, Any]) -> dict[str, Any]:
    return {key: detail.get(key) for key in ImportedFile.model_fields}


def published_imports(step: StepContext) -> list[ImportedFile]:
    """The files this run published that are still in the library, from the ledger alone
    (a compensation must not depend on step results that may not have been committed)."""
    found: list[ImportedFile] = []
    for operation, entries in _copy_operations(step).items():
        destination = Path(operation[len(COPY_PREFIX):])
        for entry in reversed(entries):
            if entry.phase in (ledger.DONE, ledger.VERIFIED) and holds_import(
                destination, entry.detail
            ):
                found.append(ImportedFile(**_file_detail(entry.detail)))
                break
    return found


def copy_operations(
    entries: Iterable[ledger.LedgerEntry],
) -> dict[str, list[ledger.LedgerEntry]]:
    """A run's ledger entries of its imports, by operation (one per library path), in order."""
    by_operation: dict[str, list[ledger.LedgerEntry]] = {}
    for entry in entries:
        if entry.operation.startswith(COPY_PREFIX):
            by_operation.setdefault(entry.operation, []).append(entry)
    return by_operation


def _copy_operations(step: StepContext) -> dict[str, list[ledger.LedgerEntry]]:
    return copy_operations(ledger.entries_of_this_run(step))


def discard_partial_imports(step: StepContext) -> list[str]:
    """Compensation: removes temporary files of unfinished imports, the folders they created
    if empty, and releases their path claims. A published library file is never removed, and
    its claim stays: what counts as published is decided from the ledger and the file's
    identity, never from step results held in memory."""
    kept = {item.path for item in published_imports(step)}
    removed: list[str] = []
    for operation, entries in _copy_operations(step).items():
        destination = Path(operation[len(COPY_PREFIX):])
        if str(destination) in kept:
            continue
        if remove_stray_partial(destination):
            removed.append(str(destination))
        for intent in entries:
            if intent.phase == ledger.INTENT:
                _remove_empty_folders(intent.detail.get("created_dirs", []))
    released = [path for path in claims.claims_of_this_run(step) if path not in kept]
    claims.release(step, released)
    ledger.record(step, "discard-partial-imports", ledger.DONE, {
        "removed": removed, "kept": sorted(kept), "released": released,
    })
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
