"""``bench/run web``: the dashboard (``umt web``) with 100,000 runs in the database.

    bench/run web [--runs 100000] [--samples 50] [--changes 20] [--wakes 5] [--idle 30]
                  [--backend both|postgresql|sqlite]

For each backend (a throwaway PostgreSQL cluster with pg_stat_statements, an SQLite file):

1. ``--runs`` runs are written in bulk (statuses mixed, one a second back from now), plus one
   run executed for real by a worker (seven steps, so its page has a timeline);
2. ``umt web``'s application is served by uvicorn on loopback, in this process;
3. **pages**: ``--samples`` GETs each of the runs page (newest first, no filter), the runs page
   of one status, a search, and the run page, over one kept-alive connection (client-side time,
   HTTP included): median and p95;
4. **live**: a page's event stream is open; ``--changes`` times a run is started (what a user
   does from another terminal; the engine notifies) and the time until the stream says
   ``change`` is taken: p50, p95; then ``--wakes`` times a run's 12 s timer fires and a worker
   claims it, which notifies nobody: the time from the claim (seen in the database) to the
   page's ``change``;
5. **idle** (PostgreSQL): statements per second that the server executed (pg_stat_statements,
   the bench's own queries left out) over ``--idle`` seconds with no page open, then with one
   page's event stream open: the difference is what an open dashboard costs.

Targets (issue 16): pages <= 50 ms median; a change on an open page <= 1 s p95; an idle open
dashboard <= 1 statement/s. Results go to ``bench/.results/web-<time>/``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from statistics import median
from typing import Any

from bench import runner
from umt.engine import Engine, Registry, WorkerOptions, Workflow
from umt.engine.store.queries import QuerySet
from umt.web.feed import HOT_AFTER_CHANGE

BENCH_WORKFLOW = Workflow("bench-web", "1", lambda ctx, _: [
    ctx.step(f"step-{n}", lambda step, n=n: {"n": n}) for n in range(7)
])
#: Longer than the feed's busy window after the start's notification, so that the wake-up is
#: seen the way a retention period's end is: through the feed's look at the next due time.
NAP_SECONDS = 12
TIMER_WORKFLOW = Workflow("bench-web-timer", "1", lambda ctx, _: (
    ctx.sleep("nap", f"{NAP_SECONDS}s"), ctx.step("after", lambda step: 1),
))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def _database(backend: str, home: Path) -> Iterator[str]:
    if backend == "sqlite":
        yield f"sqlite:///{home / 'umt.db'}"
        return
    with runner.bench_cluster(None, keep=False) as admin_url:
        yield runner.fresh_database(admin_url, "umt_web_bench")


def _app(url: str, home: Path) -> Any:
    from umt.app import App
    from umt.config import load_settings

    (home / "library").mkdir(exist_ok=True)
    settings = load_settings(None, env={
        "UMT_DATABASE_URL": url, "UMT_LIBRARY_DIR": str(home / "library"),
        "UMT_QBITTORRENT_URL": f"http://127.0.0.1:{_free_port()}",
    })
    app = App(settings)
    # The dashboard watches the due times of the workflows the installation registers.
    acquire = app.acquire_workflow
    app.registry = lambda: Registry([acquire, BENCH_WORKFLOW, TIMER_WORKFLOW])  # type: ignore[method-assign]
    app.engine(migrate_embedded=True, check_schema=False).migrate()
    return app


def _park_runs(engine: Engine, count: int) -> float:
    queries = QuerySet.load("bench", f"sql/web_{engine.database.dialect}.sql")
    now = datetime.now(UTC)
    newest: Any = now.strftime("%Y-%m-%d %H:%M:%S") if engine.database.dialect == "sqlite" else now
    began = time.perf_counter()
    with engine.database.transaction() as session:
        session.execute(queries["park_runs"], {"count": count, "newest": newest})
    return time.perf_counter() - began


@contextmanager
def _worker(engine: Engine) -> Iterator[None]:
    stop = threading.Event()
    worker = engine.worker(Registry([BENCH_WORKFLOW, TIMER_WORKFLOW]),
                           WorkerOptions(concurrency=2))
    thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(30)


def _executed_run(engine: Engine) -> str:
    run = engine.start(BENCH_WORKFLOW, None).run
    with _worker(engine):
        engine.wait(run.id, timeout=60)
    return run.id


def _wake_latency(engine: Engine, port: int, wakes: int) -> dict[str, Any]:
    """A timer fires and a worker claims the run, which notifies nobody: how long until the
    open page hears of it (from the moment the claim is visible in the database)."""
    stream = _Stream(port)
    values: list[float] = []
    missed = 0
    try:
        with _worker(engine):
            for _ in range(wakes):
                run_id = engine.start(TIMER_WORKFLOW, None).run.id
                deadline = time.monotonic() + NAP_SECONDS + 30
                while engine.get(run_id).status != "sleeping":
                    time.sleep(0.02)
                while engine.get(run_id).status == "sleeping" and time.monotonic() < deadline:
                    time.sleep(0.005)
                claimed = time.perf_counter()
                seen = stream.next_change_after(claimed, 10.0)
                if seen is None:
                    missed += 1
                else:
                    values.append((seen - claimed) * 1000)
                engine.wait(run_id, timeout=30)
    finally:
        stream.close()
    return {"p50_ms": round(median(values), 1) if values else None,
            "p95_ms": round(runner.pct(values, 0.95) or 0, 1) if values else None,
            "missed": missed}


@contextmanager
def _served(app: Any) -> Iterator[int]:
    import uvicorn

    from umt.web.server import create_app

    web = create_app(app, checks=lambda: [], token=None)
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(web, host="127.0.0.1", port=port, log_level="warning",
                                           access_log=False, timeout_graceful_shutdown=1))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(10)


def _get_times(port: int, path: str, samples: int) -> dict[str, float]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    values = []
    try:
        for index in range(samples + 3):
            began = time.perf_counter()
            connection.request("GET", path)
            response = connection.getresponse()
            body = response.read()
            elapsed = (time.perf_counter() - began) * 1000
            if response.status != 200 or not body:
                raise RuntimeError(f"GET {path}: HTTP {response.status}")
            if index >= 3:  # the first requests warm caches and prepared statements
                values.append(elapsed)
    finally:
        connection.close()
    return {"median_ms": round(median(values), 1),
            "p95_ms": round(runner.pct(values, 0.95) or 0, 1)}


class _Stream:
    """One page's open event stream (``/events``), read on a thread."""

    def __init__(self, port: int) -> None:
        self._connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self._connection.request("GET", "/events")
        self._response = self._connection.getresponse()
        self.changes: list[float] = []
        self._seen = threading.Condition()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            while line := self._response.readline():
                if line.startswith(b"event: change"):
                    with self._seen:
                        self.changes.append(time.perf_counter())
                        self._seen.notify_all()
        except (OSError, ValueError, AttributeError):  # closed under the reader: the end
            return

    def next_change_after(self, moment: float, timeout: float) -> float | None:
        with self._seen:
            self._seen.wait_for(lambda: any(t >= moment for t in self.changes), timeout)
            later = [t for t in self.changes if t >= moment]
        return later[0] if later else None

    def close(self) -> None:
        self._connection.close()


