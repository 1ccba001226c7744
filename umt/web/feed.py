"""Tells open pages that the database changed, from the engine's own wake-ups.

One thread per web process, shared by every open page, and it reads nothing while no page
listens. SQLite: ``PRAGMA data_version`` at the engine's SQLite poll interval, exactly what an
idle worker does. PostgreSQL: the engine's LISTEN/NOTIFY listener wakes it at once; since a
finished step or copy progress notifies nobody, it also reads one cheap marker (the current
snapshot), every second while a step executes or just after a change, else at the worker's
poll interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence

from umt.engine import Engine, EngineError
from umt.engine.store.database import Listener

log = logging.getLogger(__name__)

#: How long after a change the marker is read every ``busy_interval`` (a claimed run shows as
#: running only after its claim, which notifies nobody).
HOT_AFTER_CHANGE = 10.0
#: Look this long after a run falls due: its worker claims it within a poll of the timer.
DUE_GRACE = 0.05


class ChangeFeed:
    def __init__(
        self, engine: Engine, *, sqlite_interval: float, idle_interval: float,
        busy_interval: float = 1.0, workflow_keys: Sequence[str] = (),
    ) -> None:
        self._engine = engine
        self._workflow_keys = list(workflow_keys)
        self._sqlite_interval = sqlite_interval
        self._idle_interval = idle_interval
        self._busy_interval = busy_interval
        self._subscribers: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        self._listener: Listener | None = None
        #: Counts the changes seen; pages render it so a late subscriber knows it missed one.
        self.version = 0

    def subscribe(self, event: asyncio.Event) -> None:
        """``event`` is set (in the caller's loop) after every change, until unsubscribed."""
        loop = asyncio.get_running_loop()
        with self._lock:
            self._subscribers.add((loop, event))
            if self._thread is None and not self._closed.is_set():
                self._start()
        self._wake.set()

    def unsubscribe(self, event: asyncio.Event) -> None:
        with self._lock:
            self._subscribers = {pair for pair in self._subscribers if pair[1] is not event}

    def close(self) -> None:
        self._closed.set()
        self._wake.set()
        if self._listener is not None:
            self._listener.stop()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _start(self) -> None:
        if self._engine.database.notifies:
            self._listener = self._engine.database.listener()
            self._listener.start(lambda _channel, _payload: self._wake.set())
        self._thread = threading.Thread(target=self._run, name="umt-web-feed", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        read = self._marker_reader()
        last: str | None = None
        hot_until = 0.0
        due_in: float | None = None
        while not self._closed.is_set():
            if not self._has_subscribers():
                self._wake.wait()
                self._wake.clear()
                continue
            try:
                marker, busy, due_in = read()
            except EngineError as exc:
                log.warning("umt web: cannot read the database (%s)", exc)
                marker, busy, due_in = last, False, None
            if due_in is not None and due_in <= 0:
                # A run is due: a worker claims it now, which notifies nobody.
                hot_until = max(hot_until, time.monotonic() + HOT_AFTER_CHANGE)
            if marker != last:
                # Also on the first reading: what changed before this thread looked is news
                # to the first page, which was rendered before it subscribed.
                self._publish()
                if last is not None:
                    hot_until = time.monotonic() + HOT_AFTER_CHANGE
                last = marker
            self._wake.wait(self._interval(busy, hot_until, due_in))
            self._wake.clear()

    def _marker_reader(self) -> Callable[[], tuple[str | None, bool, float | None]]:
        """(marker, a step runs now, seconds until the next run is due)."""
        database = self._engine.database
        if not database.notifies:
            from umt.engine.store.sqlite import SqliteDatabase

            assert isinstance(database, SqliteDatabase)
            return lambda: (str(database.data_version()), False, None)

        def read() -> tuple[str | None, bool, float | None]:
            marker = self._engine.change_marker(self._workflow_keys)
            due = marker.next_due
            due_in = (due - self._engine.clock.now()).total_seconds() if due else None
            return marker.marker, marker.busy, due_in

        return read

    def _interval(self, busy: bool, hot_until: float, due_in: float | None = None) -> float:
        """How long to wait before the next look: the cost of an idle worker (one look every
        poll interval), but at once when a run falls due, and every second while something
        moves without notifying (a step runs, a run was just claimed)."""
        if not self._engine.database.notifies:
            return self._sqlite_interval
        if busy or time.monotonic() < hot_until:
            return self._busy_interval
        if due_in is not None:
            return max(0.0, min(self._idle_interval, due_in + DUE_GRACE))
        return self._idle_interval

    def _has_subscribers(self) -> bool:
        with self._lock:
            return bool(self._subscribers)

    def _publish(self) -> None:
        with self._lock:
            self.version += 1
            subscribers = list(self._subscribers)
        for loop, event in subscribers:
            with contextlib.suppress(RuntimeError):  # that page's loop closed: it is going away
                loop.call_soon_threadsafe(event.set)
