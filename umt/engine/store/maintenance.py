"""Housekeeping: old rows removed, the runs of dead workers taken back."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from umt.engine.hostinfo import process_alive
from umt.engine.models import LiveWorker
from umt.engine.store.base import StoreBase
from umt.engine.store.database import WORK_CHANNEL
from umt.engine.store.values import NO_WORKER, WORKER_PRESUMED_GONE


class Maintenance(StoreBase):
    """Housekeeping (part of ``Engine``; workers reclaim from dead siblings too)."""

    def collect_garbage(self, older_than: timedelta) -> dict[str, int]:
        now = self.clock.now()
        cutoff = now - older_than
        with self.database.transaction() as session:
            return {
                "runs": session.count("delete_finished_runs", cutoff=cutoff),
                "signals": session.count("delete_old_signals", cutoff=cutoff, now=now),
                "workers": session.count("delete_stopped_workers", cutoff=cutoff),
            }

    def reclaim_from_dead_workers(self, worker_ids: Sequence[str]) -> list[str]:
        """Mark workers dead and make the runs they held due now. Returns those runs."""
        if not worker_ids:
            return []
        now = self.clock.now()
        with self.database.transaction() as session:
            session.rows("mark_workers_dead", worker_ids=list(worker_ids), now=now)
            rows = session.rows("expire_leases_of_workers", worker_ids=list(worker_ids), now=now)
            if rows:
                self.database.notify(session, WORK_CHANNEL, "")
        return [row["id"] for row in rows]

    def live_workers(self) -> list[LiveWorker]:
        since = self.clock.now() - WORKER_PRESUMED_GONE
        with self.database.autocommit() as session:
            rows = session.rows("live_workers", since=since)
        return [
            LiveWorker(id=str(row["id"]), hostname=row["hostname"], pid=row["pid"],
                       workflows=list(row["workflows"]), started_at=row["started_at"],
                       heartbeat_at=row["heartbeat_at"])
            for row in rows
        ]

    def reap_dead_workers(self, host_key: str) -> list[str]:
        """Takes back the runs of workers on this host whose process is gone."""
        with self.database.autocommit() as session:
            rows = session.rows("live_workers_on_host", worker_id=NO_WORKER, host_key=host_key)
        dead = [row["id"] for row in rows if not process_alive(row["pid"], row["process_start"])]
        return self.reclaim_from_dead_workers(dead)
