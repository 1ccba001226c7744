"""One pass that lines up waiting runs with what qBittorrent says (``umt resume``).

A finished torrent whose run still waits gets its done signal (targeted at the run, with an
idempotency key per wait, so overlapping passes and the finish hook cannot double anything).
A torrent removed outside umt or in an error state wakes its run the same way: the run's
confirm step finds the problem and fails the run with it as the reason. A still-downloading
torrent is shown on the run's status line.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from umt.engine import Engine, RunFinished, WaitingRun
from umt.media.downloads import REMOVED_OUTSIDE_UMT
from umt.media.qbittorrent import QbtClient
from umt.media.torrentnames import DONE_SIGNAL_PREFIX

log = logging.getLogger(__name__)


@dataclass
class ReconcileReport:
    signaled: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    errored: list[str] = field(default_factory=list)
    downloading: list[str] = field(default_factory=list)


def reconcile(engine: Engine, qbt: QbtClient) -> ReconcileReport:
    report = ReconcileReport()
    for waiting in engine.runs_waiting_on(DONE_SIGNAL_PREFIX):
        info_hash = waiting.signal_name[len(DONE_SIGNAL_PREFIX):]
        torrent = qbt.find(info_hash)
        if torrent is None:
            # The run's confirm step finds it gone and fails the run with this reason.
            _annotate(engine, waiting.run_id, REMOVED_OUTSIDE_UMT)
            _wake(engine, waiting, info_hash, REMOVED_OUTSIDE_UMT)
            report.missing.append(waiting.run_id)
        elif torrent.is_complete:
            if _wake(engine, waiting, info_hash):
                report.signaled.append(waiting.run_id)
        elif torrent.problem is not None:
            _annotate(engine, waiting.run_id, torrent.problem)
            _wake(engine, waiting, info_hash, torrent.problem)
            report.errored.append(waiting.run_id)
        else:
            _annotate(engine, waiting.run_id,
                      f"downloading {torrent.progress:.0%} ({torrent.state})")
            report.downloading.append(waiting.run_id)
    return report


def _wake(engine: Engine, waiting: WaitingRun, info_hash: str, problem: str | None = None,
          ) -> bool:
    """Delivers the done signal to this wait of this run (once per wait, whoever sends it):
    the run's confirm step then asks qBittorrent itself."""
    data = {"info_hash": info_hash, "source": "reconcile"}
    if problem is not None:
        data["problem"] = problem
    try:
        engine.signal(waiting.signal_name, data, run_id=waiting.run_id,
                      idempotency_key=f"reconcile:{waiting.run_id}:{waiting.position}")
    except RunFinished:
        return False  # canceled between the listing and now
    return True


def _annotate(engine: Engine, run_id: str, detail: str) -> None:
    engine.annotate(run_id, detail)
    log.info("run %s: %s", run_id, detail)
