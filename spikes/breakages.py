"""Named breakages: each removes one guarantee of umt, so that the spike scenario guarding it can
be seen to FAIL (``tests/test_spikes.py``). They live here, on the test side: umt's own modules
hold no test-only branch.

``UMT_ENGINE_BREAK=name[,name…]`` in the environment of ``python -m spikes`` reaches every umt
process the spikes start; ``spikes.umt_cli`` (the entry point they all go through while it is
set) calls :func:`install` before umt is imported any further, and each breakage replaces one
seam by monkeypatching. ``seam`` names what is replaced; a function imported by name elsewhere
in umt is replaced there too. A breakage marked ``in_spikes`` is also installed in the
``python -m spikes`` process itself, for a guarantee a scenario exercises there through umt's
engine API (h starts runs inside the application's own transaction).
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import pkgutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BREAK_ENV = "UMT_ENGINE_BREAK"


@dataclass(frozen=True)
class Breakage:
    name: str
    #: The guarantee that is gone.
    breaks: str
    #: What is monkeypatched.
    seam: str
    install: Callable[[], None]
    #: Also installed in the ``python -m spikes`` process itself: the guarantee is one that a
    #: scenario exercises there, through umt's engine API (``install_in_spikes``).
    in_spikes: bool = False


BREAKAGES: dict[str, Breakage] = {}


Installer = Callable[[], None]


def breakage(name: str, breaks: str, seam: str,
             *, in_spikes: bool = False) -> Callable[[Installer], Installer]:
    def register(install: Callable[[], None]) -> Callable[[], None]:
        BREAKAGES[name] = Breakage(name, breaks, seam, install, in_spikes)
        return install

    return register


def parse(spec: str) -> list[str]:
    names = [part.strip() for part in spec.split(",") if part.strip()]
    unknown = [name for name in names if name not in BREAKAGES]
    if unknown:
        raise SystemExit(f"{BREAK_ENV}: unknown breakage(s) {', '.join(unknown)}; known: "
                         + ", ".join(sorted(BREAKAGES)))
    return names


def install(spec: str) -> list[str]:
    """Installs the breakages named in ``spec`` (comma separated) in this process."""
    names = parse(spec)
    for name in names:
        BREAKAGES[name].install()
    return names


def install_in_spikes(spec: str) -> list[str]:
    """Installs, in the ``python -m spikes`` process, those of ``spec`` marked ``in_spikes``."""
    names = [name for name in parse(spec) if BREAKAGES[name].in_spikes]
    for name in names:
        BREAKAGES[name].install()
    return names


# ---------------------------------------------------------------------- patching helpers


def _modules_of(package: str) -> list[Any]:
    root = importlib.import_module(package)
    found = [root]
    for info in pkgutil.walk_packages(root.__path__, prefix=f"{package}."):
        found.append(importlib.import_module(info.name))
    return found


def _replace_function(module_name: str, name: str, make: Callable[[Any], Any]) -> None:
    """``module.name = make(original)``, and the same in every umt module that imported the
    original by name (``from module import name``)."""
    original = getattr(importlib.import_module(module_name), name)
    replacement = make(original)
    for package in ("umt.engine", "umt.records", "umt.media"):
        _modules_of(package)
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("umt") and (
                getattr(module, name, None) is original):
            setattr(module, name, replacement)


def _replace_method(package: str, name: str, make: Callable[[Any], Any]) -> None:
    """Replaces method ``name`` on every class of ``package`` that defines it (wherever a
    refactoring moved the class)."""
    patched = 0
    for module in _modules_of(package):
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and name in vars(cls):
                setattr(cls, name, make(vars(cls)[name]))
                patched += 1
    if not patched:
        raise SystemExit(f"{BREAK_ENV}: no class in {package} defines {name}")


# ---------------------------------------------------------------------- engine


@breakage("fencing", "a worker that lost its run may still commit (the fence accepts it)",
          "the engine store's Fencing: a refused fence is replaced by the holder's, and the "
          "operation runs again with it")
def _fencing() -> None:
    from umt.engine.errors import LeaseLost
    from umt.engine.store.fencing import Fencing
    from umt.engine.store.values import NO_WORKER, Fence

    def holder(session: Any, fence: Any) -> Any:
        row = session.row("lease_of_run", run_id=fence.run_id)
        if row is None:
            raise LeaseLost(f"run {fence.run_id} no longer exists")
        return Fence(fence.run_id, row["lease_owner"] or NO_WORKER, int(row["lease_epoch"]),
                     fence.phase)

    def refused(self: Any, session: Any, fence: Any) -> None:
        holder(session, fence)  # a fenced transaction goes on as if it still held the run

    def fenced_row(self: Any, session: Any, query_name: str, fence: Any, params: Any) -> Any:
        for attempt in (fence, None):
            used = attempt or holder(session, fence)
            row = session.row(query_name, **self._fence_key(used), phase=fence.phase, **params,
                              work_channel=self._work_channel)
            if row is not None:
                return row
        raise LeaseLost(f"run {fence.run_id} is not held by any worker")

    Fencing._refused = refused  # type: ignore[method-assign]
    Fencing._fenced_row = fenced_row  # type: ignore[method-assign]


@breakage("mailbox", "a kept signal is never consumed by a run that starts waiting for it",
          "the store session's row(): the named query wait_for_signal runs with take_kept false")
def _mailbox() -> None:
    def make(original: Any) -> Any:
        def row(self: Any, query_name: str, /, **params: object) -> Any:
            if query_name == "wait_for_signal":
                params["take_kept"] = False
            return original(self, query_name, **params)

        return row

    _replace_method("umt.engine.store", "row", make)


@breakage("determinism", "replay does not compare the code's steps with the recorded ones",
          "umt.engine.execution.RunExecution._next: ReplayDrift swallowed")
def _determinism() -> None:
    from umt.engine.errors import ReplayDrift
    from umt.engine.execution import RunExecution

    original = RunExecution._next

    def _next(self: Any, name: str, kind: str) -> Any:
        try:
            return original(self, name, kind)
        except ReplayDrift:
            self._drift = None
            position = self._position - 1
            count = self._name_counts[name]
            unique = name if count == 1 else f"{name}#{count}"
            return position, unique, self.claim.steps.get(position)

    RunExecution._next = _next  # type: ignore[method-assign]


@breakage("versions", "a worker claims runs of any version of its workflows and runs them "
          "with the version it has", "umt.engine.Registry.keys and Registry.get")
def _versions() -> None:
    from umt.engine.workflow import Registry

    known_keys = Registry.keys
    known_get = Registry.get

    def keys(self: Registry) -> list[str]:
        names = {key.rsplit("@", 1)[0] for key in known_keys(self)}
        return sorted({*known_keys(self), *(f"{n}@{v}" for n in names for v in range(1, 10))})

    def get(self: Registry, name: str, version: str) -> Any:
        found = known_get(self, name, version)
        return found if found is not None else next(
            (w for w in self if w.name == name), None)

    Registry.keys = keys  # type: ignore[method-assign]
    Registry.get = get  # type: ignore[method-assign]


@breakage("reaping", "a worker does not notice that a worker on its own host died: the run "
          "waits for the dead worker's lease", "umt.engine.worker.Worker._reap_dead_siblings")
def _reaping() -> None:
    from umt.engine.worker import Worker

    Worker._reap_dead_siblings = lambda self: None  # type: ignore[method-assign]


@breakage("no-self-fence", "a worker cut off from the database goes on with runs it may no "
          "longer hold", "umt.engine.worker.Worker._fence_loop")
def _no_self_fence() -> None:
    from umt.engine.worker import Worker

    Worker._fence_loop = lambda self: None  # type: ignore[method-assign]


@breakage("deaf-listener", "the LISTEN connection never proves it is alive: a lost server side "
          "goes unnoticed", "umt.engine.store.postgres._round_trip")
def _deaf_listener() -> None:
    from umt.engine.store import postgres

    postgres._round_trip = lambda connection, *, deadline: None


@breakage("retries", "a failing step is retried without limit (max_attempts ignored)",
          "umt.engine.RetryPolicy.allows_another")
def _retries() -> None:
    from umt.engine.retry import RetryPolicy

    RetryPolicy.allows_another = lambda self, failures: True  # type: ignore[method-assign]


@breakage("idempotency", "starting a run ignores its idempotency key (a duplicate run)",
          "umt.engine.Engine.start: idempotency_key dropped")
def _idempotency() -> None:
    from umt.engine.engine import Engine

    original = Engine.start

    def start(self: Engine, *args: Any, **kwargs: Any) -> Any:
        kwargs["idempotency_key"] = None
        return original(self, *args, **kwargs)

    Engine.start = start  # type: ignore[method-assign]


# ---------------------------------------------------------------------- acquisitions


def _deaf_import_file(**replaced: Any) -> None:
    """``import_file`` that no longer hears that its step was interrupted: ``check`` does
    nothing and ``progress`` swallows the interruption it reports; ``replaced``: more
    arguments overridden."""
    from umt.engine.errors import StepInterrupted

    def deaf(progress: Any) -> Any:
        def report(*args: Any, **kwargs: Any) -> None:
            with contextlib.suppress(StepInterrupted):
                progress(*args, **kwargs)

        return report

    def make(original: Any) -> Any:
        def import_file(*args: Any, **kwargs: Any) -> Any:
            kwargs = {**kwargs, "check": lambda: None, "progress": deaf(kwargs["progress"]),
                      **replaced}
            return original(*args, **kwargs)

        return import_file

    _replace_function("umt.media.importing", "import_file", make)


@breakage("uncancelable-copy", "an import does not stop when its run is canceled",
          "umt.media.importing.import_file: check= ignored, progress= deaf to interruptions")
def _uncancelable_copy() -> None:
    _deaf_import_file()


@breakage("unfenced-publish", "a worker that lost its run copies on and publishes its file "
          "(no fenced write before the rename; the new owner leaves the old writer's temporary "
          "file alone, which would otherwise stop that rename as well)",
          "umt.media.importing.import_file: check= ignored, progress= deaf to interruptions, "
          "before_rename= dropped; umt.media.importing.remove_stray_partial: only a writer's "
          "own")
def _unfenced_publish() -> None:
    _deaf_import_file(before_rename=None)

    def make(original: Any) -> Any:
        def remove_stray_partial(dest: Path, owner: str | None = None) -> bool:
            return bool(original(dest, owner)) if owner is not None else False

        return remove_stray_partial

    _replace_function("umt.media.importing", "remove_stray_partial", make)


@breakage("no-recovery", "a re-executed import does not recognise the file it finished",
          "umt.media.importing.holds_import: always False")
def _no_recovery() -> None:
    _replace_function("umt.media.importing", "holds_import",
                      lambda original: lambda *args, **kwargs: False)


@breakage("discard-finished", "compensation also deletes the run's finished imports",
          "umt.media.library.discard_partial_imports: then unlinks every file the ledger "
          "records as imported")
def _discard_finished() -> None:
    from umt.records import ledger

    def make(original: Any) -> Any:
        def discard_partial_imports(step: Any) -> Any:
            removed = original(step)
            for entry in ledger.entries_of_this_run(step):
                path = (entry.detail or {}).get("path")
                if entry.operation.startswith("copy:") and path and entry.phase in (
                        ledger.DONE, ledger.VERIFIED):
                    Path(path).unlink(missing_ok=True)
            return removed

        return discard_partial_imports

    _replace_function("umt.media.library", "discard_partial_imports", make)


@breakage("path-claims", "two runs may import to the same library path: a run's claim on "
          "its destination is never taken", "umt.records.claims.claim: does nothing")
def _path_claims() -> None:
    _replace_function("umt.records.claims", "claim", lambda original: lambda *args: None)


@breakage("double-claim", "two workers may claim the same run: the claim ignores the lease "
          "(and, on PostgreSQL, the row locks of other claims)",
          "the block claim_due, as loaded by QuerySet.from_text: `due_at <= now` becomes "
          "`due_at IS NOT NULL` and `FOR UPDATE SKIP LOCKED` is dropped")
def _double_claim() -> None:
    import re

    from umt.engine.store.queries import QuerySet

    #: in the block claim_due of each dialect: the lease condition, and what replaces it
    broken = [(re.compile(r"\b(WHERE|AND) due_at <= (%\(now\)s|:now)"), r"\1 due_at IS NOT NULL"),
              (re.compile(r"\nFOR UPDATE SKIP LOCKED;"), ";")]
    original = QuerySet.from_text.__func__  # type: ignore[attr-defined]

    def from_text(cls: type[QuerySet], text: str, origin: str) -> QuerySet:
        head = "-- name: claim_due\n"
        if head in text:
            start = text.index(head)
            end = text.index("\n-- name: ", start + len(head))
            block = text[start:end]
            lease = broken[0][0].subn(broken[0][1], block)
            if lease[1] != 1:
                raise SystemExit(f"{BREAK_ENV}=double-claim: claim_due changed in {origin}")
            block = broken[1][0].sub(broken[1][1], lease[0])
            text = text[:start] + block + text[end:]
        return original(cls, text, origin)  # type: ignore[no-any-return]

    QuerySet.from_text = classmethod(from_text)  # type: ignore[method-assign,assignment]


@breakage("apart-step-writes", "a step's business statements commit apart from its result "
          "(after it, in a transaction of their own)",
          "the engine store's complete_step: the result alone, then the statements")
def _apart_step_writes() -> None:
    def make(original: Any) -> Any:
        def complete_step(self: Any, fence: Any, position: int, attempt_id: int, result: Any,
                          statements: Any = ()) -> None:
            original(self, fence, position, attempt_id, result)
            if statements:
                with self.database.transaction() as session:
                    for statement in statements:
                        session.execute(statement.query, statement.params)

        return complete_step

    _replace_method("umt.engine.store", "complete_step", make)


@breakage("unjoined-start", "Engine.start given the caller's session commits on its own: the "
          "run exists even if the caller's transaction rolls back",
          "umt.engine.Engine.joined: a transaction of the engine's own, not the caller's",
          in_spikes=True)
def _unjoined_start() -> None:
    from collections.abc import Iterator

    from umt.engine.engine import Engine

    @contextlib.contextmanager
    def joined(self: Engine, connection: Any) -> Iterator[Any]:
        with self.database.transaction() as session:
            yield session

    Engine.joined = joined  # type: ignore[method-assign]


@breakage("outage-fatal", "a worker does not ride out a database outage: it exits when the "
          "database goes away", "umt.engine.store.postgres.PostgresListener._listen and "
          "umt.engine.worker.Worker._claim_free_slots: a lost database ends the process")
def _outage_fatal() -> None:
    import os

    from umt.engine.errors import StoreUnavailable
    from umt.engine.store.postgres import PostgresListener
    from umt.engine.worker import Worker

    listen = PostgresListener._listen
    claim = Worker._claim_free_slots

    def fatal(what: str, error: Exception) -> None:
        print(f"{BREAK_ENV}=outage-fatal: {what}: {error}; exiting", file=sys.stderr, flush=True)
        os._exit(75)

    def _listen(self: Any, handler: Any, **options: Any) -> None:
        try:
            listen(self, handler, **options)
        except Exception as error:
            fatal("the notification listener lost the database", error)

    def _claim_free_slots(self: Worker) -> int:
        try:
            return claim(self)
        except StoreUnavailable as error:
            fatal("the claim found no database", error)
            raise

    PostgresListener._listen = _listen  # type: ignore[method-assign]
    Worker._claim_free_slots = _claim_free_slots  # type: ignore[method-assign]


@breakage("busy-poll", "an idle worker ignores its poll interval: it asks the database for "
          "due runs every 50 ms", "umt.engine.worker.Worker._idle_timeout: 0.05 s")
def _busy_poll() -> None:
    from umt.engine.worker import Worker

    Worker._idle_timeout = lambda self, claimed: 0.05  # type: ignore[method-assign]


@breakage("local-clock", "on PostgreSQL each host coordinates on its own clock: leases, timers "
          "and deadlines follow the worker's clock instead of the database server's",
          "umt.engine.store.postgres.PostgresDatabase.fleet_clock: the local clock")
def _local_clock() -> None:
    from umt.engine.clock import SYSTEM_CLOCK
    from umt.engine.store.postgres import PostgresDatabase

    PostgresDatabase.fleet_clock = lambda self: SYSTEM_CLOCK  # type: ignore[method-assign,assignment,return-value]


# ---------------------------------------------------------------------- qBittorrent


@breakage("lost-add", "a run forgets it added its torrent when the add's answer is lost: the "
          "adapter takes qBittorrent's 'Fails.' to the repeated add (the torrent is there: the "
          "first add did happen) for an error, the step's attempt fails, and the next attempt "
          "decides afresh whether the torrent was there before",
          "umt.media.qbittorrent.QbtClient._call: `add torrent` answered 'Fails.' raises "
          "QbtError; umt.media.downloads._first_add_intent: always None")
def _lost_add() -> None:
    from umt.media.qbittorrent import QbtClient, QbtError

    call = QbtClient._call

    def _call(self: QbtClient, what: str, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        answer = call(self, what, fn, *args, **kwargs)
        if what == "add torrent" and str(answer).strip() == "Fails.":
            raise QbtError(f"qBittorrent at {self.url} refused the torrent ('Fails.')")
        return answer

    QbtClient._call = _call  # type: ignore[method-assign]
    _replace_function("umt.media.downloads", "_first_add_intent",
                      lambda original: lambda *args, **kwargs: None)
