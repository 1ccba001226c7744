"""A worker's life in one process: draining, stopping, handing back, registered versions."""

from __future__ import annotations

import subprocess
import threading
import time
import uuid
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest

from tests.engine.conftest import (
    FAST,
    Effects,
    IdleWaits,
    WorkerThread,
    drain,
    stop_workers,
    wait_for_status,
    wait_until,
)
from umt.engine import (
    NO_RETRY,
    Engine,
    FakeClock,
    PermanentError,
    RunStatus,
    SingleHostDatabase,
    StepContext,
    WorkerOptions,
    Workflow,
)
from umt.engine.hostinfo import current_process


def _one_step(ctx: Any, value: Any) -> Any:
    return ctx.step("only", lambda step: value)


ONE_STEP = Workflow("one-step", "1", _one_step)


def _threads() -> set[threading.Thread]:
    return {thread for thread in threading.enumerate() if thread.is_alive()}


def _assert_no_thread_left(before: set[threading.Thread]) -> None:
    """Threads the worker started are gone after a short while."""

    def leftovers() -> set[str]:
        return {t.name for t in _threads() - before}

    deadline = time.monotonic() + 3
    while leftovers() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert leftovers() == set()


def test_a_drained_worker_leaves_no_thread_behind(engine: Engine) -> None:
    # Default options: a 30 s lease, so a heartbeat that only notices the stop at its next
    # beat (every 10 s) would outlive the worker.
    engine.start(ONE_STEP, 1)  # also opens the connection pool, whose threads stay
    before = _threads()
    report = engine.worker([ONE_STEP], WorkerOptions()).drain()
    assert report.executed == 1
    _assert_no_thread_left(before)


def test_a_stopped_worker_leaves_no_thread_behind(engine: Engine) -> None:
    run = engine.start(ONE_STEP, 1).run
    before = _threads()
    worker = WorkerThread(engine.worker([ONE_STEP], WorkerOptions())).start()
    wait_for_status(engine, run.id, RunStatus.SUCCEEDED)
    worker.stop()
    _assert_no_thread_left(before)


def test_stop_lets_a_step_finish_within_the_grace_period(
    engine: Engine, effects: Effects
) -> None:
    started, shutting_down, release = threading.Event(), threading.Event(), threading.Event()

    def body(step: Any) -> str:
        started.set()
        release.wait(60)  # ends only once the worker is shutting down; never calls check()
        effects.record(step)
        return "done"

    workflow = Workflow("graceful", "1", lambda ctx, _: ctx.step("slow", body))
    run = engine.start(workflow).run
    roomy = replace(FAST, grace_period=timedelta(minutes=2))
    worker = WorkerThread(engine.worker([workflow], roomy))
    shut_down = worker.worker._shut_down

    def shutting() -> None:
        shutting_down.set()
        shut_down()

    worker.worker._shut_down = shutting  # type: ignore[method-assign]
    worker.start()
    assert started.wait(20)
    worker.stop_event.set()
    assert shutting_down.wait(20), "the worker never began its shutdown"
    release.set()
    worker.stop()

    finished = engine.get(run.id)
    assert finished.status == RunStatus.SUCCEEDED
    assert effects.count(run.id) == 1


def test_stop_hands_back_a_step_that_outlasts_the_grace_period(
    engine: Engine, effects: Effects
) -> None:
    started = threading.Event()
    interrupted: list[BaseException] = []

    def body(step: Any) -> str:
        if step.attempt == 1 and not started.is_set():
            started.set()
            try:
                while True:
                    step.sleep(0.05)  # checks; raises WorkerStopping once asked to hand back
            except BaseException as exc:
                interrupted.append(exc)
                raise
        effects.record(step)
        return "finished elsewhere"

    workflow = Workflow("handed-back", "1", lambda ctx, _: ctx.step("long", body))
    run = engine.start(workflow).run
    first = WorkerThread(engine.worker([workflow], FAST)).start()
    assert started.wait(20)
    first.stop()

    assert [type(exc).__name__ for exc in interrupted] == ["WorkerStopping"]
    handed = engine.get(run.id)
    assert handed.status == RunStatus.PENDING
    assert handed.lease_owner is None
    assert handed.due_at is not None
    attempts = engine.attempts(run.id)
    assert [a.status for a in attempts] == ["handed_back"]

    # due at once: the next worker does not wait for a lease to expire
    assert drain(engine, [workflow], WorkerOptions(lease=timedelta(minutes=10))).executed == 1
    assert engine.get(run.id).status == RunStatus.SUCCEEDED
    assert [a.status for a in engine.attempts(run.id)] == ["handed_back", "succeeded"]
    # a hand-back is not a failure: the retry attempt number does not move
    assert [a.attempt for a in engine.attempts(run.id)] == [1, 1]
    assert effects.count(run.id) == 1


