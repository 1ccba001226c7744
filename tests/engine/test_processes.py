"""The engine with real worker processes: kill -9, SIGSTOP/SIGCONT, SIGTERM, two workers on
one database, a PostgreSQL restart, and workers of different versions.

Workers run ``tests/engine/procs/worker.py``; their step bodies write ``executions`` (how often
a body started, unfenced) and ``effects`` (the business write, fenced, committed with the step's
result). Every process is killed when its test ends.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.engine.conftest import Effects, wait_for_status, wait_until
from tests.engine.procs.workflows import STEPS, definition
from tests.support.postgres import PostgresCluster
from umt.engine import Engine, Run, RunStatus, StoreUnavailable, open_database
from umt.engine.hostinfo import host_key
from umt.engine.store.values import NO_WORKER

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
T = TypeVar("T")
STEPS_WORKFLOW = definition(STEPS)


@dataclass
class WorkerProcess:
    popen: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def send(self, signum: signal.Signals) -> None:
        os.kill(self.pid, signum)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def wait_exit(self, timeout: float = 30) -> int:
        return self.popen.wait(timeout)


class Workers:
    """Starts worker processes; kills every one of them afterwards."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.started: list[WorkerProcess] = []

    def start(self, db_url: str, workflows: str = STEPS, *, variant: str = "",
              lease: float = 2.0, concurrency: int = 4, grace: float = 1.0, host: str = "",
              env: dict[str, str] | None = None) -> WorkerProcess:
        """``host``: the worker poses as one on that host; ``env``: added to its environment."""
        log = self.tmp_path / f"worker-{len(self.started) + 1}.log"
        command = [
            sys.executable, "-m", "tests.engine.procs.worker", "--db", db_url,
            "--workflows", workflows, "--variant", variant, "--log", str(log),
            "--lease", str(lease), "--concurrency", str(concurrency), "--grace", str(grace),
            "--poll", "0.2", "--host", host,
        ]
        popen = subprocess.Popen(command, cwd=REPO, stdin=subprocess.DEVNULL,
                                 env={**os.environ, **(env or {})})
        process = WorkerProcess(popen, log)
        self.started.append(process)
        return process

    def kill_all(self) -> None:
        for process in self.started:
            if process.alive():
                with contextlib.suppress(ProcessLookupError):
                    process.send(signal.SIGCONT)
                    process.send(signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.popen.wait(10)
            tail = "\n".join(process.log_text().splitlines()[-30:])
            print(f"--- {process.log.name} (pid {process.pid}) ---\n{tail}")


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    started = Workers(tmp_path)
    try:
        yield started
    finally:
        started.kill_all()


@dataclass
class Business:
    effects: Effects

    @property
    def engine(self) -> Engine:
        return self.effects.engine

    def executions(self) -> list[dict[str, Any]]:
        with self.engine.database.autocommit() as session:
            return session.execute(self.effects.queries["executions"])

    def effect_rows(self, run_id: str | None = None) -> list[dict[str, Any]]:
        return self.effects.rows(run_id)


@pytest.fixture
def business(effects: Effects) -> Business:
    with effects.engine.database.transaction() as session:
        session.execute(effects.queries["create_executions"])
    return Business(effects)


def registered(engine: Engine, process: WorkerProcess, timeout: float = 30) -> str:
    """Waits until the process's worker is registered; returns its id."""
    def find() -> str | None:
        assert process.alive(), process.log_text()
        for record in engine.store.live_workers_on_host(NO_WORKER, host_key()):
            if record.pid == process.pid:
                return record.id
        return None

    return wait_until(find, timeout, interval=0.1, message=f"worker {process.pid} registered")


def running_attempt(engine: Engine, run_id: str, step: str, timeout: float = 30) -> Any:
    def find() -> Any:
        return next((a for a in engine.attempts(run_id)
                     if a.step_name == step and a.status == "running"), None)

    return wait_until(find, timeout, message=f"step {step} of {run_id} running")


def all_settled(engine: Engine, run_ids: list[str], timeout: float) -> list[Run]:
    def done() -> list[Run] | None:
        runs = [engine.get(run_id) for run_id in run_ids]
        return runs if all(run.finished for run in runs) else None

    return wait_until(done, timeout, interval=0.2, message=f"{len(run_ids)} runs finished")


def per_step(rows: list[dict[str, Any]]) -> Counter[tuple[str, str]]:
    return Counter((row["run_id"], row["step"]) for row in rows)


def _steps_input(steps: int = 6, **extra: Any) -> dict[str, Any]:
    return {"steps": steps, **extra}


# ---------------------------------------------------------------------------- kill -9


def test_kill_9_mid_step_then_a_restart_on_the_same_host_resumes_at_once(
    engine: Engine, business: Business, workers: Workers, db_url: str
) -> None:
    first = workers.start(db_url, lease=60)
    first_id = registered(engine, first)
    hold = {"step": "s2", "seconds": 120, "epoch": 1}
    run = engine.start(STEPS_WORKFLOW, _steps_input(hold=hold)).run
    running_attempt(engine, run.id, "s2")
    held_until = engine.get(run.id).lease_expires_at  # at least this long: heartbeats extend it

    first.send(signal.SIGKILL)
    first.wait_exit()
    second = workers.start(db_url, lease=60)

    [done] = all_settled(engine, [run.id], timeout=120)
    assert done.status == RunStatus.SUCCEEDED
    retried = [a for a in engine.attempts(run.id) if a.step_name == "s2"][-1]
    assert held_until is not None and retried.started_at < held_until, (
        "the restart waited for the dead worker's 60 s lease instead of noticing its death")

    # completed steps were not re-run; the interrupted one ran again, on the new worker
    ran = per_step(business.executions())
    assert ran == {(run.id, f"s{n}"): 2 if n == 2 else 1 for n in range(1, 7)}
    effects = business.effect_rows(run.id)
    assert per_step(effects) == {(run.id, f"s{n}"): 1 for n in range(1, 7)}
    assert [row["worker_pid"] for row in effects] == [first.pid] + [second.pid] * 5
    s2 = [a for a in engine.attempts(run.id) if a.step_name == "s2"]
    assert [(a.worker_id == first_id, a.status, a.attempt) for a in s2] == [
        (True, "interrupted", 1), (False, "succeeded", 1),
    ]
    assert second.alive()


def test_a_running_worker_takes_over_from_a_sibling_that_started_after_it_and_died(
    engine: Engine, business: Business, workers: Workers, db_url: str
) -> None:
    """Same host, but the survivor was already running when the dead worker registered."""
    survivor = workers.start(db_url, lease=60)
    registered(engine, survivor)
    warm_up = engine.start(STEPS_WORKFLOW, _steps_input(1)).run
    all_settled(engine, [warm_up.id], timeout=20)  # the survivor is in its claim loop
    survivor.send(signal.SIGSTOP)  # so that the newcomer gets the run
    newcomer = workers.start(db_url, lease=60)
    registered(engine, newcomer)
    hold = {"step": "s2", "seconds": 120, "epoch": 1}
    run = engine.start(STEPS_WORKFLOW, _steps_input(hold=hold)).run
    running_attempt(engine, run.id, "s2")
    survivor.send(signal.SIGCONT)

    newcomer.send(signal.SIGKILL)
    newcomer.wait_exit()

    [done] = all_settled(engine, [run.id], timeout=20)  # not the 60 s lease
    assert done.status == RunStatus.SUCCEEDED
    effects = business.effect_rows(run.id)
    assert [row["worker_pid"] for row in effects] == [newcomer.pid] + [survivor.pid] * 5


# ---------------------------------------------------------------------------- SIGSTOP


def test_a_frozen_worker_resumed_after_a_takeover_commits_nothing(
    engine: Engine, business: Business, workers: Workers, db_url: str
) -> None:
    frozen = workers.start(db_url, lease=2, concurrency=1)
    frozen_id = registered(engine, frozen)
    # The first step holds for 3 s on the first claim only, without calling check(), then
    # tries progress and a direct fenced write, then returns its result. On the second claim
    # it holds for 8 s: the frozen worker's writes come while the new owner is in that step.
    hold = [{"step": "s1", "seconds": 3, "epoch": 1, "check": False},
            {"step": "s1", "seconds": 8, "epoch": 2, "check": True}]
    run = engine.start(STEPS_WORKFLOW, _steps_input(hold=hold)).run
    running_attempt(engine, run.id, "s1")
    frozen.send(signal.SIGSTOP)

    taker = workers.start(db_url, lease=2)
    taker_id = registered(engine, taker)
    wait_until(lambda: [a for a in engine.attempts(run.id)
                        if a.worker_id == taker_id and a.status == "running"],
               timeout=30, message="the new owner inside the first step")

    frozen.send(signal.SIGCONT)
    wait_until(lambda: "refused: direct transaction" in frozen.log_text(), timeout=20,
               message="the frozen worker tried its writes")
    wait_until(lambda: "lease lost" in frozen.log_text(), timeout=20,
               message="the frozen worker's step result was refused")
    # refused by the fence, not because the new owner had finished the step already
    assert engine.steps(run.id)[0].status == "running"

    [done] = all_settled(engine, [run.id], timeout=30)
    assert done.status == RunStatus.SUCCEEDED

    log = frozen.log_text()
    assert "refused: progress" in log and "progress accepted" not in log
    assert "direct transaction accepted" not in log
    # the business table holds exactly the new owner's rows
    effects = business.effect_rows(run.id)
    assert {(row["worker_pid"], row["lease_epoch"]) for row in effects} == {
        (taker.pid, done.lease_epoch)
    }
    # the new owner's own hold wrote directly once, and every step wrote with its result
    assert [(row["step"], row["note"]) for row in effects] == [("s1", "direct")] + [
        (f"s{n}", "with the result") for n in range(1, 7)
    ]
    # the frozen body did run (it just could not commit)
    assert (run.id, "s1", frozen.pid) in {
        (row["run_id"], row["step"], row["worker_pid"]) for row in business.executions()
    }
    s1 = [a for a in engine.attempts(run.id) if a.step_name == "s1"]
    assert [(a.worker_id == frozen_id, a.status) for a in s1] == [
        (True, "interrupted"), (False, "succeeded"),
    ]
    assert s1[0].progress is None
    assert engine.steps(run.id)[0].result["pid"] == taker.pid
    assert frozen.alive()  # it lost a run, not its life


# ---------------------------------------------------------------------------- two workers


def test_two_worker_processes_run_every_step_body_exactly_once(
    engine: Engine, business: Business, workers: Workers, db_url: str
) -> None:
    # A long lease: under this load a heartbeat may be late, and a legitimate takeover
    # would re-run a body (at-least-once), which is not what this test is about.
    processes = [workers.start(db_url, lease=30) for _ in range(2)]
    for process in processes:
        registered(engine, process)
    runs = [engine.start(STEPS_WORKFLOW, _steps_input(n=n)).run for n in range(200)]

    finished = all_settled(engine, [run.id for run in runs], timeout=180)

    assert Counter(run.status for run in finished) == {RunStatus.SUCCEEDED: 200}
    expected = {(run.id, f"s{n}"): 1 for run in runs for n in range(1, 7)}
    executions = business.executions()
    assert per_step(executions) == expected
    assert per_step(business.effect_rows()) == expected
    assert {row["worker_pid"] for row in executions} == {p.pid for p in processes}
    assert all(process.alive() for process in processes)


# ---------------------------------------------------------------------------- SIGTERM


def test_sigterm_hands_back_an_in_flight_step_and_exits_0(
    engine: Engine, business: Business, workers: Workers, db_url: str
) -> None:
    stopping = workers.start(db_url, lease=60, grace=1)
    stopping_id = registered(engine, stopping)
    hold = {"step": "s2", "seconds": 120, "epoch": 1, "check": True}
    run = engine.start(STEPS_WORKFLOW, _steps_input(hold=hold)).run
    running_attempt(engine, run.id, "s2")

    stopping.send(signal.SIGTERM)

    assert stopping.wait_exit(timeout=30) == 0
    handed = engine.get(run.id)
    assert handed.status == RunStatus.PENDING and handed.lease_owner is None
    s2 = [a for a in engine.attempts(run.id) if a.step_name == "s2"]
    assert [(a.worker_id, a.status) for a in s2] == [(stopping_id, "handed_back")]
    assert stopping_id not in {
        r.id for r in engine.store.live_workers_on_host(NO_WORKER, host_key())
    }

    workers.start(db_url, lease=60)
    [done] = all_settled(engine, [run.id], timeout=20)  # no wait for the 60 s lease
    assert done.status == RunStatus.SUCCEEDED
    assert per_step(business.effect_rows(run.id)) == {(run.id, f"s{n}"): 1 for n in range(1, 7)}
    assert per_step(business.executions())[(run.id, "s2")] == 2


def test_sigterm_hands_back_even_a_step_that_never_checks(
    engine: Engine, business: Business, workers: Workers, db_url: str
) -> None:
    stopping = workers.start(db_url, lease=60, grace=1)
    stopping_id = registered(engine, stopping)
    hold = {"step": "s2", "seconds": 120, "epoch": 1, "check": False}
    run = engine.start(STEPS_WORKFLOW, _steps_input(hold=hold)).run
    running_attempt(engine, run.id, "s2")

    stopping.send(signal.SIGTERM)

    assert stopping.wait_exit(timeout=30) == 0  # not after the step's 120 s
    handed = engine.get(run.id)
    assert handed.status == RunStatus.PENDING and handed.lease_owner is None
    s2 = [a for a in engine.attempts(run.id) if a.step_name == "s2"]
    assert [(a.worker_id, a.status) for a in s2] == [(stopping_id, "handed_back")]
    workers.start(db_url, lease=60)
    [done] = all_settled(engine, [run.id], timeout=20)
    assert done.status == RunStatus.SUCCEEDED
    assert per_step(business.effect_rows(run.id)) == {(run.id, f"s{n}"): 1 for n in range(1, 7)}


# ---------------------------------------------------------------------------- versions


def test_workers_claim_only_their_versions_and_stop_a_run_whose_code_drifted(
    engine: Engine, business: Business, workers: Workers, db_url: str
) -> None:
    v1, v2, v3 = (definition(f"versioned@{n}") for n in (1, 2, 3))
    old = workers.start(db_url, "versioned@1")
    new = workers.start(db_url, "versioned@2")
    registered(engine, old)
    registered(engine, new)
    first = engine.start(v1).run
    second = engine.start(v2).run
    orphan = engine.start(v3).run
    for run in (first, second):
        wait_for_status(engine, run.id, RunStatus.WAITING)
    assert {a.step_name for a in engine.attempts(first.id)} == {"submit"}

    old.send(signal.SIGTERM)
    assert old.wait_exit() == 0
    assert engine.signal(f"go:{first.id}").delivered_to == (first.id,)
    assert engine.signal(f"go:{second.id}").delivered_to == (second.id,)
    wait_until(lambda: engine.get(second.id).status == RunStatus.SUCCEEDED,
               message="the version 2 run finished")

    # the version 2 worker polled for a while and never touched the others: no churn
    epoch_of_first = engine.get(first.id).lease_epoch
    for _ in range(10):
        time.sleep(0.2)
        assert engine.get(first.id).status == RunStatus.PENDING
        assert engine.get(first.id).lease_epoch == epoch_of_first
        assert engine.get(orphan.id).lease_epoch == 0
    assert engine.attempts(orphan.id) == []
    assert engine.get(orphan.id).status == RunStatus.PENDING
    assert engine.get(first.id).error is None

    # version 1 is deployed again with a completed step renamed, the version unchanged
    workers.start(db_url, "versioned@1", variant="renamed")
    [failed] = all_settled(engine, [first.id], timeout=20)
    assert failed.status == RunStatus.FAILED
    assert failed.error is not None and failed.error["type"] == "ReplayDrift"
    assert "step 0" in failed.error["message"]
    assert "'submit'" in failed.error["message"]
    assert "'submit-renamed'" in failed.error["message"]
    ran = per_step(business.executions())
    assert ran[(first.id, "submit")] == 1
    assert ran[(first.id, "submit-renamed")] == 0 and ran[(first.id, "finish")] == 0
    assert engine.get(orphan.id).lease_epoch == 0


# ---------------------------------------------------------------------------- PostgreSQL restart


def _tolerant(condition: Callable[[], T]) -> Callable[[], T | None]:
    """The test's own connections break too when the server restarts."""
    def attempt() -> T | None:
        try:
            return condition()
        except StoreUnavailable:
            return None

    return attempt


@pytest.mark.postgres_only
def test_a_postgresql_restart_loses_and_duplicates_no_run(
    backend: str, pg_private_cluster: PostgresCluster, workers: Workers
) -> None:
    pg_private_cluster.create_database("restarts")
    db_url = pg_private_cluster.url("restarts")
    engine = Engine(open_database(db_url))
    try:
        engine.migrate()
        business = Business(Effects(engine))
        with engine.database.transaction() as session:
            session.execute(business.effects.queries["create_executions"])
        processes = [workers.start(db_url, lease=10) for _ in range(2)]
        for process in processes:
            registered(engine, process)

        def statuses(run_ids: list[str]) -> Counter[str]:
            wanted = set(run_ids)  # one query: N lookups let a fast batch finish meanwhile
            return Counter(run.status for run in engine.list_runs(limit=10_000)
                           if run.id in wanted)

        # 1. during a sleep
        nap = {"after": 1, "duration": "3s"}
        sleepers = [engine.start(STEPS_WORKFLOW, _steps_input(3, nap=nap, n=n)).run.id
                    for n in range(5)]
        wait_until(_tolerant(lambda: statuses(sleepers) == {"sleeping": 5}),
                   message="all runs sleeping")
        pg_private_cluster.restart()
        wait_until(_tolerant(lambda: statuses(sleepers) == {"succeeded": 5}), timeout=60,
                   message="sleepers finished after the restart")

        # 2. during a busy batch: 300 runs, each with a 2 s sleep half-way, so that the batch is
        # still executing steps and waking sleepers when the first runs have finished
        size = 300
        mid_nap = {"after": 3, "duration": "2s"}
        batch = [engine.start(STEPS_WORKFLOW, _steps_input(n=n, nap=mid_nap)).run.id
                 for n in range(size)]
        wait_until(_tolerant(lambda: statuses(batch)["succeeded"] >= 5), timeout=60,
                   message="the batch under way")
        assert statuses(batch)["succeeded"] < size, "the batch finished before the restart"
        pg_private_cluster.restart()
        wait_until(_tolerant(lambda: statuses(batch) == {"succeeded": size}), timeout=180,
                   message="the batch finished after the restart")

        assert all(process.alive() for process in processes)
        expected = {(run_id, f"s{n}"): 1 for run_id in sleepers for n in range(1, 4)}
        expected.update({(run_id, f"s{n}"): 1 for run_id in batch for n in range(1, 7)})
        assert per_step(business.effect_rows()) == expected
        assert set(per_step(business.executions())) == set(expected)
        assert len(engine.list_runs(limit=10_000)) == len(sleepers) + size
        for process in processes:
            log = process.log_text()
            assert "database unavailable" in log or "lost the connection" in log or (
                "notification listener lost its connection" in log
            )
    finally:
        engine.close()
