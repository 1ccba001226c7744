"""``bench/run workers``: B1 with 1, 2 and 4 worker processes, on PostgreSQL and SQLite (issue 15).

    bench/run workers [--runs 1000] [--pg 1,2,4] [--sqlite 1,2] [--concurrency 10]
                      [--backlog [--backlog-lead 3]] [--sample-ms 20] [--url URL] [--keep]

For each backend and number of worker processes N, on a fresh database (PostgreSQL: one of its
own on the throwaway cluster of ``bench/run``, durable settings, pg_stat_statements reset;
SQLite: a new file): N ``bench.umt_worker`` processes (``--concurrency`` each, umt's defaults
otherwise), then B1 as peer-bench defines it: ``--runs`` ``noop6`` runs (six steps) submitted
one after another through ``Engine.start`` in this process, timed from the first submit to the
last ``finished_at``. B1 is bounded by its one submitting client as soon as the workers keep
up with it; ``--backlog`` measures the workers alone: every run is submitted to fall due at one
moment, ``--backlog-lead`` seconds after the first submit (the submits must end before it), and
timed from the first run's ``started_at`` (its claim) to the last ``finished_at``.
Per row:

* runs/s;
* statements per run (pg_stat_statements, top level, this database, the bench's own queries
  left out), and the claims' calls per run and runs claimed per call (umt's general claim,
  ``claim_runs``, and its claim of the runs a notification named, ``claim_notified_runs``): a
  claim that finds nothing (another worker took the runs) is what an extra worker costs;
* PostgreSQL CPU per run: user + system time of the postmaster's descendants (``/proc``) and of
  the backends that exited meanwhile (the postmaster's ``cutime``/``cstime``), divided by the
  runs; the workers' CPU per run likewise;
* contention: ``pg_stat_activity`` sampled every ``--sample-ms`` while B1 runs, for backends of
  this database waiting on a heavyweight lock (``wait_event_type = 'Lock'``) or on an LWLock:
  the share of samples with one and the most seen at once. umt has no claim retry to count (a
  claim skips locked runs; one that finds nothing waits for the next wake-up); the workers'
  warnings (the engine's only retry: "database unavailable …; retrying") are counted from their
  logs. SQLite waits for its write lock inside the busy timeout, which nothing can sample, so
  its rows give runs/s, CPU and the workers' warnings.

Results (JSON, the workers' logs, the table) go to ``bench/.results/workers-<time>/``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from bench import runner
from bench.umt_workflows import WORKFLOWS
from umt.engine import Engine, open_database
from umt.engine.store.queries import QuerySet

QUERIES = {dialect: QuerySet.load("bench", f"sql/workers_{dialect}.sql")
           for dialect in ("postgresql", "sqlite")}
#: umt's own PostgreSQL queries, to name what pg_stat_statements and pg_stat_activity show.
UMT_QUERIES = [QuerySet.load(package, "sql/postgresql.sql")
               for package in ("umt.engine.store", "umt.records")]
NOOP6 = WORKFLOWS["noop6"]
#: umt's claims: of any due run, and of the runs a notification named.
CLAIMS = frozenset({"claim_runs", "claim_notified_runs"})
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
#: How long B1 may take before the row is given up (a stuck worker must not hang the bench).
TIMEOUT_S = 600


def log(message: str) -> None:
    print(f"[workers {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------- /proc CPU


def _proc_table() -> dict[int, tuple[int, int, int]]:
    """pid -> (ppid, own ticks, waited-for children's ticks) for every process."""
    table: dict[int, tuple[int, int, int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue  # gone meanwhile
        rest = text[text.rindex(")") + 2:].split()
        # rest[1] = ppid, rest[11..14] = utime, stime, cutime, cstime (fields 14-17 of stat(5))
        table[int(entry)] = (int(rest[1]), int(rest[11]) + int(rest[12]),
                             int(rest[13]) + int(rest[14]))
    return table


def tree_cpu_seconds(root: int) -> float:
    """CPU of ``root`` and its descendants, including those that exited and were waited for."""
    table = _proc_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    ticks, stack = 0, [root]
    while stack:
        pid = stack.pop()
        if pid in table:
            _, own, waited = table[pid]
            ticks += own + waited
        stack.extend(children.get(pid, []))
    return ticks / CLOCK_TICKS


def process_cpu_seconds(pids: list[int]) -> float:
    table = _proc_table()
    return sum(table[pid][1] for pid in pids if pid in table) / CLOCK_TICKS


def query_name(text: str) -> str:
    """The name of umt's query that ``text`` (whitespace collapsed, as pg_stat_statements shows
    it: parameters as $n) starts like the longest, else its start."""
    best, best_length = text[:60], 40
    for queries in UMT_QUERIES:
        for name in sorted(queries.names()):
            length = _common_prefix(text, " ".join(queries[name].sql.split()))
            if length > best_length:
                best, best_length = name, length
    return best


def _common_prefix(a: str, b: str) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                min(len(a), len(b)))


# ---------------------------------------------------------------------- sampling


@dataclass
class WaitSampler:
    """Samples pg_stat_activity for lock waits on a connection of its own, in a thread."""

    url: str
    interval_s: float
    samples: int = 0
    with_lock: int = 0
    with_lwlock: int = 0
    most_lock: int = 0
    most_lwlock: int = 0
    #: Samples in which a claim (umt's claim_runs) waited on a heavyweight lock.
    claim_lock: int = 0
    events: Counter[str] = field(default_factory=Counter)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="wait-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        query = QUERIES["postgresql"]["waits"].sql
        with psycopg.connect(self.url, autocommit=True, row_factory=dict_row) as conn:
            while not self._stop.wait(self.interval_s):
                rows = conn.execute(query).fetchall()
                locks = [r for r in rows if r["wait_event_type"] == "Lock"]
                lwlocks = [r for r in rows if r["wait_event_type"] == "LWLock"]
                self.samples += 1
                self.with_lock += bool(locks)
                self.with_lwlock += bool(lwlocks)
                self.most_lock = max(self.most_lock, len(locks))
                self.most_lwlock = max(self.most_lwlock, len(lwlocks))
                names = [query_name(r["query"] or "") for r in rows]
                self.claim_lock += any(r["wait_event_type"] == "Lock" and name in CLAIMS
                                       for r, name in zip(rows, names, strict=True))
                for r, name in zip(rows, names, strict=True):
                    self.events[f"{r['wait_event_type']}:{r['wait_event']} in {name}"] += 1

    def result(self) -> dict[str, Any]:
        return {"samples": self.samples, "with_lock": self.with_lock,
                "with_lwlock": self.with_lwlock, "most_lock": self.most_lock,
                "most_lwlock": self.most_lwlock, "claim_lock": self.claim_lock,
                "events": dict(self.events.most_common(10))}


# ---------------------------------------------------------------------- workers


def start_workers(n: int, url: str, concurrency: int, logs: Path) -> list[subprocess.Popen[str]]:
    env = {**os.environ, "BENCH_DB_URL": url, "BENCH_CONCURRENCY": str(concurrency),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(runner.ROOT),
                                                        os.environ.get("PYTHONPATH")]))}
    workers = []
    for i in range(n):
        sink = (logs / f"worker-{i}.log").open("w")
        workers.append(subprocess.Popen([str(runner.PYTHON), "-m", "bench.umt_worker"], env=env,
                                        stdout=subprocess.PIPE, stderr=sink, text=True))
    for worker in workers:
        assert worker.stdout is not None
        line = worker.stdout.readline()
        if line.strip() != "READY":
            stop_workers(workers)
            raise SystemExit(f"a worker did not start (printed {line!r}); see {logs}")
    return workers