def _change_latency(
    engine: Engine, port: int, changes: int, change: Callable[[int], object]
) -> dict[str, Any]:
    stream = _Stream(port)
    try:
        time.sleep(1.5)  # the stream's first look
        values = []
        missed = 0
        for index in range(changes):
            time.sleep(index % 3 * 0.37)  # at another moment of the feed's cycle each time
            began = time.perf_counter()
            change(index)
            seen = stream.next_change_after(began, 10.0)
            if seen is None:
                missed += 1
            else:
                values.append((seen - began) * 1000)
            time.sleep(0.5)
    finally:
        stream.close()
    return {"p50_ms": round(median(values), 1) if values else None,
            "p95_ms": round(runner.pct(values, 0.95) or 0, 1) if values else None,
            "missed": missed}


def _statements_per_second(engine: Engine, seconds: float) -> float:
    queries = QuerySet.load("bench", f"sql/web_{engine.database.dialect}.sql")

    def calls() -> int:
        with engine.database.autocommit() as session:
            return int(session.execute(queries["statements_so_far"])[0]["calls"])

    with engine.database.autocommit() as session:
        session.execute(queries["enable_statements"])
    before = calls()
    time.sleep(seconds)
    return round((calls() - before) / seconds, 2)


def _idle_cost(engine: Engine, port: int, seconds: float) -> dict[str, Any]:
    if engine.database.dialect != "postgresql":
        return {"note": "SQLite: the feed polls PRAGMA data_version like an idle worker"}
    without = _statements_per_second(engine, seconds)
    stream = _Stream(port)
    try:
        time.sleep(HOT_AFTER_CHANGE + 2)  # the page's first look, and what the bench just did
        with_page = _statements_per_second(engine, seconds)
    finally:
        stream.close()
    return {"no_page_per_s": without, "open_page_per_s": with_page,
            "added_per_s": round(with_page - without, 2)}