def test_a_worker_claims_only_the_versions_it_registers(engine: Engine) -> None:
    v1 = Workflow("versioned", "1", _one_step)
    v2 = Workflow("versioned", "2", _one_step)
    old = engine.start(v1, "old").run
    new = engine.start(v2, "new").run

    report = drain(engine, [v2])

    assert report.executed == 1
    assert engine.get(new.id).status == RunStatus.SUCCEEDED
    untouched = engine.get(old.id)
    assert untouched.status == RunStatus.PENDING
    assert untouched.lease_epoch == 0 and untouched.error is None
    assert engine.attempts(old.id) == []

    assert drain(engine, [v1]).executed == 1
    assert engine.get(old.id).status == RunStatus.SUCCEEDED


def test_drain_also_executes_what_its_own_executions_made_due(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run that fails makes its compensation due at once; the pass must not end before it,
    even when the execution finishes while the pass is asking the database for more work."""

    def run(ctx: Any, _: Any) -> None:
        ctx.step("fail", _fail_now, retry=NO_RETRY)

    def compensate(ctx: Any, _: Any) -> None:
        ctx.step("undo", lambda step: "undone")

    claim = engine.store.claim
    workflow = Workflow("fails-then-undoes", "1", run, compensate=compensate)
    started = engine.start(workflow).run

    def slow_claim(*args: Any, **kwargs: Any) -> Any:
        claims = claim(*args, **kwargs)
        if not claims:  # a slow answer: the execution in flight finishes meanwhile
            wait_until(lambda: engine.get(started.id).status == RunStatus.FAILED,
                       message="the execution in flight failed the run")
        return claims

    monkeypatch.setattr(engine.store, "claim", slow_claim)

    drain(engine, [workflow])

    done = engine.get(started.id)
    assert (done.status, done.compensation) == (RunStatus.FAILED, "succeeded")


def _fail_now(step: Any) -> None:
    raise PermanentError("fails at once")


# ---------------------------------------------------------------------------- leases


def test_the_heartbeat_keeps_a_long_step_leased(
    engine: Engine, clocked: Engine, clock: FakeClock, run_worker: Any
) -> None:
    """A step lasting 1.5 times the lease is not taken over by an eager second worker. The
    lease runs on a fake clock that the step moves forward half a lease at a time, each time
    once a heartbeat has extended the lease past the new time: no machine is too slow."""
    lease = FAST.lease.total_seconds()

    def long(step: StepContext) -> int:
        for _ in range(3):
            clock.advance(timedelta(seconds=lease / 2))
            wanted = clock.now() + timedelta(seconds=lease * 3 / 4)

            def extended(wanted: datetime = wanted) -> bool:
                expires = engine.get(step.run_id).lease_expires_at
                return expires is not None and expires >= wanted

            wait_until(extended, message="a heartbeat extending the lease")
        return step.lease_epoch

    workflow = Workflow("long", "1", lambda ctx, _: ctx.step("long", long))
    run = clocked.start(workflow).run
    workers = [WorkerThread(clocked.worker([workflow], FAST)).start() for _ in range(2)]
    try:
        done = wait_for_status(engine, run.id, RunStatus.SUCCEEDED, timeout=60)
    finally:
        stop_workers(workers)
    assert done.output == 1 and done.lease_epoch == 1
    assert [a.status for a in engine.attempts(run.id)] == ["succeeded"]


def test_a_worker_whose_own_lease_ran_out_takes_the_run_over_once(
    engine: Engine, run_worker: Any
) -> None:
    """A worker starved of heartbeats (a frozen process) claims its own run again: the stale
    execution stops and the new one keeps its lease; the run is not claimed over and over."""
    heartbeats_back = threading.Event()

    def long(step: StepContext) -> int:
        while not heartbeats_back.is_set():  # outlasts the lease, however slow the machine
            step.sleep(0.1)
        return step.lease_epoch

    workflow = Workflow("starved", "1", lambda ctx, _: ctx.step("long", long))
    run = engine.start(workflow).run
    thread = run_worker([workflow])
    real_extend = thread.worker._extend_leases

    def frozen_then_back() -> None:
        if heartbeats_back.is_set():
            real_extend()

    thread.worker._extend_leases = frozen_then_back  # type: ignore[method-assign]
    wait_until(lambda: engine.get(run.id).lease_epoch >= 2, timeout=60,
               message="the worker claiming its own run again")
    heartbeats_back.set()

    done = wait_for_status(engine, run.id, RunStatus.SUCCEEDED, timeout=30)
    assert done.output == 2, "finished by the second claim, which kept its lease"
    # The worker fences itself before its lease runs out (lease_lost); on a starved machine the
    # second claim may get there first and find the attempt still running (interrupted).
    first, second = (a.status for a in engine.attempts(run.id))
    assert first in ("lease_lost", "interrupted") and second == "succeeded"


def test_progress_is_persisted_with_the_attempt(engine: Engine, run_worker: Any) -> None:
    reported = threading.Event()
    release = threading.Event()

    def copy(step: Any) -> str:
        step.progress(512, 1024, file="movie.mkv")
        reported.set()
        release.wait(20)
        step.progress(1024, 1024, file="movie.mkv")
        return "copied"

    workflow = Workflow("progress", "1", lambda ctx, _: ctx.step("copy", copy))
    run = engine.start(workflow).run
    run_worker([workflow])
    assert reported.wait(20)
    [attempt] = engine.attempts(run.id)
    assert attempt.status == "running"
    assert attempt.progress == {"done": 512, "total": 1024, "file": "movie.mkv"}
    assert attempt.progress_at is not None
    release.set()
    wait_for_status(engine, run.id, RunStatus.SUCCEEDED)
    [attempt] = engine.attempts(run.id)
    assert attempt.progress == {"done": 1024, "total": 1024, "file": "movie.mkv"}


def test_progress_is_rate_limited_but_the_last_report_goes_through(
    engine: Engine, effects: Effects
) -> None:
    def copy(step: StepContext) -> str:
        for done in range(1, 1001):
            step.progress(done, 1000)
            if done == 999:
                persisted = engine.attempts(step.run_id)[0].progress
                assert persisted is not None and persisted["done"] < 999
        return "copied"

    workflow = Workflow("chatty", "1", lambda ctx, _: ctx.step("copy", copy))
    run = engine.start(workflow).run
    drain(engine, [workflow], WorkerOptions(progress_interval=timedelta(minutes=1)))
    assert engine.get(run.id).status == RunStatus.SUCCEEDED, engine.get(run.id).error
    assert engine.attempts(run.id)[0].progress == {"done": 1000, "total": 1000}


def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def _held_by_ghost(engine: Engine, workflow: Workflow, *, host: str, pid: int,
                   process_start: str, lease: timedelta,
                   hostname: str = current_process().hostname) -> str:
    """A run claimed by a registered worker that then did nothing more (it is dead, or not)."""
    run = engine.start(workflow).run
    ghost = str(uuid.uuid4())
    engine.store.register_worker(ghost, host_key=host, hostname=hostname, pid=pid,
                                 process_start=process_start, workflows=[workflow.key])
    [claim] = engine.store.claim(ghost, [workflow.key], limit=1, lease=lease)
    engine.store.begin_step(claim.fence, 0, "only")
    return run.id


def test_a_dead_worker_on_this_host_is_taken_over_at_once(
    clocked: Engine, clock: FakeClock
) -> None:
    run_id = _held_by_ghost(clocked, ONE_STEP, host=current_process().host_key,
                            pid=_dead_pid(), process_start="", lease=timedelta(hours=1))
    assert drain(clocked, [ONE_STEP]).executed == 1  # no clock move: the lease is untouched
    assert clocked.get(run_id).status == RunStatus.SUCCEEDED
    assert [a.status for a in clocked.attempts(run_id)] == ["interrupted", "succeeded"]


def test_a_live_worker_on_this_host_keeps_its_runs(clocked: Engine, clock: FakeClock) -> None:
    me = current_process()
    run_id = _held_by_ghost(clocked, ONE_STEP, host=me.host_key, pid=me.pid,
                            process_start=me.process_start, lease=timedelta(minutes=1))
    assert drain(clocked, [ONE_STEP]).executed == 0
    clock.advance(timedelta(minutes=1, seconds=1))
    assert drain(clocked, [ONE_STEP]).executed == 1
    assert clocked.get(run_id).status == RunStatus.SUCCEEDED


def test_a_reused_pid_is_not_mistaken_for_the_dead_worker(
    clocked: Engine, clock: FakeClock
) -> None:
    me = current_process()
    run_id = _held_by_ghost(clocked, ONE_STEP, host=me.host_key, pid=me.pid,
                            process_start="1", lease=timedelta(hours=1))  # started long ago
    assert drain(clocked, [ONE_STEP]).executed == 1
    assert clocked.get(run_id).status == RunStatus.SUCCEEDED


@pytest.mark.postgres_only
def test_a_worker_on_another_host_waits_for_the_lease(clocked: Engine, clock: FakeClock) -> None:
    run_id = _held_by_ghost(clocked, ONE_STEP, host="elsewhere/boot/1", pid=_dead_pid(),
                            process_start="", lease=timedelta(minutes=1), hostname="elsewhere")
    assert drain(clocked, [ONE_STEP]).executed == 0
    assert clocked.get(run_id).status == RunStatus.RUNNING
    clock.advance(timedelta(seconds=59))
    assert drain(clocked, [ONE_STEP]).executed == 0
    clock.advance(timedelta(seconds=2))
    assert drain(clocked, [ONE_STEP]).executed == 1
    assert [a.status for a in clocked.attempts(run_id)] == ["interrupted", "succeeded"]


@pytest.mark.sqlite_only
def test_an_sqlite_database_refuses_a_worker_while_one_on_another_host_is_alive(
    clocked: Engine, clock: FakeClock
) -> None:
    run_id = clocked.start(ONE_STEP).run.id
    clocked.store.register_worker(str(uuid.uuid4()), host_key="nas/boot/1", hostname="nas",
                                  pid=4242, process_start="", workflows=[ONE_STEP.key])
    with pytest.raises(SingleHostDatabase, match=r"worker on host 'nas'.*use PostgreSQL"):
        drain(clocked, [ONE_STEP])
    assert clocked.get(run_id).status == RunStatus.PENDING  # nothing was claimed

    clock.advance(timedelta(minutes=2))  # unheard of for longer than WORKER_PRESUMED_GONE
    assert drain(clocked, [ONE_STEP]).executed == 1


@pytest.mark.sqlite_only
def test_a_worker_from_before_a_reboot_of_this_host_does_not_block_sqlite(
    clocked: Engine,
) -> None:
    me = current_process()
    clocked.store.register_worker(str(uuid.uuid4()), host_key=f"{me.hostname}/old-boot/0",
                                  hostname=me.hostname, pid=4242, process_start="",
                                  workflows=[ONE_STEP.key])
    clocked.start(ONE_STEP)
    assert drain(clocked, [ONE_STEP]).executed == 1


@pytest.mark.postgres_only
def test_postgresql_serves_workers_on_several_hosts(clocked: Engine) -> None:
    clocked.store.register_worker(str(uuid.uuid4()), host_key="nas/boot/1", hostname="nas",
                                  pid=4242, process_start="", workflows=[ONE_STEP.key])
    clocked.start(ONE_STEP)
    assert drain(clocked, [ONE_STEP]).executed == 1


def test_a_new_run_wakes_an_idle_worker(engine: Engine) -> None:
    slow_poll = WorkerOptions(lease=FAST.lease, poll_interval=timedelta(minutes=10),
                              grace_period=FAST.grace_period)
    worker = engine.worker([ONE_STEP], slow_poll)
    waits = IdleWaits.watch(worker)
    serving = WorkerThread(worker).start()
    try:
        assert waits.idle.wait(30), "the worker never went idle"
        run = engine.start(ONE_STEP, "wake").run
        wait_for_status(engine, run.id, RunStatus.SUCCEEDED)
    finally:
        serving.stop()
    assert waits.ended and all(waits.ended), "a poll timeout, not the new run, woke the worker"
