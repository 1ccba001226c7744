"""umt's peer-bench driver: the JSON-lines client protocol of peer-bench's harness.

    python -m bench.umt_driver          (with the repository root on PYTHONPATH)

Prints ``{"ready":true}``, then answers one JSON request per stdin line with one JSON line on
stdout (stdout carries nothing else). Engine work (submits, signals) goes through umt's public
API; the measurement queries are in ``sql/driver.sql`` and carry ``/*bench-driver*/``.

Environment: ``BENCH_DB_URL`` (required); ``UMT_BENCH_KEEP_WORKFLOW`` (optional, a workflow
name whose runs ``reset`` keeps: scale runs keep their parked background runs).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from bench.jsonlines import SqlDriver, serve
from bench.umt_workflows import WORKFLOWS, now_ms
from umt.engine import Engine, open_database
from umt.engine.store.queries import QuerySet

QUERIES = QuerySet.load("bench", "sql/driver.sql")
FINAL = {"succeeded": "completed", "failed": "failed", "canceled": "canceled"}


class Driver(SqlDriver):
    final = FINAL
    queries = QUERIES

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = Engine(open_database(url, pool_size=2))
        self.engine.migrate()
        # The measurement connection: separate from the engine's pool, autocommit.
        self.conn = psycopg.connect(url, autocommit=True, row_factory=dict_row)
        self.keep = os.environ.get("UMT_BENCH_KEEP_WORKFLOW") or None

    # ------------------------------------------------------------------ ops

    def op_hello(self, _req: dict[str, Any]) -> dict[str, Any]:
        from importlib.metadata import version

        import umt

        source = Path(umt.__file__).resolve().parent.parent
        return {
            "engine": "umt",
            "version": version("umt"),
            "backend": "postgres",
            "python": sys.version.split()[0],
            "psycopg": psycopg.__version__,
            "source": str(source),
            "commit": _git(source, "rev-parse", "--short", "HEAD"),
            # Uncommitted engine changes make a result irreproducible: say so.
            "engineDirty": bool(_git(source, "status", "--porcelain", "--", "umt/engine")),
        }

    def op_reset(self, _req: dict[str, Any]) -> dict[str, Any]:
        if self.keep:
            self.sql("reset_runs_keeping", keep=self.keep)
            self.sql("reset_signals")
        else:
            self.sql("reset_runs")
        self.sql("reset_workers")
        return {}

    def op_submit_batch(self, req: dict[str, Any]) -> dict[str, Any]:
        workflow = WORKFLOWS.get(req["workflow"])
        if workflow is None:
            raise ValueError(f"unknown workflow {req['workflow']}")
        default_input = req.get("input") or {}
        inputs = req.get("inputs") or [default_input] * int(req.get("count", 0))
        prefix = req.get("idempotencyKeyPrefix")
        start = self.engine.start
        for i in range(int(req.get("warmup") or 0)):
            start(workflow, default_input,
                  idempotency_key=f"{prefix}-warm-{i}" if prefix else None)
        run_ids: list[str] = []
        latencies: list[float] = []
        t0 = now_ms()
        for i, input_value in enumerate(inputs):
            key = f"{prefix}-{i}" if prefix else None
            began = time.perf_counter()
            result = start(workflow, input_value, idempotency_key=key)
            latencies.append((time.perf_counter() - began) * 1000)
            run_ids.append(result.run.id)
        t1 = now_ms()
        return {"runIds": run_ids, "t0": t0, "t1": t1, "latenciesMs": latencies}

    def op_signal(self, req: dict[str, Any]) -> dict[str, Any]:
        TRACE.clear()
        t_send = now_ms()
        began = time.perf_counter()
        result = self.engine.signal(req["name"], req.get("data"))
        ms = (time.perf_counter() - began) * 1000
        _report_slow("signal", ms)
        return {
            "tSend": t_send,
            "ms": ms,
            "delivered": len(result.delivered_to),
        }

    def close(self) -> None:
        self.conn.close()
        self.engine.close()


#: ``UMT_BENCH_TRACE_SLOW_MS``: log the statements of any signal call slower than this to
#: stderr (a diagnosis aid for latency outliers; the time not in a statement is the pool
#: checkout, BEGIN and COMMIT).
TRACE_SLOW_MS = float(os.environ.get("UMT_BENCH_TRACE_SLOW_MS") or 0)
TRACE: list[tuple[str, float]] = []


def _install_trace() -> None:
    original = psycopg.Connection.execute

    def execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return original(self, query, *args, **kwargs)
        finally:
            text = " ".join(str(query).split())[:60]
            TRACE.append((text, (time.perf_counter() - began) * 1000))

    psycopg.Connection.execute = execute  # type: ignore[method-assign]


def _report_slow(what: str, total_ms: float) -> None:
    if TRACE_SLOW_MS and total_ms > TRACE_SLOW_MS:
        steps = "; ".join(f"{ms:.1f} ms {text}" for text, ms in TRACE)
        in_statements = sum(ms for _, ms in TRACE)
        print(f"slow {what}: {total_ms:.1f} ms, {in_statements:.1f} ms in statements: {steps}",
              file=sys.stderr, flush=True)


def _git(where: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(where), *args], capture_output=True, text=True,
                              timeout=10, check=False)
    except OSError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def main() -> int:
    if TRACE_SLOW_MS:
        _install_trace()
    return serve(Driver(os.environ["BENCH_DB_URL"]))


if __name__ == "__main__":
    sys.exit(main())
