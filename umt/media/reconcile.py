"""One pass that lines up waiting runs with what qBittorrent says (``umt resume``).

A finished torrent whose run still waits gets its done signal (targeted at the run, with an
idempotency key per wait, so overlapping passes and the finish hook cannot double anything).
A missing, errored or still-downloading torrent is shown on the run's status line.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from umt.engine import Engine, RunFinished
from umt.media.qbittorrent import QbtClient
from umt.media.request import DONE_SIGNAL_PREFIX

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
            _annotate(engine, waiting.run_id, "torrent not found in qBittorrent")
            report.missing.append(waiting.run_id)
        elif torrent.is_complete:
            try:
                engine.signal(
                    waiting.signal_name, {"info_hash": info_hash, "source": "reconcile"},
                    run_id=waiting.run_id,
                    idempotency_key=f"reconcile:{waiting.run_id}:{waiting.position}",
                )
            except RunFinished:
                continue  # canceled between the listing and now
            report.signaled.append(waiting.run_id)
        elif torrent.is_errored:
            _annotate(engine, waiting.run_id, f"qBittorrent reports {torrent.state}")
            report.errored.append(waiting.run_id)
        else:
            _annotate(engine, waiting.run_id,
                      f"downloading {torrent.progress:.0%} ({torrent.state})")
            report.downloading.append(waiting.run_id)
    return report


def _annotate(engine: Engine, run_id: str, detail: str) -> None:
    engine.annotate(run_id, detail)
    log.info("run %s: %s", run_id, detail)
