"""One clock for the fleet: worker processes whose clocks are 45 s ahead of and 45 s behind the
PostgreSQL server's (libfaketime) share runs as if their clocks agreed.

Both pose as workers on hosts of their own, so that the only way one takes the other's runs is
the lease. The lease is 4 s (a skew of 45 s would make every lease look expired to the worker
ahead, and a takeover 45 s late to the one behind); 50 runs of 3 steps with a 2 s sleep.
"""

from __future__ import annotations

import signal
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

import pytest

from tests.engine.conftest import wait_until
from tests.engine.test_processes import (
    STEPS_WORKFLOW,
    Business,
    WorkerProcess,
    Workers,
    all_settled,
    business,
    per_step,
    running_attempt,
    workers,
)
from tests.support.faketime import shifted
from umt.engine import Engine, RunStatus

pytestmark = [pytest.mark.slow, pytest.mark.postgres_only]

__all__ = ["business", "workers"]  # fixtures of test_processes used here

LEASE = 4.0
RUNS = 50
NAP = timedelta(seconds=2)
SKEW = 45


def registered(engine: Engine, *processes: WorkerProcess) -> dict[int, str]:
    """Waits until the processes' workers are registered; returns their ids by pid."""
    def find() -> dict[int, str] | None:
        for process in processes:
            assert process.alive(), process.log_text()
        ids = {worker.pid: worker.id for worker in engine.live_workers()}
        return ids if all(process.pid in ids for process in processes) else None

    return wait_until(find, 30, interval=0.1, message="workers registered")


def server_now(business: Business) -> datetime:
    with business.engine.database.autocommit() as session:
        [row] = session.execute(business.effects.queries["server_now"])
    now: datetime = row["now"]
    return now


def execution_times(business: Business) -> list[dict[str, Any]]:
    with business.engine.database.autocommit() as session:
        return session.execute(business.effects.queries["execution_times"])


def test_workers_45s_ahead_and_behind_share_runs_by_the_servers_clock(
    engine: Engine, business: Business, workers: Workers, db_url: str
) -> None:
    ahead = workers.start(db_url, lease=LEASE, host="ahead", env=shifted(+SKEW))
    behind = workers.start(db_url, lease=LEASE, host="behind", env=shifted(-SKEW))
    ids = registered(engine, ahead, behind)

    # each host says that its clock is off, with the fix
    for process, skew in ((ahead, "+45"), (behind, "-45")):
        warning = wait_until(lambda p=process: next(
            (line for line in p.log_text().splitlines() if "off the database server's" in line),
            None), 10, message="the skew warning")
        assert f"clock is {skew}." in warning and "NTP" in warning, warning

    nap = {"after": 1, "duration": f"{NAP.total_seconds():g}s"}
    run_ids = [engine.start(STEPS_WORKFLOW, {"steps": 3, "nap": nap}).run.id
               for _ in range(RUNS)]
    runs = all_settled(engine, run_ids, timeout=180)
    assert {run.status for run in runs} == {RunStatus.SUCCEEDED}, [r.error for r in runs]

    # no takeover while both live: each run was claimed twice (before and after its nap), and
    # every attempt was the first and succeeded
    assert sum(run.lease_epoch - 2 for run in runs) == 0, [run.lease_epoch for run in runs]
    attempts = [a for run_id in run_ids for a in engine.attempts(run_id)]
    assert Counter((a.status, a.attempt) for a in attempts) == {("succeeded", 1): 3 * RUNS}
    assert {a.worker_id for a in attempts} == set(ids.values()), "both workers took part"

    # no duplicate effect, no body run twice
    every_step = {(run_id, f"s{n}"): 1 for run_id in run_ids for n in (1, 2, 3)}
    assert per_step(business.effect_rows()) == every_step
    assert per_step(business.executions()) == every_step

    # every nap was asked 2 s after its step by the server's clock (to within the worker's
    # measurement of it: its round trip, more while the machine is busy), and woke no earlier
    # than asked by the server's clock (nor later by a skew)
    started = {(row["run_id"], row["step"]): row["executed_at"]
               for row in execution_times(business)}
    for run_id in run_ids:
        [sleep] = [step for step in engine.steps(run_id) if step.name == "nap"]
        assert sleep.wake_at is not None
        asked = sleep.wake_at - started[(run_id, "s1")]
        assert NAP - timedelta(milliseconds=100) <= asked < NAP + timedelta(seconds=LEASE), asked
        woke = started[(run_id, "s2")] - sleep.wake_at
        assert timedelta(0) <= woke < timedelta(seconds=LEASE), (run_id, woke)

    # kill -9 of the worker ahead mid-step: the one behind takes over when the lease expires
    # by the server's clock, not 45 s later (nor earlier)
    behind.send(signal.SIGSTOP)  # so that the worker ahead claims the next run
    try:
        hold = {"step": "s2", "seconds": 120, "epoch": 1}
        run_id = engine.start(STEPS_WORKFLOW, {"steps": 3, "hold": hold}).run.id
        assert running_attempt(engine, run_id, "s2").worker_id == ids[ahead.pid]
    finally:
        behind.send(signal.SIGCONT)
    ahead.send(signal.SIGKILL)
    ahead.wait_exit()
    killed_at = server_now(business)
    expires = engine.get(run_id).lease_expires_at
    assert expires is not None

    [done] = all_settled(engine, [run_id], timeout=LEASE + 60)
    assert done.status == RunStatus.SUCCEEDED
    [taken_over] = [row["executed_at"] for row in execution_times(business)
                    if row["run_id"] == run_id and row["step"] == "s2"
                    and row["worker_pid"] == behind.pid]
    assert expires <= taken_over <= expires + timedelta(seconds=1), (expires, taken_over)
    assert taken_over - killed_at <= timedelta(seconds=LEASE + 1)
    assert behind.alive()
