"""``bench/run scale``: claim cost, idle cost and B2/B3 with many parked runs (issue 7, "Scale").

For each size N (default 2,000 and 100,000), on one throwaway cluster:

1. the harness's B5 with ``B5_RUNS=N``: N ``sleep_long`` runs are submitted and parked by
   workers (each sleeps 1 h), then the idle cost of one worker is measured (concurrency 10, 1);
2. claim cost, in-process through umt's ``Store``: ``claim()`` when nothing is due and when one
   run is due, ``next_due()``, and the server-side time of the claim's candidate scan
   (``EXPLAIN ANALYZE``), all with the N runs asleep;
3. the harness's B2 and B3 with the driver's ``reset`` keeping the N parked runs
   (``UMT_BENCH_KEEP_WORKFLOW``), so signals and timers are measured next to N sleepers.

Prints one table with the figures per size and the ratio of the largest size to the smallest
(target: within 1.5x). Raw results go to ``bench/.results/scale-<time>/``.
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from datetime import timedelta
from pathlib import Path
from statistics import median
from typing import Any

import psycopg
from psycopg.rows import dict_row

from bench import runner
from bench.umt_workflows import WORKFLOWS
from umt.engine import Engine, open_database
from umt.engine.store.queries import QuerySet

QUERIES = QuerySet.load("bench", "sql/scale.sql")
KEEP = WORKFLOWS["sleep_long"].name


def _timed(fn: Any, n: int) -> dict[str, float]:
    values = []
    for _ in range(n):
        began = time.perf_counter()
        fn()
        values.append((time.perf_counter() - began) * 1000)
    return {"median": round(median(values), 3), "p95": round(runner.pct(values, 0.95) or 0, 3)}


def _explain_ms(conn: psycopg.Connection[Any], query_name: str, **params: Any) -> float:
    plan = conn.execute(QUERIES[query_name].sql, params).fetchone()
    assert plan is not None
    return float(next(iter(plan.values()))[0]["Execution Time"])


def claim_cost(db_url: str, samples: int = 200) -> dict[str, Any]:
    """Claim and next_due timings with whatever is parked in the database right now."""
    engine = Engine(open_database(db_url, pool_size=2))
    store = engine.store
    keys = sorted(w.key for w in WORKFLOWS.values())
    lease = timedelta(seconds=30)
    worker_id = str(uuid.uuid4())  # a worker that does not exist: nothing it claims runs
    noop = WORKFLOWS["noop6"]
    out: dict[str, Any] = {}
    try:
        with psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as conn:
            out["parked"] = {
                f"{r['workflow_name']}:{r['status']}": r["runs"]
                for r in conn.execute(QUERIES["count_by_status"].sql).fetchall()
            }
            for _ in range(20):  # warm the pool and the prepared statements
                store.claim(worker_id, keys, limit=10, lease=lease)
                store.next_due(keys)
            out["claimNothingDueMs"] = _timed(
                lambda: store.claim(worker_id, keys, limit=10, lease=lease), samples)
            out["nextDueMs"] = _timed(lambda: store.next_due(keys), samples)

            def claim_one() -> None:
                claims = store.claim(worker_id, keys, limit=10, lease=lease)
                assert len(claims) == 1, len(claims)

            due = []
            for _ in range(samples // 4):
                engine.start(noop, {})
                began = time.perf_counter()
                claim_one()
                due.append((time.perf_counter() - began) * 1000)
            out["claimOneDueMs"] = {"median": round(median(due), 3),
                                    "p95": round(runner.pct(due, 0.95) or 0, 3)}
            conn.execute(QUERIES["delete_workflow_runs"].sql, {"workflow": noop.name})
            now = engine.clock.now()
            out["claimScanServerMs"] = median(
                _explain_ms(conn, "explain_claim_candidates", workflow_keys=keys, now=now,
                            limit=10) for _ in range(20))
            out["nextDueServerMs"] = median(
                _explain_ms(conn, "explain_next_due", workflow_keys=keys) for _ in range(20))
            out["signalLookupServerMs"] = median(
                _explain_ms(conn, "explain_waiting_steps_for_signal", name="nobody")
                for _ in range(20))
            out["tableBytes"] = {
                r["relname"]: r["bytes"] for r in conn.execute(QUERIES["table_sizes"].sql)
            }
    finally:
        engine.close()
    return out


def scale(args: argparse.Namespace) -> int:
    runner.use_umt_from(args.umt_path)
    runner.prepare_peer_bench()
    sizes = [int(s) for s in args.sizes.split(",")]
    out_dir = runner.RESULTS / time.strftime("scale-%Y%m%d-%H%M%S")
    out_dir.mkdir(parents=True, exist_ok=True)
    figures: dict[int, dict[str, Any]] = {}
    with runner.bench_cluster(args.url, args.keep, out_dir / "postgres.log") as admin_url:
        db_url = runner.fresh_database(admin_url, "bench_scale")
        for size in sizes:
            runner.log(f"scale: {size} parked runs")
            b5 = runner.run_harness("umt", db_url, {
                "BENCHES": "B5", "REPEATS": "1", "B5_RUNS": str(size),
            }, out_dir / f"umt-{size}-b5.json")
            cost = claim_cost(db_url)
            runner.log(f"scale: claim cost with {size}: {json.dumps(cost)}")
            (out_dir / f"umt-{size}-claim.json").write_text(json.dumps(cost, indent=2))
            lat = runner.run_harness("umt", db_url, {
                "BENCHES": "B2,B3", "REPEATS": "1", "B2_TRIALS": str(args.trials),
                "B3_TRIALS": str(args.trials),
            }, out_dir / f"umt-{size}-lat.json", extra_env={"UMT_BENCH_KEEP_WORKFLOW": KEEP})
            figures[size] = {"b5": runner.metrics(b5), "lat": runner.metrics(lat),
                             "claim": cost}
    text = scale_table(figures)
    (out_dir / "table.md").write_text(text + "\n")
    print(text)
    runner.log(f"results in {out_dir}")
    return 0


def scale_table(figures: dict[int, dict[str, Any]]) -> str:
    sizes = sorted(figures)
    def claim(key: str, part: str | None = None) -> Any:
        return lambda f: f["claim"][key][part] if part else f["claim"][key]

    def harness(group: str, key: str) -> Any:
        return lambda f: f[group].get(key)

    rows: list[tuple[str, Any]] = [
        ("claim, nothing due (in-process), median ms", claim("claimNothingDueMs", "median")),
        ("claim, one run due (in-process), median ms", claim("claimOneDueMs", "median")),
        ("next_due (in-process), median ms", claim("nextDueMs", "median")),
        ("claim candidate scan, server ms", claim("claimScanServerMs")),
        ("next_due, server ms", claim("nextDueServerMs")),
        ("signal lookup (no waiter), server ms", claim("signalLookupServerMs")),
        ("B2 signal → completed, median ms", harness("lat", "B2.median")),
        ("B2 signal → completed, p95 ms", harness("lat", "B2.p95")),
        ("B3 sleep overshoot (completion), median ms", harness("lat", "B3.median")),
        ("B3 sleep overshoot (completion), p95 ms", harness("lat", "B3.p95")),
        ("B5 idle worker conc 10, statements/s", harness("b5", "B5.10.dbStatementsPerSec")),
        ("B5 idle worker conc 1, statements/s", harness("b5", "B5.1.dbStatementsPerSec")),
        ("B5 idle worker conc 10, worker CPU %", harness("b5", "B5.10.workerCpuPctOfOneCore")),
    ]
    head = " | ".join(f"{s:,} parked" for s in sizes)
    lines = [f"| metric | {head} | {sizes[-1]:,} / {sizes[0]:,} |",
             "| --- |" + " ---: |" * (len(sizes) + 1)]
    for label, get in rows:
        values = [get(figures[s]) for s in sizes]
        ratio = (f"{values[-1] / values[0]:.2f}x"
                 if values[0] and values[-1] is not None else "-")
        lines.append(f"| {label} | " + " | ".join(runner._fmt(v) for v in values)
                     + f" | {ratio} |")
    return "\n".join(lines)


def reprint(folder: Path) -> str:
    figures: dict[int, dict[str, Any]] = {}
    for claim_file in folder.glob("umt-*-claim.json"):
        size = int(claim_file.name.split("-")[1])
        figures[size] = {
            "claim": json.loads(claim_file.read_text()),
            "b5": runner.metrics(json.loads((folder / f"umt-{size}-b5.json").read_text())),
            "lat": runner.metrics(json.loads((folder / f"umt-{size}-lat.json").read_text())),
        }
    return scale_table(figures)
