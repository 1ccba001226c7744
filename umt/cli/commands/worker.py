"""umt worker: execute runs until SIGTERM or SIGINT, then drain and exit 0."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Annotated

import typer

from umt.cli.application import get_app
from umt.cli.logs import set_level

log = logging.getLogger("umt.cli.worker")


def worker(
    ctx: typer.Context,
    concurrency: Annotated[
        int | None,
        typer.Option("--concurrency", min=1, max=64, metavar="N",
                     help="Steps run at the same time (default: engine.concurrency)."),
    ] = None,
) -> None:
    """Execute runs until stopped. On SIGTERM or SIGINT it stops claiming, lets the steps in
    flight finish (or hands them back after a grace period) and exits 0. Logs go to stderr.

    Run one per machine under systemd; several may share a PostgreSQL database.

    Example: umt worker --concurrency 2
    """
    app = get_app(ctx)
    set_level(logging.INFO)
    engine = app.engine()
    options = app.app.worker_options(concurrency)
    runner = engine.worker(app.app.registry(), options)
    stop = threading.Event()
    with _stop_on_signals(stop):
        log.info("worker %s started on %s (concurrency %d); stop with SIGTERM or Ctrl-C",
                 runner.id, engine.database.describe(), options.concurrency)
        runner.run(stop)
    log.info("worker %s stopped", runner.id)


@contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    def request_stop(signum: int, _frame: FrameType | None) -> None:
        if stop.is_set():
            log.info("already stopping; waiting for the steps in flight")
            return
        log.info("%s received: finishing the steps in flight, then exiting",
                 signal.Signals(signum).name)
        stop.set()

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
