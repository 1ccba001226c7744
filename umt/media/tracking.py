"""Whether umt tracks a torrent: a run that is not final was started for its info-hash.

The finish hook fires for every torrent qBittorrent finishes, most of them other tools'; only
a tracked torrent's done signal is worth sending (and keeping, if its run does not wait yet).
"""

from __future__ import annotations

from umt.engine import Engine

#: A run in these states may still wait for its torrent's done signal.
_MAY_WAIT = ("pending", "running", "waiting")
#: More runs than anyone keeps in flight; the hook looks at each one's input.
_AT_MOST = 100_000


def tracks_torrent(engine: Engine, info_hash: str, workflow: str = "acquire") -> bool:
    info_hash = info_hash.lower()
    for status in _MAY_WAIT:
        for run in engine.list_runs(status=status, workflow=workflow, limit=_AT_MOST):
            wanted = run.input.get("info_hash") if isinstance(run.input, dict) else None
            if str(wanted or "").lower() == info_hash:
                return True
    return False
