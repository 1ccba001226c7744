"""What every part of the store holds: the database, the clock, the signals' lifetime.

The store is written once for every backend, one module per subject (runs, signals, workers,
steps, maintenance); ``Store`` (store.py) puts them together, ``Engine`` takes the parts a
client uses."""

from __future__ import annotations

from datetime import timedelta

from umt.engine.clock import Clock
from umt.engine.store.database import WORK_CHANNEL, Database
from umt.engine.store.values import Fence


class StoreBase:
    """The database, the clock and the signals' lifetime every part of the store uses."""

    def __init__(
        self,
        database: Database,
        clock: Clock | None = None,
        *,
        signal_ttl: timedelta = timedelta(days=7),
    ) -> None:
        self.database = database
        #: The fleet's clock (``Database.fleet_clock``) unless a test gives its own.
        self.clock = clock or database.fleet_clock()
        self.signal_ttl = signal_ttl
        self._work_channel = database.channel(WORK_CHANNEL)

    @staticmethod
    def _fence_key(fence: Fence) -> dict[str, object]:
        return {"run_id": fence.run_id, "worker_id": fence.worker_id, "lease_epoch": fence.epoch}