def stop_workers(workers: list[subprocess.Popen[str]]) -> None:
    for worker in workers:
        if worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
    for worker in workers:
        try:
            worker.wait(timeout=60)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


def warnings_in(logs: Path) -> dict[str, int]:
    lines = [line for f in sorted(logs.glob("worker-*.log"))
             for line in f.read_text(errors="replace").splitlines()]
    return {"warnings": sum(" WARNING " in line for line in lines),
            "retrying": sum("retrying" in line for line in lines),
            "errors": sum(" ERROR " in line for line in lines)}


# ---------------------------------------------------------------------- one row


class Progress:
    """How many B1 runs are done, and when the last one finished (epoch seconds)."""

    def __init__(self, url: str, dialect: str) -> None:
        self.query = QUERIES[dialect]["progress"].sql
        self.dialect = dialect
        if dialect == "postgresql":
            self.pg = psycopg.connect(url, autocommit=True, row_factory=dict_row)
        else:
            path = url.removeprefix("sqlite:///")
            self.lite = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)

    def read(self) -> tuple[int, int, float | None, float | None]:
        """Succeeded, failed, the first start and the last finish (epoch seconds)."""
        if self.dialect == "postgresql":
            row = self.pg.execute(self.query, {"workflow": NOOP6.name}).fetchone()
            assert row is not None
            return (row["succeeded"], row["failed"], row["first_started"],
                    row["last_finished"])
        succeeded, failed, first, last = self.lite.execute(
            self.query, {"workflow": NOOP6.name}).fetchone()
        return (succeeded, failed, datetime.fromisoformat(first).timestamp() if first else None,
                datetime.fromisoformat(last).timestamp() if last else None)

    def close(self) -> None:
        (self.pg if self.dialect == "postgresql" else self.lite).close()


