"""The four peer-bench workflows (see peer-bench's README, "Workflow contract") for DBOS.

Runs in the DBOS venv (``bench/.dbos-venv``), not in the project's: umt does not depend on
DBOS. Each workflow takes the harness's input object as its one argument.
"""

from __future__ import annotations

import time
from typing import Any

from dbos import DBOS

#: The DBOS application (the worker) and the client acting for it.
APP_NAME = "umt-bench"

#: Logical name (as the harness sends it) -> the name DBOS registers the workflow under.
WORKFLOW_NAMES = {
    "noop6": "bench-noop6",
    "wait_signal": "bench-wait-signal",
    "sleep_short": "bench-sleep-short",
    "sleep_long": "bench-sleep-long",
}

#: Queues (registered by the worker, named by the client). A DBOS workflow keeps its
#: ``worker_concurrency`` slot while it sleeps or waits in ``recv``, so the workflows that park
#: (20 signal waits in B2, 2,000 one-hour sleeps in B5) go to a queue without a limit, DBOS's
#: default; the others to one limited to the worker's ``BENCH_CONCURRENCY``.
WORKING_QUEUE = "bench"
PARKING_QUEUE = "bench-parking"
QUEUE_OF = {
    "noop6": WORKING_QUEUE,
    "sleep_short": WORKING_QUEUE,
    "wait_signal": PARKING_QUEUE,
    "sleep_long": PARKING_QUEUE,
}

SIGNAL_TIMEOUT_S = 3600
LONG_SLEEP_S = 3600


def now_ms() -> float:
    """Wall-clock epoch milliseconds with sub-millisecond resolution."""
    return time.time_ns() / 1e6


@DBOS.step(name="noop")
def _noop(i: int) -> dict[str, Any]:
    return {"i": i, "ok": True}


@DBOS.step(name="now")
def _now() -> float:
    return now_ms()


@DBOS.workflow(name=WORKFLOW_NAMES["noop6"])
def noop6(_input: Any = None) -> Any:
    last = None
    for i in range(6):
        last = _noop(i)
    return last


@DBOS.workflow(name=WORKFLOW_NAMES["wait_signal"])
def wait_signal(input_value: Any) -> Any:
    received = DBOS.recv(input_value["signal"], timeout_seconds=SIGNAL_TIMEOUT_S)
    return {"received": received, "t1": _now()}


@DBOS.workflow(name=WORKFLOW_NAMES["sleep_short"])
def sleep_short(input_value: Any = None) -> Any:
    duration = (input_value or {}).get("duration", "1s")
    t0 = _now()
    DBOS.sleep(_seconds(duration))
    return {"t0": t0, "t1": _now()}


@DBOS.workflow(name=WORKFLOW_NAMES["sleep_long"])
def sleep_long(_input: Any = None) -> Any:
    DBOS.sleep(LONG_SLEEP_S)
    return {"ok": True}


def _seconds(duration: str) -> float:
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    for suffix in ("ms", "s", "m", "h"):
        if duration.endswith(suffix):
            return float(duration[: -len(suffix)]) * units[suffix]
    return float(duration)
