"""DBOS's peer-bench driver: the JSON-lines client protocol of peer-bench's harness.

    bench/.dbos-venv/bin/python -m bench.dbos_driver     (repository root on PYTHONPATH)

Creates DBOS's system tables in ``BENCH_DB_URL`` once (``dbos migrate``: a ``DBOSClient`` never
migrates), prints ``{"ready":true}``, then answers one JSON request per stdin line. Submits go
through ``DBOSClient.enqueue`` onto the queues of ``dbos_workflows`` (DBOS's recommended way to
start workflows from another process), signals through ``DBOSClient.send`` to the workflow that
waits on that signal, with the signal name as the topic. The measurement queries are in
``sql/dbos_driver.sql`` and carry ``/*bench-driver*/``.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
from dbos import DBOSClient, EnqueueOptions
from dbos._serialization import DefaultSerializer, deserialize_value
from psycopg.rows import dict_row

from bench.dbos_workflows import APP_NAME, QUEUE_OF, WORKFLOW_NAMES, now_ms
from bench.jsonlines import SqlDriver, serve

FINAL = {"SUCCESS": "completed", "ERROR": "failed", "CANCELLED": "canceled",
         "MAX_RECOVERY_ATTEMPTS_EXCEEDED": "failed"}


def _load_queries() -> Any:
    """umt's named-query loader, by file: the DBOS venv has psycopg but not umt."""
    path = Path(__file__).resolve().parent.parent / "umt" / "engine" / "store" / "queries.py"
    spec = importlib.util.spec_from_file_location("bench_named_queries", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module.QuerySet.load("bench", "sql/dbos_driver.sql")


QUERIES = _load_queries()


class Driver(SqlDriver):
    final = FINAL
    queries = QUERIES

    def __init__(self, url: str) -> None:
        dbos_cli = Path(sys.executable).parent / "dbos"
        subprocess.run([str(dbos_cli), "migrate", "--sys-db-url", url], check=True,
                       stdout=sys.stderr)
        self.client = DBOSClient(system_database_url=url, application_name=APP_NAME)
        self.serializer = DefaultSerializer()
        # The measurement connection: separate from the client's pool, autocommit.
        self.conn = psycopg.connect(url, autocommit=True, row_factory=dict_row)
        #: signal name -> the workflow that waits for it (DBOS sends to a workflow, not a name)
        self.waiting_for: dict[str, str] = {}

    # ------------------------------------------------------------------ ops

    def op_hello(self, _req: dict[str, Any]) -> dict[str, Any]:
        from importlib.metadata import version

        return {
            "engine": "dbos",
            "version": version("dbos"),
            "backend": "postgres",
            "python": sys.version.split()[0],
            "psycopg": psycopg.__version__,
            "sqlalchemy": version("sqlalchemy"),
        }

    def op_reset(self, _req: dict[str, Any]) -> dict[str, Any]:
        self.sql("reset_runs")
        self.waiting_for.clear()
        return {}

    def op_submit_batch(self, req: dict[str, Any]) -> dict[str, Any]:
        logical = req["workflow"]
        if logical not in WORKFLOW_NAMES:
            raise ValueError(f"unknown workflow {logical}")
        options: EnqueueOptions = {"workflow_name": WORKFLOW_NAMES[logical],
                                   "queue_name": QUEUE_OF[logical]}
        default_input = req.get("input") or {}
        inputs = req.get("inputs") or [default_input] * int(req.get("count", 0))
        prefix = req.get("idempotencyKeyPrefix")
        enqueue = self.client.enqueue

        def keyed(key: str | None) -> EnqueueOptions:
            # DBOS's idempotency key is the workflow ID.
            return {**options, "workflow_id": key} if key else options

        for i in range(int(req.get("warmup") or 0)):
            enqueue(keyed(f"{prefix}-warm-{i}" if prefix else None), default_input)
        run_ids: list[str] = []
        latencies: list[float] = []
        t0 = now_ms()
        for i, input_value in enumerate(inputs):
            key = f"{prefix}-{i}" if prefix else None
            began = time.perf_counter()
            handle = enqueue(keyed(key), input_value)
            latencies.append((time.perf_counter() - began) * 1000)
            run_ids.append(handle.get_workflow_id())
        t1 = now_ms()
        if logical == "wait_signal":
            for run_id, input_value in zip(run_ids, inputs, strict=True):
                self.waiting_for[input_value["signal"]] = run_id
        return {"runIds": run_ids, "t0": t0, "t1": t1, "latenciesMs": latencies}

    def op_signal(self, req: dict[str, Any]) -> dict[str, Any]:
        name = req["name"]
        destination = self.waiting_for.get(name)
        t_send = now_ms()
        began = time.perf_counter()
        if destination is not None:
            self.client.send(destination, req.get("data"), topic=name)
        ms = (time.perf_counter() - began) * 1000
        return {"tSend": t_send, "ms": ms, "delivered": 0 if destination is None else 1}

    def close(self) -> None:
        self.conn.close()
        self.client.destroy()

    def output(self, row: dict[str, Any]) -> Any:
        return deserialize_value(row["output"], row["serialization"], self.serializer)


def main() -> int:
    return serve(Driver(os.environ["BENCH_DB_URL"]))


if __name__ == "__main__":
    sys.exit(main())