def b1_row(url: str, dialect: str, n_workers: int, args: argparse.Namespace,
           logs: Path) -> dict[str, Any]:
    engine = Engine(open_database(url, pool_size=2))
    engine.migrate()
    observer = None
    postmaster = None
    if dialect == "postgresql":
        observer = psycopg.connect(url, autocommit=True, row_factory=dict_row)
        queries = QUERIES["postgresql"]
        observer.execute(queries["create_pg_stat_statements"].sql)
        row = observer.execute(queries["data_directory"].sql).fetchone()
        assert row is not None
        try:
            pid_file = Path(row["data_directory"]) / "postmaster.pid"
            postmaster = int(pid_file.read_text().split()[0])
        except OSError:
            log("the postmaster's pid is not readable here: no PostgreSQL CPU")
    workers = start_workers(n_workers, url, args.concurrency, logs)
    pids = [w.pid for w in workers]

    def counters_from_zero() -> tuple[float | None, float]:
        if observer is not None:
            observer.execute(QUERIES["postgresql"]["reset_pg_stat_statements"].sql)
        return (tree_cpu_seconds(postmaster) if postmaster else None,
                process_cpu_seconds(pids))

    progress = Progress(url, dialect)
    sampler = WaitSampler(url, args.sample_ms / 1000) if dialect == "postgresql" else None
    try:
        # B1: each run due at once, counted from the first submit. A backlog: all due together
        # once every run is written, counted from then (the submits are not the workers' work).
        due = (datetime.now(UTC) + timedelta(seconds=args.backlog_lead)
               if args.backlog else None)
        pg_cpu0, worker_cpu0 = counters_from_zero()
        if sampler is not None and due is None:
            sampler.start()
        t0 = time.time()
        for _ in range(args.runs):
            engine.start(NOOP6, {}, start_at=due)
        submitted = time.time() - t0
        if due is not None:
            if time.time() > due.timestamp():
                log(f"the submits outlasted --backlog-lead {args.backlog_lead:g} s: raise it")
            time.sleep(max(0.0, due.timestamp() - time.time() - 0.05))
            pg_cpu0, worker_cpu0 = counters_from_zero()
            if sampler is not None:
                sampler.start()
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            succeeded, failed, first_started, last_finished = progress.read()
            if succeeded + failed >= args.runs or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        if sampler is not None:
            sampler.stop()
        worker_cpu = process_cpu_seconds(pids) - worker_cpu0
        pg_cpu = (tree_cpu_seconds(postmaster) - pg_cpu0
                  if postmaster and pg_cpu0 is not None else None)
        statements = (observer.execute(QUERIES["postgresql"]["statements"].sql).fetchall()
                      if observer is not None else [])
    finally:
        if sampler is not None:
            sampler.stop()
        stop_workers(workers)
        progress.close()
        engine.close()
        if observer is not None:
            observer.close()
    began = first_started if args.backlog else t0
    wall = (last_finished - began) if last_finished and began else None
    row_out: dict[str, Any] = {
        "backend": dialect, "workers": n_workers, "concurrency": args.concurrency,
        "mode": "backlog" if args.backlog else "B1", "runs": args.runs,
        "succeeded": succeeded, "failed": failed,
        "submit_s": submitted, "wall_s": wall,
        "runs_per_s": succeeded / wall if wall else None,
        "worker_cpu_ms_per_run": 1000 * worker_cpu / args.runs,
        "pg_cpu_ms_per_run": 1000 * pg_cpu / args.runs if pg_cpu is not None else None,
        "log": warnings_in(logs),
    }
    if statements:
        total = sum(r["calls"] for r in statements)
        claims = [r for r in statements if query_name(r["query"]) in CLAIMS]
        claim_calls = sum(r["calls"] for r in claims)
        row_out.update(
            statements_per_run=total / args.runs,
            claims_per_run=claim_calls / args.runs if claims else None,
            runs_per_claim=(sum(r["rows"] for r in claims) / claim_calls) if claim_calls else None,
            statements_by_query=_by_query(statements, args.runs),
        )
    if sampler is not None:
        row_out["waits"] = sampler.result()
    return row_out


