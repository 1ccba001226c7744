"""The fleet's clock: the PostgreSQL server's time, read once and then followed on this host's
elapsed time; SQLite keeps the machine's clock."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from tests.engine.conftest import wait_until
from umt.engine import SYSTEM_CLOCK, Engine
from umt.engine.clock import ClockSample, ServerClock, clock_offset, elapsed, skew_bound

SERVER = datetime(2031, 5, 1, 12, 0, tzinfo=UTC)


class FakeServer:
    """Answers clock readings; each reading's round trip is the next of ``trips`` (seconds)."""

    def __init__(self, skew: timedelta, trips: list[float]) -> None:
        self.skew = skew
        self.trips = trips
        self.readings = 0
        self.lock = threading.Lock()
        self.fail = False

    def read(self) -> ClockSample:
        with self.lock:
            if self.fail:
                raise OSError("server gone")
            trip = self.trips[self.readings % len(self.trips)]
            self.readings += 1
        received = elapsed()
        sent = received - trip
        local = SYSTEM_CLOCK.now() - timedelta(seconds=trip / 2)
        # the server read its clock somewhere during the trip: here, at its very start
        return ClockSample(local + self.skew - timedelta(seconds=trip / 2), sent, received, local)


def test_the_time_is_the_servers_never_ahead_of_it() -> None:
    server = FakeServer(timedelta(seconds=-45), [0.002])
    clock = ServerClock(server.read)
    local = SYSTEM_CLOCK.now()
    now = clock.now()
    offset = clock_offset(clock)
    assert offset is not None and abs(offset + timedelta(seconds=45)) < timedelta(seconds=0.01)
    # the server's time (45 s behind), read at most a round trip late: never ahead of it
    assert local - timedelta(seconds=45.01) <= now <= SYSTEM_CLOCK.now() - timedelta(seconds=45)


def test_the_reading_with_the_shortest_round_trip_is_kept() -> None:
    server = FakeServer(timedelta(0), [0.5, 0.001, 0.3])
    clock = ServerClock(server.read, samples=3)
    assert clock.sample.round_trip == pytest.approx(0.001)
    assert server.readings == 3


def test_it_follows_monotonic_time_between_measurements() -> None:
    server = FakeServer(timedelta(hours=2), [0.0])
    clock = ServerClock(server.read, samples=1)
    first = clock.now()
    time.sleep(0.05)
    second = clock.now()
    assert timedelta(seconds=0.05) <= second - first < timedelta(seconds=1)
    assert server.readings == 1  # no round trip per reading


def test_it_is_measured_again_in_the_background_and_survives_a_failed_measurement() -> None:
    server = FakeServer(timedelta(0), [0.0])
    clock = ServerClock(server.read, samples=1, resync_every=0.05)
    clock.now()
    server.fail = True
    time.sleep(0.06)
    before = clock.now()  # the old measurement still answers while a new one fails
    assert before <= SYSTEM_CLOCK.now()
    server.fail = False
    wait_until(lambda: clock.now() and server.readings >= 2, 10, interval=0.02,
               message="a measurement in the background")
    clock.resync_soon()
    wait_until(lambda: server.readings >= 3, 10, interval=0.02,
               message="a measurement after a reconnection")


def test_the_skew_bound_is_a_quarter_of_the_lease() -> None:
    assert skew_bound(timedelta(seconds=30)) == timedelta(seconds=7.5)


def test_the_engine_takes_the_backends_clock(engine: Engine) -> None:
    if engine.database.dialect == "sqlite":
        assert engine.clock is SYSTEM_CLOCK and clock_offset(engine.clock) is None
        return
    assert isinstance(engine.clock, ServerClock)
    assert engine.store.clock is engine.clock
    offset = clock_offset(engine.clock)
    assert offset is not None and abs(offset) < timedelta(seconds=1)  # the same host
    queries = engine.database.query_set("tests.engine")
    before = engine.clock.now()
    with engine.database.autocommit() as session:
        [row] = session.execute(queries["server_now"])
    assert before <= row["now"]  # never ahead of the server
