"""DBOS's peer-bench worker process (a DBOS application that only runs queued workflows).

    bench/.dbos-venv/bin/python -m bench.dbos_worker     (repository root on PYTHONPATH)

Reads ``BENCH_DB_URL`` (the DBOS system database) and ``BENCH_CONCURRENCY`` (default 10: the
``worker_concurrency`` of the working queue), registers the workflows and the two queues of
``dbos_workflows``, launches DBOS with its defaults otherwise (executor ``local``, 1 s queue
poll, LISTEN/NOTIFY for messages), prints ``READY``, and on SIGTERM destroys DBOS and exits 0.
A launch recovers the executor's PENDING workflows, so B5's idle worker takes over the 2,000
sleeping runs its predecessors left (one thread each, as DBOS runs them). DBOS does that in a
background thread after ``launch()``; ``READY`` waits until every one of them runs again, so that
B5's warm-up and window see an idle worker, not its start-up.

Optional: ``DBOS_BENCH_POLL_S`` (the queues' polling interval; default DBOS's 1 s).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from types import FrameType

from dbos import DBOS, DBOSConfig
from dbos._dbos import _get_dbos_instance
from dbos._utils import GlobalParams

from bench import dbos_workflows
from bench.dbos_workflows import APP_NAME


def main() -> None:
    url = os.environ["BENCH_DB_URL"]
    concurrency = int(os.environ.get("BENCH_CONCURRENCY", "10"))
    poll = float(os.environ.get("DBOS_BENCH_POLL_S") or 1.0)
    config: DBOSConfig = {"name": APP_NAME, "system_database_url": url, "log_level": "WARNING"}
    DBOS(config=config)
    DBOS.launch()
    DBOS.register_queue(dbos_workflows.WORKING_QUEUE, worker_concurrency=concurrency,
                        polling_interval_sec=poll, on_conflict="always_update")
    DBOS.register_queue(dbos_workflows.PARKING_QUEUE, polling_interval_sec=poll,
                        on_conflict="always_update")

    _wait_for_startup_recovery()

    stop = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    sys.stdout.write("READY\n")
    sys.stdout.flush()
    stop.wait()
    DBOS.destroy(workflow_completion_timeout_sec=0)
    # The threads of workflows still asleep would hold the interpreter's exit for an hour.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _wait_for_startup_recovery(limit_s: float = 300) -> None:
    pending = {status.workflow_id for status in DBOS.list_workflows(
        status="PENDING", executor_id=GlobalParams.executor_id, load_input=False,
        load_output=False)}
    # No public API tells that the recovery is done: the set of workflows running in this
    # process does (read only).
    active = getattr(_get_dbos_instance(), "_active_workflows_set", None)
    deadline = time.monotonic() + limit_s
    while active is not None and pending and time.monotonic() < deadline:
        if pending <= set(active.activeList()):
            return
        time.sleep(0.05)


if __name__ == "__main__":
    main()
