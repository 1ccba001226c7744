"""The driver side of peer-bench's JSON-lines protocol, shared by the engines' drivers.

A driver object answers ``op_<name>(request) -> result`` for each op, sets ``closing`` on
``close`` and releases what it holds in ``close()``. Only protocol lines go to stdout.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class Driver(Protocol):
    closing: bool

    def close(self) -> None: ...


def reply(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def serve(driver: Driver) -> int:
    """Say ready, answer requests from stdin until ``close`` or end of input, then close."""
    reply({"ready": True})
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            try:
                request = json.loads(line)
            except json.JSONDecodeError:
                continue
            handler: Callable[[dict[str, Any]], dict[str, Any]] | None = getattr(
                driver, f"op_{request.get('op')}", None
            )
            try:
                if handler is None:
                    raise ValueError(f"unknown op {request.get('op')}")
                reply({"id": request.get("id"), "ok": True, "result": handler(request)})
            except Exception:
                reply({"id": request.get("id"), "ok": False, "error": traceback.format_exc()})
            if driver.closing:
                break
    finally:
        driver.close()
    return 0


def wait_until(request: dict[str, Any], default_poll_ms: float,
               attempt: Callable[[], tuple[T | None, str]]) -> T:
    """Call ``attempt`` every ``pollMs`` until it returns a result; after ``timeoutMs``, raise
    TimeoutError with the progress text it returned last."""
    deadline = time.monotonic() + request.get("timeoutMs", 600_000) / 1000
    poll = request.get("pollMs", default_poll_ms) / 1000
    while True:
        result, progress = attempt()
        if result is not None:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(progress)
        time.sleep(poll)


class SqlDriver:
    """The ops every driver answers alike, from its named measurement queries (``queries``, run
    on ``conn``, an autocommit psycopg connection with dict rows): ``wait_completed`` from
    ``runs_state`` (one row per run: ``id``, ``status``, ``created_ms``, ``finished_ms``,
    ``output``), ``wait_parked`` from ``count_parked`` (one row: ``parked``), ``stats`` from
    ``stats``, and ``close``."""

    #: The engine's terminal statuses -> the protocol's (``completed`` on success).
    final: dict[str, str] = {}
    queries: Any
    conn: Any
    closing = False

    def sql(self, name: str, **params: Any) -> list[dict[str, Any]]:
        cursor = self.conn.execute(self.queries[name].sql, params)
        rows: list[dict[str, Any]] = cursor.fetchall() if cursor.description else []
        return rows

    def op_stats(self, _req: dict[str, Any]) -> dict[str, Any]:
        return self.sql("stats")[0]

    def op_close(self, _req: dict[str, Any]) -> dict[str, Any]:
        self.closing = True
        return {}

    def output(self, row: dict[str, Any]) -> Any:
        """A run's output as stored in ``row`` (decoded, where the engine encodes it)."""
        return row["output"]

    def op_wait_completed(self, req: dict[str, Any]) -> dict[str, Any]:
        ids = req["ids"]

        def attempt() -> tuple[dict[str, Any] | None, str]:
            rows = self.sql("runs_state", ids=ids)
            if len(rows) == len(ids) and all(row["status"] in self.final for row in rows):
                return {"runs": [self._run_json(row) for row in rows]}, ""
            pending = sum(row["status"] not in self.final for row in rows)
            return None, f"wait_completed timeout: {pending} not terminal"

        return wait_until(req, 50, attempt)

    def op_wait_parked(self, req: dict[str, Any]) -> dict[str, Any]:
        ids = req["ids"]
        began = time.monotonic()

        def attempt() -> tuple[dict[str, Any] | None, str]:
            parked = self.sql("count_parked", ids=ids)[0]["parked"]
            if parked == len(ids):
                return {"parked": parked, "ms": round((time.monotonic() - began) * 1000)}, ""
            return None, f"wait_parked timeout: {parked}/{len(ids)}"

        return wait_until(req, 100, attempt)

    def _run_json(self, row: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": row["id"],
            "status": self.final.get(row["status"], row["status"]),
            "createdMs": row["created_ms"],
            "finishedMs": row["finished_ms"],
            "output": self.output(row),
        }
