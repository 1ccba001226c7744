"""Steps that talk to qBittorrent: submit, confirm, clean up, and undo a submit."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from umt.engine import PermanentError, StepContext
from umt.media.qbittorrent import QbtClient, TorrentInfo
from umt.media.request import RUN_TAG, AcquireRequest, run_tag
from umt.media.results import Cleaned, Confirmation, Progress, Submitted
from umt.media.torrentnames import add_operation, delete_operation
from umt.records import ledger

log = logging.getLogger(__name__)

#: qBittorrent's API lags its finish hook by about 1.5 s; give it this long to catch up.
CONFIRM_WINDOW_SECONDS = 30.0
CONFIRM_POLL_SECONDS = 0.5
RECHECK_SECONDS = 3.0
REMOVED_OUTSIDE_UMT = "torrent removed outside umt"


def submit_download(step: StepContext, request: AcquireRequest, qbt: QbtClient) -> Submitted:
    """Adds the torrent with umt's category and the run's tag, or adopts it if present.

    Whether the torrent was there before this run is decided once, by the first attempt, and
    kept in the ledger: a retried attempt that finds the torrent it added itself still knows
    the torrent is the run's own.
    """
    operation = add_operation(request.info_hash)
    first_intent = _first_add_intent(step, request.info_hash)
    if first_intent is None:
        before = qbt.find(request.info_hash)
        present_before = before is not None
        umt_before = before is not None and _added_by_umt(before)
        ledger.record(step, operation, ledger.INTENT, {
            "present_before": present_before, "umt_before": umt_before,
        })
    else:
        present_before = bool(first_intent.detail.get("present_before"))
        umt_before = bool(first_intent.detail.get("umt_before"))
    step.check()
    # Another tool's torrent is adopted as it is: not re-tagged, re-categorized or moved.
    foreign = present_before and not umt_before
    outcome = qbt.add(
        request.torrent, category=request.category,
        tags=[] if foreign else [run_tag(step.run_id)], save_path=request.save_path,
    )
    ledger.record(step, operation, ledger.DONE, {
        "outcome": outcome.status, "state": outcome.torrent.state,
        "present_before": present_before, "completed": outcome.torrent.completed,
    })
    return Submitted(
        info_hash=request.info_hash, name=outcome.torrent.name, added_by_run=not present_before
    )


def confirm_download(step: StepContext, request: AcquireRequest, qbt: QbtClient) -> Confirmation:
    """A done signal is only a wake-up: qBittorrent itself must say the torrent is complete."""
    waited = 0.0
    while True:
        info = healthy_torrent(step, qbt, request.info_hash)
        if info.is_complete:
            return Confirmation(complete=True, state=info.state, progress=info.progress)
        if waited >= CONFIRM_WINDOW_SECONDS:
            log.info("run %s: torrent not complete yet (%s, %.0f%%); waiting again",
                     step.run_id, info.state, info.progress * 100)
            return Confirmation(complete=False, state=info.state, progress=info.progress)
        step.sleep(CONFIRM_POLL_SECONDS)
        waited += CONFIRM_POLL_SECONDS


def healthy_torrent(step: StepContext, qbt: QbtClient, info_hash: str) -> TorrentInfo:
    """The run's torrent, or a permanent failure that says why it cannot finish."""
    info = qbt.find(info_hash)
    if info is None:
        # Asked again a moment later: a qBittorrent that has just started may list its
        # torrents late, and a failed run is for good.
        step.sleep(RECHECK_SECONDS)
        info = qbt.find(info_hash)
    if info is None:
        raise PermanentError(REMOVED_OUTSIDE_UMT)
    if info.problem is not None:
        raise PermanentError(info.problem)
    return info


