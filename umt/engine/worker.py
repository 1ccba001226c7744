"""A worker: claims due runs of the workflows it registers and executes them on threads.

Threads: the caller's thread claims; up to ``concurrency`` executor threads run claimed runs;
one heartbeat thread extends the leases of the runs held (only while it holds some); one
fence thread stops the runs whose lease it could not extend in time; one listener thread turns
database notifications into wake-ups. Parked runs (sleeping, waiting, backing off) hold no
thread, no connection and no slot.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from umt.engine.clock import SKEW_FIX, SYSTEM_CLOCK, Clock, ServerClock, clock_offset, skew_bound
from umt.engine.context import Interrupts
from umt.engine.errors import StoreUnavailable, UnknownWorkflow
from umt.engine.execution import ExecutionSettings, Outcome, RunExecution
from umt.engine.hostinfo import ProcessIdentity, current_process, process_alive
from umt.engine.models import MAIN, RunStatus
from umt.engine.store.database import CANCEL_CHANNEL, WORK_CHANNEL, WORKERS_CHANNEL, due_run
from umt.engine.store.store import Store
from umt.engine.store.values import WORKER_TOUCH_INTERVAL, Claim, WorkerRecord
from umt.engine.workflow import Registry

log = logging.getLogger(__name__)

#: Longest wait between claim attempts while the database is unreachable: short, so that a
#: worker is back soon after a partition heals.
MAX_CLAIM_BACKOFF = 2.0


@dataclass(frozen=True)
class WorkerOptions:
    concurrency: int = 4
    #: How long a claim stays valid without a heartbeat. Other hosts wait this long before
    #: taking over the runs of a worker that vanished; this host knows at once.
    lease: timedelta = timedelta(seconds=30)
    #: Fallback poll when no notification arrives (PostgreSQL); due timers wake it earlier.
    poll_interval: timedelta = timedelta(seconds=5)
    #: On stop: how long in-flight steps may run before they are told to hand back.
    grace_period: timedelta = timedelta(seconds=10)
    progress_interval: timedelta = timedelta(seconds=1)
    #: The list of other workers on this host is re-read when one registers (PostgreSQL: its
    #: notification; SQLite: any change of the file, at most every ``sibling_recheck``), and
    #: at least this often in case such a wake-up was missed. A sibling that registered after
    #: the last reading and died is only noticed after the next one.
    sibling_refresh: timedelta = timedelta(seconds=60)
    #: SQLite, which has no notifications: how soon after a change of the file (it may be a
    #: registration) the list is re-read. Bounds the cost while the file changes all the time.
    sibling_recheck: timedelta = timedelta(seconds=5)

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if self.lease <= timedelta(0):
            raise ValueError("lease must be positive")

    @property
    def heartbeat_interval(self) -> float:
        return self.lease.total_seconds() / 3

    @property
    def self_fence_after(self) -> float:
        """A run whose lease no claim or extension has confirmed for this long is treated as
        lost: its lease can run out a sixth of a lease later at the earliest, and by then its
        step has stopped."""
        return self.lease.total_seconds() * 5 / 6

    @property
    def listener_check(self) -> float:
        """How often the listener proves its connection alive: each poll, and often enough that
        wake-ups lost to a dead connection are missed for a small part of a lease at most."""
        return min(self.poll_interval.total_seconds(), self.lease.total_seconds() / 6)


@dataclass
class DrainReport:
    executed: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)

    @property
    def failed(self) -> int:
        return self.outcomes.get(Outcome.FAILED.value, 0)


class Worker:
    def __init__(
        self,
        store: Store,
        registry: Registry,
        options: WorkerOptions | None = None,
        *,
        clock: Clock = SYSTEM_CLOCK,
        identity: ProcessIdentity | None = None,
    ) -> None:
        if not registry.keys():
            raise ValueError("a worker needs at least one workflow")
        self.store = store
        self.registry = registry
        self.options = options or WorkerOptions()
        self.clock = clock
        self.id = str(uuid.uuid4())
        self.identity = identity or current_process()
        self._executions: dict[str, RunExecution] = {}
        #: Per run held: when (time.monotonic()) the claim or lease extension was sent that
        #: the database last confirmed; the lease lasts at least ``lease`` from then.
        self._confirmed: dict[str, float] = {}
        #: Executions the self-fence gave up (once each: a canceled one keeps its reason).
        self._fenced: set[RunExecution] = set()
        #: Runs were given up because the database stopped answering: log when it answers.
        self._out_of_touch = threading.Event()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        #: A general claim (of any due run) is wanted at the next pass of the claim loop.
        self._sweep = threading.Event()
        self._sweep.set()
        #: time.monotonic() of the next general claim without a wake-up (the poll, a timer).
        self._sweep_at = float("-inf")
        #: Runs that notifications named to this worker, with their workflow keys: the next
        #: pass claims exactly these (PostgreSQL; see ``_owns``).
        self._named: dict[str, str] = {}
        #: Due runs may have been left unclaimed for want of a free slot: each slot that frees
        #: brings a general claim until one finds fewer runs than it had slots for.
        self._behind = threading.Event()
        #: Every live worker and the workflow keys it registers (PostgreSQL): who claims the
        #: run a notification names. Re-read when a worker registers or stops, or once a
        #: ``sibling_refresh`` passed.
        self._fleet: dict[str, frozenset[str]] = {}
        self._fleet_read_at = float("-inf")
        self._fleet_stale = threading.Event()
        #: Whether each pass looks for any due run, and claims again while it finds some (a
        #: drain; SQLite, which names no runs). Otherwise a worker looks on a general
        #: wake-up, at its poll or timer, and when a slot frees while it is behind.
        self._eager = not store.database.notifies
        self._keys = frozenset(registry.keys())
        self._left = False
        self._verify_leases = threading.Event()
        self._stop_heartbeat = threading.Event()
        self._abandon = threading.Event()
        self._siblings: list[WorkerRecord] = []
        self._siblings_read_at = float("-inf")  # time.monotonic() of the last reading
        #: A worker on this host registered, or notifications may have been missed: re-read.
        self._siblings_stale = threading.Event()
        #: The database changed (SQLite): re-read once ``sibling_recheck`` has passed.
        self._database_changed = threading.Event()
        self._report = DrainReport()
        #: The last (time.monotonic(), clock.now()) of the claim loop, to notice clock jumps.
        self._last_reading: tuple[float, datetime] | None = None
        #: time.monotonic() until which no run whose lease looks expired is taken over.
        self._leased_untouchable_until = float("-inf")

    # ------------------------------------------------------------------ public

    def run(self, stop: threading.Event) -> None:
        """Works until ``stop`` is set, then drains (see ``WorkerOptions.grace_period``)."""
        self._serve(stop, until_idle=False)

    def drain(self) -> DrainReport:
        """Executes runs until none is due and none is in flight (``umt resume``)."""
        done = threading.Event()
        try:
            self._serve(done, until_idle=True)
        finally:
            done.set()  # releases the thread that waits for a stop request
        return self._report

    def wake(self) -> None:
        self._sweep.set()
        self._wake.set()

    @property
    def in_flight(self) -> int:
        with self._lock:
            return len(self._executions)

    # ------------------------------------------------------------------ main loop

    def _serve(self, stop: threading.Event, *, until_idle: bool) -> None:
        self._call_until_reachable(self._register, stop)
        self._warn_about_skew()
        listener = self.store.database.listener(self.options.listener_check)
        listener.start(self._on_notification)
        heartbeat = threading.Thread(target=self._heartbeat_loop, name="umt-heartbeat",
                                     daemon=True)
        heartbeat.start()
        fence = threading.Thread(target=self._fence_loop, name="umt-fence", daemon=True)
        fence.start()
        stop_waiter = threading.Thread(target=self._forward_stop, args=(stop,),
                                       name="umt-stop-waiter", daemon=True)
        stop_waiter.start()
        try:
            self._claim_loop(stop, until_idle)
        finally:
            if self.store.database.notifies:
                self._leave()  # before draining: runs are no longer named to this worker
            self._shut_down()
            self._stop_heartbeat.set()
            self._verify_leases.set()  # the heartbeat sleeps on this event; wake it to exit
            heartbeat.join(timeout=5)
            fence.join(timeout=5)
            listener.stop()
            self._leave()

    def _forward_stop(self, stop: threading.Event) -> None:
        stop.wait()
        self._wake.set()

    def _claim_loop(self, stop: threading.Event, until_idle: bool) -> None:
        self._eager = self._eager or until_idle
        backoff = 0.5
        while not stop.is_set():
            # Read before claiming: an execution that ends while the claim query runs may have
            # made more work due (compensation, a hand-back) after the query looked.
            in_flight_before = self.in_flight
            sweep = time.monotonic() >= self._sweep_at
            if self._sweep.is_set():
                self._sweep.clear()  # before claiming: a request made meanwhile is kept
                sweep = True
            try:
                self._reap_dead_siblings()
                self._read_fleet()
                claimed = self._claim_free_slots() if sweep else self._claim_named()
                backoff = 0.5
            except StoreUnavailable as exc:
                self._sweep.set()
                self._out_of_touch.set()
                log.warning("database unavailable (%s); retrying in %.1fs", exc, backoff)
                stop.wait(backoff)
                backoff = min(backoff * 2, MAX_CLAIM_BACKOFF)
                continue
            if sweep:
                if until_idle and not claimed and in_flight_before == 0:
                    return
                if claimed and self._eager and self.in_flight < self.options.concurrency:
                    self._sweep.set()
                    continue  # there may be more due right now
                timeout = self._idle_timeout(claimed)
                self._sweep_at = time.monotonic() + timeout
            else:
                timeout = max(0.0, self._sweep_at - time.monotonic())
            self._wake.wait(timeout)
            self._wake.clear()

    def _idle_timeout(self, claimed: int) -> float:
        poll = self.options.poll_interval.total_seconds()
        if claimed or self.in_flight >= self.options.concurrency:
            return poll  # a finishing run wakes us
        try:
            next_due = self.store.next_due(self.registry.keys())
        except StoreUnavailable:
            return min(poll, 1.0)
        if next_due is None:
            return poll
        until = (next_due - self.clock.now()).total_seconds()
        return max(0.0, min(poll, until))

    def _claim_free_slots(self) -> int:
        """A general claim: any due run of the registered workflows, as many as slots are free."""
        with self._lock:
            self._named.clear()  # taken now if still due, or by another worker
        free = self.options.concurrency - self.in_flight
        if free <= 0:
            self._behind.set()
            return 0
        take_leased = self._leases_trustworthy()
        with self._lock:
            held = list(self._executions)
        asked_at = time.monotonic()
        claims = self.store.claim(
            self.id, self.registry.keys(), limit=free, lease=self.options.lease, held=held,
            take_leased=take_leased,
        )
        if len(claims) < free:
            self._behind.clear()
        else:
            self._behind.set()  # there may be more
        return self._started(claims, asked_at)

    def _claim_named(self) -> int:
        """Claims the runs notifications named to this worker, and no other: one statement,
        and none with no slot free (a slot freeing then brings a general claim, see
        ``_behind``). A run another worker took meanwhile is simply not returned."""
        with self._lock:
            named = list(self._named)
            self._named.clear()
            held = list(self._executions)
        free = self.options.concurrency - len(held)
        if len(named) > free:
            self._behind.set()
        if not named or free <= 0:
            return 0
        take_leased = self._leases_trustworthy()
        asked_at = time.monotonic()
        claims = self.store.claim_notified(
            self.id, named, self.registry.keys(), limit=free, lease=self.options.lease,
            held=held, take_leased=take_leased,
        )
        return self._started(claims, asked_at)

    def _started(self, claims: list[Claim], asked_at: float) -> int:
        if self._out_of_touch.is_set():
            self._out_of_touch.clear()
            log.warning("database reachable again; claiming")
        for claim in claims:
            self._start(claim, asked_at)
        return len(claims)

    def _leases_trustworthy(self) -> bool:
        """Whether a lease that looks expired may be taken over: not for one lease after the
        clock jumped forward (a step of the local clock on SQLite; of the server's on
        PostgreSQL; or the machine was suspended, which time.monotonic() does not count), when
        every live holder's lease looks expired until its heartbeat, due within a third of a
        lease, extends it on the new time."""
        moment, now = time.monotonic(), self.clock.now()
        if self._last_reading is not None:
            last_moment, last_now = self._last_reading
            jump = (now - last_now).total_seconds() - (moment - last_moment)
            lease = self.options.lease.total_seconds()
            if jump > lease / 4:
                log.warning("the clock jumped forward by %.1fs: runs whose lease looks expired "
                            "are left to their workers for %.1fs", jump, lease)
                self._leased_untouchable_until = moment + lease
        self._last_reading = (moment, now)
        return moment >= self._leased_untouchable_until

    def _warn_about_skew(self) -> None:
        try:
            offset = clock_offset(self.clock)
        except StoreUnavailable:
            return
        if offset is not None and abs(offset) > skew_bound(self.options.lease):
            log.warning(
                "this host's clock is %+.1fs off the database server's; umt coordinates on "
                "the server's time and keeps working, but %s",
                -offset.total_seconds(), SKEW_FIX)

    def _start(self, claim: Claim, asked_at: float) -> None:
        definition = self.registry.get(claim.run.workflow, claim.run.version)
        if definition is None:  # only registered keys are claimed
            raise UnknownWorkflow(claim.run.workflow, claim.run.version)
        execution = RunExecution(
            self.store, claim, definition, self.clock,
            ExecutionSettings(
                progress_interval=self.options.progress_interval.total_seconds(),
                abandon=self._abandon.is_set,
            ),
        )
        # A daemon thread per execution (never more than ``concurrency``): a step body that
        # ignores the stop request must not keep the process alive once its run was handed back.
        thread = threading.Thread(target=self._execute, args=(execution,),
                                  name=f"umt-run-{claim.run.id[:8]}", daemon=True)
        with self._lock:
            # Never one it executes already: the claim leaves those out (``held``).
            self._executions[claim.run.id] = execution
            self._confirmed[claim.run.id] = asked_at
        thread.start()

    def _execute(self, execution: RunExecution) -> Outcome:
        run_id = execution.fence.run_id
        outcome = Outcome.LEASE_LOST
        try:
            outcome = execution.execute()
            return outcome
        except BaseException:
            log.exception("run %s: unexpected error in the worker", run_id)
            raise
        finally:
            with self._lock:
                if self._eager or self._behind.is_set():
                    self._sweep.set()
                if self._executions.get(run_id) is execution:
                    del self._executions[run_id]
                    del self._confirmed[run_id]
                self._fenced.discard(execution)
                self._report.executed += 1
                self._report.outcomes[outcome.value] = (
                    self._report.outcomes.get(outcome.value, 0) + 1
                )
            self._wake.set()

    # ------------------------------------------------------------------ notifications

    def _on_notification(self, channel: str, payload: str) -> None:
        if channel == CANCEL_CHANNEL:
            with self._lock:
                held = payload in self._executions
            if held:
                self._verify_leases.set()
            return
        if channel == WORKERS_CHANNEL:
            # A worker registered or stopped: re-read who claims named runs now (and the list
            # of siblings if it is on this host), before the next run is named.
            self._fleet_stale.set()
            if payload == self.identity.host_key:
                self._siblings_stale.set()
            self._wake.set()
            return
        if channel == WORK_CHANNEL and (named := due_run(payload)) is not None:
            run_id, workflow_key = named
            if self._owns(run_id, workflow_key):
                with self._lock:
                    self._named[run_id] = workflow_key
                self._wake.set()
            return
        if channel == "listening":  # PostgreSQL: (re)connected; registrations may be missed
            self._siblings_stale.set()
            self._fleet_stale.set()
            if isinstance(self.clock, ServerClock):
                self.clock.resync_soon()
        if channel == "changed":  # SQLite: some other connection committed
            self._database_changed.set()
            with self._lock:
                holding = bool(self._executions)
            if holding:
                self._verify_leases.set()
        self._sweep.set()
        self._wake.set()

    def _owns(self, run_id: str, workflow_key: str) -> bool:
        """Whether this worker claims the run a notification names: of the live workers that
        register its workflow version, the one whose id hashed with the run's ranks first
        (rendezvous hashing: every worker that knows the same workers picks the same one,
        without a word between them; a worker joining or leaving moves only its own share).
        Should that worker be gone or busy, the poll of any worker claims the run."""
        if workflow_key not in self._keys:
            return False
        candidates = [worker for worker, keys in self._fleet.items() if workflow_key in keys]
        if self.id not in candidates:
            candidates.append(self.id)
        return max(candidates, key=lambda worker: _rank(worker, run_id)) == self.id

    # ------------------------------------------------------------------ leases

    def _heartbeat_loop(self) -> None:
        interval = self.options.heartbeat_interval
        next_beat = time.monotonic() + interval
        touch_every = WORKER_TOUCH_INTERVAL.total_seconds()
        next_touch = time.monotonic() + touch_every
        while not self._stop_heartbeat.is_set():
            timeout = max(0.0, next_beat - time.monotonic())
            verify_only = self._verify_leases.wait(timeout)
            if self._stop_heartbeat.is_set():
                return
            self._verify_leases.clear()
            try:
                if verify_only:
                    self._check_leases()
                    time.sleep(0.05)  # coalesce bursts of notifications
                    continue
                self._extend_leases()
                if time.monotonic() >= next_touch:
                    self.store.touch_worker(self.id)
                    next_touch = time.monotonic() + touch_every
            except StoreUnavailable as exc:
                log.warning("heartbeat: database unavailable (%s)", exc)
            next_beat = time.monotonic() + interval

    def _held(self) -> dict[str, RunExecution]:
        with self._lock:
            return dict(self._executions)

    def _extend_leases(self) -> None:
        held = self._held()
        if not held:
            return
        asked_at = time.monotonic()
        kept = self.store.extend_leases(
            self.id, {run_id: e.fence.epoch for run_id, e in held.items()}, self.options.lease
        )
        with self._lock:
            for run_id in kept:
                if self._executions.get(run_id) is held.get(run_id):
                    self._confirmed[run_id] = max(self._confirmed[run_id], asked_at)
        lost = [run_id for run_id in held if run_id not in kept]
        if lost:
            self._interrupt_lost({run_id: held[run_id] for run_id in lost})

    def _check_leases(self) -> None:
        held = self._held()
        states = self.store.lease_states(list(held))
        lost = {
            run_id: execution
            for run_id, execution in held.items()
            if (state := states.get(run_id)) is None
            or state.owner != self.id
            or state.epoch != execution.fence.epoch
        }
        if lost:
            self._interrupt_lost(lost)

    def _interrupt_lost(self, lost: dict[str, RunExecution]) -> None:
        states = self.store.lease_states(list(lost))
        for run_id, execution in lost.items():
            state = states.get(run_id)
            canceled = (
                state is not None and state.status == RunStatus.CANCELED
                and execution.fence.phase == MAIN
            )
            reason = Interrupts.CANCELED if canceled else Interrupts.LEASE_LOST
            log.info("run %s: %s", run_id, "canceled" if canceled else "lease lost")
            execution.interrupts.set(reason)

    def _fence_loop(self) -> None:
        """Self-fencing. The heartbeat may be stuck on a connection whose path is cut, so this
        thread of its own stops the steps of runs whose lease may be about to run out (see
        ``WorkerOptions.self_fence_after``) before another worker can take them over: a copy
        stops and removes its partial file, as when a run is canceled. Measured from when
        the last confirmed claim or extension was sent, on this host's monotonic clock: the
        lease the database granted lasts at least that long, whatever the clocks say."""
        limit = self.options.self_fence_after
        while not self._stop_heartbeat.wait(self._until_next_fence(limit)):
            now = time.monotonic()
            with self._lock:
                overdue = {
                    run_id: now - self._confirmed[run_id]
                    for run_id, execution in self._executions.items()
                    if now - self._confirmed[run_id] >= limit
                    and execution.interrupts.reason != Interrupts.LEASE_LOST
                    and execution not in self._fenced
                }
                executions = {run_id: self._executions[run_id] for run_id in overdue}
                self._fenced.update(executions.values())
            if not overdue:
                continue
            self._out_of_touch.set()
            log.warning("no lease extension confirmed within %.1fs (database unreachable?):"
                        " giving up %d run(s); claiming again when the database answers",
                        limit, len(overdue))
            for run_id, silent in overdue.items():
                log.warning("run %s: lease presumed lost (last confirmed %.1fs ago);"
                            " stopping its step", run_id, silent)
                executions[run_id].interrupts.set(Interrupts.LEASE_LOST)
            # The heartbeat, a progress report, a step's commit may be waiting on the cut path.
            aborted = self.store.database.abort_stuck(self.options.heartbeat_interval)
            if aborted:
                log.warning("gave up %d database statement(s) left unanswered", aborted)

    def _until_next_fence(self, limit: float) -> float:
        """Seconds until the first held run's fence falls due (it wakes on time, not up to a
        polling period late: that period would come out of the sixth of a lease a fenced step
        has to stop), at most an eighth of the heartbeat (a run claimed meanwhile)."""
        longest = self.options.heartbeat_interval / 8
        with self._lock:
            confirmed = [self._confirmed[run_id] for run_id, execution in self._executions.items()
                         if execution.interrupts.reason != Interrupts.LEASE_LOST
                         and execution not in self._fenced]
        if not confirmed:
            return longest
        return min(longest, max(0.0, min(confirmed) + limit - time.monotonic()))

    # ------------------------------------------------------------------ same-host takeover

    def _reap_dead_siblings(self) -> None:
        now = time.monotonic()
        age = now - self._siblings_read_at
        if (
            self._siblings_stale.is_set()
            or age >= self.options.sibling_refresh.total_seconds()
            or (self._database_changed.is_set()
                and age >= self.options.sibling_recheck.total_seconds())
        ):
            # Cleared before reading: a registration announced meanwhile is read next time.
            self._siblings_stale.clear()
            self._database_changed.clear()
            try:
                self._siblings = self.store.live_workers_on_host(self.id, self.identity.host_key)
            except StoreUnavailable:
                self._siblings_stale.set()
                raise
            self._siblings_read_at = now
        dead = [w for w in self._siblings if not process_alive(w.pid, w.process_start)]
        if not dead:
            return
        reclaimed = self.store.reclaim_from_dead_workers([w.id for w in dead])
        self._siblings = [w for w in self._siblings if w not in dead]
        log.info("workers %s on this host are gone; reclaimed runs %s",
                 ", ".join(w.id for w in dead), ", ".join(reclaimed) or "none")

    def _read_fleet(self) -> None:
        if not self.store.database.notifies:
            return
        age = time.monotonic() - self._fleet_read_at
        if not self._fleet_stale.is_set() and age < self.options.sibling_refresh.total_seconds():
            return
        self._fleet_stale.clear()  # before reading: a change announced meanwhile is read next
        try:
            workers = self.store.live_workers()
        except StoreUnavailable:
            self._fleet_stale.set()
            raise
        self._fleet = {worker.id: frozenset(worker.workflows) for worker in workers}
        self._fleet_read_at = time.monotonic()

    def _leave(self) -> None:
        """Records that this worker stopped claiming and tells the others, so that the runs
        notifications name go to them from now on, not to a worker that drains."""
        if self._left:
            return
        try:
            self.store.stop_worker(self.id, self.identity.host_key)
            self._left = True
        except StoreUnavailable:
            log.warning("could not record that worker %s stopped", self.id)

    def _register(self) -> None:
        self.store.register_worker(
            self.id, host_key=self.identity.host_key, hostname=self.identity.hostname,
            pid=self.identity.pid, process_start=self.identity.process_start,
            workflows=self.registry.keys(),
        )

    def _call_until_reachable(self, operation: Callable[[], None], stop: threading.Event) -> None:
        backoff = 0.5
        while True:
            try:
                operation()
                return
            except StoreUnavailable as exc:
                if stop.is_set():
                    raise
                log.warning("database unavailable (%s); retrying in %.1fs", exc, backoff)
                stop.wait(backoff)
                backoff = min(backoff * 2, 10.0)

    # ------------------------------------------------------------------ shutdown

    def _shut_down(self) -> None:
        grace_deadline = time.monotonic() + self.options.grace_period.total_seconds()
        self._wait_for_executions(grace_deadline)
        remaining = self._held()
        if not remaining:
            return
        log.info("handing back %d run(s) still in flight", len(remaining))
        for execution in remaining.values():
            execution.interrupts.set(Interrupts.STOPPING)
        self._wait_for_executions(time.monotonic() + 5.0)
        self._abandon.set()
        for run_id, execution in self._held().items():
            # The step body ignores check(): release the lease from here; the body's later
            # writes are rejected by the fence because the run no longer names this worker.
            try:
                self.store.hand_back(
                    execution.fence, execution.current_attempt_id, _parked_status(execution)
                )
                log.warning("run %s: step did not stop; lease handed back anyway", run_id)
            except Exception as exc:
                log.warning("run %s: could not hand back: %s", run_id, exc)

    def _wait_for_executions(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            with self._lock:
                if not self._executions:
                    return
            self._wake.wait(min(0.1, max(0.0, deadline - time.monotonic())))
            self._wake.clear()


def _rank(worker_id: str, run_id: str) -> bytes:
    return hashlib.blake2b(f"{worker_id} {run_id}".encode(), digest_size=8).digest()


def _parked_status(execution: RunExecution) -> str:
    return RunStatus.PENDING if execution.fence.phase == MAIN else execution.claim.run.status
