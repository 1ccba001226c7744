"""The four peer-bench workflows (see peer-bench's README, "Workflow contract") for umt."""

from __future__ import annotations

import time
from typing import Any

from umt.engine import Workflow, WorkflowContext

VERSION = "1"


def now_ms() -> float:
    """Wall-clock epoch milliseconds with sub-millisecond resolution."""
    return time.time_ns() / 1e6


def _noop6(ctx: WorkflowContext, _input: Any) -> Any:
    last = None
    for i in range(6):
        last = ctx.step(f"s{i}", lambda _step, i=i: {"i": i, "ok": True})
    return last


def _wait_signal(ctx: WorkflowContext, input_value: Any) -> Any:
    received = ctx.wait_for_signal("wait", input_value["signal"], timeout="1h")
    t1 = ctx.step("after", lambda _step: now_ms())
    return {"received": None if received is None else received.data, "t1": t1}


def _sleep_short(ctx: WorkflowContext, input_value: Any) -> Any:
    t0 = ctx.step("before", lambda _step: now_ms())
    ctx.sleep("nap", (input_value or {}).get("duration", "1s"))
    t1 = ctx.step("after", lambda _step: now_ms())
    return {"t0": t0, "t1": t1}


def _sleep_long(ctx: WorkflowContext, _input: Any) -> Any:
    ctx.sleep("nap", "1h")
    return {"ok": True}


#: Logical name (as the harness sends it) -> umt workflow.
WORKFLOWS: dict[str, Workflow] = {
    "noop6": Workflow("bench-noop6", VERSION, _noop6),
    "wait_signal": Workflow("bench-wait-signal", VERSION, _wait_signal),
    "sleep_short": Workflow("bench-sleep-short", VERSION, _sleep_short),
    "sleep_long": Workflow("bench-sleep-long", VERSION, _sleep_long),
}
