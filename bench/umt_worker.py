"""umt's peer-bench worker process.

    python -m bench.umt_worker          (with the repository root on PYTHONPATH)

Reads ``BENCH_DB_URL`` and ``BENCH_CONCURRENCY`` (default 10), prints ``READY`` once it is
registered and listening for notifications (on SQLite, which has no listener, at once), works
until SIGTERM (or SIGINT), then stops the way a umt worker stops (drain, record the stop) and
exits 0. The harness starts it with ``exec`` and
measures the CPU of this very process.

Optional: ``UMT_BENCH_POOL_SIZE`` (connections; default concurrency + 2),
``UMT_BENCH_POLL_S`` (the worker's fallback poll interval; default: umt's),
``UMT_BENCH_WORKER_SYNCHRONOUS_COMMIT`` (``off``: an experiment, see bench/README.md).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from dataclasses import replace
from datetime import timedelta
from types import FrameType
from typing import Any

from bench.umt_workflows import WORKFLOWS
from umt.engine import Engine, Registry, Worker, WorkerOptions, open_database


class BenchWorker(Worker):
    """A umt worker that tells when its notification listener is up (the harness's READY)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.listening = threading.Event()

    def _on_notification(self, channel: str, payload: str) -> None:
        if channel == "listening":  # PostgresListener: LISTEN is in place
            self.listening.set()
        super()._on_notification(channel, payload)


def main() -> int:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    url = os.environ["BENCH_DB_URL"]
    concurrency = int(os.environ.get("BENCH_CONCURRENCY", "10"))
    pool_size = int(os.environ.get("UMT_BENCH_POOL_SIZE", str(concurrency + 2)))
    options = WorkerOptions(concurrency=concurrency)
    if poll := os.environ.get("UMT_BENCH_POLL_S"):
        options = replace(options, poll_interval=timedelta(seconds=float(poll)))

    if sync := os.environ.get("UMT_BENCH_WORKER_SYNCHRONOUS_COMMIT"):
        # An experiment, not umt's behaviour: the worker's own transactions (claims, steps,
        # parking) stop waiting for the WAL flush; submits and signals (the driver) still do.
        separator = "&" if "?" in url else "?"
        url = f"{url}{separator}options=-c%20synchronous_commit%3D{sync}"
    engine = Engine(open_database(url, pool_size=pool_size))
    engine.require_schema()  # the driver migrates, once
    worker = BenchWorker(engine.store, Registry(WORKFLOWS.values()), options, clock=engine.clock)
    if engine.database.dialect != "postgresql":
        worker.listening.set()  # SQLite has no listener: its workers poll the file's version

    stop = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    def announce() -> None:
        while not worker.listening.wait(0.5):
            if stop.is_set():
                return
        sys.stdout.write("READY\n")
        sys.stdout.flush()

    threading.Thread(target=announce, name="bench-ready", daemon=True).start()
    try:
        worker.run(stop)
    finally:
        engine.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
