"""The engine's only source of time.

Everything that reads the time goes through a ``Clock`` so that tests can move it. On SQLite
(one machine) that is the machine's clock; on PostgreSQL, where workers on several hosts share
the runs, it is ``ServerClock``: the database server's time, so that hosts whose clocks differ
still agree on when a lease expires or a timer is due.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

log = logging.getLogger(__name__)


class Clock(Protocol):
    def now(self) -> datetime:
        """Current time, timezone-aware, in UTC."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class FakeClock:
    """A clock that only moves when told to (tests)."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2030, 1, 1, tzinfo=UTC)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, delta: timedelta) -> None:
        with self._lock:
            self._now += delta

    def set(self, moment: datetime) -> None:
        with self._lock:
            self._now = moment


SYSTEM_CLOCK = SystemClock()


def elapsed() -> float:
    """Seconds on a clock that only moves forward and, unlike ``time.monotonic()`` on Linux,
    also while the machine is suspended (a VM resumed after a pause is not behind)."""
    return time.clock_gettime(_ELAPSED_CLOCK)


_ELAPSED_CLOCK = getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC)


@dataclass(frozen=True)
class ClockSample:
    """One reading of the server's clock: ``server`` was read between ``sent`` and
    ``received`` (``elapsed()``), while the local clock read ``local``."""

    server: datetime
    sent: float
    received: float
    local: datetime

    @property
    def round_trip(self) -> float:
        return self.received - self.sent

    @property
    def offset(self) -> timedelta:
        """Server minus local time (the local reading was taken half-way through the trip)."""
        return self.server - self.local


#: A measurement whose round trip is longer than this (seconds) is repeated within a second.
_PRECISE_ENOUGH = 0.005


class ServerClock:
    """The database server's time, read without a round trip per call.

    A measurement reads the server's clock a few times and keeps the reading with the shortest
    round trip; afterwards the time is that reading plus the local time elapsed since the
    answer arrived (``elapsed()``: monotonic, counting suspended time). That is never ahead of
    the server (the server read its clock before the answer came back), so a timer is never
    seen due early, and a step of the local wall clock changes nothing; it is behind the
    server's by at most that round trip (well under a millisecond on a LAN; a slow one is
    measured again within a second). It is measured again every ``resync_every`` seconds (in
    the background, so ``now()`` never waits on the database once it has a measurement) and
    soon after a reconnection (``resync_soon``). Elapsed time runs at the rate of the host's
    wall clock, so what a new measurement catches is a step of the server's clock; measuring
    every 5 minutes costs an idle worker 3 statements per 5 minutes.
    """

    def __init__(
        self, read: Callable[[], ClockSample], *, resync_every: float = 300.0, samples: int = 3
    ) -> None:
        self._read = read
        self._resync_every = resync_every
        self._samples = samples
        self._lock = threading.Lock()
        self._best: ClockSample | None = None
        self._syncing = False
        self._next_sync = float("inf")  # elapsed() of the next measurement

    def now(self) -> datetime:
        best = self._best
        if best is None:
            best = self.sync()
        elif elapsed() >= self._next_sync:
            self._sync_in_background()
        return best.server + timedelta(seconds=elapsed() - best.received)

    @property
    def sample(self) -> ClockSample:
        """The measurement in use (measured now if there is none yet)."""
        return self._best or self.sync()

    def sync(self) -> ClockSample:
        """Measures the server's clock now (raises the store's error if it is unreachable)."""
        readings = [self._read() for _ in range(self._samples)]
        best = min(readings, key=lambda sample: sample.round_trip)
        with self._lock:
            previous, self._best = self._best, best
            # A slow round trip (a busy machine or network) leaves the time up to that much
            # behind the server's: measure again soon rather than live with it for long.
            again = self._resync_every if best.round_trip <= _PRECISE_ENOUGH else 1.0
            self._next_sync = best.received + min(again, self._resync_every)
        if previous is not None:
            drift = (self._at(best, best.received) - self._at(previous, best.received))
            if abs(drift) > timedelta(seconds=1):
                log.warning("the database server's clock moved by %+.1fs since it was last "
                            "measured", drift.total_seconds())
        return best

    def resync_soon(self) -> None:
        """Measure again (in the background): the connection to the server was renewed."""
        if self._best is not None:
            self._sync_in_background()

    def _sync_in_background(self) -> None:
        with self._lock:
            if self._syncing:
                return
            self._syncing = True
        threading.Thread(target=self._background_sync, name="umt-clock-sync",
                         daemon=True).start()

    def _background_sync(self) -> None:
        try:
            self.sync()
        except Exception as exc:  # the store's errors: keep the last measurement, try later
            log.debug("could not measure the server's clock: %s", exc)
            with self._lock:
                self._next_sync = elapsed() + min(5.0, self._resync_every)
        finally:
            with self._lock:
                self._syncing = False

    @staticmethod
    def _at(sample: ClockSample, moment: float) -> datetime:
        return sample.server + timedelta(seconds=moment - sample.received)


#: How to stop a host's clock from drifting (the skew warning of workers and ``umt doctor``).
SKEW_FIX = ("synchronise this host's clock over NTP (install chrony, or enable "
            "systemd-timesyncd: timedatectl set-ntp true)")


def skew_bound(lease: timedelta) -> timedelta:
    """An offset beyond which a host's clock is worth fixing: umt coordinates on the server's
    time and keeps working, but such a host's logs and local times mislead."""
    return lease / 4


def clock_offset(clock: Clock) -> timedelta | None:
    """How far the server's clock is from this host's (``None``: the clock is this host's)."""
    return clock.sample.offset if isinstance(clock, ServerClock) else None
