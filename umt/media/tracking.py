"""Whether umt tracks a torrent: a run that is not final was started for its info-hash.

The finish hook fires for every torrent qBittorrent finishes, most of them other tools'; only
a tracked torrent's done signal is worth sending (and keeping, if its run does not wait yet).
A run that added (or adopted) the torrent recorded it in the ledger, which is indexed by
operation; only runs that have not started yet are looked for by their input.
"""

from __future__ import annotations

from umt.engine import Engine, RunStatus, UnknownRun
from umt.media.torrentnames import add_operation
from umt.records import ledger

#: A run in these states may still wait for its torrent's done signal.
_MAY_WAIT = frozenset({RunStatus.PENDING, RunStatus.RUNNING, RunStatus.WAITING})
#: More queued runs than anyone has; the hook looks at each one's input.
_AT_MOST = 10_000


def tracks_torrent(engine: Engine, info_hash: str, workflow: str = "acquire") -> bool:
    info_hash = info_hash.lower()
    for run_id in ledger.runs_of_operation(engine.database, add_operation(info_hash)):
        try:
            if engine.get(run_id).status in _MAY_WAIT:
                return True
        except UnknownRun:
            continue  # collected by 'umt db gc'
    for run in engine.list_runs(status=RunStatus.PENDING, workflow=workflow, limit=_AT_MOST):
        wanted = run.input.get("info_hash") if isinstance(run.input, dict) else None
        if str(wanted or "").lower() == info_hash:
            return True
    return False
