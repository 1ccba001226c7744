"""The test harness's own guarantee: a worker thread that crashes or hangs fails its test."""

from __future__ import annotations

import threading
from typing import Any, cast

import pytest

from tests.engine.conftest import WorkerThread, stop_workers


class CrashingWorker:
    def run(self, stop: threading.Event) -> None:
        raise RuntimeError("the worker's loop blew up")


class ObedientWorker:
    def run(self, stop: threading.Event) -> None:
        stop.wait()


class DeafWorker:
    """Ignores the stop request until released."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def run(self, stop: threading.Event) -> None:
        self.release.wait()


def thread_of(worker: object) -> WorkerThread:
    return WorkerThread(cast(Any, worker)).start()


def test_a_crashed_worker_fails_the_teardown_even_when_another_one_stopped_cleanly() -> None:
    crashed = thread_of(CrashingWorker())
    crashed.thread.join(5)
    healthy = thread_of(ObedientWorker())

    with pytest.raises(AssertionError, match=r"crashed.*blew up"):
        stop_workers([healthy, crashed])
    assert not healthy.thread.is_alive()


def test_a_worker_that_does_not_stop_fails_the_teardown() -> None:
    deaf = DeafWorker()
    hanging = thread_of(deaf)
    try:
        with pytest.raises(AssertionError, match="did not stop"):
            stop_workers([hanging], timeout=0.2)
    finally:
        deaf.release.set()
        hanging.thread.join(5)


def test_workers_that_stop_cleanly_pass_the_teardown() -> None:
    stop_workers([thread_of(ObedientWorker()), thread_of(ObedientWorker())])
