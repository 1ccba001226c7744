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

from umt.cli.application import Application, get_app
from umt.cli.logs import use_options
from umt.cli.params import LogFileOption, QuietOption, VerboseOption

log = logging.getLogger("umt.cli.worker")


def worker(
    ctx: typer.Context,
    concurrency: Annotated[
        int | None,
        typer.Option("--concurrency", min=1, max=64, metavar="N",
                     help="Steps run at the same time (default: engine.concurrency)."),
    ] = None,
    verbose: VerboseOption = 0,
    quiet: QuietOption = 0,
    log_file: LogFileOption = None,
) -> None:
    """Execute runs until stopped. On SIGTERM or SIGINT it stops claiming, lets the steps in
    flight finish (or hands them back after a grace period) and exits 0. Logs go to stderr
    (or --log-file).

    Every qbittorrent.reconcile_interval (1 min) it also asks qBittorrent about the torrents
    runs wait for, as 'umt resume' does: a finish the hook missed, a torrent removed or errored.

    Run one per machine under systemd (contrib/systemd); several may share a PostgreSQL
    database. It logs a line per run event (claimed, sleeping, waiting, succeeded, failed,
    canceled, released); -v adds the steps (started, finished), -q keeps warnings only.

    Example: umt worker --concurrency 2 --log-file ~/umt-worker.log
    """
    use_options(logging.INFO, verbose, quiet, log_file)
    app = get_app(ctx)
    engine = app.engine()
    options = app.app.worker_options(concurrency)
    runner = engine.worker(app.app.registry(), options)
    stop = threading.Event()
    interval = app.settings.qbittorrent.reconcile_interval
    watcher = None
    if interval is not None:
        watcher = threading.Thread(
            target=_reconcile_every, args=(app, interval.total_seconds(), stop),
            name="umt-reconcile", daemon=True,
        )
    with _stop_on_signals(stop):
        log.info("worker %s started on %s (concurrency %d); stop with SIGTERM or Ctrl-C",
                 runner.id, engine.database.describe(), options.concurrency)
        if watcher is not None:
            watcher.start()
        runner.run(stop)
    if watcher is not None:
        watcher.join(30)
    log.info("worker %s stopped", runner.id)


def _reconcile_every(app: Application, seconds: float, stop: threading.Event) -> None:
    """What 'umt resume' does for qBittorrent, every ``seconds`` while the worker runs: a
    finish missed by the hook, a torrent removed or errored, wakes its run."""
    from umt.engine import EngineError
    from umt.media.qbittorrent import QbtAdapterError
    from umt.media.reconcile import reconcile

    qbt = app.app.qbittorrent()
    while not stop.wait(seconds):
        try:
            reconcile(app.engine(), qbt)
        except (QbtAdapterError, EngineError) as exc:
            log.warning("reconciling with qBittorrent: %s; trying again in %.0fs", exc, seconds)


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