def measure(backend: str, args: argparse.Namespace) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(prefix=f"umt-bench-web-{backend}-"))
    try:
        with _database(backend, home) as url:
            app = _app(url, home)
            engine = app.engine()
            try:
                parked = _park_runs(engine, args.runs)
                runner.log(f"{backend}: {args.runs} runs written in {parked:.1f} s")
                run_id = _executed_run(engine)
                with _served(app) as port:
                    pages = {
                        "runs": _get_times(port, "/", args.samples),
                        "runs?status=sleeping": _get_times(port, "/?status=sleeping",
                                                           args.samples),
                        "runs?q=Film 99": _get_times(port, "/?q=Film%2099", args.samples),
                        "run": _get_times(port, f"/runs/{run_id}", args.samples),
                    }
                    runner.log(f"{backend}: pages {json.dumps(pages)}")
                    live = _change_latency(engine, port, args.changes, lambda index: (
                        engine.start(BENCH_WORKFLOW, {"change": index})))
                    quiet = _wake_latency(engine, port, args.wakes)
                    runner.log(f"{backend}: live {json.dumps(live)}, quiet {json.dumps(quiet)}")
                    idle = _idle_cost(engine, port, args.idle)
                    runner.log(f"{backend}: idle {json.dumps(idle)}")
            finally:
                app.close()
        return {"runs": args.runs, "pages": pages, "live": live, "quiet": quiet, "idle": idle}
    finally:
        shutil.rmtree(home, ignore_errors=True)


def table(results: dict[str, dict[str, Any]]) -> str:
    lines = ["| measure | " + " | ".join(results) + " | target |",
             "| --- | " + " | ".join("---:" for _ in results) + " | --- |"]
    for page in ("runs", "runs?status=sleeping", "runs?q=Film 99", "run"):
        cells = [f"{r['pages'][page]['median_ms']} / {r['pages'][page]['p95_ms']} ms"
                 for r in results.values()]
        target = "<= 50 ms median" if page in ("runs", "run") else ""
        lines.append(f"| GET {page} (median / p95) | " + " | ".join(cells) + f" | {target} |")
    cells = [f"{r['live']['p50_ms']} / {r['live']['p95_ms']} ms (missed {r['live']['missed']})"
             for r in results.values()]
    lines.append("| a new run reaches an open page (p50 / p95) | " + " | ".join(cells)
                 + " | <= 1 s p95 |")
    cells = [f"{r['quiet']['p50_ms']} / {r['quiet']['p95_ms']} ms "
             f"(missed {r['quiet']['missed']})" for r in results.values()]
    lines.append("| a timer fires, a worker claims the run: the page hears (p50 / p95) | "
                 + " | ".join(cells) + " | <= 1 s p95 |")
    cells = [str(r["idle"].get("added_per_s", "-")) for r in results.values()]
    lines.append("| statements/s an idle open page adds | " + " | ".join(cells) + " | <= 1 |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/run web", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=50)
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--wakes", type=int, default=5)
    parser.add_argument("--idle", type=float, default=30.0)
    parser.add_argument("--backend", choices=["both", "postgresql", "sqlite"], default="both")
    args = parser.parse_args(argv)
    out = runner.RESULTS / f"web-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    backends = ["postgresql", "sqlite"] if args.backend == "both" else [args.backend]
    results = {backend: measure(backend, args) for backend in backends}
    (out / "results.json").write_text(json.dumps(results, indent=2))
    text = table(results)
    (out / "table.md").write_text(text + "\n")
    print(text)
    return 0