def check_progress(step: StepContext, request: AcquireRequest, qbt: QbtClient) -> Progress:
    """After ``stall_timeout`` without a done signal: fails the run if the torrent is gone or
    errored, made no progress since the previous check, or the download timeout has passed."""
    info = healthy_torrent(step, qbt, request.info_hash)
    operation = progress_operation(request.info_hash)
    checks = ledger.entries_of_operation(step, operation)
    started = ledger.entries_of_operation(step, add_operation(request.info_hash))
    if started and step.now() - started[0].recorded_at >= request.download_timeout:
        raise PermanentError(f"the download did not finish within {request.download_timeout}")
    submitted = ledger.last_entry(started, ledger.DONE)
    baseline = checks[-1] if checks else submitted
    previous = baseline.detail.get("completed") if baseline is not None else None
    ledger.record(step, operation, ledger.DONE, {
        "completed": info.completed, "progress": info.progress, "state": info.state,
    })
    if previous is not None and info.completed <= int(previous) and not info.is_complete:
        stalled = request.stall_timeout or request.download_timeout
        raise PermanentError(
            f"no progress for {stalled} (acquire.stall_timeout): {info.progress:.0%} "
            f"({info.state})"
        )
    return Progress(completed=info.completed, progress=info.progress, state=info.state,
                    complete=info.is_complete)


def progress_operation(info_hash: str) -> str:
    return f"qbt-progress:{info_hash}"


def added_by_this_run(step: StepContext, info_hash: str) -> bool:
    first_intent = _first_add_intent(step, info_hash)
    return first_intent is not None and not first_intent.detail.get("present_before")


def added_by_umt(step: StepContext, info_hash: str) -> bool:
    """This run added the torrent, or an earlier umt run did (it carried a run's tag)."""
    first_intent = _first_add_intent(step, info_hash)
    return first_intent is not None and (
        not first_intent.detail.get("present_before")
        or bool(first_intent.detail.get("umt_before"))
    )


def _added_by_umt(info: TorrentInfo) -> bool:
    return any(RUN_TAG.fullmatch(tag) for tag in info.tags)


def _first_add_intent(step: StepContext, info_hash: str) -> ledger.LedgerEntry | None:
    """The submit's first intent, which recorded whether the torrent was there before."""
    entries = ledger.entries_of_operation(step, add_operation(info_hash))
    return ledger.last_entry(entries[:1], ledger.INTENT)


def cleanup_download(step: StepContext, request: AcquireRequest, qbt: QbtClient) -> Cleaned:
    """After retention: removes the torrent and its data, never the library copy.

    A torrent umt did not add (another tool's, adopted) is left alone, whatever its category.
    """
    operation = delete_operation(request.info_hash)
    info = qbt.find(request.info_hash)
    if info is None:
        ledger.record(step, operation, ledger.SKIPPED, {"reason": "already gone"})
        return Cleaned(removed=False, reason="already gone")
    if not added_by_umt(step, request.info_hash):
        reason = f"not added by umt (category {info.category!r})"
        ledger.record(step, operation, ledger.SKIPPED, {"reason": reason})
        return Cleaned(removed=False, reason=reason)
    return _delete(step, qbt, info, operation)


def remove_own_torrent(step: StepContext, request: AcquireRequest, qbt: QbtClient) -> Cleaned:
    """Compensation: removes the torrent and its data if this run added it."""
    operation = delete_operation(request.info_hash)
    if not added_by_this_run(step, request.info_hash):
        ledger.record(step, operation, ledger.SKIPPED, {"reason": "not added by this run"})
        return Cleaned(removed=False, reason="not added by this run")
    info = qbt.find(request.info_hash)
    if info is None:
        ledger.record(step, operation, ledger.SKIPPED, {"reason": "already gone"})
        return Cleaned(removed=False, reason="already gone")
    return _delete(step, qbt, info, operation)


def _delete(step: StepContext, qbt: QbtClient, info: TorrentInfo, operation: str) -> Cleaned:
    ledger.record(step, operation, ledger.INTENT, {
        "save_path": info.save_path, "content_path": info.content_path,
    })
    removed = qbt.delete(info.info_hash, delete_files=True)
    _remove_empty_content_folder(info)
    ledger.record(step, operation, ledger.DONE, {"removed": removed})
    return Cleaned(removed=removed, reason="removed" if removed else "already gone")


def _remove_empty_content_folder(info: TorrentInfo) -> None:
    """qBittorrent leaves a multi-file torrent's emptied folder behind in some versions."""
    if not info.content_path or not info.save_path:
        return
    content = Path(info.content_path)
    save_root = Path(info.save_path).resolve()
    try:
        resolved = content.resolve()
        inside = resolved != save_root and resolved.is_relative_to(save_root)
        if inside and resolved.is_dir() and not any(resolved.iterdir()):
            os.rmdir(resolved)
    except OSError as exc:
        log.info("left %s in place: %s", content, exc)
