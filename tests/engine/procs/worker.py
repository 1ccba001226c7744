"""A worker process for the multi-process tests.

    python -m tests.engine.procs.worker --db URL --workflows steps,versioned@1 --log FILE

SIGTERM or SIGINT stops it the way ``umt worker`` stops: no more claims, a grace period for
in-flight steps, then their runs are handed back; the exit code is 0.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from datetime import timedelta

from tests.engine.procs.workflows import build
from tests.support.faketime import sleep_on_condition_variables
from umt.engine import Engine, Registry, Worker, WorkerOptions, open_database
from umt.engine.hostinfo import ProcessIdentity, current_process


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--workflows", required=True, help="comma-separated")
    parser.add_argument("--variant", default="")
    parser.add_argument("--log", required=True)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--lease", type=float, default=2.0)
    parser.add_argument("--poll", type=float, default=0.2)
    parser.add_argument("--grace", type=float, default=1.0)
    parser.add_argument("--host", default="",
                        help="pose as a worker on this other host (no same-host takeover)")
    args = parser.parse_args(argv)
    if os.environ.get("FAKETIME"):
        sleep_on_condition_variables()

    logging.basicConfig(
        filename=args.log, level=logging.INFO,
        format="%(asctime)s %(process)d %(threadName)s %(levelname)s %(name)s: %(message)s",
    )
    log = logging.getLogger("tests.engine.procs.worker")
    stop = threading.Event()

    def request_stop(signum: int, _frame: object) -> None:
        log.info("received %s: stopping", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)

    engine = Engine(open_database(args.db, pool_size=args.concurrency + 2))
    try:
        workflows = build(args.workflows.split(","), engine.database, args.variant)
        options = WorkerOptions(
            concurrency=args.concurrency, lease=timedelta(seconds=args.lease),
            poll_interval=timedelta(seconds=args.poll),
            grace_period=timedelta(seconds=args.grace),
        )
        worker = Worker(engine.store, Registry(workflows), options, clock=engine.clock,
                        identity=_identity(args.host))
        log.info("worker %s (pid %d) serves %s", worker.id, os.getpid(), args.workflows)
        worker.run(stop)
        log.info("worker %s exits", worker.id)
    except BaseException:
        log.exception("worker failed")
        raise
    finally:
        engine.close()
    return 0


def _identity(host: str) -> ProcessIdentity:
    me = current_process()
    if not host:
        return me
    return ProcessIdentity(f"{host}/simulated", host, me.pid, me.process_start)


if __name__ == "__main__":
    sys.exit(main())