def _by_query(statements: list[dict[str, Any]], runs: int) -> dict[str, dict[str, float]]:
    """Calls per run and rows per call of each of umt's queries (one name may have several
    pg_stat_statements entries), most called first."""
    calls: Counter[str] = Counter()
    rows: Counter[str] = Counter()
    for r in statements:
        name = query_name(r["query"])
        calls[name] += r["calls"]
        rows[name] += r["rows"]
    return {name: {"calls_per_run": n / runs, "rows_per_call": rows[name] / n}
            for name, n in calls.most_common()}


# ---------------------------------------------------------------------- table


def _f(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if abs(value) < 100 else f"{value:.0f}"


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| backend | workers x concurrency | mode | runs | runs/s | statements/run | claims/run "
        "| runs/claim | PostgreSQL CPU ms/run | worker CPU ms/run | samples with a claim waiting "
        "on a Lock | samples with a Lock wait | most Lock waits at once "
        "| samples with an LWLock wait | worker warnings / retries |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: | ---: |",
    ]
    for r in rows:
        waits = r.get("waits")
        lock_share = (f"{waits['with_lock']} / {waits['samples']}" if waits else "-")
        claim_share = (f"{waits['claim_lock']} / {waits['samples']}" if waits else "-")
        lwlock_share = (f"{waits['with_lwlock']} / {waits['samples']}" if waits else "-")
        lines.append(
            f"| {'PostgreSQL' if r['backend'] == 'postgresql' else 'SQLite'} "
            f"| {r['workers']} x {r['concurrency']} | {r['mode']} | {r['succeeded']} "
            f"| {_f(r['runs_per_s'], 1)} | {_f(r.get('statements_per_run'))} "
            f"| {_f(r.get('claims_per_run'))} | {_f(r.get('runs_per_claim'))} "
            f"| {_f(r['pg_cpu_ms_per_run'])} | {_f(r['worker_cpu_ms_per_run'])} "
            f"| {claim_share} | {lock_share} | {waits['most_lock'] if waits else '-'} "
            f"| {lwlock_share} "
            f"| {r['log']['warnings']} / {r['log']['retrying']} |")
    return "\n".join(lines)


# ---------------------------------------------------------------------- main


def _counts(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/run workers", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--pg", default="1,2,4", help="worker processes on PostgreSQL ('' skips)")
    parser.add_argument("--sqlite", default="1,2", help="worker processes on SQLite ('' skips)")
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--backlog", action="store_true",
                        help="all runs due together once written (the workers alone)")
    parser.add_argument("--backlog-lead", type=float, default=3.0, metavar="SECONDS",
                        help="with --backlog: the runs fall due this long after the first submit")
    parser.add_argument("--sample-ms", type=float, default=20)
    parser.add_argument("--url", help="an existing superuser URL instead of a throwaway cluster")
    parser.add_argument("--keep", action="store_true", help="leave the throwaway cluster running")
    args = parser.parse_args(argv)
    out = runner.RESULTS / f"workers-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    started = time.strftime("%Y-%m-%d %H:%M:%S %z")
    uptime_start = _uptime()
    log(f"results in {out}; {uptime_start}")
    rows: list[dict[str, Any]] = []
    if _counts(args.pg):
        with runner.bench_cluster(args.url, args.keep, out / "postgres.log") as admin_url:
            for n in _counts(args.pg):
                url = runner.fresh_database(admin_url, f"bench_workers_{n}")
                logs = out / f"postgresql-{n}"
                logs.mkdir()
                log(f"PostgreSQL, {n} worker(s) x {args.concurrency}, {args.runs} runs")
                rows.append(b1_row(url, "postgresql", n, args, logs))
                log(json.dumps({k: v for k, v in rows[-1].items()
                                if k != "statements_by_query"}))
    for n in _counts(args.sqlite):
        with tempfile.TemporaryDirectory(prefix="umt-bench-workers-") as folder:
            logs = out / f"sqlite-{n}"
            logs.mkdir()
            log(f"SQLite, {n} worker(s) x {args.concurrency}, {args.runs} runs")
            rows.append(b1_row(f"sqlite:///{folder}/umt.db", "sqlite", n, args, logs))
            log(json.dumps(rows[-1]))
    text = (f"{started}, {os.cpu_count()} CPUs; start: {uptime_start}; end: {_uptime()}\n"
            f"{args.runs} noop6 runs submitted one after another "
            f"{'due together after the last (backlog)' if args.backlog else '(B1)'} "
            f"to running workers; "
            f"pg_stat_activity sampled every {args.sample_ms:g} ms\n\n{table(rows)}\n")
    (out / "results.json").write_text(json.dumps(rows, indent=1))
    (out / "table.md").write_text(text)
    print(text)
    return 0


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


if __name__ == "__main__":
    sys.exit(main())
